package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Passkey is one approver's registered WebAuthn credential (issue 21, item 3; migration
// 0014): CredentialID is the credential's id, base64url without padding, as the browser
// reports it; PublicKey its COSE public key as the authenticator returned it at registration;
// SignCount the signature counter last accepted (UsePasskey); AAGUID the authenticator model
// (hex, "" when it reported none); Name the label the approver gave it. RemovedAt is set once
// the passkey was removed: it never decides again. Times are UTC, microseconds.
type Passkey struct {
	CredentialID string
	Approver     string
	PublicKey    []byte
	SignCount    uint32
	AAGUID       string
	Name         string
	CreatedAt    time.Time
	LastUsedAt   *time.Time
	RemovedAt    *time.Time
}

type passkeyRow struct {
	CredentialID string `db:"credential_id"`
	Approver     string `db:"approver"`
	PublicKey    []byte `db:"public_key"`
	SignCount    int64  `db:"sign_count"`
	AAGUID       string `db:"aaguid"`
	Name         string `db:"name"`
	LastNonce    string `db:"last_nonce"`
	CreatedAt    dbTime `db:"created_at"`
	LastUsedAt   dbTime `db:"last_used_at"`
	RemovedAt    dbTime `db:"removed_at"`
}

func (r passkeyRow) passkey() Passkey {
	return Passkey{CredentialID: r.CredentialID, Approver: r.Approver, PublicKey: r.PublicKey, SignCount: uint32(r.SignCount),
		AAGUID: r.AAGUID, Name: r.Name, CreatedAt: r.CreatedAt.Time, LastUsedAt: r.LastUsedAt.ptr(), RemovedAt: r.RemovedAt.ptr()}
}

const passkeyCols = `credential_id, approver, public_key, sign_count, aaguid, name, last_nonce, created_at, last_used_at, removed_at`

// MaxPasskeysPerApprover bounds how many live passkeys one approver may register: every one
// is offered to the browser with each decision's request (allowCredentials).
const MaxPasskeysPerApprover = 16

// ErrPasskeyExists: AddPasskey for a credential id already registered (to anyone, removed or
// not): one authenticator's credential belongs to one approver, once.
var ErrPasskeyExists = errors.New("store: this passkey is already registered")

// ErrTooManyPasskeys: AddPasskey for an approver with MaxPasskeysPerApprover live passkeys.
var ErrTooManyPasskeys = fmt.Errorf("store: an approver may register at most %d passkeys (remove one first)", MaxPasskeysPerApprover)

// AddPasskey registers p (CredentialID, Approver and PublicKey required; a zero CreatedAt is
// now). Errors: ErrPasskeyExists, ErrTooManyPasskeys.
func (s *Store) AddPasskey(ctx context.Context, p Passkey) error {
	if p.CredentialID == "" || p.Approver == "" || len(p.PublicKey) == 0 {
		return errors.New("store: a passkey needs a credential id, an approver and a public key")
	}
	live, err := s.ListPasskeys(ctx, p.Approver)
	if err != nil {
		return err
	}
	if len(live) >= MaxPasskeysPerApprover {
		return ErrTooManyPasskeys
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO passkeys (credential_id, approver, public_key, sign_count, aaguid, name, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (credential_id) DO NOTHING`),
		p.CredentialID, p.Approver, p.PublicKey, int64(p.SignCount), p.AAGUID, p.Name, tsArg(orNow(p.CreatedAt)))
	if err != nil {
		return fmt.Errorf("store: add passkey of %q: %w", p.Approver, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return ErrPasskeyExists
	}
	return nil
}

// GetPasskey returns the passkey credentialID names, removed or not, or an error wrapping
// ErrNotFound.
func (s *Store) GetPasskey(ctx context.Context, credentialID string) (Passkey, error) {
	var r passkeyRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+passkeyCols+` FROM passkeys WHERE credential_id = ?`), credentialID); err != nil {
		return Passkey{}, notFound(err, "passkey %q", credentialID)
	}
	return r.passkey(), nil
}

// ListPasskeys returns approver's live (not removed) passkeys, oldest first.
func (s *Store) ListPasskeys(ctx context.Context, approver string) ([]Passkey, error) {
	var rows []passkeyRow
	if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+passkeyCols+` FROM passkeys
		WHERE approver = ? AND removed_at IS NULL ORDER BY created_at, credential_id`), approver); err != nil {
		return nil, fmt.Errorf("store: list passkeys of %q: %w", approver, err)
	}
	out := make([]Passkey, len(rows))
	for i, r := range rows {
		out[i] = r.passkey()
	}
	return out, nil
}

// PasskeyHolders returns the approvers with at least one live passkey, sorted (airlock
// doctor: a capability that requires a passkey needs an eligible approver who has one).
func (s *Store) PasskeyHolders(ctx context.Context) ([]string, error) {
	var names []string
	if err := s.db.SelectContext(ctx, &names, `SELECT DISTINCT approver FROM passkeys WHERE removed_at IS NULL ORDER BY approver`); err != nil {
		return nil, fmt.Errorf("store: list passkey holders: %w", err)
	}
	return names, nil
}

// RemovePasskey marks approver's passkey credentialID removed at at: from then on it decides
// nothing. An error wrapping ErrNotFound when approver has no such live passkey.
func (s *Store) RemovePasskey(ctx context.Context, approver, credentialID string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE passkeys SET removed_at = ? WHERE credential_id = ? AND approver = ? AND removed_at IS NULL`),
		tsArg(orNow(at)), credentialID, approver)
	if err != nil {
		return fmt.Errorf("store: remove passkey %q: %w", credentialID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: %s has no passkey %q", ErrNotFound, approver, credentialID)
	}
	return nil
}

// ErrPasskeyCounter: UsePasskey with a signature counter that does not raise the stored one
// (a replayed or cloned authenticator's assertion), or for a passkey removed meanwhile.
var ErrPasskeyCounter = errors.New("store: the passkey's signature counter did not increase")

// UsePasskey accepts one assertion of approver's live passkey credentialID with signature
// counter count, made for the decision with nonce, in one compare-and-set: it stores count
// when count is above the stored counter, or when both are 0 (an authenticator that keeps no
// counter), or when the stored counter is count and was set by this same nonce (a retry of
// one presentation). Anything else (a counter that stayed or went back, a removed passkey) is
// ErrPasskeyCounter and changes nothing.
func (s *Store) UsePasskey(ctx context.Context, approver, credentialID string, count uint32, nonce string, at time.Time) error {
	c := int64(count)
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE passkeys SET sign_count = ?, last_nonce = ?, last_used_at = ?
		WHERE credential_id = ? AND approver = ? AND removed_at IS NULL
		  AND (sign_count < ? OR (sign_count = 0 AND ? = 0) OR (sign_count = ? AND last_nonce = ? AND last_nonce <> ''))`),
		c, nonce, tsArg(orNow(at)), credentialID, approver, c, c, c, nonce)
	if err != nil {
		return fmt.Errorf("store: record use of passkey %q: %w", credentialID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: record use of passkey %q: %w", credentialID, err)
	} else if n == 0 {
		return ErrPasskeyCounter
	}
	return nil
}

// PasskeyChallengeTTL bounds a registration ceremony: begun on the approver page, it must be
// finished within this time.
const PasskeyChallengeTTL = 5 * time.Minute

// SavePasskeyChallenge keeps the WebAuthn session data of a registration ceremony approver
// began (session: JSON, the library's SessionData) under id until expires; expired ones are
// swept.
func (s *Store) SavePasskeyChallenge(ctx context.Context, id, approver string, session json.RawMessage, expires time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM passkey_challenges WHERE expires_at < ?`), tsArg(time.Now())); err != nil {
		return fmt.Errorf("store: sweep passkey challenges: %w", err)
	}
	v, err := jsonArg("passkey challenge", session)
	if err != nil || v == nil {
		return errors.New("store: a passkey challenge needs its session data (JSON)")
	}
	if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO passkey_challenges (id, approver, session, expires_at) VALUES (?, ?, ?, ?)`),
		id, approver, v, tsArg(expires)); err != nil {
		return fmt.Errorf("store: save passkey challenge: %w", err)
	}
	return nil
}

// TakePasskeyChallenge returns and deletes approver's registration ceremony id (one use);
// an error wrapping ErrNotFound when there is none, it is another approver's or it expired
// at now.
func (s *Store) TakePasskeyChallenge(ctx context.Context, id, approver string, now time.Time) (json.RawMessage, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: take passkey challenge: %w", err)
	}
	defer tx.Rollback()
	var row struct {
		Session []byte `db:"session"`
		Expires dbTime `db:"expires_at"`
	}
	err = tx.GetContext(ctx, &row, s.q(`SELECT session, expires_at FROM passkey_challenges WHERE id = ? AND approver = ?`), id, approver)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: no passkey registration %q in flight for %s (start it again)", ErrNotFound, id, approver)
	}
	if err != nil {
		return nil, fmt.Errorf("store: take passkey challenge: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.q(`DELETE FROM passkey_challenges WHERE id = ? AND approver = ?`), id, approver)
	if err != nil {
		return nil, fmt.Errorf("store: take passkey challenge: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fmt.Errorf("%w: the passkey registration %q was finished by another request", ErrNotFound, id)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: take passkey challenge: %w", err)
	}
	if !now.Before(row.Expires.Time) {
		return nil, fmt.Errorf("%w: the passkey registration expired (it must be finished within %s)", ErrNotFound, PasskeyChallengeTTL)
	}
	return json.RawMessage(strings.Clone(string(row.Session))), nil
}
