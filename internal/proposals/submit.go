package proposals

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/store"
)

// Submit builds actor's decision on the stored proposal row (attested with cred: the actor's
// own approver credential, or a surface's that vouches for the signed-in actor), replays the
// proposal's authority chain, verifies the decision against the approvers set and appends it.
// It returns the stored decision and whether this call inserted it: the same payload retried
// converges (inserted false); a different payload on a decided proposal returns the first
// decision and an error wrapping store.ErrConflict (the first decision stands). Errors wrap
// ErrUntrusted when the chain or the attestation does not verify. Both the CLI and the
// approver page decide through it.
func Submit(ctx context.Context, st *store.Store, set *approvers.Set, row store.ProposalRow, disposition, replacement, submissionID string,
	cred approvers.Credential, actor string) (store.ProposalDecision, bool, error) {
	d, err := NewDecision(row, disposition, replacement, submissionID, cred, actor)
	if err != nil {
		return store.ProposalDecision{}, false, err
	}
	p, err := VerifyProposal(ctx, st, row)
	if err != nil {
		return store.ProposalDecision{}, false, err
	}
	if err := VerifyDecision(p, d, set); err != nil {
		return store.ProposalDecision{}, false, err
	}
	stored, inserted, err := st.AppendProposalDecision(ctx, d)
	if errors.Is(err, store.ErrConflict) {
		return stored, false, fmt.Errorf("proposal %s already has another decision (%s by %s, %s): it stands: %w", row.ID, stored.Disposition, stored.Actor, stored.ID, err)
	}
	return stored, inserted, err
}
