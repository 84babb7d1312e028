package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/receipts"
)

// ReceiptHead returns the log's head: its size and compact range.
func (s *Store) ReceiptHead(ctx context.Context) (receipts.Head, error) {
	var head struct {
		Size     int64  `db:"size"`
		Frontier []byte `db:"frontier"`
	}
	if err := s.db.GetContext(ctx, &head, `SELECT size, frontier FROM receipt_head WHERE id = 1`); err != nil {
		return receipts.Head{}, fmt.Errorf("store: read the receipts head: %w", err)
	}
	f, err := receipts.SplitHashes(head.Frontier)
	if err != nil {
		return receipts.Head{}, fmt.Errorf("store: receipts head: %w", err)
	}
	return receipts.Head{Size: uint64(head.Size), Frontier: f}, nil
}

// receiptPage bounds one read of EachReceipt.
const receiptPage = 2000

// EachReceipt calls fn for every stored record with an index of at least from, in index
// order, as the table holds it (a verifier, not this reader, judges whether it was altered).
// It reads in pages, so the log never has to fit in memory.
func (s *Store) EachReceipt(ctx context.Context, from uint64, fn func(receipts.Receipt) error) error {
	next := int64(from)
	for {
		var rows []struct {
			Idx        int64  `db:"idx"`
			Key        string `db:"event_key"`
			Record     []byte `db:"record"`
			Proof      []byte `db:"proof"`
			Checkpoint string `db:"checkpoint"`
		}
		if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT idx, event_key, record, proof, checkpoint FROM receipts
			WHERE idx >= ? ORDER BY idx LIMIT ?`), next, receiptPage); err != nil {
			return fmt.Errorf("store: read receipts from %d: %w", next, err)
		}
		for _, r := range rows {
			proof, err := receipts.SplitHashes(r.Proof)
			if err != nil {
				return fmt.Errorf("store: receipt %d: %w", r.Idx, err)
			}
			rc := receipts.Receipt{Index: uint64(r.Idx), Event: r.Key, Leaf: r.Record, Proof: proof}
			if r.Checkpoint != "" {
				rc.Checkpoint = []byte(r.Checkpoint)
			}
			if err := fn(rc); err != nil {
				return err
			}
			next = r.Idx + 1
		}
		if len(rows) < receiptPage {
			return nil
		}
	}
}

// SignReceiptHead sequences the records written so far (SequenceReceipts) and signs the
// checkpoint of the log with the store's key (and extra signers: a rotation's), keeps it in receipt_checkpoints and returns it. ErrNoReceiptKey
// when the store has no key.
func (s *Store) SignReceiptHead(ctx context.Context, extra ...*receipts.Signer) ([]byte, error) {
	sg := s.receiptKey.Load()
	if sg == nil {
		return nil, ErrNoReceiptKey
	}
	if _, err := s.SequenceReceipts(ctx); err != nil {
		return nil, err
	}
	h, err := s.ReceiptHead(ctx)
	if err != nil {
		return nil, err
	}
	root, err := h.Root()
	if err != nil {
		return nil, fmt.Errorf("store: receipts head: %w", err)
	}
	note, err := sg.Sign(h.Size, root, extra...)
	if err != nil {
		return nil, err
	}
	if err := s.AddReceiptCheckpoint(ctx, h.Size, note, time.Now()); err != nil {
		return nil, err
	}
	return note, nil
}

// AddReceiptCheckpoint keeps a signed checkpoint of a tree of size records.
func (s *Store) AddReceiptCheckpoint(ctx context.Context, size uint64, note []byte, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO receipt_checkpoints (size, note, created_at) VALUES (?, ?, ?)`),
		int64(size), string(note), tsArg(at)); err != nil {
		return fmt.Errorf("store: keep checkpoint %d: %w", size, err)
	}
	return nil
}

// ReceiptCheckpoints returns the kept checkpoints, oldest first.
func (s *Store) ReceiptCheckpoints(ctx context.Context) ([][]byte, error) {
	var notes []string
	if err := s.db.SelectContext(ctx, &notes, `SELECT note FROM receipt_checkpoints ORDER BY id`); err != nil {
		return nil, fmt.Errorf("store: read checkpoints: %w", err)
	}
	out := make([][]byte, len(notes))
	for i, n := range notes {
		out[i] = []byte(n)
	}
	return out, nil
}

// ExportReceipts sequences the records written so far (SequenceReceipts: signed when the
// store has a key) and writes the log as an export (receipts.Writer): the head, the kept
// checkpoints, then every record with its receipt.
func (s *Store) ExportReceipts(ctx context.Context, w *receipts.Writer) error {
	if _, err := s.SequenceReceipts(ctx); err != nil {
		return err
	}
	h, err := s.ReceiptHead(ctx)
	if err != nil {
		return err
	}
	if err := w.Head(h.Size); err != nil {
		return err
	}
	cps, err := s.ReceiptCheckpoints(ctx)
	if err != nil {
		return err
	}
	for _, c := range cps {
		if err := w.Checkpoint(c); err != nil {
			return err
		}
	}
	var leaves [][]byte
	if err := s.EachReceipt(ctx, 0, func(r receipts.Receipt) error {
		leaves = append(leaves, receipts.LeafHash(r.Leaf))
		return w.Receipt(r)
	}); err != nil {
		return err
	}
	// Consistency proofs from each kept checkpoint's size to the newest kept one's: a holder of
	// two checkpoints checks with them alone that the log only grew between them.
	var sizes []uint64
	for _, c := range cps {
		if n, err := receiptCheckpointSize(c); err == nil {
			sizes = append(sizes, n)
		}
	}
	if len(sizes) > 1 {
		newest := slices.Max(sizes)
		if newest <= uint64(len(leaves)) {
			tree := receipts.NewTree(leaves[:newest])
			slices.Sort(sizes)
			for _, n := range slices.Compact(sizes) {
				if n == 0 || n == newest {
					continue
				}
				p, err := tree.ConsistencyProof(n, newest)
				if err != nil {
					return err
				}
				if err := w.Consistency(n, newest, p); err != nil {
					return err
				}
			}
		}
	}
	return w.Flush()
}

// receiptCheckpointSize reads the size of a signed checkpoint as stored (its signature is the
// verifier's business).
func receiptCheckpointSize(note []byte) (uint64, error) {
	body, _, _ := strings.Cut(string(note), "\n\n")
	c, err := receipts.ParseCheckpoint(body + "\n")
	return c.Size, err
}
