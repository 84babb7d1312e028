package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Recording is one stage-6 write of a turn (DESIGN "Executor stage 6: record"): an outcome's
// audit row, the decision that closed its confirmation and its context messages. Each part is
// optional; Record writes the parts present in one transaction.
type Recording struct {
	Audit *AuditEvent
	// Decision closes a confirmation (DecideConfirmation's rules: approved, denied or expired;
	// recording the decision it already has is a no-op; another one is ErrConflict).
	Decision *RecordedDecision
	Context  []ContextEntry
	// ReplaceContext gives a context key already stored the new payload instead of keeping the
	// stored one: for a message whose content an attempt that never reached workflow history
	// may have written first (a model asked again after a crash answers differently).
	ReplaceContext bool
}

// RecordedDecision is the decision part of a Recording.
type RecordedDecision struct {
	ConfirmationID, Decision, Approver, Reason string
	At                                         time.Time
}

// Record writes r atomically: the audit row (idempotent by its Key, as AppendAudit), the
// decision (as DecideConfirmation) and the context entries (idempotent by key, as
// AppendContext), all or nothing, in one transaction and one commit. A turn records every
// outcome through it, so an audit row never exists without the context message the model was
// given, nor the other way round, and a retry after any failure writes exactly once.
func (s *Store) Record(ctx context.Context, r Recording) error {
	if r.Audit == nil && r.Decision == nil && len(r.Context) == 0 {
		return nil
	}
	if a := r.Audit; a != nil && (a.Key == "" || a.Outcome == "") {
		return errors.New("store: record: the audit event needs a Key and an Outcome")
	}
	if d := r.Decision; d != nil {
		switch d.Decision {
		case DecisionApproved, DecisionDenied, DecisionExpired:
		default:
			return fmt.Errorf("store: confirmation %q: decision %q is not approved, denied or expired", d.ConfirmationID, d.Decision)
		}
	}
	args, err := contextArgs(r.Context)
	if err != nil {
		return err
	}
	if r.Audit == nil && r.Decision == nil && oneStatement(r.Context) {
		// Context messages alone (an inference round's): one statement, atomic by itself,
		// without the two round trips of a transaction.
		return s.insertContext(ctx, s.db, r.Context, args, r.ReplaceContext)
	}
	if s.driver == DriverPostgres && r.Audit == nil && r.Decision != nil && len(r.Context) <= 1 {
		// A decision recorded already (a confirmed call's outcome: the decision was recorded
		// when the turn judged it): one statement instead of a transaction of five round trips.
		if done, err := s.recordDecidedPG(ctx, r, args); done || err != nil {
			return err
		}
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: record: begin: %w", err)
	}
	defer tx.Rollback()
	if s.driver == DriverPostgres && r.Audit != nil && oneStatement(r.Context) {
		return s.recordAuditPG(ctx, tx, r, args)
	}
	if d := r.Decision; d != nil {
		if err := s.decideConfirmation(ctx, tx, d.ConfirmationID, d.Decision, d.Approver, d.Reason, "", d.At); err != nil {
			return err
		}
	}
	if err := s.insertContext(ctx, tx, r.Context, args, r.ReplaceContext); err != nil {
		return err
	}
	if r.Audit != nil {
		// The audit row and its receipts last: the receipts log's lock is held from here to
		// the commit only.
		if inserted, err := s.appendAudit(ctx, tx, *r.Audit); err != nil {
			return err
		} else if inserted {
			if err := s.appendReceipts(ctx, tx, *r.Audit); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: record: commit: %w", err)
	}
	return nil
}

// recordDecidedPG records r (its Decision set, no audit row: an audit row takes the
// transaction, which appends its receipts; at most one context entry; args from contextArgs)
// in one PostgreSQL statement when the confirmation holds r's decision already: its message
// is inserted only if it does, in the snapshot that read it (a
// decision, once recorded, never changes). It reports done false, having written nothing, when
// the confirmation is undecided, decided otherwise or unknown: Record's transaction then
// decides it or reports the conflict, as for any decision.
func (s *Store) recordDecidedPG(ctx context.Context, r Recording, args [][]any) (done bool, err error) {
	const decided = `EXISTS (SELECT 1 FROM ok)`
	q := `WITH cur AS (SELECT decision FROM confirmations WHERE id = ?),
		ok AS (SELECT 1 FROM cur WHERE decision = ?)`
	qargs := []any{r.Decision.ConfirmationID, r.Decision.Decision}
	if len(args) == 1 {
		q += `, message AS (` + contextInsertInto + `SELECT ?, ?, ?, ?, ? WHERE ` + decided + ` ON CONFLICT (conversation, entry_key) ` + contextConflict(r.ReplaceContext) + `)`
		qargs = append(qargs, args[0]...)
	}
	var got string
	if err := s.db.GetContext(ctx, &got, s.q(q+` SELECT COALESCE((SELECT decision FROM cur), '')`), qargs...); err != nil {
		return false, fmt.Errorf("store: record decided %q: %w", r.Decision.ConfirmationID, err)
	}
	return got == r.Decision.Decision, nil
}

// recordAuditPG is Record's transaction on PostgreSQL for a recording with an audit row and at
// most one statement of context (tx begun, rolled back on return unless committed): the audit
// row, the messages and a read of the confirmation's decision in one statement; the decision
// only when it is not recorded yet (usually it is: the turn recorded it when it judged it);
// the row's receipts (one locked read, one write) when the row is new; the commit. Five round
// trips where the generic transaction takes eight or more.
func (s *Store) recordAuditPG(ctx context.Context, tx *sqlx.Tx, r Recording, args [][]any) error {
	aq, qargs := auditInsert(*r.Audit)
	q := `WITH audit AS (` + aq + ` RETURNING 1)`
	decided := `''`
	if d := r.Decision; d != nil {
		q = `WITH cur AS (SELECT decision FROM confirmations WHERE id = ?), audit AS (` + aq + ` RETURNING 1)`
		qargs = append([]any{d.ConfirmationID}, qargs...)
		decided = `COALESCE((SELECT decision FROM cur), '')`
	}
	if len(args) > 0 {
		cq, cargs := contextInsert(args, contextConflict(r.ReplaceContext))
		q += `, message AS (` + cq + `)`
		qargs = append(qargs, cargs...)
	}
	var got struct {
		Inserted int64  `db:"inserted"`
		Decision string `db:"decision"`
	}
	if err := tx.GetContext(ctx, &got, s.q(q+` SELECT (SELECT count(*) FROM audit) AS inserted, `+decided+` AS decision`), qargs...); err != nil {
		return fmt.Errorf("store: record %q: %w", r.Audit.Key, err)
	}
	if d := r.Decision; d != nil && got.Decision != d.Decision {
		if err := s.decideConfirmation(ctx, tx, d.ConfirmationID, d.Decision, d.Approver, d.Reason, "", d.At); err != nil {
			return err
		}
	}
	if got.Inserted == 1 {
		if err := s.appendReceipts(ctx, tx, *r.Audit); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: record: commit: %w", err)
	}
	return nil
}
