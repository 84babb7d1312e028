package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// insertContext inserts entries (args from contextArgs) in tx, skipping stored keys, or with
// replace giving a stored key the new payload (it keeps its place in the conversation). One
// statement per entry, unprepared: a turn records one or two entries at a time, and a prepared
// statement would cost two more round trips than it saves.
func (s *Store) insertContext(ctx context.Context, tx *sqlx.Tx, entries []ContextEntry, args [][]any, replace bool) error {
	conflict := `DO NOTHING`
	if replace {
		conflict = `DO UPDATE SET payload = excluded.payload, workflow_id = excluded.workflow_id`
	}
	q := s.q(`INSERT INTO context_entries
		(conversation, entry_key, workflow_id, payload, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (conversation, entry_key) ` + conflict)
	for i, a := range args {
		if _, err := tx.ExecContext(ctx, q, a...); err != nil {
			return fmt.Errorf("store: append context entry %q of %q: %w", entries[i].Key, entries[i].Conversation, err)
		}
	}
	return nil
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
