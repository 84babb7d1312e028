package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	if r.Audit != nil {
		a := *r.Audit
		a.At = orNow(a.At) // the row and its records carry one time
		if r.Decision != nil && a.ConfirmationID == "" {
			// The row's records name the confirmation this recording decides, not another
			// of the proposal's.
			a.ConfirmationID = r.Decision.ConfirmationID
		}
		r.Audit = &a
	}
	if r.Audit == nil && r.Decision == nil && oneStatement(r.Context) {
		// Context messages alone (an inference round's): one statement, atomic by itself,
		// without the two round trips of a transaction.
		return s.insertContext(ctx, s.db, r.Context, args, r.ReplaceContext)
	}
	if s.driver == DriverPostgres && (r.Decision == nil && oneStatement(r.Context) || r.Decision != nil && len(r.Context) <= 1) {
		// An outcome's audit row, its draft for the receipts log and its messages (an
		// automatic call's record), or a decision recorded already and what goes with it (a
		// confirmed call's outcome: the decision was recorded when the turn judged it): one
		// statement instead of a transaction of four or five round trips.
		if done, err := s.recordPG(ctx, r, args); done || err != nil {
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
		// The audit row and, with a new row, its draft for the receipts log.
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

// recordPG records r (at most one statement of context; with a decision at most one entry;
// args from contextArgs) in one PostgreSQL statement, a data-modifying WITH, atomic by itself:
// the audit row, its receipts draft (only with a new row) and its messages. With a decision,
// it writes only when the confirmation holds that decision already, in the snapshot that read
// it (a decision, once recorded, never changes); it reports done false, having written
// nothing, when the confirmation is undecided, decided otherwise or unknown: Record's
// transaction then decides it or reports the conflict, as for any decision.
func (s *Store) recordPG(ctx context.Context, r Recording, args [][]any) (done bool, err error) {
	var with []string
	var qargs []any
	cond, final := "", `SELECT ''`
	if d := r.Decision; d != nil {
		with = append(with, `cur AS (SELECT decision FROM confirmations WHERE id = ?)`, `ok AS (SELECT 1 FROM cur WHERE decision = ?)`)
		qargs = append(qargs, d.ConfirmationID, d.Decision)
		cond, final = `EXISTS (SELECT 1 FROM ok)`, `SELECT COALESCE((SELECT decision FROM cur), '')`
	}
	what := ""
	if e := r.Audit; e != nil {
		a := *e
		what = a.Key
		aq, aargs := auditInsert(a)
		if cond != "" {
			aq, aargs = auditInsertWhere(a, cond)
		}
		dq, dargs, err := auditDraftInsert(a, `EXISTS (SELECT 1 FROM audit)`)
		if err != nil {
			return false, err
		}
		with = append(with, `audit AS (`+aq+` RETURNING 1)`, `drafted AS (`+dq+`)`)
		qargs = append(append(qargs, aargs...), dargs...)
	} else if r.Decision != nil {
		what = r.Decision.ConfirmationID
	}
	switch {
	case len(args) == 0:
	case cond == "":
		cq, cargs := contextInsert(args, contextConflict(r.ReplaceContext))
		with = append(with, `message AS (`+cq+`)`)
		qargs = append(qargs, cargs...)
	default: // one entry, on the condition
		with = append(with, `message AS (`+contextInsertInto+`SELECT ?, ?, ?, ?, ? WHERE `+cond+` ON CONFLICT (conversation, entry_key) `+contextConflict(r.ReplaceContext)+`)`)
		qargs = append(qargs, args[0]...)
	}
	if len(with) == 0 {
		return false, nil
	}
	var got string
	if err := s.db.GetContext(ctx, &got, s.q(`WITH `+strings.Join(with, ", ")+` `+final), qargs...); err != nil {
		return false, fmt.Errorf("store: record %q: %w", what, err)
	}
	if r.Decision != nil && got != r.Decision.Decision {
		return false, nil
	}
	if r.Audit != nil {
		// Woken whether or not this write inserted the row: a wake is cheap, a read is not.
		s.kickSequencer()
	}
	return true, nil
}
