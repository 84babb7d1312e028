package activities

import (
	"context"
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
	prior, err := a.Store.ListApprovals(ctx, row.ID)
	if err != nil {
		return "", "", false, err
	}
	if slices.ContainsFunc(prior, func(p store.Approval) bool { return clients.SamePerson(p.Approver, in.Approver) }) {
		return ApproverAlreadyApproved, fmt.Sprintf("%s's approval already counts; %d of %d", in.Approver, len(prior), need), false, nil
	}
	if have := len(prior) + 1; have < need {
		return QuorumPending, fmt.Sprintf("approval %d of %d recorded (by %s); the call waits for %d more", have, need, in.Approver, need-have), true, nil
	}
	return "", "", true, nil
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
		if prior, err := a.Store.ListApprovals(ctx, in.ConfirmationID); err == nil && len(prior) > 1 {
			var names []string
			for _, p := range prior {
				names = append(names, p.Approver)
			}
			proof += "; quorum of " + strings.Join(names, ", ")
		}
	}
	return proof
}
