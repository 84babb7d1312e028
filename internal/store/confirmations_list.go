package store

import (
	"context"
	"fmt"
)

// confirmationListMax bounds every confirmation listing below.
const confirmationListMax = 500

// ListUndecidedConfirmations returns the confirmations with no decision yet, newest first
// (CreatedAt, then ID, descending), at most limit of them (1..500; other values mean 500).
// Unlike ListPendingConfirmations it keeps the ones whose expiry has passed but whose turn has
// not recorded the expiry yet, so an approver surface can show them as expired instead of
// letting them vanish. Rows include SealedToken, never a plaintext token.
func (s *Store) ListUndecidedConfirmations(ctx context.Context, limit int) ([]Confirmation, error) {
	return s.listConfirmations(ctx, "undecided confirmations", `WHERE decision = '' ORDER BY created_at DESC, id DESC`, limit)
}

// ListDecidedConfirmations returns decided confirmations (approved, denied, expired), most
// recently decided first, at most limit of them (1..500; other values mean 500): the past
// decisions an approver surface lists.
func (s *Store) ListDecidedConfirmations(ctx context.Context, limit int) ([]Confirmation, error) {
	return s.listConfirmations(ctx, "decided confirmations", `WHERE decision <> '' ORDER BY decided_at DESC, id DESC`, limit)
}

// ListTurnConfirmations returns every confirmation of turn workflowID, decided or not, in
// proposal order (Seq, then CreatedAt).
func (s *Store) ListTurnConfirmations(ctx context.Context, workflowID string) ([]Confirmation, error) {
	var rows []confirmationRow
	err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+confirmationCols+` FROM confirmations
		WHERE workflow_id = ? ORDER BY seq, created_at, id`), workflowID)
	if err != nil {
		return nil, fmt.Errorf("store: list confirmations of %q: %w", workflowID, err)
	}
	return confirmations(rows), nil
}

func (s *Store) listConfirmations(ctx context.Context, what, where string, limit int) ([]Confirmation, error) {
	if limit <= 0 || limit > confirmationListMax {
		limit = confirmationListMax
	}
	var rows []confirmationRow
	err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+confirmationCols+` FROM confirmations `+where+` LIMIT ?`), limit)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	return confirmations(rows), nil
}

func confirmations(rows []confirmationRow) []Confirmation {
	out := make([]Confirmation, len(rows))
	for i, r := range rows {
		out[i] = r.confirmation()
	}
	return out
}
