package proposals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// ErrUntrusted is wrapped by every failure of the authority chain: a proposal or decision
// that fails it is never decided, projected or materialized, and gets no receipt.
var ErrUntrusted = errors.New("proposals: authority chain does not verify")

// Dispositions of a human decision.
const (
	Accept = "accept"
	Edit   = "edit"
	Reject = "reject"
)

// Receipt kinds.
const (
	ReceiptProjected           = "correction.projected"
	ReceiptRejected            = "rejected"
	ReceiptMaterialized        = "memory-change.materialized"
	ReceiptMaterializionFailed = "memory-change.materialization.failed"
	ReceiptFocusRecorded       = "focus.decision.recorded"
)

// Judgment fields of a projected correction.
const (
	JudgmentKindCorrect       = "correct"
	CriterionSelfCorrection   = "agent-self-correction"
	CriterionSelfCorrectionV1 = 1
)

// DecisionDigest is the payload digest of a decision: proposal, disposition, replacement and
// actor (the submission id is provenance, not payload).
func DecisionDigest(proposalID, disposition, replacement, actor string) string {
	return id("dd", proposalID, disposition, replacement, actor)[3:]
}

// CheckDisposition enforces the decision rules for a proposal of kind: edit needs an exact
// bounded replacement; accept and reject forbid one.
func CheckDisposition(kind, disposition, replacement string) error {
	switch disposition {
	case Accept, Reject:
		if replacement != "" {
			return fmt.Errorf("proposals: %s takes no replacement", disposition)
		}
		return nil
	case Edit:
	default:
		return fmt.Errorf("proposals: disposition %q is not accept, edit or reject", disposition)
	}
	max := registry.MaxReplacement
	switch kind {
	case KindMemory:
		max = registry.MaxProposedText
	case KindFocus:
		return errors.New("proposals: a focus proposal cannot be edited")
	}
	if replacement == "" || !utf8.ValidString(replacement) || utf8.RuneCountInString(replacement) > max {
		return fmt.Errorf("proposals: an edit needs a replacement of 1 to %d characters", max)
	}
	return nil
}

// VerifyProposal replays a stored proposal's authority chain: the strict record and its
// literal fields; the row matches it; deterministic ids; the stored snapshot's bytes hash to
// the recorded SHA-256 and admit exactly the bound target, memory version and evidence; the
// proposer turn completed and its result names the proposal as captured.
func VerifyProposal(ctx context.Context, st *store.Store, row store.ProposalRow) (Proposal, error) {
	bad := func(format string, a ...any) (Proposal, error) {
		return Proposal{}, fmt.Errorf("%w: %s: %s", ErrUntrusted, row.ID, fmt.Sprintf(format, a...))
	}
	p, err := DecodeProposal(row.Payload)
	if err != nil {
		return bad("record: %v", err)
	}
	pv := p.Proposer
	if p.ID != row.ID || p.Kind != row.Kind || pv.WorkflowID != row.WorkflowID || pv.OutputID != row.OutputID ||
		pv.SnapshotID != row.SnapshotID || pv.Conversation != row.Conversation {
		return bad("row and record disagree")
	}
	if p.ID != ProposalID(pv.WorkflowID, p.Kind) || pv.OutputID != OutputID(pv.WorkflowID) || pv.InputID != InputID(pv.WorkflowID) || KindOf(pv.CapabilityID) != p.Kind {
		return bad("ids are not the deterministic ones")
	}
	raw, err := st.GetSnapshot(ctx, pv.SnapshotID)
	if err != nil {
		return bad("snapshot: %v", err)
	}
	if Digest(raw) != pv.SnapshotSHA256 {
		return bad("snapshot bytes changed")
	}
	snap, err := DecodeSnapshot(raw)
	if err != nil || snap.WorkflowID != pv.WorkflowID || snap.ID != pv.SnapshotID || !slices.Contains(snap.Offered, pv.CapabilityID) || !snap.Admits(pv.CapabilityID) {
		return bad("snapshot does not admit the proposal")
	}
	for _, e := range p.Evidence {
		if !slices.Contains(snap.Evidence, e) {
			return bad("evidence not admitted")
		}
	}
	switch p.Kind {
	case KindMemory:
		if p.Memory == nil || snap.Memory == nil || *p.Memory != *snap.Memory || Digest([]byte(p.ProposedText)) != p.TextSHA256 {
			return bad("memory binding is not the snapshot's")
		}
	case KindCorrection:
		if p.Target == nil || !slices.Contains(snap.Targets, *p.Target) {
			return bad("correction target is not the snapshot's")
		}
	case KindFocus:
		if p.Authority == nil || p.Fingerprint != "focus:"+Digest(p.Declaration) || p.DependencyResolution != "unchecked" {
			return bad("focus declaration fingerprint or authority")
		}
	}
	res, err := st.GetTurnResult(ctx, pv.WorkflowID)
	if err != nil {
		return bad("proposer turn: %v", err)
	}
	var tr struct {
		Status   string `json:"status"`
		Outcomes []struct {
			Outcome string `json:"outcome"`
			Detail  string `json:"detail"`
		} `json:"outcomes"`
	}
	if err := json.Unmarshal(res, &tr); err != nil || tr.Status != "completed" {
		return bad("proposer turn did not complete")
	}
	named := slices.ContainsFunc(tr.Outcomes, func(o struct {
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
	}) bool {
		return o.Outcome == "captured" && o.Detail == p.ID
	})
	if !named {
		return bad("proposer turn's completion does not name the proposal")
	}
	return p, nil
}

// VerifyDecision checks a stored decision against its verified proposal: its deterministic
// identity, its payload digest, the disposition rules and its attestation (signed by the
// actor's own credential, or a surface's, listed in the approvers file).
func VerifyDecision(p Proposal, d store.ProposalDecision, set *approvers.Set) error {
	if d.ID != DecisionID(p.ID) || d.ProposalID != p.ID {
		return fmt.Errorf("%w: decision identity", ErrUntrusted)
	}
	if d.Digest != DecisionDigest(p.ID, d.Disposition, d.Replacement, d.Actor) {
		return fmt.Errorf("%w: decision digest", ErrUntrusted)
	}
	if err := CheckDisposition(p.Kind, d.Disposition, d.Replacement); err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if set == nil {
		return fmt.Errorf("%w: no approvers file", ErrUntrusted)
	}
	var att approvers.Attestation
	if err := json.Unmarshal(d.Attestation, &att); err != nil {
		return fmt.Errorf("%w: attestation", ErrUntrusted)
	}
	if err := set.Verify(d.Actor, d.ID, d.Digest, att); err != nil {
		return fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	return nil
}

// NewDecision builds the decision of actor on proposal p, attested with cred.
func NewDecision(p store.ProposalRow, disposition, replacement, submissionID string, cred approvers.Credential, actor string) (store.ProposalDecision, error) {
	if err := CheckDisposition(p.Kind, disposition, replacement); err != nil {
		return store.ProposalDecision{}, err
	}
	d := store.ProposalDecision{ID: DecisionID(p.ID), ProposalID: p.ID, Disposition: disposition, Replacement: replacement,
		Actor: actor, SubmissionID: submissionID, Digest: DecisionDigest(p.ID, disposition, replacement, actor)}
	att := cred.Attest(d.ID, d.Digest)
	b, err := json.Marshal(att)
	if err != nil {
		return d, err
	}
	d.Attestation = b
	return d, nil
}
