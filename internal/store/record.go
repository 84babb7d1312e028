package store

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	if r.Audit != nil && r.Decision != nil && r.Audit.ConfirmationID == "" {
		// The row's records name the confirmation this recording decides, not another of
		// the proposal's.
		a := *r.Audit
		a.ConfirmationID = r.Decision.ConfirmationID
		r.Audit = &a
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
	if s.driver == DriverPostgres && r.Audit != nil && oneStatement(r.Context) {
		// An outcome's audit row, its records and its messages: one read and one statement
		// when its decision, if any, is recorded already (the usual case).
		if done, err := s.recordAuditPG(ctx, r, args); done || err != nil {
			return err
		}
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: record: begin: %w", err)
	}
	defer tx.Rollback()
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
	if r.Audit != nil {
		s.kickSequencer()
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

// recordAuditPG records r (an audit row, at most one statement of context, perhaps a decision)
// on PostgreSQL without a transaction when r's decision, if any, is recorded already: it reads
// what the row's receipts records need (one round trip for a call's outcome or a row with a
// decision, none for any other row: receiptInputs), then writes the audit row, its messages
// and its records in one statement (a data-modifying WITH, atomic by itself; the records only
// with a new row). The background sequencer places the records in the tree. It reports done
// false, having written nothing, when the decision is not recorded yet: Record's transaction
// records it, with the rest.
func (s *Store) recordAuditPG(ctx context.Context, r Recording, args [][]any) (done bool, err error) {
	e := *r.Audit
	in, err := s.receiptInputs(ctx, s.db, e)
	if err != nil {
		return false, fmt.Errorf("store: record %q: %w", e.Key, err)
	}
	if d := r.Decision; d != nil && (in.conf == nil || in.conf.ID != d.ConfirmationID || in.conf.Decision != d.Decision) {
		return false, nil
	}
	if err := s.editProof(ctx, s.db, &in); err != nil {
		return false, fmt.Errorf("store: record %q: %w", e.Key, err)
	}
	aq, qargs := auditInsert(e)
	q := `WITH audit AS (` + aq + ` RETURNING 1)`
	if len(args) > 0 {
		cq, cargs := contextInsert(args, contextConflict(r.ReplaceContext))
		q += `, message AS (` + cq + `)`
		qargs = append(qargs, cargs...)
	}
	pq, pargs, err := pendingInsert(e.Key, receiptRecords(e, in), `EXISTS (SELECT 1 FROM audit)`)
	if err != nil {
		return false, err
	}
	q += `, appended AS (` + pq + `) SELECT count(*) FROM audit`
	var inserted int64
	if err := s.db.GetContext(ctx, &inserted, s.q(q), append(qargs, pargs...)...); err != nil {
		return false, fmt.Errorf("store: record %q: %w", e.Key, err)
	}
	if inserted == 1 {
		s.kickSequencer()
	}
	return true, nil
}
