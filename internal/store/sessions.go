package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PageSession is one approver page sign-in session (issue 21, item 4: sessions live in the
// store so every `airlock web` instance behind one address shares them and a restart keeps
// them). IDHash is the hex SHA-256 of the session id the cookie carries; the id itself is
// never stored. Stamp is the approver's password stamp at sign-in. Answer is the JSON of the
// last decision the session sent ("" for none). Times are UTC, microsecond precision.
type PageSession struct {
	IDHash   string    `db:"id_hash"`
	Approver string    `db:"approver"`
	Stamp    string    `db:"stamp"`
	Answer   string    `db:"last_answer"`
	Created  time.Time `db:"-"`
	LastSeen time.Time `db:"-"`
}

type pageSessionRow struct {
	PageSession
	CreatedCol  dbTime `db:"created_at"`
	LastSeenCol dbTime `db:"last_seen"`
}

const pageSessionCols = `id_hash, approver, stamp, last_answer, created_at, last_seen`

// CreatePageSession stores a new session; an id hash already stored is an error (ids are 256
// random bits: a collision means a broken random source, never a case to merge).
func (s *Store) CreatePageSession(ctx context.Context, p PageSession) error {
	if p.IDHash == "" || p.Approver == "" {
		return errors.New("store: a page session needs an id hash and an approver")
	}
	created := orNow(p.Created)
	seen := p.LastSeen
	if seen.IsZero() {
		seen = created
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO page_sessions (`+pageSessionCols+`) VALUES (?, ?, ?, ?, ?, ?)`),
		p.IDHash, p.Approver, p.Stamp, p.Answer, tsArg(created), tsArg(seen)); err != nil {
		return fmt.Errorf("store: create page session: %w", err)
	}
	return nil
}

// GetPageSession returns the session whose id hash is idHash, or an error wrapping ErrNotFound
// when there is none. Expiry is the caller's rule (it knows the lifetimes).
func (s *Store) GetPageSession(ctx context.Context, idHash string) (PageSession, error) {
	var r pageSessionRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+pageSessionCols+` FROM page_sessions WHERE id_hash = ?`), idHash); err != nil {
		return PageSession{}, notFound(err, "page session")
	}
	r.PageSession.Created, r.PageSession.LastSeen = r.CreatedCol.Time, r.LastSeenCol.Time
	return r.PageSession, nil
}

// TouchPageSession sets the session's last request time to at (a later time only, so two
// instances answering the same session at once never move it back).
func (s *Store) TouchPageSession(ctx context.Context, idHash string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE page_sessions SET last_seen = ? WHERE id_hash = ? AND last_seen < ?`),
		tsArg(at), idHash, tsArg(at)); err != nil {
		return fmt.Errorf("store: touch page session: %w", err)
	}
	return nil
}

// SetPageSessionAnswer records the JSON of the last decision the session sent.
func (s *Store) SetPageSessionAnswer(ctx context.Context, idHash, answer string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE page_sessions SET last_answer = ? WHERE id_hash = ?`), answer, idHash); err != nil {
		return fmt.Errorf("store: record page session answer: %w", err)
	}
	return nil
}

// DeletePageSession ends one session (sign-out, expiry); ending one already gone is no error.
func (s *Store) DeletePageSession(ctx context.Context, idHash string) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM page_sessions WHERE id_hash = ?`), idHash); err != nil {
		return fmt.Errorf("store: delete page session: %w", err)
	}
	return nil
}

// DeleteApproverPageSessions ends every session of approver (removed, or their password
// changed: issue 21, item 4) and returns how many it ended.
func (s *Store) DeleteApproverPageSessions(ctx context.Context, approver string) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM page_sessions WHERE approver = ?`), approver)
	if err != nil {
		return 0, fmt.Errorf("store: delete page sessions of %q: %w", approver, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: delete page sessions of %q: %w", approver, err)
	}
	return n, nil
}

// DeleteStalePageSessions ends every session of approver signed in with another password
// stamp than stamp (the password changed since), keeping those signed in with the current one,
// and returns how many it ended.
func (s *Store) DeleteStalePageSessions(ctx context.Context, approver, stamp string) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM page_sessions WHERE approver = ? AND stamp <> ?`), approver, stamp)
	if err != nil {
		return 0, fmt.Errorf("store: delete stale page sessions of %q: %w", approver, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: delete stale page sessions of %q: %w", approver, err)
	}
	return n, nil
}

// DeleteExpiredPageSessions removes sessions last seen before idleBefore or created before
// createdBefore, and returns how many.
func (s *Store) DeleteExpiredPageSessions(ctx context.Context, idleBefore, createdBefore time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM page_sessions WHERE last_seen < ? OR created_at < ?`),
		tsArg(idleBefore), tsArg(createdBefore))
	if err != nil {
		return 0, fmt.Errorf("store: delete expired page sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: delete expired page sessions: %w", err)
	}
	return n, nil
}
