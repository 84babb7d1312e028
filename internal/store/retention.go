package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Retention (issue 36, item 4) removes what an operator chose not to keep, never what the
// receipts log needs to be verified: stream events older than a cutoff, and audit rows older
// than a cutoff whose records the receipts log holds (its records carry everything a verifier
// reads). Rows written before the log existed, which have no records, are kept; the log, its
// head and its checkpoints are never pruned.

// Retention is what Prune removes: every time is a cutoff ("older than"), the zero time keeps
// everything of its kind.
type Retention struct {
	// StreamsBefore removes client-stream events (AG-UI) created before it.
	StreamsBefore time.Time
	// AuditBefore removes audit rows recorded before it whose receipts records exist.
	AuditBefore time.Time
}

// Pruned counts what Prune removed.
type Pruned struct {
	StreamEvents int64
	AuditRows    int64
}

// Prune removes what r names, in one transaction.
func (s *Store) Prune(ctx context.Context, r Retention) (Pruned, error) {
	var p Pruned
	err := s.inTx(ctx, "prune", func(tx *sqlx.Tx) error {
		if !r.StreamsBefore.IsZero() {
			res, err := tx.ExecContext(ctx, s.q(`DELETE FROM stream_events WHERE created_at < ?`), tsArg(r.StreamsBefore))
			if err != nil {
				return fmt.Errorf("stream events: %w", err)
			}
			p.StreamEvents, _ = res.RowsAffected()
		}
		if !r.AuditBefore.IsZero() {
			res, err := tx.ExecContext(ctx, s.q(`DELETE FROM audit_events WHERE at < ?
				AND EXISTS (SELECT 1 FROM receipts WHERE receipts.event_key = audit_events.event_key)`), tsArg(r.AuditBefore))
			if err != nil {
				return fmt.Errorf("audit rows: %w", err)
			}
			p.AuditRows, _ = res.RowsAffected()
		}
		return nil
	})
	return p, err
}
