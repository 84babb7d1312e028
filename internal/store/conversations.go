package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// NextTurnSeq atomically allocates the next turn number of conversation:
// 1 for the first call, then 2, 3, … (one upsert statement,
// INSERT … ON CONFLICT DO UPDATE SET last_seq = last_seq + 1 RETURNING), so
// concurrent callers always get distinct numbers with no gaps. Every call
// allocates a number; it is not idempotent. conversation must not be empty.
func (s *Store) NextTurnSeq(ctx context.Context, conversation string) (int, error) {
	if conversation == "" {
		return 0, errors.New("store: NextTurnSeq needs a conversation")
	}
	var seq int
	err := s.db.GetContext(ctx, &seq, s.q(`INSERT INTO conversations (conversation, last_seq) VALUES (?, 1)
		ON CONFLICT (conversation) DO UPDATE SET last_seq = conversations.last_seq + 1
		RETURNING last_seq`), conversation)
	if err != nil {
		return 0, fmt.Errorf("store: next turn of conversation %q: %w", conversation, err)
	}
	return seq, nil
}

// ContextEntry is one durable item of a conversation's context (a message, a
// capability result labelled as untrusted data, …) as an opaque JSON Payload.
// Key identifies the entry within its conversation, so re-appending it (after
// a retry or replay) is a no-op. ID is assigned by the store in insertion
// order. CreatedAt is UTC, truncated to microseconds.
type ContextEntry struct {
	ID           int64
	Conversation string
	Key          string
	WorkflowID   string
	Payload      json.RawMessage
	CreatedAt    time.Time
}

type contextRow struct {
	ID           int64  `db:"id"`
	Conversation string `db:"conversation"`
	Key          string `db:"entry_key"`
	WorkflowID   string `db:"workflow_id"`
	Payload      []byte `db:"payload"`
	CreatedAt    dbTime `db:"created_at"`
}

const contextCols = `id, conversation, entry_key, workflow_id, payload, created_at`

// AppendContext appends entries, in order, in one transaction: either all new
// entries are stored or none. It is idempotent per (Conversation, Key): an
// entry whose key is already stored in that conversation (or repeated earlier
// in the same call) is skipped and the stored one kept. Each entry needs a
// Conversation, a Key and a valid JSON Payload; a zero CreatedAt is recorded
// as the current time; ID is ignored. Nothing is written if any entry is
// invalid.
func (s *Store) AppendContext(ctx context.Context, entries []ContextEntry) error {
	args, err := contextArgs(entries)
	if err != nil || len(entries) == 0 {
		return err
	}
	if oneStatement(entries) {
		return s.insertContext(ctx, s.db, entries, args, false)
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: append context: begin: %w", err)
	}
	defer tx.Rollback()
	if err := s.insertContext(ctx, tx, entries, args, false); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: append context: commit: %w", err)
	}
	return nil
}

// contextArgs validates entries and returns each one's insert arguments.
func contextArgs(entries []ContextEntry) ([][]any, error) {
	args := make([][]any, len(entries))
	now := time.Now()
	for i, e := range entries {
		if e.Conversation == "" || e.Key == "" {
			return nil, fmt.Errorf("store: context entry %d needs a Conversation and a Key", i)
		}
		if len(e.Payload) == 0 {
			return nil, fmt.Errorf("store: context entry %q needs a Payload", e.Key)
		}
		payload, err := jsonArg("context entry payload", e.Payload)
		if err != nil {
			return nil, fmt.Errorf("%w (entry %q)", err, e.Key)
		}
		at := e.CreatedAt
		if at.IsZero() {
			at = now
		}
		args[i] = []any{e.Conversation, e.Key, e.WorkflowID, payload, tsArg(at)}
	}
	return args, nil
}

// insertContext inserts entries (args from contextArgs) through x (the store or a transaction),
// skipping stored keys, or with replace giving a stored key the new payload (it keeps its place
// in the conversation). Entries with distinct keys go in multi-row statements of up to
// contextRowsPerStatement rows, unprepared: one round trip where a turn's recording used to
// make one per entry (a prepared statement would cost two more round trips than it saves), and
// one statement is atomic without a transaction of its own. A batch that repeats a key goes
// one statement per entry, in order, so the first of the repeated entries wins as before
// (PostgreSQL refuses a DO UPDATE that would touch one row twice in a statement).
func (s *Store) insertContext(ctx context.Context, x sqlx.ExecerContext, entries []ContextEntry, args [][]any, replace bool) error {
	conflict := contextConflict(replace)
	insert := func(from, to int) error {
		q, flat := contextInsert(args[from:to], conflict)
		if _, err := x.ExecContext(ctx, s.q(q), flat...); err != nil {
			if to-from == 1 {
				return fmt.Errorf("store: append context entry %q of %q: %w", entries[from].Key, entries[from].Conversation, err)
			}
			return fmt.Errorf("store: append context entries %q…%q of %q: %w", entries[from].Key, entries[to-1].Key, entries[from].Conversation, err)
		}
		return nil
	}
	if !distinctKeys(entries) {
		for i := range entries {
			if err := insert(i, i+1); err != nil {
				return err
			}
		}
		return nil
	}
	for from := 0; from < len(entries); from += contextRowsPerStatement {
		if err := insert(from, min(from+contextRowsPerStatement, len(entries))); err != nil {
			return err
		}
	}
	return nil
}

// contextInsertInto is the head of a context entry's insert (contextInsert, recordDecidedPG).
const contextInsertInto = `INSERT INTO context_entries (conversation, entry_key, workflow_id, payload, created_at) `

// contextInsert is one multi-row insert (with ? placeholders) of the entries whose arguments
// are args, resolving a stored key by conflict, and its flattened arguments.
func contextInsert(args [][]any, conflict string) (string, []any) {
	var q strings.Builder
	q.WriteString(contextInsertInto + `VALUES `)
	flat := make([]any, 0, 5*len(args))
	for i, a := range args {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?)")
		flat = append(flat, a...)
	}
	q.WriteString(` ON CONFLICT (conversation, entry_key) ` + conflict)
	return q.String(), flat
}

// contextConflict is insertContext's resolution of a stored key.
func contextConflict(replace bool) string {
	if replace {
		return `DO UPDATE SET payload = excluded.payload, workflow_id = excluded.workflow_id`
	}
	return `DO NOTHING`
}

// contextRowsPerStatement bounds a multi-row context insert: 5 parameters a row, far below
// SQLite's 32,766 and PostgreSQL's 65,535 parameters per statement.
const contextRowsPerStatement = 100

// oneStatement reports whether insertContext writes entries in a single statement, which is
// atomic by itself: no transaction (two round trips, BEGIN and COMMIT) is needed around it.
func oneStatement(entries []ContextEntry) bool {
	return len(entries) <= contextRowsPerStatement && distinctKeys(entries)
}

// distinctKeys reports whether no (conversation, key) repeats in entries.
func distinctKeys(entries []ContextEntry) bool {
	if len(entries) < 2 {
		return true
	}
	seen := make(map[[2]string]bool, len(entries))
	for _, e := range entries {
		k := [2]string{e.Conversation, e.Key}
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// LoadContext returns the LAST limit entries of conversation, in insertion
// order (oldest first). limit <= 0 returns all entries. An unknown
// conversation yields an empty slice, not an error.
func (s *Store) LoadContext(ctx context.Context, conversation string, limit int) ([]ContextEntry, error) {
	var rows []contextRow
	var err error
	if limit > 0 {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+contextCols+` FROM (
			SELECT `+contextCols+` FROM context_entries WHERE conversation = ? ORDER BY id DESC LIMIT ?
		) recent ORDER BY id`), conversation, limit)
	} else {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+contextCols+` FROM context_entries
			WHERE conversation = ? ORDER BY id`), conversation)
	}
	if err != nil {
		return nil, fmt.Errorf("store: load context of %q: %w", conversation, err)
	}
	out := make([]ContextEntry, len(rows))
	for i, r := range rows {
		out[i] = ContextEntry{
			ID: r.ID, Conversation: r.Conversation, Key: r.Key, WorkflowID: r.WorkflowID,
			Payload: rawJSON(r.Payload), CreatedAt: r.CreatedAt.Time,
		}
	}
	return out, nil
}

// DeleteContext deletes the entries of conversation stored under keys (unknown keys are
// ignored), in one statement.
func (s *Store) DeleteContext(ctx context.Context, conversation string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	q, args, err := sqlx.In(`DELETE FROM context_entries WHERE conversation = ? AND entry_key IN (?)`, conversation, keys)
	if err != nil {
		return fmt.Errorf("store: delete context of %q: %w", conversation, err)
	}
	if _, err := s.db.ExecContext(ctx, s.q(q), args...); err != nil {
		return fmt.Errorf("store: delete context of %q: %w", conversation, err)
	}
	return nil
}

// FirstContext returns the oldest entry of conversation (ok false when it has none): where a
// conversation's system prompt is stored, which a bounded LoadContext window leaves out once
// the conversation is longer than the window.
func (s *Store) FirstContext(ctx context.Context, conversation string) (e ContextEntry, ok bool, err error) {
	var rows []contextRow
	if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+contextCols+` FROM context_entries
		WHERE conversation = ? ORDER BY id LIMIT 1`), conversation); err != nil {
		return e, false, fmt.Errorf("store: first context entry of %q: %w", conversation, err)
	}
	if len(rows) == 0 {
		return e, false, nil
	}
	r := rows[0]
	return ContextEntry{ID: r.ID, Conversation: r.Conversation, Key: r.Key, WorkflowID: r.WorkflowID,
		Payload: rawJSON(r.Payload), CreatedAt: r.CreatedAt.Time}, true, nil
}

// SaveTurnResult stores the final result of turn workflowID (an upsert: a
// later save for the same workflow replaces result, conversation and time).
// result must be valid JSON; a zero at is recorded as the current time.
func (s *Store) SaveTurnResult(ctx context.Context, workflowID, conversation string, result json.RawMessage, at time.Time) error {
	if workflowID == "" {
		return errors.New("store: SaveTurnResult needs a workflow id")
	}
	if len(result) == 0 {
		return fmt.Errorf("store: turn result of %q is empty", workflowID)
	}
	res, err := jsonArg("turn result", result)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO turn_results (workflow_id, conversation, result, saved_at)
		VALUES (?, ?, ?, ?)
		ON CONFLICT (workflow_id) DO UPDATE SET conversation = excluded.conversation,
			result = excluded.result, saved_at = excluded.saved_at`),
		workflowID, conversation, res, tsArg(orNow(at)))
	if err != nil {
		return fmt.Errorf("store: save turn result of %q: %w", workflowID, err)
	}
	return nil
}

// GetTurnResult returns the stored result of turn workflowID byte for byte,
// or an error wrapping ErrNotFound.
func (s *Store) GetTurnResult(ctx context.Context, workflowID string) (json.RawMessage, error) {
	var b []byte
	err := s.db.GetContext(ctx, &b, s.q(`SELECT result FROM turn_results WHERE workflow_id = ?`), workflowID)
	if err != nil {
		return nil, notFound(err, "turn result %q", workflowID)
	}
	return rawJSON(b), nil
}
