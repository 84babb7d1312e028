package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Approval is one approval a confirmation gathered towards its capability's quorum (issue 21):
// who approved, under which token generation, with which decision nonce, and when.
type Approval struct {
	ConfirmationID string `db:"confirmation_id"`
	Approver       string `db:"approver"`
	Generation     int    `db:"generation"`
	Nonce          string `db:"nonce"`
	// Proof says how the approver proved who they were (the wording of
	// Confirmation.ApproverProof); "" for approvals recorded before it was kept.
	Proof string    `db:"proof"`
	At    time.Time `db:"-"`
}

type approvalRow struct {
	Approval
	AtCol dbTime `db:"at"`
}

const approvalCols = `confirmation_id, approver, generation, nonce, proof, at`

// AddApproval records a's approval unless its approver already approved the confirmation;
// inserted is false then (the earlier row stands).
func (s *Store) AddApproval(ctx context.Context, a Approval) (inserted bool, err error) {
	if a.ConfirmationID == "" || a.Approver == "" || a.Nonce == "" {
		return false, errors.New("store: an approval needs a confirmation, an approver and a nonce")
	}
	res, err := s.db.ExecContext(ctx, s.q(`INSERT INTO confirmation_approvals (`+approvalCols+`)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`), a.ConfirmationID, a.Approver, a.Generation, a.Nonce, a.Proof, tsArg(orNow(a.At)))
	if err != nil {
		return false, fmt.Errorf("store: record approval: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: record approval: %w", err)
	}
	return n == 1, nil
}

// ListApprovals returns the approvals of a confirmation, oldest first.
func (s *Store) ListApprovals(ctx context.Context, confirmationID string) ([]Approval, error) {
	var rows []approvalRow
	if err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+approvalCols+` FROM confirmation_approvals WHERE confirmation_id = ? ORDER BY at, approver`), confirmationID); err != nil {
		return nil, fmt.Errorf("store: list approvals: %w", err)
	}
	out := make([]Approval, len(rows))
	for i, r := range rows {
		out[i] = r.Approval
		out[i].At = r.AtCol.Time
	}
	return out, nil
}
