package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// AuditEvent is one row of the append-only audit log: one row per outcome of
// a proposal (executed, rejected, denied, expired, parse_failed,
// budget_exhausted, captured) or other audited step.
//
// Key is the row's idempotency key, chosen by the caller from the event's
// deterministic identity (for example workflow id / proposal seq / stage), so
// that an activity retry or a workflow replay that records the same outcome
// again writes nothing. ID is assigned by the store in insertion order and is
// ignored by AppendAudit. At is stored in UTC truncated to microseconds; a
// zero At is recorded as the current time. Its JSON (airlock audit --json, exports) uses
// stable snake_case names; Facts and ConfirmationID travel only in receipts drafts (never
// read back from a row, so audit --json omits them).
type AuditEvent struct {
	ID           int64  `json:"id"`
	Key          string `json:"key"`
	WorkflowID   string `json:"workflow_id"`
	RunID        string `json:"run_id"`
	Seq          int    `json:"seq"`
	CallID       string `json:"call_id,omitempty"`
	CapabilityID string `json:"capability_id,omitempty"`
	Version      int    `json:"version,omitempty"`
	Outcome      string `json:"outcome"`
	Stage        string `json:"stage,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Detail       string `json:"detail,omitempty"`
	ArgsDigest   string `json:"args_digest,omitempty"`
	// OriginalDigest is set on a proposal_edited row only: the digest of the model's arguments
	// the approver's edit replaced (ArgsDigest is then the edited arguments' digest).
	OriginalDigest string `json:"original_digest,omitempty"`
	Approver       string `json:"approver,omitempty"`
	// Provenance, on rows about a proposal that was held for a human, is the JSON
	// provenance.Report of its arguments (issue 24); nil otherwise.
	Provenance json.RawMessage `json:"provenance,omitempty"`
	At         time.Time       `json:"at"`
	// Facts feed the row's receipts records (receipts.go); they are not stored in the row.
	Facts *ReceiptFacts `json:"facts,omitempty"`
	// ConfirmationID, when the writer knows it (Record sets it from its Decision), is the
	// confirmation whose decision the authorization record of a call's outcome names; ""
	// lets the store choose among the proposal's confirmations (receiptInputs). Not stored
	// in the row.
	ConfirmationID string `json:"confirmation_id,omitempty"`
}

type auditRow struct {
	ID           int64  `db:"id"`
	Key          string `db:"event_key"`
	WorkflowID   string `db:"workflow_id"`
	RunID        string `db:"run_id"`
	Seq          int    `db:"seq"`
	CallID       string `db:"call_id"`
	CapabilityID string `db:"capability_id"`
	Version      int    `db:"version"`
	Outcome      string `db:"outcome"`
	Stage        string `db:"stage"`
	Reason       string `db:"reason"`
	Detail       string `db:"detail"`
	ArgsDigest   string `db:"args_digest"`
	OrigDigest   string `db:"original_digest"`
	Approver     string `db:"approver"`
	Provenance   string `db:"provenance"`
	At           dbTime `db:"at"`
}

func (r auditRow) event() AuditEvent {
	return AuditEvent{
		ID: r.ID, Key: r.Key, WorkflowID: r.WorkflowID, RunID: r.RunID, Seq: r.Seq,
		CallID: r.CallID, CapabilityID: r.CapabilityID, Version: r.Version,
		Outcome: r.Outcome, Stage: r.Stage, Reason: r.Reason, Detail: r.Detail,
		ArgsDigest: r.ArgsDigest, OriginalDigest: r.OrigDigest, Approver: r.Approver, At: r.At.Time,
		Provenance: optionalJSON(r.Provenance),
	}
}

const auditCols = `id, event_key, workflow_id, run_id, seq, call_id, capability_id, version,
	outcome, stage, reason, detail, args_digest, original_digest, approver, at, provenance`

// AppendAudit appends e to the audit log unless a row with e.Key already
// exists (INSERT … ON CONFLICT (event_key) DO NOTHING), and with a new row its records to
// the receipts log, in one transaction. inserted reports
// whether this call wrote the row; false means the event was already recorded
// (by an earlier attempt or a replay) and the existing row is left unchanged.
// e.Key and e.Outcome are required; e.ID is ignored.
func (s *Store) AppendAudit(ctx context.Context, e AuditEvent) (inserted bool, err error) {
	if e.Key == "" {
		return false, errors.New("store: audit event needs a Key (its idempotency key)")
	}
	if e.Outcome == "" {
		return false, fmt.Errorf("store: audit event %q needs an Outcome", e.Key)
	}
	if len(e.Provenance) > 0 && !json.Valid(e.Provenance) {
		return false, fmt.Errorf("store: audit event %q: provenance is not valid JSON", e.Key)
	}
	return s.appendAuditTx(ctx, e)
}

// appendAudit inserts e through x (the store or a transaction); see AppendAudit.
func (s *Store) appendAudit(ctx context.Context, x sqlx.ExecerContext, e AuditEvent) (inserted bool, err error) {
	q, args := auditInsert(e)
	res, err := x.ExecContext(ctx, s.q(q), args...)
	if err != nil {
		return false, fmt.Errorf("store: append audit event %q: %w", e.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: append audit event %q: %w", e.Key, err)
	}
	return n == 1, nil
}

// auditInsertInto is the head of an audit row's insert (auditInsert, auditInsertWhere).
const auditInsertInto = `INSERT INTO audit_events
		(event_key, workflow_id, run_id, seq, call_id, capability_id, version,
		 outcome, stage, reason, detail, args_digest, original_digest, approver, at, provenance)
		`

// auditInsert is the statement (with ? placeholders) and arguments that insert e unless its
// Key is stored.
func auditInsert(e AuditEvent) (string, []any) {
	return auditInsertInto + `VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (event_key) DO NOTHING`,
		[]any{e.Key, e.WorkflowID, e.RunID, e.Seq, e.CallID, e.CapabilityID, e.Version,
			e.Outcome, e.Stage, e.Reason, e.Detail, e.ArgsDigest, e.OriginalDigest, e.Approver, tsArg(orNow(e.At)), string(e.Provenance)}
}

// auditInsertWhere is auditInsert made only when the SQL condition cond holds (a data-modifying
// WITH's condition on PostgreSQL: the parameters take the columns' types).
func auditInsertWhere(e AuditEvent, cond string) (string, []any) {
	_, args := auditInsert(e)
	return auditInsertInto + `SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE ` + cond + `
		ON CONFLICT (event_key) DO NOTHING`, args
}

// auditListLimit bounds ListAudit("").
const auditListLimit = 1000

// ListAudit returns the audit events of one workflow, ordered by ID
// (insertion order). With workflowID "" it returns the most recent 1000 events
// of all workflows, still oldest first. No events is an empty slice, not an
// error.
// ListAuditOutcome lists the newest limit audit events of one outcome kind (e.g. the
// policy_shadow rows `airlock policy diff --audit` replays), oldest first.
func (s *Store) ListAuditOutcome(ctx context.Context, outcome string, limit int) ([]AuditEvent, error) {
	var rows []auditRow
	if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+auditCols+` FROM (
			SELECT `+auditCols+` FROM audit_events WHERE outcome = ? ORDER BY id DESC LIMIT ?
		) recent ORDER BY id`), outcome, limit); err != nil {
		return nil, fmt.Errorf("store: list %s audit events: %w", outcome, err)
	}
	out := make([]AuditEvent, len(rows))
	for i, r := range rows {
		out[i] = r.event()
	}
	return out, nil
}

func (s *Store) ListAudit(ctx context.Context, workflowID string) ([]AuditEvent, error) {
	var rows []auditRow
	var err error
	if workflowID == "" {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+auditCols+` FROM (
			SELECT `+auditCols+` FROM audit_events ORDER BY id DESC LIMIT ?
		) recent ORDER BY id`), auditListLimit)
	} else {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+auditCols+` FROM audit_events
			WHERE workflow_id = ? ORDER BY id`), workflowID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: list audit events of %q: %w", workflowID, err)
	}
	out := make([]AuditEvent, len(rows))
	for i, r := range rows {
		out[i] = r.event()
	}
	return out, nil
}
