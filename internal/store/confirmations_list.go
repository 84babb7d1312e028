package store

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
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

// UndecidedFilter narrows ListUndecidedPage and CountUndecided; a zero field matches all.
type UndecidedFilter struct {
	// Conversation keeps the confirmations of the conversation's turns (workflow ids
	// "turn/<Conversation>/<seq>", exactly: not those of a conversation named Conversation+"/…").
	Conversation string
	// CapabilityID keeps the confirmations of this capability.
	CapabilityID string
	// EligibleGroups, when set, keeps the confirmations an approver of these groups may decide
	// (Confirmation.ApproverGroups empty, or sharing one of them); a "|"-joined list, so the
	// filter stays comparable (issue 21). Use Eligible to build it; NoGroups for an approver
	// in no group.
	EligibleGroups string
}

// NoGroups is EligibleGroups for an approver in no group: only confirmations every approver
// may decide.
const NoGroups = "|"

// Eligible returns the EligibleGroups value for an approver in groups.
func Eligible(groups []string) string {
	if len(groups) == 0 {
		return NoGroups
	}
	return strings.Join(groups, "|")
}

// where is f as SQL conditions (appended to the undecided test) and their arguments. The conversation
// test uses substr, not LIKE, so no character of a conversation name is a pattern and case
// matters on both drivers.
func (f UndecidedFilter) where() (string, []any) {
	var sql string
	var args []any
	if f.Conversation != "" {
		prefix := "turn/" + f.Conversation + "/"
		n := utf8.RuneCountInString(prefix)
		sql += ` AND substr(workflow_id, 1, ?) = ? AND substr(workflow_id, ?) NOT LIKE '%/%'`
		args = append(args, n, prefix, n+1)
	}
	if f.CapabilityID != "" {
		sql += ` AND capability_id = ?`
		args = append(args, f.CapabilityID)
	}
	if f.EligibleGroups != "" {
		cond := `approver_groups = ''`
		for _, g := range strings.Split(f.EligibleGroups, "|") {
			if g == "" || strings.Contains(g, ",") {
				continue // not a group name (NamePattern has no comma)
			}
			cond += ` OR approver_groups LIKE ? ESCAPE '\'`
			args = append(args, "%,"+likeEscaper.Replace(g)+",%")
		}
		sql += ` AND (` + cond + `)`
	}
	return sql, args
}

// ListUndecidedPage is one page of ListUndecidedConfirmations narrowed by f: at most limit
// rows (1..500; other values mean 500) after skipping offset (negative means 0), newest first.
// With CountUndecided it lets an approver surface page through any number of undecided
// confirmations while reading only the rows it shows.
func (s *Store) ListUndecidedPage(ctx context.Context, f UndecidedFilter, limit, offset int) ([]Confirmation, error) {
	if limit <= 0 || limit > confirmationListMax {
		limit = confirmationListMax
	}
	offset = max(offset, 0)
	cond, args := f.where()
	var rows []confirmationRow
	err := s.db.SelectContext(ctx, &rows, s.q(`SELECT `+confirmationCols+` FROM confirmations
		WHERE decision = ''`+cond+` ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`), append(args, limit, offset)...)
	if err != nil {
		return nil, fmt.Errorf("store: list a page of undecided confirmations: %w", err)
	}
	return confirmations(rows), nil
}

// CountUndecided counts the undecided confirmations f keeps (expired ones not yet recorded
// included, as in ListUndecidedConfirmations).
func (s *Store) CountUndecided(ctx context.Context, f UndecidedFilter) (int, error) {
	cond, args := f.where()
	var n int
	if err := s.db.GetContext(ctx, &n, s.q(`SELECT count(*) FROM confirmations WHERE decision = ''`+cond), args...); err != nil {
		return 0, fmt.Errorf("store: count undecided confirmations: %w", err)
	}
	return n, nil
}

// likeEscaper escapes LIKE's wildcards (and its escape character) in a group name.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
