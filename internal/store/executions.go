package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Execution states in the idempotency ledger.
const (
	// ExecStarted: BeginExecution recorded the attempt; the effect may or may
	// not have happened (after a crash its outcome is unknown and must be
	// reported as such, never silently re-run).
	ExecStarted = "started"
	// ExecCompleted: the effect finished and Result holds its outcome.
	ExecCompleted = "completed"
	// ExecFailed: the effect finished with an error recorded in Result.
	ExecFailed = "failed"
)

// Execution is one row of the idempotency ledger that makes effects run at
// most once per proposal. Key is the proposal's deterministic identity (for
// example workflow id + proposal seq + capability id + version), chosen by the
// caller. State is ExecStarted, then ExecCompleted or ExecFailed. Times are
// UTC, truncated to microseconds.
type Execution struct {
	Key          string
	WorkflowID   string
	Seq          int
	CapabilityID string
	Version      int
	State        string
	Result       json.RawMessage
	StartedAt    time.Time
	FinishedAt   *time.Time
	// Attempts is how many times the effect was started for this proposal: 1, plus one per
	// RetryExecution (only capabilities the registry declares idempotent are retried).
	Attempts int
}

type executionRow struct {
	Key          string `db:"exec_key"`
	WorkflowID   string `db:"workflow_id"`
	Seq          int    `db:"seq"`
	CapabilityID string `db:"capability_id"`
	Version      int    `db:"version"`
	State        string `db:"state"`
	Result       []byte `db:"result"`
	StartedAt    dbTime `db:"started_at"`
	FinishedAt   dbTime `db:"finished_at"`
	Attempts     int    `db:"attempts"`
}

func (r executionRow) execution() Execution {
	return Execution{
		Key: r.Key, WorkflowID: r.WorkflowID, Seq: r.Seq, CapabilityID: r.CapabilityID,
		Version: r.Version, State: r.State, Result: rawJSON(r.Result),
		StartedAt: r.StartedAt.Time, FinishedAt: r.FinishedAt.ptr(), Attempts: r.Attempts,
	}
}

const executionCols = `exec_key, workflow_id, seq, capability_id, version, state, result, started_at, finished_at, attempts`

// BeginExecution claims e.Key before an effect runs: it inserts the row with
// State ExecStarted (e.State, e.Result and e.FinishedAt are ignored; a zero
// e.StartedAt is recorded as the current time) and returns (nil, nil). If the
// key already exists it inserts nothing and returns the existing row: the
// caller must then NOT run the effect again, but report the recorded outcome
// (or "outcome unknown" if it is still ExecStarted). Concurrent calls with
// one key: exactly one gets (nil, nil).
func (s *Store) BeginExecution(ctx context.Context, e Execution) (existing *Execution, err error) {
	if e.Key == "" {
		return nil, errors.New("store: execution needs a Key (the proposal identity)")
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO executions
		(exec_key, workflow_id, seq, capability_id, version, state, started_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (exec_key) DO NOTHING`),
		e.Key, e.WorkflowID, e.Seq, e.CapabilityID, e.Version, ExecStarted, tsArg(orNow(e.StartedAt)))
	if err != nil {
		return nil, fmt.Errorf("store: begin execution %q: %w", e.Key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("store: begin execution %q: %w", e.Key, err)
	}
	if n == 1 {
		return nil, nil
	}
	got, err := s.GetExecution(ctx, e.Key)
	if err != nil {
		return nil, err
	}
	return &got, nil
}

// FinishExecution records the outcome of a started execution: state is
// ExecCompleted or ExecFailed, result (optional, valid JSON) and the finish
// time. The first finish is final: finishing again with the same state is a
// no-op returning nil (the first result is kept), a different state returns an
// error wrapping ErrConflict. Unknown key → ErrNotFound.
func (s *Store) FinishExecution(ctx context.Context, key, state string, result json.RawMessage, at time.Time) error {
	if state != ExecCompleted && state != ExecFailed {
		return fmt.Errorf("store: finish execution %q: state %q is not %q or %q", key, state, ExecCompleted, ExecFailed)
	}
	res0, err := jsonArg("execution result", result)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE executions SET state = ?, result = ?, finished_at = ?
		WHERE exec_key = ? AND state = ?`), state, res0, tsArg(orNow(at)), key, ExecStarted)
	if err != nil {
		return fmt.Errorf("store: finish execution %q: %w", key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: finish execution %q: %w", key, err)
	} else if n == 1 {
		return nil
	}
	var existing string
	if err := s.db.GetContext(ctx, &existing, s.q(`SELECT state FROM executions WHERE exec_key = ?`), key); err != nil {
		return notFound(err, "execution %q", key)
	}
	if existing == state {
		return nil
	}
	return fmt.Errorf("%w: execution %q already %s, cannot record %s", ErrConflict, key, existing, state)
}

// GetExecution returns the ledger row for key, or an error wrapping
// ErrNotFound.
func (s *Store) GetExecution(ctx context.Context, key string) (Execution, error) {
	var r executionRow
	err := s.db.GetContext(ctx, &r, s.q(`SELECT `+executionCols+` FROM executions WHERE exec_key = ?`), key)
	if err != nil {
		return Execution{}, notFound(err, "execution %q", key)
	}
	return r.execution(), nil
}

// CountExecutions returns how many ledger rows exist for capabilityID (all
// capabilities when ""), whatever their state. For tests and diagnostics
// (e.g. "this effect ran once").
func (s *Store) CountExecutions(ctx context.Context, capabilityID string) (int, error) {
	var n int
	var err error
	if capabilityID == "" {
		err = s.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM executions`)
	} else {
		err = s.db.GetContext(ctx, &n, s.q(`SELECT COUNT(*) FROM executions WHERE capability_id = ?`), capabilityID)
	}
	if err != nil {
		return 0, fmt.Errorf("store: count executions of %q: %w", capabilityID, err)
	}
	return n, nil
}

// RetryExecution counts one more start of a started, unfinished execution and returns the new
// attempt count. Only for capabilities the registry declares idempotent: for every other one
// a started execution is outcome unknown and is never started again. Errors: the row is not
// in state ExecStarted (finished, or unknown key) → an error wrapping ErrConflict or
// ErrNotFound.
func (s *Store) RetryExecution(ctx context.Context, key string, at time.Time) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, s.q(`UPDATE executions SET attempts = attempts + 1, started_at = ?
		WHERE exec_key = ? AND state = ? RETURNING attempts`), tsArg(orNow(at)), key, ExecStarted)
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: retry execution %q: %w", key, err)
	}
	got, gerr := s.GetExecution(ctx, key)
	if gerr != nil {
		return 0, gerr
	}
	return 0, fmt.Errorf("%w: execution %q is %s, not started", ErrConflict, key, got.State)
}
