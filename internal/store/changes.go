package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// ConfirmationsChannel is the PostgreSQL NOTIFY channel the store signals on each change to
// the undecided confirmations (a new one, a decision, a reissued token): the approver page's
// live inbox listens on it (issue 23). The payload is the id of the confirmation that changed
// (one notification per changed row), or empty for "something may have changed, re-read"
// (touch). A payload is a hint, never an authority: listeners read the row before acting on it.
const ConfirmationsChannel = "airlock_confirmations"

// notifyChanged is the PostgreSQL form of a data-changing statement q (with ? placeholders,
// no RETURNING) that signals ConfirmationsChannel once for each row it changed and returns
// how many it changed, in the statement's one round trip: the notification rides the change
// (delivered at its commit) instead of following it as a statement of its own.
func notifyChanged(q string) string {
	return notifying(q+` RETURNING id`, `count(*)`)
}

// notifying wraps the PostgreSQL statement q (on the confirmations table, with a RETURNING
// clause that includes id) so that it signals ConfirmationsChannel once for each row it
// returns, with that row's id as the payload, and selects sel from those rows.
func notifying(q, sel string) string {
	return `WITH changed AS (` + q + `) SELECT ` + sel + ` FROM changed, LATERAL (SELECT pg_notify('` + ConfirmationsChannel + `', changed.id)) AS note`
}

// execChanging runs the data-changing statement q through x and returns the rows it changed;
// on PostgreSQL a change also signals ConfirmationsChannel, in the same statement
// (notifyChanged). It is what a write that adds, decides or reissues a confirmation uses. The
// notification is part of the write: were PostgreSQL's notification queue full (8 GB behind a
// stuck listener) the write would fail and be retried, never succeed unannounced.
func (s *Store) execChanging(ctx context.Context, x sqlx.ExtContext, q string, args ...any) (int64, error) {
	if s.driver == DriverPostgres {
		var n int64
		err := getContext(ctx, x, &n, s.q(notifyChanged(q)), args...)
		return n, err
	}
	res, err := x.ExecContext(ctx, s.q(q), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// touch signals ConfirmationsChannel through x (inside a transaction, PostgreSQL delivers it at
// commit). Best effort: a listener that misses it still polls.
func (s *Store) touch(ctx context.Context, x sqlx.ExecerContext) {
	if s.driver == DriverPostgres {
		_, _ = x.ExecContext(ctx, `SELECT pg_notify('`+ConfirmationsChannel+`', '')`)
	}
}

// ConfirmationsVersion is a fingerprint of the undecided confirmations and the decisions made:
// it changes whenever a card of the approver inbox appears, changes (a reissued token) or goes.
func (s *Store) ConfirmationsVersion(ctx context.Context) (string, error) {
	var v struct {
		N   int    `db:"n"`
		Gen int    `db:"g"`
		Max string `db:"mx"`
		Dec int    `db:"d"`
	}
	err := s.db.GetContext(ctx, &v, `SELECT count(*) AS n, COALESCE(SUM(generation), 0) AS g, COALESCE(MAX(id), '') AS mx,
		(SELECT count(*) FROM confirmations WHERE decision <> '') AS d FROM confirmations WHERE decision = ''`)
	if err != nil {
		return "", fmt.Errorf("store: confirmations version: %w", err)
	}
	return fmt.Sprintf("%d.%d.%s.%d", v.N, v.Gen, v.Max, v.Dec), nil
}

// WatchConfirmations sends on the returned channel (capacity 1, never blocking the sender)
// whenever the undecided confirmations may have changed, until ctx ends: on PostgreSQL at each
// NOTIFY on ConfirmationsChannel from any process, and every fallback interval (2s) in case a
// notification was lost while the listener reconnected; on SQLite, which has no notifications,
// every poll interval (200ms). Callers compare ConfirmationsVersion to tell a real change.
func (s *Store) WatchConfirmations(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	s.watchConfirmations(ctx, func(string) {
		select {
		case out <- struct{}{}:
		default:
		}
	})
	return out
}

// WatchConfirmationIDs is WatchConfirmations for a listener that acts on each confirmation as
// it changes (an automated approver): it sends the id of each changed confirmation (the
// notification's payload), and "" whenever the listener must re-read them all (a notification
// without an id, the fallback interval, a reconnection, or ids dropped because the receiver
// fell behind). It never blocks the notifications: ids beyond maxQueuedIDs unreceived are
// replaced by one "". On SQLite every send is "" (no notifications). The channel closes when
// ctx ends.
func (s *Store) WatchConfirmationIDs(ctx context.Context) <-chan string {
	in := make(chan string, 16)
	s.watchConfirmations(ctx, func(id string) {
		select {
		case in <- id:
		case <-ctx.Done():
		}
	})
	out := make(chan string)
	go func() {
		defer close(out)
		var queue []string
		rescan := false
		for {
			var send chan string
			next := ""
			switch {
			case rescan:
				send = out
			case len(queue) > 0:
				send, next = out, queue[0]
			}
			select {
			case <-ctx.Done():
				return
			case id := <-in:
				switch {
				case id == "":
					rescan, queue = true, queue[:0]
				case !rescan && len(queue) < maxQueuedIDs:
					queue = append(queue, id)
				default:
					rescan, queue = true, queue[:0]
				}
			case send <- next:
				if rescan {
					rescan = false
				} else {
					queue = queue[1:]
				}
			}
		}
	}()
	return out
}

// maxQueuedIDs bounds the ids WatchConfirmationIDs holds for a slow receiver before it falls
// back to one "re-read everything".
const maxQueuedIDs = 1024

// watchConfirmations calls note, from one goroutine, until ctx ends: with a notification's
// payload at each NOTIFY on ConfirmationsChannel (PostgreSQL), with "" at each reconnection of
// the listener and every fallback interval (2 s on PostgreSQL, 200 ms on SQLite).
func (s *Store) watchConfirmations(ctx context.Context, note func(id string)) {
	wake := func() { note("") }
	poll := 200 * time.Millisecond
	var notes <-chan *pq.Notification
	var l *pq.Listener
	if s.driver == DriverPostgres {
		poll = 2 * time.Second
		l = pq.NewListener(s.dsn, 100*time.Millisecond, 10*time.Second, nil)
		if err := l.Listen(ConfirmationsChannel); err == nil {
			notes = l.Notify
		} else {
			_ = l.Close()
			l, poll = nil, 200*time.Millisecond // no LISTEN: poll as on SQLite
		}
	}
	go func() {
		t := time.NewTicker(poll)
		defer t.Stop()
		if l != nil {
			defer l.Close()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-notes:
				if n == nil { // the listener reconnected: notifications may have been lost
					wake()
				} else {
					note(n.Extra)
				}
			case <-t.C:
				wake()
			}
		}
	}()
}
