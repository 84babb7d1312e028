package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// StreamEvent is one event of a turn's client stream (table stream_events, issue 22): Seq
// numbers the events of Stream (the turn's workflow id) from 1 in the order they were
// appended; it is the SSE event id a client resumes after. Type is the AG-UI event type and
// Payload the whole AG-UI event (a JSON object).
type StreamEvent struct {
	Stream  string          `db:"stream" json:"stream"`
	Seq     int64           `db:"seq" json:"seq"`
	Dedup   string          `db:"dedup" json:"-"`
	Type    string          `db:"type" json:"type"`
	Payload json.RawMessage `db:"-" json:"payload"`
	At      time.Time       `db:"-" json:"at"`
}

type streamRow struct {
	StreamEvent
	PayloadCol string `db:"payload"`
	AtCol      dbTime `db:"created_at"`
}

// MaxStreamPage bounds the events one StreamEvents call returns.
const MaxStreamPage = 1000

// AppendStreamEvent appends an event to stream and returns its Seq. dedup identifies the
// event for retries: appending the same (stream, dedup) again returns the first Seq and writes
// nothing (an activity retry converges on one event). Seq is the stream's largest plus one,
// taken in the insert itself; two writers racing for one Seq retry, so Seq order is commit
// order and a reader that saw Seq n never later finds an event below n appear.
//
// Errors: an empty stream, dedup or type, a payload that is not a JSON object, or the
// database's error.
func (s *Store) AppendStreamEvent(ctx context.Context, stream, dedup, typ string, payload json.RawMessage, at time.Time) (int64, error) {
	if stream == "" || dedup == "" || typ == "" {
		return 0, errors.New("store: a stream event needs a stream, a dedup key and a type")
	}
	if !json.Valid(payload) || len(payload) == 0 || payload[0] != '{' {
		return 0, errors.New("store: a stream event's payload must be a JSON object")
	}
	for attempt := 0; attempt < 20; attempt++ {
		// One statement in the common case: the insert returns the seq it took.
		var seq int64
		q := `INSERT INTO stream_events (stream, seq, dedup, type, payload, created_at)
			SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM stream_events WHERE stream = ?
			ON CONFLICT DO NOTHING RETURNING seq`
		if s.driver == DriverPostgres {
			// The notification rides the insert (delivered at its commit): followers wait on
			// StreamsChannel instead of polling (issue 32).
			q = `WITH ins AS (` + q + `, stream) SELECT ins.seq FROM ins, LATERAL (SELECT pg_notify('` + StreamsChannel + `', ins.stream)) AS note`
		}
		err := s.db.GetContext(ctx, &seq, s.q(q), stream, dedup, typ, string(payload), tsArg(orNow(at)), stream)
		if err == nil {
			return seq, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("store: append stream event: %w", err)
		}
		// Nothing inserted: this very event was written before (a retry), or another writer
		// took this seq (look again).
		if seq, err := s.streamSeq(ctx, stream, dedup); err == nil {
			return seq, nil
		} else if !errors.Is(err, ErrNotFound) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("store: append stream event to %q: too many concurrent writers", stream)
}

func (s *Store) streamSeq(ctx context.Context, stream, dedup string) (int64, error) {
	var seq int64
	if err := s.db.GetContext(ctx, &seq, s.q(`SELECT seq FROM stream_events WHERE stream = ? AND dedup = ?`), stream, dedup); err != nil {
		return 0, notFound(err, "stream event")
	}
	return seq, nil
}

// StreamEvents returns the events of stream with Seq > after, in Seq order, at most limit
// (MaxStreamPage when limit <= 0 or larger). An unknown stream has no events (no error).
func (s *Store) StreamEvents(ctx context.Context, stream string, after int64, limit int) ([]StreamEvent, error) {
	if limit <= 0 || limit > MaxStreamPage {
		limit = MaxStreamPage
	}
	var rows []streamRow
	if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT stream, seq, dedup, type, payload, created_at FROM stream_events
		WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?`), stream, after, limit); err != nil {
		return nil, fmt.Errorf("store: stream events of %q: %w", stream, err)
	}
	out := make([]StreamEvent, len(rows))
	for i, r := range rows {
		r.StreamEvent.At = r.AtCol.Time
		r.StreamEvent.Payload = json.RawMessage(r.PayloadCol)
		out[i] = r.StreamEvent
	}
	return out, nil
}
