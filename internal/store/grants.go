package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Repeat grants (issue 37, item 4; tables repeat_grants and repeat_grant_uses): an approver
// approves one call and the next N identical calls (same capability@version, same canonical
// argument digest) of the same principal in the same conversation, for T minutes, under the
// capability revision (registry and policy) of the approval.

// Why a repeat grant stopped counting (Grant.Closed).
const (
	GrantExhausted     = "exhausted"      // every use was taken
	GrantExpired       = "expired"        // its time ran out
	GrantPolicyChanged = "policy_changed" // the capability's registry entry or policy changed
	// GrantApproverGone: its approver no longer stands (removed from the approvers, or out of
	// the capability's groups): their approval cannot answer more calls.
	GrantApproverGone = "approver_gone"
)

// Grant is one repeat grant.
type Grant struct {
	// ID is "rg-" plus the id suffix of the confirmation whose approval granted it.
	ID string `db:"id" json:"id"`
	// ConfirmationID is the approved confirmation that carried the grant.
	ConfirmationID string `db:"confirmation_id" json:"confirmation_id"`
	// Conversation and Principal scope it: only calls of this principal's turns in this
	// conversation may use it.
	Conversation string `db:"conversation" json:"conversation"`
	Principal    string `db:"principal" json:"principal"`
	// CapabilityID, Version and ArgsDigest are the call it repeats (canonical.Digest).
	CapabilityID string `db:"capability_id" json:"capability_id"`
	Version      int    `db:"version" json:"version"`
	ArgsDigest   string `db:"args_digest" json:"args_digest"`
	// RegistryRevision is the capability's revision (registry entry and policy) when approved:
	// a call admitted under another revision cannot use it.
	RegistryRevision string `db:"registry_revision" json:"registry_revision"`
	// Approver granted it.
	Approver string `db:"approver" json:"approver"`
	// Granted is N, the later calls it covers; Remaining how many are left.
	Granted   int `db:"granted" json:"granted"`
	Remaining int `db:"remaining" json:"remaining"`
	// GrantedAt and ExpiresAt bound when it may be used (ExpiresAt exclusive).
	GrantedAt time.Time `db:"-" json:"granted_at"`
	ExpiresAt time.Time `db:"-" json:"expires_at"`
	// Closed is "" while usable, else GrantExhausted, GrantExpired or GrantPolicyChanged.
	Closed string `db:"closed" json:"closed,omitempty"`
}

type grantRow struct {
	Grant
	GrantedAtCol dbTime `db:"granted_at"`
	ExpiresAtCol dbTime `db:"expires_at"`
}

func (r grantRow) grant() Grant {
	g := r.Grant
	g.GrantedAt, g.ExpiresAt = r.GrantedAtCol.Time, r.ExpiresAtCol.Time
	return g
}

const grantCols = `id, confirmation_id, conversation, principal, capability_id, version, args_digest,
	registry_revision, approver, granted, remaining, granted_at, expires_at, closed`

// CreateGrant stores g (Remaining = Granted) unless a grant with its id exists, and returns
// the stored row: a retried approval finds the grant its first attempt created, never a
// second one. Errors: a grant without scope, approver or a positive count.
func (s *Store) CreateGrant(ctx context.Context, g Grant) (Grant, error) {
	if g.ID == "" || g.ConfirmationID == "" || g.CapabilityID == "" || g.ArgsDigest == "" || g.Approver == "" || g.Granted < 1 || !g.ExpiresAt.After(g.GrantedAt) {
		return Grant{}, fmt.Errorf("store: repeat grant %q needs its confirmation, capability, digest, approver, a count of at least 1 and an expiry after its start", g.ID)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO repeat_grants (`+grantCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '') ON CONFLICT (id) DO NOTHING`),
		g.ID, g.ConfirmationID, g.Conversation, g.Principal, g.CapabilityID, g.Version, g.ArgsDigest,
		g.RegistryRevision, g.Approver, g.Granted, g.Granted, tsArg(g.GrantedAt), tsArg(g.ExpiresAt)); err != nil {
		return Grant{}, fmt.Errorf("store: create repeat grant %q: %w", g.ID, err)
	}
	return s.GetGrant(ctx, g.ID)
}

// GetGrant reads grant id, or ErrNotFound.
func (s *Store) GetGrant(ctx context.Context, id string) (Grant, error) {
	var row grantRow
	if err := s.db.GetContext(ctx, &row, s.q(`SELECT `+grantCols+` FROM repeat_grants WHERE id = ?`), id); err != nil {
		return Grant{}, notFound(err, "repeat grant %q", id)
	}
	return row.grant(), nil
}

// GrantScope is what a call offers to use a repeat grant: its confirmation id (one use per
// confirmation), its conversation and principal, its capability, argument digest and the
// revision it was admitted under, and the time of the use.
type GrantScope struct {
	ConfirmationID   string
	Conversation     string
	Principal        string
	CapabilityID     string
	Version          int
	ArgsDigest       string
	RegistryRevision string
	At               time.Time
	// Accept, when set, judges each open grant of the scope before a use is taken (inside the
	// transaction: it must not touch the store). "" takes the use; GrantSkip leaves the grant
	// open but not for this call (its approver may not decide this one); any other reason
	// closes the grant with it (returned in lapsed).
	Accept func(Grant) string
}

// GrantSkip is the Accept verdict that leaves a grant open and unused for this call.
const GrantSkip = "skip"

// GrantUse is one call run under a repeat grant: the grant (as it stands after the use) and
// how many uses remain.
type GrantUse struct {
	Grant     Grant
	Remaining int
	// Again: this confirmation had used the grant before (a retried activity): nothing was
	// taken now.
	Again bool
}

// UseGrant takes one use of the oldest open repeat grant that covers sc, in one transaction,
// and records it under sc.ConfirmationID (a confirmation uses a grant at most once; asked
// again, it returns that use with Again set). Grants of sc's scope that it finds expired at
// sc.At, or granted under another revision, are closed on the way (GrantExpired,
// GrantPolicyChanged) and returned in lapsed, so the caller can audit them once; a grant whose
// last use this takes is closed GrantExhausted. use is nil when no grant covers sc.
func (s *Store) UseGrant(ctx context.Context, sc GrantScope) (use *GrantUse, lapsed []Grant, err error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("store: use repeat grant: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var prev struct {
		GrantID   string `db:"grant_id"`
		Remaining int    `db:"remaining"`
	}
	err = tx.GetContext(ctx, &prev, s.q(`SELECT grant_id, remaining FROM repeat_grant_uses WHERE confirmation_id = ?`), sc.ConfirmationID)
	switch {
	case err == nil:
		var row grantRow
		if err := tx.GetContext(ctx, &row, s.q(`SELECT `+grantCols+` FROM repeat_grants WHERE id = ?`), prev.GrantID); err != nil {
			return nil, nil, fmt.Errorf("store: use repeat grant: %w", err)
		}
		g := row.grant()
		// A use taken by an earlier attempt counts again only if the grant still covers the
		// call as asked now (found by an attack helper: a retry after a registry or policy
		// change, or an approver's removal, reused it unchecked). Otherwise the use is spent
		// and the call has none: safe, it asks or is refused.
		if g.RegistryRevision != sc.RegistryRevision || g.Conversation != sc.Conversation || g.Principal != sc.Principal ||
			g.CapabilityID != sc.CapabilityID || g.Version != sc.Version || g.ArgsDigest != sc.ArgsDigest ||
			!sc.At.Before(g.ExpiresAt) || (sc.Accept != nil && sc.Accept(g) != "") {
			return nil, nil, nil
		}
		return &GrantUse{Grant: g, Remaining: prev.Remaining, Again: true}, nil, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, nil, fmt.Errorf("store: use repeat grant: %w", err)
	}
	var rows []grantRow
	if err := tx.SelectContext(ctx, &rows, s.q(`SELECT `+grantCols+` FROM repeat_grants
		WHERE conversation = ? AND principal = ? AND capability_id = ? AND version = ? AND args_digest = ? AND closed = ''
		ORDER BY granted_at, id`), sc.Conversation, sc.Principal, sc.CapabilityID, sc.Version, sc.ArgsDigest); err != nil {
		return nil, nil, fmt.Errorf("store: use repeat grant: %w", err)
	}
	closeAs := func(g Grant, why string) error {
		_, err := tx.ExecContext(ctx, s.q(`UPDATE repeat_grants SET closed = ? WHERE id = ? AND closed = ''`), why, g.ID)
		return err
	}
	for _, r := range rows {
		g := r.grant()
		switch {
		case !sc.At.Before(g.ExpiresAt):
			g.Closed = GrantExpired
		case g.RegistryRevision != sc.RegistryRevision:
			g.Closed = GrantPolicyChanged
		case g.Remaining < 1:
			g.Closed = GrantExhausted
		case sc.Accept != nil:
			switch why := sc.Accept(g); why {
			case "":
			case GrantSkip:
				continue
			default:
				g.Closed = why
			}
		}
		if g.Closed != "" {
			if err := closeAs(g, g.Closed); err != nil {
				return nil, nil, fmt.Errorf("store: close repeat grant %q: %w", g.ID, err)
			}
			if g.Closed != GrantExhausted {
				lapsed = append(lapsed, g)
			}
			continue
		}
		// The counts come back from the update itself: under READ COMMITTED another use may
		// have taken one since the select (found by an attack helper: the uses left and the
		// exhausted row were computed from the stale read).
		var after struct {
			Remaining int    `db:"remaining"`
			Closed    string `db:"closed"`
		}
		err := tx.GetContext(ctx, &after, s.q(`UPDATE repeat_grants SET remaining = remaining - 1,
			closed = CASE WHEN remaining = 1 THEN ? ELSE '' END WHERE id = ? AND remaining > 0 AND closed = ''
			RETURNING remaining, closed`), GrantExhausted, g.ID)
		if errors.Is(err, sql.ErrNoRows) {
			continue // taken to its end by another use meanwhile
		} else if err != nil {
			return nil, nil, fmt.Errorf("store: use repeat grant %q: %w", g.ID, err)
		}
		g.Remaining, g.Closed = after.Remaining, after.Closed
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO repeat_grant_uses (confirmation_id, grant_id, remaining, at) VALUES (?, ?, ?, ?)`),
			sc.ConfirmationID, g.ID, g.Remaining, tsArg(orNow(sc.At))); err != nil {
			return nil, nil, fmt.Errorf("store: record use of repeat grant %q: %w", g.ID, err)
		}
		if err := tx.Commit(); err != nil {
			return nil, nil, fmt.Errorf("store: use repeat grant %q: %w", g.ID, err)
		}
		return &GrantUse{Grant: g, Remaining: g.Remaining}, lapsed, nil
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("store: use repeat grant: %w", err)
	}
	return nil, lapsed, nil
}
