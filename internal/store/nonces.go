package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// VerdictAccepted is the DecisionNonce verdict of a decision that was valid and decided its
// confirmation; any other verdict is a refusal code.
const VerdictAccepted = "accepted"

// DecisionNonce records one decision presented to a confirmation: its nonce (unique for all
// time), the presentation that consumed the token for it, who sent it, what it decided and the
// consumer's verdict (VerdictAccepted or a refusal code such as "decision_mac_invalid").
type DecisionNonce struct {
	Nonce          string    `db:"nonce"`
	ConfirmationID string    `db:"confirmation_id"`
	Presentation   string    `db:"presentation"`
	Approver       string    `db:"approver"`
	Decision       string    `db:"decision"`
	Verdict        string    `db:"verdict"`
	Detail         string    `db:"detail"`
	At             time.Time `db:"-"`
}

type nonceRow struct {
	DecisionNonce
	AtCol dbTime `db:"at"`
}

const nonceCols = `nonce, confirmation_id, presentation, approver, decision, verdict, detail, at`

// RecordNonce stores n unless its nonce was seen before. It returns (nil, nil) when n was
// recorded, and the earlier record otherwise: the caller treats a record from another
// presentation as a replayed decision, and one from its own presentation as its retry.
func (s *Store) RecordNonce(ctx context.Context, n DecisionNonce) (*DecisionNonce, error) {
	if n.Nonce == "" || n.Verdict == "" {
		return nil, errors.New("store: a decision nonce record needs a nonce and a verdict")
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO decision_nonces (`+nonceCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (nonce) DO NOTHING`),
		n.Nonce, n.ConfirmationID, n.Presentation, n.Approver, n.Decision, n.Verdict, n.Detail, tsArg(orNow(n.At)))
	if err != nil {
		return nil, fmt.Errorf("store: record decision nonce: %w", err)
	}
	if k, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("store: record decision nonce: %w", err)
	} else if k == 1 {
		return nil, nil
	}
	got, err := s.GetNonce(ctx, n.Nonce)
	if err != nil {
		return nil, err
	}
	return &got, nil
}

// GetNonce returns the record of a decision nonce, or an error wrapping ErrNotFound (the
// decision has not been presented, or was refused before its token was touched).
func (s *Store) GetNonce(ctx context.Context, nonce string) (DecisionNonce, error) {
	var r nonceRow
	if err := s.db.GetContext(ctx, &r, s.q(`SELECT `+nonceCols+` FROM decision_nonces WHERE nonce = ?`), nonce); err != nil {
		return DecisionNonce{}, notFound(err, "decision nonce")
	}
	r.DecisionNonce.At = r.AtCol.Time
	return r.DecisionNonce, nil
}
