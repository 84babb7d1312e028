package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// Approver eligibility and quorums (issue 21, item 2). The policy sidecar names, per
// capability, the approver groups whose members may decide its confirmations
// ("approval/groups") and how many distinct approvals it needs ("approval/quorum"). Both are
// read from the registry the worker serves now, when the decision is presented: a decision
// judged under a policy that changed since the confirmation was issued is refused
// registry_changed anyway.

// Refusal codes of approver eligibility and quorums.
const (
	// ApproverIneligible: an authenticated approver outside the capability's approver groups.
	// Refused before the token is touched: the proposal keeps its token and stays decidable.
	ApproverIneligible = "approver_ineligible"
	// QuorumPending: a valid approval was recorded towards the capability's quorum; the call
	// waits for more (the proposal got a fresh token for the next approver).
	QuorumPending = "quorum_pending"
	// ApproverAlreadyApproved: this approver's approval already counts towards the quorum.
	ApproverAlreadyApproved = "approver_already_approved"
)

// approvalPolicy is the policy entry of the capability in.CapabilityID@in.Version in the
// served registry (zero: none, which admission never lets reach a confirmation).
//
// Under a Cedar policy (issue 37) the ask rules that matched the call name its groups and
// quorum (in.Cedar, from the admission); the JSON entry keeps the four-eyes and passkey rules.
func (a *Activities) approvalPolicy(in ConsumeInput) registry.PolicyEntry {
	pe, _ := a.reg().Policy().Entry(keyOf(in.CapabilityID, in.Version))
	if in.Cedar != nil && a.reg().Cedar() != nil {
		pe.ApproverGroups, pe.Quorum = in.Cedar.Groups, in.Cedar.Quorum
	}
	return pe
}

// ineligible reports, for a decision whose attestation verifies, that its approver is not in
// the capability's approver groups (refused approver_ineligible before any token is touched).
// An unauthenticated decision is left to judge, which refuses it approver_unauthenticated.
func (a *Activities) ineligible(in ConsumeInput) (bool, string) {
	pe := a.approvalPolicy(in)
	if len(pe.ApproverGroups) == 0 || a.Approvers == nil {
		return false, ""
	}
	set, err := a.Approvers()
	if err != nil || set.Verify(in.Approver, in.ConfirmationID, in.MAC, in.Attestation) != nil {
		return false, ""
	}
	if set.Eligible(in.Approver, pe.ApproverGroups) {
		return false, ""
	}
	return true, fmt.Sprintf("%s may be decided only by members of %s; %s is not one", keyOf(in.CapabilityID, in.Version),
		strings.Join(pe.ApproverGroups, ", "), in.Approver)
}

// quorum counts a valid approval of a capability that needs several: it returns "" when
// this approval completes the quorum (the decision is final), else a refusal code and detail
// (QuorumPending: it counts, more are needed; ApproverAlreadyApproved: this approver counted
// before). count reports that the approval is to be recorded (store.AddApproval) once its
// nonce proved fresh. Approvers compare as the four-eyes rule does (clients.SamePerson), so
// "Alice" is not a second approval after "alice". It writes nothing.
func (a *Activities) quorum(ctx context.Context, row store.Confirmation, in ConsumeInput) (code, detail string, count bool, err error) {
	need := a.approvalPolicy(in).Approvals()
	if need <= 1 || in.Decision == DecisionDeny {
		return "", "", false, nil // one denial denies
	}
	if in.Decision == DecisionEdit {
		return BadDecision, fmt.Sprintf("%s needs %d approvals: an edit cannot gather them (deny, and let the model propose again)", keyOf(in.CapabilityID, in.Version), need), false, nil
	}
	all, err := a.Store.ListApprovals(ctx, row.ID)
	if err != nil {
		return "", "", false, err
	}
	// Judged now (issue 33, item 3): an earlier approval counts only if its approver is still
	// an approver in the capability's groups; the others are dropped, and the detail (which
	// the audit records) names them and why.
	prior, dropped, err := a.standing(in.CapabilityID, in.Version, approverNames(all))
	if err != nil {
		return "", "", false, err
	}
	if slices.ContainsFunc(prior, func(p string) bool { return a.samePerson(p, in.Approver) }) {
		return ApproverAlreadyApproved, fmt.Sprintf("%s's approval already counts; %d of %d", in.Approver, len(prior), need) + droppedNote(dropped), false, nil
	}
	if have := len(prior) + 1; have < need {
		return QuorumPending, fmt.Sprintf("approval %d of %d recorded (by %s); the call waits for %d more", have, need, in.Approver, need-have) + droppedNote(dropped), true, nil
	}
	return "", "", true, nil
}

// samePerson reports whether identities x and y (approver, principal, client) are one person
// under the approvers file now (approvers.Set.SamePerson); without a readable file, as
// clients.SamePerson compares.
func (a *Activities) samePerson(x, y string) bool {
	if a.Approvers != nil {
		if set, err := a.Approvers(); err == nil && set != nil {
			return set.SamePerson(x, y)
		}
	}
	return clients.SamePerson(x, y)
}

// approverNames lists the approvers of approvals, in order.
func approverNames(all []store.Approval) []string {
	out := make([]string, 0, len(all))
	for _, p := range all {
		out = append(out, p.Approver)
	}
	return out
}

// droppedNote is the audit's sentence on approvals that no longer count ("" for none).
func droppedNote(dropped []string) string {
	if len(dropped) == 0 {
		return ""
	}
	return "; dropped, no longer counting: " + strings.Join(dropped, "; ")
}

// standing judges, against the approvers file as it is now, which of names (approvers whose
// approvals are on record for a call of id@version) still count: each must still be an
// approver and, where the capability's policy names approver groups, a member of one of them
// (issue 33, item 3: a leaver's approval stops counting). dropped says, per approval that does
// not count, whose and why ("bob: bob is no longer an approver"). Errors: the approvers file
// cannot be read (nothing counts then; the caller fails closed).
func (a *Activities) standing(id string, version int, names []string) (counted, dropped []string, err error) {
	if a.Approvers == nil {
		return nil, nil, errors.New("this worker has no approvers file, so no approval can be judged")
	}
	set, err := a.Approvers()
	if err != nil {
		return nil, nil, fmt.Errorf("the worker cannot read its approvers file: %w", err)
	}
	groups := a.approvalPolicy(ConsumeInput{CapabilityID: id, Version: version}).ApproverGroups
	for _, n := range names {
		switch {
		case !set.Has(n):
			dropped = append(dropped, fmt.Sprintf("%s: %s is no longer an approver", n, n))
		case !set.Eligible(n, groups):
			dropped = append(dropped, fmt.Sprintf("%s: %s is no longer in %s", n, n, strings.Join(groups, " or ")))
		default:
			counted = append(counted, n)
		}
	}
	return counted, dropped, nil
}

// holds judges, when a confirmed call is about to execute, whether its approval still stands
// (issue 33, item 3): for a capability that needs one approval, its approver is still an
// approver in its groups; for a quorum, enough approvals on record still count (standing).
// It returns "" when it holds, else why not (naming the dropped approvals).
func (a *Activities) holds(ctx context.Context, row store.Confirmation) (string, error) {
	need := a.approvalPolicy(ConsumeInput{CapabilityID: row.CapabilityID, Version: row.Version}).Approvals()
	names := []string{row.Approver}
	if need > 1 {
		all, err := a.Store.ListApprovals(ctx, row.ID)
		if err != nil {
			return "", err
		}
		names = approverNames(all)
	}
	counted, dropped, err := a.standing(row.CapabilityID, row.Version, names)
	if err != nil {
		return "", err
	}
	if len(counted) >= max(need, 1) {
		return "", nil
	}
	return fmt.Sprintf("confirmation %s has %d of the %d approvals it needs now", row.ID, len(counted), max(need, 1)) + droppedNote(dropped), nil
}

// ProofOf says how an attestation's signer proved the approver (issue 21, item 5): their own
// CLI credential ("approver:<name>") or a password session on an approver page that vouched
// for them ("surface:<name>"), and, when the decision carried a verified passkey assertion
// (withPasskey), "passkey on approver page <name>".
func ProofOf(signer string, withPasskey bool) string {
	if name, ok := strings.CutPrefix(signer, "surface:"); ok {
		if withPasskey {
			return "passkey on approver page " + name
		}
		return "password session on approver page " + name
	}
	if strings.HasPrefix(signer, "approver:") {
		if withPasskey {
			return "passkey, attested by CLI credential"
		}
		return "CLI credential"
	}
	return "unattested"
}

// recordProof records how the final decision's approver proved it, with the quorum's earlier
// approvers when there were any.
func (a *Activities) recordProof(ctx context.Context, row store.Confirmation, in ConsumeInput) error {
	return a.Store.SetApproverProof(ctx, in.ConfirmationID, in.Approver, a.proofOf(ctx, row, in))
}

// proofOf is the approver proof recorded with a valid decision: how the approver was proven
// (credential, passkey) and, for the last approval of a quorum, who else approved.
func (a *Activities) proofOf(ctx context.Context, row store.Confirmation, in ConsumeInput) string {
	// A passkey assertion counts as proof only where checkPasskey verified it.
	proof := ProofOf(in.Attestation.Signer, len(in.Passkey) > 0 && a.passkeyRequired(row, in))
	if a.approvalPolicy(in).Approvals() > 1 && in.Decision == DecisionApprove {
		if all, err := a.Store.ListApprovals(ctx, in.ConfirmationID); err == nil && len(all) > 1 {
			counted, dropped, err := a.standing(in.CapabilityID, in.Version, approverNames(all))
			if err == nil {
				proof += "; quorum of " + strings.Join(counted, ", ") + droppedNote(dropped)
			}
		}
	}
	return proof
}
