package receipts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Line types of the export (JSON lines, one object a line, the "type" member).
const (
	// LineHead: the store's head when exported ("size"): how many records the log holds.
	LineHead = "head"
	// LineCheckpoint: a signed checkpoint kept beside the records ("checkpoint": the note
	// text), e.g. one a key rotation signed with both keys, or the head signed at export.
	LineCheckpoint = "checkpoint"
	// LineReceipt: one record ("index", "event", "record": the leaf bytes as JSON, "proof": its
	// inclusion proof in the tree of size index+1, base64 hashes bottom up, "checkpoint": the
	// signed checkpoint of that tree, "" when the appending process held no key).
	LineReceipt = "receipt"
	// LineConsistency: the RFC 6962 (section 2.1.2) consistency proof ("proof") from the tree
	// of "from" records to the tree of "size" records, for a kept checkpoint of size "from": a
	// holder of both checkpoints checks with it alone that the newer log extends the older.
	LineConsistency = "consistency"
)

// Line is one line of an export. Record holds the leaf bytes verbatim.
type Line struct {
	Type       string          `json:"type"`
	Size       uint64          `json:"size,omitempty"`
	From       uint64          `json:"from,omitempty"`
	Index      *uint64         `json:"index,omitempty"`
	Event      string          `json:"event,omitempty"`
	Record     json.RawMessage `json:"record,omitempty"`
	Proof      [][]byte        `json:"proof,omitempty"`
	Checkpoint string          `json:"checkpoint,omitempty"`
}

// Receipt is one stored record of the log with its receipt.
type Receipt struct {
	Index uint64
	Event string
	Leaf  []byte
	// Proof is the inclusion proof of the leaf in the tree of size Index+1 (bottom up).
	Proof [][]byte
	// Checkpoint is the signed note of that tree; nil when none was signed.
	Checkpoint []byte
}

// Writer writes an export. Checkpoints and the head come first, receipts after them in index
// order, so a verifier checks everything in one pass.
type Writer struct {
	w   *bufio.Writer
	enc *json.Encoder
}

// NewWriter returns a Writer on w; call Flush at the end.
func NewWriter(w io.Writer) *Writer {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false) // the record's bytes must stay as they were hashed
	return &Writer{w: bw, enc: enc}
}

// Head writes the head line.
func (w *Writer) Head(size uint64) error { return w.write(Line{Type: LineHead, Size: size}) }

// Checkpoint writes a signed checkpoint line.
func (w *Writer) Checkpoint(signed []byte) error {
	return w.write(Line{Type: LineCheckpoint, Checkpoint: string(signed)})
}

// Receipt writes a receipt line. The leaf must be JSON (Record.Leaf's bytes are).
func (w *Writer) Receipt(r Receipt) error {
	if !json.Valid(r.Leaf) {
		return fmt.Errorf("receipts: record %d (%s) is not JSON", r.Index, r.Event)
	}
	idx := r.Index
	return w.write(Line{Type: LineReceipt, Index: &idx, Event: r.Event, Record: r.Leaf, Proof: r.Proof, Checkpoint: string(r.Checkpoint)})
}

// Consistency writes a consistency proof line from the tree of from records to that of size.
func (w *Writer) Consistency(from, size uint64, proof [][]byte) error {
	return w.write(Line{Type: LineConsistency, From: from, Size: size, Proof: proof})
}

// Flush writes what is buffered.
func (w *Writer) Flush() error { return w.w.Flush() }

func (w *Writer) write(l Line) error {
	if err := w.enc.Encode(l); err != nil {
		return fmt.Errorf("receipts: write export line: %w", err)
	}
	return nil
}

// ReadLines calls fn for each line of an export, in order; n is the 1-based line number. A
// line that is not a JSON object of a known type stops the read with an error naming it.
func ReadLines(r io.Reader, fn func(n int, l Line) error) error {
	return eachLine(r, func(n int, raw []byte) error {
		var l Line
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("receipts: export line %d: %w", n, err)
		}
		switch l.Type {
		case LineHead, LineCheckpoint, LineReceipt, LineConsistency:
		default:
			return fmt.Errorf("receipts: export line %d: unknown type %q", n, l.Type)
		}
		if l.Type == LineReceipt && (l.Index == nil || len(l.Record) == 0) {
			return fmt.Errorf("receipts: export line %d: a receipt needs an index and a record", n)
		}
		return fn(n, l)
	})
}

// eachLine calls fn with each non-blank line of an export (trimmed; lines up to 64 MiB) and
// its 1-based number, stopping at fn's first error.
func eachLine(r io.Reader, fn func(n int, raw []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		if err := fn(n, raw); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("receipts: read export: %w", err)
	}
	return nil
}

// SIEMLine is one record as a SIEM ingests it (JSON lines, airlock audit export --siem): the
// record's time and identity at the top level, the record itself unchanged in Record.
type SIEMLine struct {
	Time   time.Time       `json:"time"`
	Source string          `json:"source"`
	Index  uint64          `json:"index"`
	Event  string          `json:"event"`
	Type   string          `json:"type"`
	Record json.RawMessage `json:"record"`
	// Signed is whether the record carries its own signed checkpoint.
	Signed bool `json:"signed"`
}

// SIEMSource is SIEMLine.Source.
const SIEMSource = "airlock.receipts"

// SIEM writes r as a SIEM line.
func (w *Writer) SIEM(r Receipt) error {
	rec, err := ParseRecord(r.Leaf)
	if err != nil {
		return fmt.Errorf("receipts: record %d: %w", r.Index, err)
	}
	return w.writeAny(SIEMLine{Time: rec.At, Source: SIEMSource, Index: r.Index, Event: r.Event, Type: rec.Type, Record: r.Leaf, Signed: len(r.Checkpoint) > 0})
}

func (w *Writer) writeAny(v any) error {
	if err := w.enc.Encode(v); err != nil {
		return fmt.Errorf("receipts: write line: %w", err)
	}
	return nil
}
