package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Notice delivery states (notice_outbox.state, issue 23).
const (
	// NoticeQueued: not delivered yet; due at DueAt (a retry after a failure is queued again).
	NoticeQueued = "queued"
	// NoticeSent: the channel accepted it.
	NoticeSent = "sent"
	// NoticeSkipped: not sent because the confirmation was decided (or expired) first.
	NoticeSkipped = "skipped"
	// NoticeFailed: given up after the last attempt; LastError says why.
	NoticeFailed = "failed"
)

// Delivery is one notice owed to one channel (a notice_outbox row). ID is the delivery id the
// channel receives as its idempotency key. Payload is the notice as JSON (notify.Notice), made
// fit to show when it was written: never a token or a decision MAC. Times are UTC.
type Delivery struct {
	ID             string
	ConfirmationID string
	Channel        string
	// Kind is pending, reminder or escalation.
	Kind       string
	Payload    json.RawMessage
	DueAt      time.Time
	Attempts   int
	LeaseUntil *time.Time
	State      string
	LastError  string
	CreatedAt  time.Time
	DoneAt     *time.Time
}

type deliveryRow struct {
	ID             string `db:"id"`
	ConfirmationID string `db:"confirmation_id"`
	Channel        string `db:"channel"`
	Kind           string `db:"kind"`
	Payload        []byte `db:"payload"`
	DueAt          dbTime `db:"due_at"`
	Attempts       int    `db:"attempts"`
	LeaseUntil     dbTime `db:"lease_until"`
	State          string `db:"state"`
	LastError      string `db:"last_error"`
	CreatedAt      dbTime `db:"created_at"`
	DoneAt         dbTime `db:"done_at"`
}

const deliveryCols = `id, confirmation_id, channel, kind, payload, due_at, attempts, lease_until, state, last_error, created_at, done_at`

func (r deliveryRow) delivery() Delivery {
	return Delivery{ID: r.ID, ConfirmationID: r.ConfirmationID, Channel: r.Channel, Kind: r.Kind,
		Payload: rawJSON(r.Payload), DueAt: r.DueAt.Time, Attempts: r.Attempts, LeaseUntil: r.LeaseUntil.ptr(),
		State: r.State, LastError: r.LastError, CreatedAt: r.CreatedAt.Time, DoneAt: r.DoneAt.ptr()}
}

// EnqueueDeliveries writes ds as queued rows, each unless a row with its ID exists (ON
// CONFLICT DO NOTHING): the activity that issues a confirmation calls it on every attempt and
// a retry writes nothing new. It returns how many rows this call wrote. Each Delivery needs
// ID, ConfirmationID, Channel, Kind, valid JSON Payload and DueAt; the rows go in one
// transaction, so a notice is owed to all its channels or none.
func (s *Store) EnqueueDeliveries(ctx context.Context, ds []Delivery) (int, error) {
	if len(ds) == 0 {
		return 0, nil
	}
	for _, d := range ds {
		if d.ID == "" || d.ConfirmationID == "" || d.Channel == "" || d.Kind == "" || d.DueAt.IsZero() {
			return 0, fmt.Errorf("store: enqueue delivery %q: id, confirmation id, channel, kind and due time are required", d.ID)
		}
		if !json.Valid(d.Payload) {
			return 0, fmt.Errorf("store: enqueue delivery %q: payload is not valid JSON", d.ID)
		}
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: enqueue deliveries: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	n := 0
	now := tsArg(time.Now())
	for _, d := range ds {
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO notice_outbox
			(id, confirmation_id, channel, kind, payload, due_at, state, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
			d.ID, d.ConfirmationID, d.Channel, d.Kind, string(d.Payload), tsArg(d.DueAt), NoticeQueued, now)
		if err != nil {
			return 0, fmt.Errorf("store: enqueue delivery %q: %w", d.ID, err)
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: enqueue deliveries: %w", err)
	}
	return n, nil
}

// ClaimDeliveries leases up to limit queued deliveries due by now whose lease (if any) has run
// out, until now+lease, and returns them (attempts counted). A claim is one conditional UPDATE
// per row, so two dispatchers (two workers) never hold one row at once; a dispatcher killed
// mid-send leaves its rows to be claimed again once the lease ends.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Delivery, error) {
	if limit <= 0 {
		limit = 50
	}
	var rows []deliveryRow
	err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+deliveryCols+` FROM notice_outbox
		WHERE state = ? AND due_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
		ORDER BY due_at, id LIMIT ?`), NoticeQueued, tsArg(now), tsArg(now), limit)
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	var out []Delivery
	for _, r := range rows {
		res, err := s.db.ExecContext(ctx, s.q(`UPDATE notice_outbox SET lease_until = ?, attempts = attempts + 1
			WHERE id = ? AND state = ? AND (lease_until IS NULL OR lease_until <= ?)`),
			tsArg(now.Add(lease)), r.ID, NoticeQueued, tsArg(now))
		if err != nil {
			return out, fmt.Errorf("store: claim delivery %q: %w", r.ID, err)
		}
		if k, _ := res.RowsAffected(); k == 1 {
			d := r.delivery()
			d.Attempts++
			l := now.Add(lease).UTC().Truncate(time.Microsecond)
			d.LeaseUntil = &l
			out = append(out, d)
		}
	}
	return out, nil
}

// FinishDelivery records the end of one claimed delivery: state sent, skipped or failed (with
// detail, already free of secrets), or queued again at retryAt after a failed attempt.
func (s *Store) FinishDelivery(ctx context.Context, id, state, detail string, retryAt, now time.Time) error {
	var err error
	switch state {
	case NoticeQueued:
		_, err = s.db.ExecContext(ctx, s.q(`UPDATE notice_outbox SET due_at = ?, lease_until = NULL, last_error = ? WHERE id = ?`),
			tsArg(retryAt), detail, id)
	case NoticeSent, NoticeSkipped, NoticeFailed:
		_, err = s.db.ExecContext(ctx, s.q(`UPDATE notice_outbox SET state = ?, lease_until = NULL, last_error = ?, done_at = ? WHERE id = ?`),
			state, detail, tsArg(now), id)
	default:
		return fmt.Errorf("store: finish delivery %q: unknown state %q", id, state)
	}
	if err != nil {
		return fmt.Errorf("store: finish delivery %q: %w", id, err)
	}
	return nil
}

// GetDelivery returns the delivery with this id, or an error wrapping ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, id string) (Delivery, error) {
	var r deliveryRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+deliveryCols+` FROM notice_outbox WHERE id = ?`), id); err != nil {
		return Delivery{}, notFound(err, "delivery %q", id)
	}
	return r.delivery(), nil
}

// ListDeliveries returns the deliveries of one confirmation (all of them with ""), oldest due
// first, at most 500.
func (s *Store) ListDeliveries(ctx context.Context, confirmationID string) ([]Delivery, error) {
	var rows []deliveryRow
	var err error
	if confirmationID == "" {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+deliveryCols+` FROM notice_outbox ORDER BY due_at, id LIMIT 500`))
	} else {
		err = s.db.SelectContext(ctx, &rows, s.q(`SELECT `+deliveryCols+` FROM notice_outbox WHERE confirmation_id = ? ORDER BY due_at, id`), confirmationID)
	}
	if err != nil {
		return nil, fmt.Errorf("store: list deliveries: %w", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = r.delivery()
	}
	return out, nil
}

// OutboxStats summarizes the outbox for `airlock doctor` and metrics.
type OutboxStats struct {
	// Queued counts deliveries not finished yet; Retrying those of them that failed at least once.
	Queued, Retrying int
	// Sent, Skipped and Failed count finished deliveries by state.
	Sent, Skipped, Failed int
	// OldestDue is the due time of the oldest queued delivery (nil with none).
	OldestDue *time.Time
	// LastError is the most recent failure's detail with its channel ("" with none).
	LastError string
}

// NoticeOutboxStats reads OutboxStats. A store without the outbox table (older schema) is an
// error that says so.
func (s *Store) NoticeOutboxStats(ctx context.Context) (OutboxStats, error) {
	var st OutboxStats
	var counts []struct {
		State string `db:"state"`
		Retry int    `db:"retry"`
		N     int    `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &counts, `SELECT state, CASE WHEN last_error <> '' THEN 1 ELSE 0 END AS retry, count(*) AS n
		FROM notice_outbox GROUP BY state, CASE WHEN last_error <> '' THEN 1 ELSE 0 END`); err != nil {
		return st, fmt.Errorf("store: notice outbox stats: %w", err)
	}
	for _, c := range counts {
		switch c.State {
		case NoticeQueued:
			st.Queued += c.N
			if c.Retry == 1 {
				st.Retrying += c.N
			}
		case NoticeSent:
			st.Sent += c.N
		case NoticeSkipped:
			st.Skipped += c.N
		case NoticeFailed:
			st.Failed += c.N
		}
	}
	var oldest dbTime
	err := s.db.GetContext(ctx, &oldest, s.q(`SELECT due_at FROM notice_outbox WHERE state = ? ORDER BY due_at LIMIT 1`), NoticeQueued)
	if err == nil {
		st.OldestDue = oldest.ptr()
	}
	var last struct {
		Channel string `db:"channel"`
		Err     string `db:"last_error"`
	}
	err = s.db.GetContext(ctx, &last, `SELECT channel, last_error FROM notice_outbox WHERE last_error <> '' AND state IN ('queued', 'failed') ORDER BY due_at DESC LIMIT 1`)
	if err == nil {
		st.LastError = last.Channel + ": " + last.Err
	} else if !errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("store: notice outbox stats: %w", err)
	}
	return st, nil
}
