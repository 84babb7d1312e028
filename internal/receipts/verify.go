package receipts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// ErrTampered reports an export that does not verify; the error is a *TamperError naming
// each problem's record.
var ErrTampered = errors.New("receipts: the log does not verify")

// Problem is one thing wrong with an export. Index is the record it names (-1: none, e.g. a
// checkpoint of its own); Event is that record's audit key when the export holds it.
type Problem struct {
	Index int64
	Event string
	What  string
}

func (p Problem) String() string {
	switch {
	case p.Index >= 0 && p.Event != "":
		return fmt.Sprintf("record %d (%s): %s", p.Index, p.Event, p.What)
	case p.Index >= 0:
		return fmt.Sprintf("record %d: %s", p.Index, p.What)
	}
	return p.What
}

// TamperError lists every problem Verify found; errors.Is(err, ErrTampered) holds.
type TamperError struct{ Problems []Problem }

func (e *TamperError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "receipts: the log does not verify (%d problem(s))", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrTampered) true.
func (e *TamperError) Is(target error) bool { return target == ErrTampered }

// VerifyOptions are Verify's inputs besides the export.
type VerifyOptions struct {
	// Checkpoints are signed checkpoints the verifier kept from elsewhere (published by the
	// operator, held by a third party): each must be consistent with the export, and one
	// larger than the export shows its tail was cut.
	Checkpoints [][]byte
	// EachRecord checks every record's own checkpoint and proof even when a signed checkpoint
	// of the whole export matches (Verify's quick pass), as a reader of one receipt would.
	EachRecord bool
}

// Report is what Verify established.
type Report struct {
	// Records is how many records the export holds.
	Records uint64
	// Signed is how many of them carry their own verified checkpoint.
	Signed uint64
	// Root is the root hash of the whole export's tree.
	Root []byte
	// Checkpoints is how many checkpoints (the export's and VerifyOptions') verified and
	// matched the records.
	Checkpoints int
	// Keys are the key ids that signed the verified checkpoints.
	Keys []string
}

// maxProblems bounds the problems reported (a wholesale rewrite names the first ones).
const maxProblems = 100

// verifier is one pass of Verify.
type verifier struct {
	keys *Keyring
	rep  Report
	prob []Problem
	// run is the tree of the records read so far, as the verifier recomputes it; nil while
	// unknown (after a gap) until a record's verified proof gives it back.
	run *compact.Range
	// tainted: a problem was reported since the tree was last confirmed by a signature, so a
	// later mismatch is its echo, not news.
	tainted bool
	// unsigned is the first index of the records read since the last one a signature
	// confirmed (-1: none).
	unsigned int64
	// checkpoints maps sizes to the roots other checkpoints sign (the export's and the
	// options'), with how they were named.
	checkpoints map[uint64][]named
	head        *uint64
	lastEvent   string
	// signed holds every verified checkpoint by size (checkpoints loses them as they are met);
	// consistency the export's consistency proof lines, checked at the end.
	signed      map[uint64][]named
	consistency []Line
}

type named struct {
	root []byte
	name string
}

// Verify checks an export (Writer's format) offline with the log's public keys only: every
// record's own checkpoint signature, size and inclusion proof (RFC 6962 section 2.1.1), the
// order and density of indices, that the records before each signed record are the ones its
// checkpoint commits to, that every checkpoint in the export or in opt (RFC 6962 section 2.1.2
// consistency: a checkpoint of size s must have the root of the export's first s records) is
// met, and that no signed checkpoint or head claims more records than the export holds (a cut
// tail). It returns the Report and, when anything is wrong, a *TamperError (ErrTampered)
// naming each record involved. Other errors are a malformed export or keyring.
//
// When r is an io.ReadSeeker (a file) and opt.EachRecord is unset, Verify first makes a quick
// pass: it hashes the records into the tree and compares it with the signed checkpoints alone.
// If indices are dense and a checkpoint of the whole export and every other checkpoint match,
// every record is proven by them and the records' own signatures are not checked (Report.Signed
// is 0). Otherwise it reads the export again and checks each record, to name the problems.
func Verify(r io.Reader, keys *Keyring, opt VerifyOptions) (Report, error) {
	if rs, ok := r.(io.ReadSeeker); ok && !opt.EachRecord {
		rep, ok, err := quickVerify(rs, keys, opt)
		if err != nil || ok {
			return rep, err
		}
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			return Report{}, fmt.Errorf("receipts: read the export again: %w", err)
		}
	}
	return fullVerify(r, keys, opt)
}

// quickVerify is Verify's quick pass: ok when the signed checkpoints alone prove the export.
func quickVerify(r io.Reader, keys *Keyring, opt VerifyOptions) (Report, bool, error) {
	var rep Report
	roots, signedRoots := map[uint64][][]byte{}, map[uint64][][]byte{}
	var largest uint64
	bad := false
	addCheckpoint := func(signed []byte) {
		c, ids, err := keys.Open(signed)
		if err != nil {
			bad = true
			return
		}
		for _, id := range ids {
			if !slices.Contains(rep.Keys, id) {
				rep.Keys = append(rep.Keys, id)
			}
		}
		roots[c.Size] = append(roots[c.Size], c.Root)
		signedRoots[c.Size] = append(signedRoots[c.Size], c.Root)
		largest = max(largest, c.Size)
	}
	for _, c := range opt.Checkpoints {
		addCheckpoint(c)
	}
	run := rangeFactory.NewEmptyRange(0)
	meet := func(size uint64) {
		if len(roots[size]) == 0 {
			return
		}
		root := EmptyRoot()
		if size > 0 {
			root, _ = run.GetRootHash(nil)
		}
		for _, want := range roots[size] {
			if !sameHash(root, want) {
				bad = true
			}
			rep.Checkpoints++
		}
		delete(roots, size)
	}
	var head *uint64
	var consistency []consistencyLine
	err := readQuickLines(r, func(l quickLine) error {
		if bad {
			return nil
		}
		switch l.Type {
		case LineHead:
			size := l.Size
			head = &size
		case LineCheckpoint:
			if rep.Records > 0 {
				bad = true // the writer puts checkpoints first; anything else takes the full pass
			}
			addCheckpoint([]byte(l.Checkpoint))
		case LineConsistency:
			var p [][]byte
			if json.Unmarshal(l.Proof, &p) != nil {
				bad = true
				return nil
			}
			consistency = append(consistency, consistencyLine{from: l.From, size: l.Size, proof: p})
		case LineReceipt:
			if *l.Index != rep.Records {
				bad = true
				return nil
			}
			meet(rep.Records)
			if err := run.Append(LeafHash(l.Record), nil); err != nil {
				bad = true
				return nil
			}
			rep.Records++
			var rec struct {
				Event string `json:"event"`
			}
			if err := json.Unmarshal(l.Record, &rec); err != nil || rec.Event != l.Event {
				bad = true
			}
		}
		return nil
	})
	if err != nil {
		return rep, false, err
	}
	meet(rep.Records)
	for _, l := range consistency {
		for _, a := range signedRoots[l.from] {
			for _, b := range signedRoots[l.size] {
				if proof.VerifyConsistency(hasher, l.from, l.size, l.proof, a, b) != nil {
					bad = true
				}
			}
		}
	}
	if bad || len(roots) > 0 || largest != rep.Records || (head != nil && *head != rep.Records) {
		return Report{}, false, nil
	}
	rep.Root, _ = run.GetRootHash(nil)
	if rep.Records == 0 {
		rep.Root = EmptyRoot()
	}
	return rep, true, nil
}

// quickLine is the part of an export line the quick pass reads (never a proof).
type quickLine struct {
	Type  string          `json:"type"`
	Size  uint64          `json:"size"`
	From  uint64          `json:"from"`
	Proof json.RawMessage `json:"proof"` // decoded for consistency lines only

	Index      *uint64         `json:"index"`
	Event      string          `json:"event"`
	Record     json.RawMessage `json:"record"`
	Checkpoint string          `json:"checkpoint"`
}

// consistencyLine is a consistency proof line as the quick pass keeps it.
type consistencyLine struct {
	from, size uint64
	proof      [][]byte
}

// readQuickLines is ReadLines for the quick pass: a line it cannot read stops it with an error.
func readQuickLines(r io.Reader, fn func(quickLine) error) error {
	return eachLine(r, func(n int, raw []byte) error {
		var l quickLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("receipts: export line %d: %w", n, err)
		}
		if l.Type == LineReceipt && (l.Index == nil || len(l.Record) == 0) {
			return fmt.Errorf("receipts: export line %d: a receipt needs an index and a record", n)
		}
		return fn(l)
	})
}

// fullVerify checks each record (Verify's second pass).
func fullVerify(r io.Reader, keys *Keyring, opt VerifyOptions) (Report, error) {
	v := &verifier{keys: keys, run: rangeFactory.NewEmptyRange(0), unsigned: -1, checkpoints: map[uint64][]named{}, signed: map[uint64][]named{}}
	for i, c := range opt.Checkpoints {
		v.addCheckpoint(c, fmt.Sprintf("checkpoint %d given to verify", i+1))
	}
	err := ReadLines(r, func(n int, l Line) error {
		switch l.Type {
		case LineHead:
			size := l.Size
			v.head = &size
		case LineCheckpoint:
			v.addCheckpoint([]byte(l.Checkpoint), fmt.Sprintf("checkpoint on export line %d", n))
		case LineReceipt:
			v.receipt(l)
		case LineConsistency:
			v.consistency = append(v.consistency, l)
		}
		return nil
	})
	if err != nil {
		return v.rep, err
	}
	v.finish()
	if v.run != nil {
		if root, err := v.run.GetRootHash(nil); err == nil {
			v.rep.Root = root
		}
	}
	if len(v.prob) > 0 {
		return v.rep, &TamperError{Problems: v.prob}
	}
	return v.rep, nil
}

func (v *verifier) problem(idx int64, event, format string, a ...any) {
	v.tainted = true
	if len(v.prob) < maxProblems {
		v.prob = append(v.prob, Problem{Index: idx, Event: event, What: fmt.Sprintf(format, a...)})
	}
}

func (v *verifier) addKeys(ids []string) {
	for _, id := range ids {
		if !slices.Contains(v.rep.Keys, id) {
			v.rep.Keys = append(v.rep.Keys, id)
		}
	}
}

func (v *verifier) addCheckpoint(signed []byte, name string) {
	c, ids, err := v.keys.Open(signed)
	if err != nil {
		v.problem(-1, "", "%s: %v", name, err)
		return
	}
	v.addKeys(ids)
	n := named{root: c.Root, name: fmt.Sprintf("%s (size %d, signed by %s)", name, c.Size, strings.Join(ids, ", "))}
	v.checkpoints[c.Size] = append(v.checkpoints[c.Size], n)
	v.signed[c.Size] = append(v.signed[c.Size], n)
	if c.Size == 0 {
		v.meet(0)
	}
}

// receipt checks one receipt line.
func (v *verifier) receipt(l Line) {
	idx, next := *l.Index, v.rep.Records
	event := l.Event
	switch {
	case idx < next:
		v.problem(int64(idx), event, "out of order: it comes after record %d (%s); a record was moved or inserted", next-1, v.lastEvent)
		return
	case idx > next && next == 0:
		v.problem(0, "", "records 0 to %d are missing (removed): the export starts with record %d (%s)", idx-1, idx, event)
		v.run, v.unsigned = nil, -1
	case idx > next:
		if next == idx-1 {
			v.problem(int64(next), "", "missing (removed): the export goes from record %d (%s) to record %d (%s)", int64(next)-1, v.lastEvent, idx, event)
		} else {
			v.problem(int64(next), "", "records %d to %d are missing (removed): the export goes from record %d (%s) to record %d (%s)", next, idx-1, int64(next)-1, v.lastEvent, idx, event)
		}
		v.run, v.unsigned = nil, -1 // unknown until a signature gives it back
	}
	v.rep.Records = idx + 1
	v.lastEvent = event
	defer v.meet(idx + 1) // whatever this record's verdict, the checkpoints of its size are met
	if rec, err := ParseRecord(l.Record); err != nil {
		v.problem(int64(idx), event, "%v", err)
	} else if rec.Event != event {
		v.problem(int64(idx), event, "the record is of event %q, not of the event its line names", rec.Event)
	}
	lh := LeafHash(l.Record)
	var before *compact.Range
	if v.run != nil {
		before = cloneRange(v.run)
		if err := v.run.Append(lh, nil); err != nil {
			v.run = nil
		}
	}
	if l.Checkpoint == "" {
		if v.unsigned < 0 {
			v.unsigned = int64(idx)
		}
		return
	}
	c, ids, err := v.keys.Open([]byte(l.Checkpoint))
	switch {
	case err != nil:
		v.problem(int64(idx), event, "its checkpoint: %v", err)
		return
	case c.Size != idx+1:
		v.problem(int64(idx), event, "its signed checkpoint is of a tree of %d records, so it was record %d: it was moved, or records before it were removed or inserted", c.Size, c.Size-1)
		return
	}
	if err := proof.VerifyInclusion(hasher, idx, idx+1, lh, l.Proof, c.Root); err != nil {
		v.problem(int64(idx), event, "altered: its contents are not the record its signed checkpoint (size %d) commits to", c.Size)
		return
	}
	// The proof is verified: it gives the tree before this record back, authenticated.
	v.addKeys(ids)
	v.rep.Signed++
	frontier := slices.Clone(l.Proof)
	slices.Reverse(frontier)
	good, err := rangeFactory.NewRange(0, idx, frontier)
	if err != nil {
		v.problem(int64(idx), event, "its proof does not fit its index: %v", err)
		return
	}
	if before != nil && !before.Equal(good) && !v.tainted {
		if v.unsigned >= 0 {
			v.problem(v.unsigned, "", "records %d to %d (not signed one by one) differ from those record %d's signed checkpoint commits to: one of them was altered, removed, inserted or moved", v.unsigned, idx-1, idx)
		} else {
			v.problem(int64(idx), event, "the records before it differ from those its signed checkpoint commits to")
		}
	}
	_ = good.Append(lh, nil)
	v.run, v.tainted, v.unsigned = good, false, -1
}

// meet compares the tree of the first size records with the checkpoints of that size.
func (v *verifier) meet(size uint64) {
	cps := v.checkpoints[size]
	if len(cps) == 0 {
		return
	}
	var root []byte
	if v.run != nil {
		root, _ = v.run.GetRootHash(nil)
		if size == 0 {
			root = EmptyRoot()
		}
	}
	for _, c := range cps {
		switch {
		case root == nil:
			// After a gap the tree is unknown: the gap is reported already.
		case !sameHash(root, c.root) && !v.tainted:
			first := int64(0)
			if v.unsigned >= 0 {
				first = v.unsigned
			}
			v.problem(int64(size)-1, v.lastEvent, "%s does not match records %d to %d: one of them was altered, removed, inserted or moved", c.name, first, size-1)
			v.unsigned = -1 // judged: not "unsigned" as well
		case !sameHash(root, c.root):
			v.unsigned = -1 // an echo of the problem reported already
		case sameHash(root, c.root):
			v.rep.Checkpoints++
			v.unsigned = -1
		}
	}
	delete(v.checkpoints, size)
}

// finish reports what the end of the export leaves open: checkpoints and a head beyond it (a
// cut tail), records no signature covers, and consistency proofs that fail.
func (v *verifier) finish() {
	for _, l := range v.consistency {
		for _, a := range v.signed[l.From] {
			for _, b := range v.signed[l.Size] {
				if err := proof.VerifyConsistency(hasher, l.From, l.Size, l.Proof, a.root, b.root); err != nil {
					v.problem(-1, "", "%s and %s are not consistent (RFC 6962 consistency proof): the log was rewritten between them", a.name, b.name)
				}
			}
		}
	}
	n := v.rep.Records
	last := "the export holds no record"
	if n > 0 {
		last = fmt.Sprintf("the export ends with record %d (%s)", n-1, v.lastEvent)
	}
	sizes := make([]uint64, 0, len(v.checkpoints))
	for s := range v.checkpoints {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	for _, s := range sizes {
		for _, c := range v.checkpoints[s] {
			v.problem(int64(n), "", "missing: the tail was cut: %s, but %s; records %d to %d are missing", c.name, last, n, s-1)
		}
	}
	if v.head != nil && *v.head > n {
		v.problem(int64(n), "", "missing: the tail was cut: the store's head counts %d records, but %s", *v.head, last)
	} else if v.head != nil && *v.head < n {
		v.problem(int64(*v.head), "", "the store's head counts %d records, but the export holds %d: records were appended outside the log", *v.head, n)
	}
	if v.unsigned >= 0 {
		v.problem(v.unsigned, "", "records %d to %d are covered by no signed checkpoint (sign one with `airlock audit checkpoint`)", v.unsigned, n-1)
	}
}

func cloneRange(r *compact.Range) *compact.Range {
	c, _ := rangeFactory.NewRange(r.Begin(), r.End(), clone(r.Hashes()))
	return c
}

// ConsistencyProof returns the RFC 6962 (section 2.1.2) proof that the tree of the first size1
// leaves is a prefix of the tree of size2 leaves, computed from all leaf hashes (len at least
// size2). For several proofs over one log, build a Tree once.
func ConsistencyProof(leafHashes [][]byte, size1, size2 uint64) ([][]byte, error) {
	return NewTree(leafHashes[:size2]).ConsistencyProof(size1, size2)
}

// Tree holds every perfect subtree's root of a log (levels[0] the leaf hashes): about twice
// the leaf hashes' memory, built once in one pass, after which proofs cost O(log n) lookups.
type Tree struct {
	levels [][][]byte
}

// NewTree builds the Tree of leafHashes.
func NewTree(leafHashes [][]byte) *Tree {
	t := &Tree{levels: [][][]byte{leafHashes}}
	for cur := leafHashes; len(cur) > 1; {
		next := make([][]byte, len(cur)/2)
		for i := range next {
			next[i] = hasher.HashChildren(cur[2*i], cur[2*i+1])
		}
		t.levels = append(t.levels, next)
		cur = next
	}
	return t
}

// Size is the number of leaves.
func (t *Tree) Size() uint64 { return uint64(len(t.levels[0])) }

// ConsistencyProof is the RFC 6962 consistency proof from size1 to size2 (both at most Size).
func (t *Tree) ConsistencyProof(size1, size2 uint64) ([][]byte, error) {
	if size2 > t.Size() {
		return nil, fmt.Errorf("receipts: consistency proof to %d of a tree of %d", size2, t.Size())
	}
	nodes, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("receipts: consistency proof %d→%d: %w", size1, size2, err)
	}
	hs := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		hs[i] = t.levels[id.Level][id.Index]
	}
	out, err := nodes.Rehash(hs, hasher.HashChildren)
	if err != nil {
		return nil, fmt.Errorf("receipts: consistency proof %d→%d: %w", size1, size2, err)
	}
	return out, nil
}

// VerifyConsistency checks two signed checkpoints of the log against each other: both verify
// with keys, the older is no larger, and proof is the RFC 6962 consistency proof from the
// older to the newer (an empty proof for equal sizes). The error wraps ErrSignature,
// ErrCheckpointFormat or ErrTampered (the newer tree does not extend the older).
func VerifyConsistency(keys *Keyring, older, newer []byte, cproof [][]byte) error {
	a, _, err := keys.Open(older)
	if err != nil {
		return fmt.Errorf("older checkpoint: %w", err)
	}
	b, _, err := keys.Open(newer)
	if err != nil {
		return fmt.Errorf("newer checkpoint: %w", err)
	}
	if a.Origin != b.Origin {
		return fmt.Errorf("%w: the checkpoints are of two logs (%q, %q)", ErrTampered, a.Origin, b.Origin)
	}
	if a.Size > b.Size {
		return fmt.Errorf("%w: the older checkpoint (size %d) is larger than the newer (size %d)", ErrTampered, a.Size, b.Size)
	}
	if err := proof.VerifyConsistency(hasher, a.Size, b.Size, cproof, a.Root, b.Root); err != nil {
		return fmt.Errorf("%w: the log of size %d does not extend the log of size %d: %w", ErrTampered, b.Size, a.Size, err)
	}
	return nil
}
