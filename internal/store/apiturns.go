package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// APITurn is one turn started through the application API (issue 32, table api_turns): the
// caller that started it, the idempotency key it sent and the SHA-256 (hex) of its request,
// the turn's workflow id, conversation and principal.
type APITurn struct {
	Caller       string    `db:"caller"`
	Key          string    `db:"idem_key"`
	BodySHA256   string    `db:"body_sha256"`
	WorkflowID   string    `db:"workflow_id"`
	Conversation string    `db:"conversation"`
	Principal    string    `db:"principal"`
	At           time.Time `db:"-"`
}

type apiTurnRow struct {
	APITurn
	AtCol dbTime `db:"at"`
}

const apiTurnCols = `caller, idem_key, body_sha256, workflow_id, conversation, principal, at`

// ReserveAPITurn records t unless its caller used its key before, and returns the recorded
// row and whether it is t (created). A caller that sends one request twice gets the first
// row back (created false): its workflow id names the one turn both requests mean; callers
// compare BodySHA256 to refuse a key reused for another request.
func (s *Store) ReserveAPITurn(ctx context.Context, t APITurn) (APITurn, bool, error) {
	if t.Caller == "" || t.Key == "" || t.WorkflowID == "" || t.BodySHA256 == "" {
		return APITurn{}, false, errors.New("store: an API turn needs a caller, a key, a body digest and a workflow id")
	}
	var row apiTurnRow
	err := s.db.GetContext(ctx, &row, s.q(`INSERT INTO api_turns (`+apiTurnCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING RETURNING `+apiTurnCols),
		t.Caller, t.Key, t.BodySHA256, t.WorkflowID, t.Conversation, t.Principal, tsArg(orNow(t.At)))
	if err == nil {
		row.APITurn.At = row.AtCol.Time
		return row.APITurn, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return APITurn{}, false, fmt.Errorf("store: reserve API turn: %w", err)
	}
	if err := s.db.GetContext(ctx, &row, s.q(`SELECT `+apiTurnCols+` FROM api_turns WHERE caller = ? AND idem_key = ?`), t.Caller, t.Key); err != nil {
		return APITurn{}, false, notFound(err, "API turn")
	}
	row.APITurn.At = row.AtCol.Time
	return row.APITurn, false, nil
}

// ReleaseAPITurn deletes the reservation of caller's key (its turn could not be started), so
// the caller may send the request again.
func (s *Store) ReleaseAPITurn(ctx context.Context, caller, key string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM api_turns WHERE caller = ? AND idem_key = ?`), caller, key); err != nil {
		return fmt.Errorf("store: release API turn: %w", err)
	}
	return nil
}

// TurnOwner is the principal a turn acts for, from what the store knows of it: the API turn
// that started it, else its proven requester (turn_requesters). ErrNotFound when the store
// knows no such turn, so an unknown turn is answered at once, without waiting.
func (s *Store) TurnOwner(ctx context.Context, workflowID string) (string, error) {
	var owner string
	err := s.db.GetContext(ctx, &owner, s.q(`SELECT principal FROM api_turns WHERE workflow_id = ?
		UNION ALL SELECT principal FROM turn_requesters WHERE workflow_id = ? LIMIT 1`), workflowID, workflowID)
	if err != nil {
		return "", notFound(err, "turn %q", workflowID)
	}
	return owner, nil
}

// ConversationOwner is the principal conversation is bound to (BindConversation), or
// ErrNotFound.
func (s *Store) ConversationOwner(ctx context.Context, conversation string) (string, error) {
	var owner string
	if err := s.db.GetContext(ctx, &owner, s.q(`SELECT principal FROM conversation_principals WHERE conversation = ?`), conversation); err != nil {
		return "", notFound(err, "conversation %q", conversation)
	}
	return owner, nil
}

// LatestTurn is the workflow id of the newest API turn of conversation, or ErrNotFound.
func (s *Store) LatestTurn(ctx context.Context, conversation string) (string, error) {
	var id string
	if err := s.db.GetContext(ctx, &id, s.q(`SELECT workflow_id FROM api_turns WHERE conversation = ? ORDER BY at DESC LIMIT 1`), conversation); err != nil {
		return "", notFound(err, "turns of conversation %q", conversation)
	}
	return id, nil
}

// StreamsChannel is the PostgreSQL NOTIFY channel AppendStreamEvent signals on, with the
// stream (a turn's workflow id) as the payload: followers wait on it instead of polling
// (issue 32). A payload is a hint: followers read the events before acting.
const StreamsChannel = "airlock_streams"

// WatchStreams calls note, from one goroutine, until ctx ends: with the stream named by each
// NOTIFY on StreamsChannel, and with "" (every stream may have changed) when the listener
// (re)connects. It reports whether notifications are available: false on SQLite or when the
// LISTEN failed, in which case note is never called and callers must poll.
func (s *Store) WatchStreams(ctx context.Context, note func(stream string)) bool {
	if s.driver != DriverPostgres {
		return false
	}
	l := pq.NewListener(s.dsn, 100*time.Millisecond, 10*time.Second, nil)
	if err := l.Listen(StreamsChannel); err != nil {
		_ = l.Close()
		return false
	}
	go func() {
		defer l.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-l.Notify:
				if n == nil { // reconnected: notifications may have been lost
					note("")
				} else {
					note(n.Extra)
				}
			}
		}
	}()
	return true
}

// StreamEnded reports whether stream holds its turn's final event (RUN_FINISHED or
// RUN_ERROR): the turn is ending even while Temporal still shows it running.
func (s *Store) StreamEnded(ctx context.Context, stream string) (bool, error) {
	var n int
	err := s.db.GetContext(ctx, &n, s.q(`SELECT count(*) FROM stream_events WHERE stream = ? AND type IN ('RUN_FINISHED', 'RUN_ERROR')`), stream)
	if err != nil {
		return false, fmt.Errorf("store: stream %q ended: %w", stream, err)
	}
	return n > 0, nil
}
