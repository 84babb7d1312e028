package activities

// Repeat grants (issue 37, item 4): an approver approves one call and the next N calls of the
// same capability@version with the same canonical argument digest, by the same principal in
// the same conversation, within T minutes. Each later call is still admitted (stages 1-3: a
// call the policy now forbids never reaches the grant) and still bound to the capability
// revision of the approval (a registry or policy change voids the grant, as it voids an
// approval); it takes one use of the grant in IssueConfirmation, which records its
// confirmation approved by the grant's approver, so Execute's checks (approved, at most once,
// the approver still standing) hold for it as for any confirmed call.

import (
	"context"
	"fmt"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
)

// Bounds of a repeat grant: at most MaxRepeatCalls later calls, for at most MaxRepeatMinutes.
const (
	MaxRepeatCalls   = 20
	MaxRepeatMinutes = 60
)

// Audit rows of repeat grants (store.AuditEvent.Outcome).
const (
	// AuditGrantIssued: an approval granted repeats (Detail: how many, until when).
	AuditGrantIssued = "repeat_grant_issued"
	// AuditGrantUsed: a call ran without a human under a repeat grant (Approver: who granted
	// it; Detail: the grant's id and the uses left). The call's own outcome row follows.
	AuditGrantUsed = "repeat_grant_used"
	// AuditGrantClosed: a grant stopped counting (Reason: store.GrantExhausted, GrantExpired
	// or GrantPolicyChanged).
	AuditGrantClosed = "repeat_grant_closed"
)

// RepeatGrantRefused is the refusal of an approval whose repeat grant cannot be given: the
// call needs more than one approval (a quorum grants nothing beyond the call it approved).
const RepeatGrantRefused = "repeat_grant_refused"

// GrantReasonPrefix starts the reason recorded on a confirmation a repeat grant approved:
// "repeat grant rg-…".
const GrantReasonPrefix = "repeat grant "

// grantID is the id of the repeat grant an approval of confirmation id carries.
func grantID(confirmationID string) string { return "rg-" + confirmationID }

// grantTerms is what the MAC binds of in's repeat grant (token.RepeatTerms).
func grantTerms(in ConsumeInput) string { return token.RepeatTerms(in.RepeatCount, in.RepeatMinutes) }

// refuseGrant reports why in's repeat grant cannot be given ("" when it can, or when it asks
// for none): bounds, and the quorum rule (only a call that needs one approval).
func (a *Activities) refuseGrant(in ConsumeInput) string {
	if in.RepeatCount == 0 && in.RepeatMinutes == 0 {
		return ""
	}
	switch {
	case in.Decision != DecisionApprove:
		return "only an approval may grant repeats"
	case in.RepeatCount < 1 || in.RepeatCount > MaxRepeatCalls:
		return fmt.Sprintf("a repeat grant covers 1 to %d calls", MaxRepeatCalls)
	case in.RepeatMinutes < 1 || in.RepeatMinutes > MaxRepeatMinutes:
		return fmt.Sprintf("a repeat grant lasts 1 to %d minutes", MaxRepeatMinutes)
	case a.approvalPolicy(in).Approvals() > 1:
		return fmt.Sprintf("this call needs %d approvals: a repeat grant is given only for a call one approver decides; approve it without one", a.approvalPolicy(in).Approvals())
	}
	return ""
}

// grant stores the repeat grant of a valid approval (row is its confirmation) and audits it.
func (a *Activities) grant(ctx context.Context, row store.Confirmation, in ConsumeInput, now time.Time) error {
	g, err := a.Store.CreateGrant(ctx, store.Grant{ID: grantID(row.ID), ConfirmationID: row.ID,
		Conversation: turnConversation(in.Conversation, in.WorkflowID), Principal: in.Principal,
		CapabilityID: row.CapabilityID, Version: row.Version, ArgsDigest: row.ArgsDigest, RegistryRevision: row.RegistryRevision,
		Approver: in.Approver, Granted: in.RepeatCount, GrantedAt: now, ExpiresAt: now.Add(time.Duration(in.RepeatMinutes) * time.Minute)})
	if err != nil {
		return fmt.Errorf("repeat grant of %s: %w", row.ID, err)
	}
	_, err = a.Store.AppendAudit(ctx, store.AuditEvent{Key: fmt.Sprintf("%s/%s", g.ID, AuditGrantIssued),
		WorkflowID: row.WorkflowID, RunID: row.RunID, Seq: row.Seq, CallID: row.CallID, CapabilityID: row.CapabilityID,
		Version: row.Version, Outcome: AuditGrantIssued, Stage: string(StageConfirm), Reason: g.ID,
		Detail: fmt.Sprintf("%s approved this call and granted the next %d identical calls (same arguments, same principal, same conversation) until %s",
			g.Approver, g.Granted, g.ExpiresAt.UTC().Format(time.RFC3339)),
		ArgsDigest: row.ArgsDigest, Approver: g.Approver, At: now})
	if err != nil {
		return fmt.Errorf("audit repeat grant of %s: %w", row.ID, err)
	}
	return nil
}

// useGrant answers confirmation id of in with a repeat grant when one covers it: it takes one
// use (store.UseGrant, at most once per confirmation), records the confirmation approved by
// the grant's approver and audits the use (and the grant's end, when this was its last use,
// and any grant of this scope found expired or voided by a policy change). ok is false when no
// grant covers the call; a call that needs more than one approval never uses one.
// grantAccepts judges whether grant g may answer this call in its approver's name, as a
// decision by them on this call would be judged (found by an attack helper): "" it may;
// store.GrantApproverGone when the approver no longer stands (removed, or out of the
// capability's policy groups: the grant is closed, no use is burnt and the call asks);
// store.GrantSkip when this call asks for deciders the approver is not (a Cedar ask whose
// groups depend on the call's context, where each value came from) or for four eyes the
// approver cannot give (they are the turn's principal or requester): the call asks.
func (a *Activities) grantAccepts(g store.Grant, in IssueInput, pol registry.PolicyEntry) string {
	if counted, _, err := a.standing(in.CapabilityID, in.Version, []string{g.Approver}); err != nil || len(counted) == 0 {
		return store.GrantApproverGone
	}
	if len(pol.ApproverGroups) > 0 {
		if a.Approvers == nil {
			return store.GrantSkip
		}
		set, err := a.Approvers()
		if err != nil || set == nil || !set.Eligible(g.Approver, pol.ApproverGroups) {
			return store.GrantSkip
		}
	}
	if pol.DistinctApprover && (a.samePerson(g.Approver, in.Principal) || (in.Requester != "" && a.samePerson(g.Approver, in.Requester))) {
		return store.GrantSkip
	}
	return ""
}

func (a *Activities) useGrant(ctx context.Context, id, rev string, in IssueInput, now time.Time) (out IssueOutput, ok bool, err error) {
	pol := a.approvalPolicy(ConsumeInput{CapabilityID: in.CapabilityID, Version: in.Version, Cedar: in.Cedar})
	if pol.Approvals() > 1 {
		return IssueOutput{}, false, nil
	}
	use, lapsed, err := a.Store.UseGrant(ctx, store.GrantScope{ConfirmationID: id, Conversation: turnConversation(in.Conversation, in.WorkflowID),
		Principal: in.Principal, CapabilityID: in.CapabilityID, Version: in.Version, ArgsDigest: in.ArgsDigest, RegistryRevision: rev, At: now,
		Accept: func(g store.Grant) string { return a.grantAccepts(g, in, pol) }})
	if err != nil {
		return IssueOutput{}, false, fmt.Errorf("repeat grant for %s: %w", id, err)
	}
	audit := func(key, outcome, reason, approver, detail string) error {
		_, err := a.Store.AppendAudit(ctx, store.AuditEvent{Key: key, WorkflowID: in.WorkflowID, RunID: in.RunID, Seq: in.Seq,
			CallID: in.CallID, CapabilityID: in.CapabilityID, Version: in.Version, Outcome: outcome, Stage: string(StageConfirm),
			Reason: reason, Detail: detail, ArgsDigest: in.ArgsDigest, Approver: approver, At: now})
		if err != nil {
			return fmt.Errorf("audit repeat grant: %w", err)
		}
		return nil
	}
	for _, g := range lapsed {
		why := "its time ran out at " + g.ExpiresAt.UTC().Format(time.RFC3339)
		switch g.Closed {
		case store.GrantPolicyChanged:
			why = "the capability's registry entry or policy changed since it was granted"
		case store.GrantApproverGone:
			why = g.Approver + " no longer stands as an approver of it (removed, or out of its groups)"
		}
		if err := audit(g.ID+"/"+AuditGrantClosed, AuditGrantClosed, g.Closed, g.Approver,
			fmt.Sprintf("repeat grant %s by %s no longer counts (%d of %d uses left): %s; this call asks a human", g.ID, g.Approver, g.Remaining, g.Granted, why)); err != nil {
			return IssueOutput{}, false, err
		}
	}
	if use == nil {
		return IssueOutput{}, false, nil
	}
	g := use.Grant
	_, hash, err := token.Mint() // a token no one holds: the row is decided at once
	if err != nil {
		return IssueOutput{}, false, err
	}
	disc, discJSON := a.disclose(in.CapabilityID, in.Version, in.Arguments)
	row, err := a.Store.CreateApprovedConfirmation(ctx, store.Confirmation{ID: id, TokenHash: hash, WorkflowID: in.WorkflowID,
		RunID: in.RunID, Seq: in.Seq, CallID: in.CallID, CapabilityID: in.CapabilityID, Version: in.Version,
		ArgsDigest: in.ArgsDigest, Arguments: in.Arguments, Display: in.Display, CreatedAt: now, ExpiresAt: now.Add(in.TTL),
		RegistryRevision: rev, Approver: g.Approver, Reason: GrantReasonPrefix + g.ID, Disclosure: discJSON})
	if err != nil {
		return IssueOutput{}, false, fmt.Errorf("repeat grant for %s: %w", id, err)
	}
	if row.Decision != store.DecisionApproved || row.Approver != g.Approver || row.ArgsDigest != in.ArgsDigest {
		return IssueOutput{}, false, fmt.Errorf("repeat grant for %s: the confirmation already holds another decision", id)
	}
	// The row says how it was approved: by the grant, on the confirmation its approver decided
	// (their proof is recorded there), never as if the approver had decided this one.
	if err := a.Store.SetApproverProof(ctx, id, g.Approver, fmt.Sprintf("repeat grant %s, given with the approval of %s", g.ID, g.ConfirmationID)); err != nil {
		return IssueOutput{}, false, fmt.Errorf("repeat grant for %s: %w", id, err)
	}
	if err := audit(fmt.Sprintf("%s/%s/%d/%s", in.WorkflowID, in.RunID, in.Seq, AuditGrantUsed), AuditGrantUsed, g.ID, g.Approver,
		fmt.Sprintf("ran without asking under repeat grant %s by %s (approved on %s); %d of %d uses left", g.ID, g.Approver, g.ConfirmationID, use.Remaining, g.Granted)); err != nil {
		return IssueOutput{}, false, err
	}
	if use.Remaining == 0 {
		if err := audit(g.ID+"/"+AuditGrantClosed, AuditGrantClosed, store.GrantExhausted, g.Approver,
			fmt.Sprintf("repeat grant %s by %s is used up (%d calls)", g.ID, g.Approver, g.Granted)); err != nil {
			return IssueOutput{}, false, err
		}
	}
	return IssueOutput{ConfirmationID: id, ExpiresAt: row.ExpiresAt, Disclosure: disc, Granted: true, GrantID: g.ID,
		Approver: g.Approver, GrantRemaining: use.Remaining}, true, nil
}
