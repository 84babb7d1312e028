package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// KindProposal marks a CatalogRef of an agent proposal tool.
const KindProposal = string(registry.KindProposal)

// ErrTypeUntrusted is the application error type of a proposal or decision whose authority
// chain does not verify (proposals.ErrUntrusted): never retried, never applied.
const ErrTypeUntrusted = "UntrustedProposal"

// maxCorrectionTargets bounds the prior answers a snapshot admits as correction targets.
const maxCorrectionTargets = 16

// offer is a round's proposal offer: the context snapshot it was built from, and the
// proposal tools that snapshot admits, each tailored to it (proposals.Snapshot.Offer).
type offer struct {
	snap  proposals.Snapshot
	body  []byte
	tools []registry.CatalogEntry
}

// buildOffer builds this round's context snapshot and the proposal tools it admits (live
// turns only: a recorded session never offers them); nil when none is offered. Nothing is
// stored: a round whose answer uses no proposal tool never needs its snapshot, so Infer
// stores it (keepOffer) only when the answer names one. That is 2 statements fewer per round
// of a live turn (the snapshot's insert and read-back), and the same offer.
func (a *Activities) buildOffer(ctx context.Context, in InferInput, reg *registry.Registry, allow func(string) bool, now time.Time) (*offer, error) {
	if in.Session != "" || a.Store == nil || in.WorkflowID == "" {
		return nil, nil
	}
	tools := reg.ProposalCatalog(allow, now)
	if len(tools) == 0 {
		return nil, nil
	}
	snap := proposals.Snapshot{ID: proposals.SnapshotID(in.WorkflowID, in.Round), WorkflowID: in.WorkflowID, Round: in.Round,
		Conversation: in.Conversation, InputID: proposals.InputID(in.WorkflowID), Targets: []proposals.CorrectionTarget{}}
	snap.Evidence = append(snap.Evidence, snap.InputID)
	turns, err := a.Store.ConversationTurns(ctx, in.Conversation, maxCorrectionTargets+1)
	if err != nil {
		return nil, fmt.Errorf("proposal snapshot: %w", err)
	}
	for _, t := range turns {
		var r struct {
			Status    string `json:"status"`
			EndReason string `json:"end_reason"`
			Prose     string `json:"prose"`
		}
		if t.WorkflowID == in.WorkflowID || json.Unmarshal(t.Result, &r) != nil || r.Status != "completed" || r.Prose == "" ||
			(r.EndReason != "answered" && r.EndReason != EndProposed) {
			continue
		}
		tg := proposals.CorrectionTarget{WorkflowID: t.WorkflowID, OutputID: proposals.OutputID(t.WorkflowID), InputID: proposals.InputID(t.WorkflowID),
			OutputSHA256: proposals.Digest([]byte(r.Prose)), Contract: proposals.OutputContract}
		snap.Targets = append(snap.Targets, tg)
		snap.Evidence = append(snap.Evidence, tg.InputID, tg.OutputID)
	}
	if n := len(snap.Targets); n > maxCorrectionTargets {
		snap.Targets = snap.Targets[n-maxCorrectionTargets:]
	}
	if a.Memory.Root != "" {
		if v, err := a.Memory.Scan(ctx, a.Store); err == nil {
			snap.Memory = proposals.Binding(v)
		}
	}
	slices.Sort(snap.Evidence)
	if len(snap.Evidence) > 64 {
		snap.Evidence = snap.Evidence[len(snap.Evidence)-64:]
	}
	o := &offer{}
	for _, c := range tools {
		if t, ok := snap.Offer(c); ok {
			o.tools = append(o.tools, t)
			snap.Offered = append(snap.Offered, c.CapabilityID)
		}
	}
	if len(o.tools) == 0 {
		return nil, nil
	}
	o.snap, o.body = snap, snap.Encode()
	return o, nil
}

// offerStored is the offer of a snapshot stored already (body): the proposal tools of reg
// that it admits and offered.
func offerStored(body []byte, reg *registry.Registry, allow func(string) bool, now time.Time) (*offer, error) {
	s, err := proposals.DecodeSnapshot(body)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("stored snapshot does not decode", ErrTypeBadInput, err)
	}
	o := &offer{snap: s, body: body}
	for _, c := range reg.ProposalCatalog(allow, now) {
		if t, ok := s.Offer(c); ok && slices.Contains(s.Offered, c.CapabilityID) {
			o.tools = append(o.tools, t)
		}
	}
	return o, nil
}

// add puts the offer's tools in the model request and the round's catalog (nil: none).
func (o *offer) add(req *inference.Request, out *InferOutput) {
	if o == nil {
		return
	}
	for _, c := range o.tools {
		req.Tools = append(req.Tools, inference.Tool{Name: c.Name, Description: c.Description, Parameters: c.Parameters})
		out.Catalog = append(out.Catalog, CatalogRef{Name: c.Name, CapabilityID: c.CapabilityID, Version: c.Version, PerTurnCap: c.PerTurnCap, Kind: KindProposal})
	}
	out.ProposalSnapshot = o.snap.ID
}

// namesProposal reports whether one of calls names a proposal tool of the round's catalog:
// the turn's proposal hook (capture, or a mixed message refused) then takes the message and
// reads the round's snapshot.
func namesProposal(catalog []CatalogRef, calls []parse.Call) bool {
	kinds := make(map[string]string, len(catalog))
	for _, c := range catalog {
		kinds[c.Name] = c.Kind
	}
	for _, c := range calls {
		if kinds[c.Name] == KindProposal {
			return true
		}
	}
	return false
}

// keepOffer stores the offer's snapshot, the first write winning (store.PutSnapshot), and
// reports whether the stored snapshot is this one. It is not when an earlier attempt of the
// round stored another and died before its answer reached history: its offer (the stored
// one) binds the round, and Infer asks the model again with it (stored is its body).
func (a *Activities) keepOffer(ctx context.Context, in InferInput, o *offer) (same bool, stored []byte, err error) {
	stored, err = a.Store.PutSnapshot(ctx, o.snap.ID, in.WorkflowID, in.Round, o.body)
	if err != nil {
		return false, nil, fmt.Errorf("proposal snapshot: %w", err)
	}
	return bytes.Equal(stored, o.body), stored, nil
}

// EndProposed is the end reason of a turn that captured at least one proposal;
// EndProposalsRefused of a proposal-only message all of whose calls were refused.
const (
	EndProposed         = "proposed"
	EndProposalsRefused = "proposals_refused"
)

// CaptureInput is one model message whose calls are all proposal calls (or unknown names).
type CaptureInput struct {
	WorkflowID   string       `json:"workflow_id"`
	RunID        string       `json:"run_id"`
	Conversation string       `json:"conversation"`
	Principal    string       `json:"principal,omitempty"`
	Model        string       `json:"model,omitempty"`
	Round        int          `json:"round"`
	SnapshotID   string       `json:"snapshot_id"`
	Calls        []parse.Call `json:"calls"`
	Catalog      []CatalogRef `json:"catalog"`
}

// CallVerdict is what capture decided for one call: Captured with its proposal id and kind,
// or refused with a content-free Code and Detail.
type CallVerdict struct {
	Index      int    `json:"index"`
	Captured   bool   `json:"captured"`
	ProposalID string `json:"proposal_id,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Code       string `json:"code,omitempty"`
	Detail     string `json:"detail,omitempty"`
	Parse      bool   `json:"parse,omitempty"`
}

// CaptureOutput lists one verdict per call, in call order, and the fixed acknowledgement of
// the captured kinds.
type CaptureOutput struct {
	Verdicts        []CallVerdict `json:"verdicts"`
	Acknowledgement string        `json:"acknowledgement"`
}

// capture validates the calls against the registry and the stored snapshot. It is the first
// validation (CaptureProposals) and, run again by SettleProposals on the stored snapshot, the
// second; both return the records of the captured calls.
func (a *Activities) capture(ctx context.Context, in CaptureInput) (CaptureOutput, []proposals.Proposal, error) {
	reg := a.reg()
	out := CaptureOutput{Verdicts: make([]CallVerdict, len(in.Calls))}
	var snap proposals.Snapshot
	snapSHA := ""
	if in.SnapshotID != "" {
		raw, err := a.Store.GetSnapshot(ctx, in.SnapshotID)
		if err != nil {
			return out, nil, fmt.Errorf("capture: %w", err)
		}
		if snap, err = proposals.DecodeSnapshot(raw); err != nil {
			return out, nil, temporal.NewNonRetryableApplicationError("stored snapshot does not decode", ErrTypeBadInput, err)
		}
		snapSHA = proposals.Digest(raw)
	}
	offered := map[string]CatalogRef{}
	for _, c := range in.Catalog {
		if c.Kind == KindProposal {
			offered[c.Name] = c
		}
	}
	kinds := map[string]int{}
	for _, c := range in.Calls {
		if ref, ok := offered[c.Name]; ok {
			kinds[proposals.KindOf(ref.CapabilityID)]++
		}
	}
	var recs []proposals.Proposal
	var captured []string
	for i, c := range in.Calls {
		v := &out.Verdicts[i]
		v.Index = i
		ref, isProposal := offered[c.Name]
		kind := proposals.KindOf(ref.CapabilityID)
		refuse := func(code, detail string) { v.Code, v.Detail = code, detail }
		switch {
		case !c.Candidate():
			v.Parse = true
			refuse(string(c.Reason), "the call did not parse")
			continue
		case len(in.Calls) > proposals.MaxProposalCallsPerTurn:
			refuse(proposals.RefusedTooMany, fmt.Sprintf("at most %d proposal calls a turn", proposals.MaxProposalCallsPerTurn))
			continue
		case !isProposal:
			refuse(proposals.RefusedUnknownTool, "not a proposal tool offered in this turn")
			continue
		case kinds[kind] > 1:
			refuse(proposals.RefusedDuplicateKind, "at most one proposal of each kind a turn")
			continue
		}
		capb, ok := reg.ByToolName(c.Name)
		if !ok || capb.ID != ref.CapabilityID || !capb.IsProposal() {
			refuse(proposals.RefusedUnknownTool, "not a registered proposal tool")
			continue
		}
		if auth := reg.Authorize(capb, in.Principal); auth.Code != "" {
			refuse(proposals.RefusedPolicy, "policy: "+auth.Code)
			continue
		}
		prov := proposals.Provenance{WorkflowID: in.WorkflowID, RunID: in.RunID, OutputID: proposals.OutputID(in.WorkflowID),
			InputID: proposals.InputID(in.WorkflowID), Conversation: in.Conversation, Principal: in.Principal, Model: in.Model}
		rec, r := proposals.Build(capb, snap, snapSHA, prov, c.Arguments)
		if r != nil {
			refuse(r.Code, r.Detail)
			continue
		}
		v.Captured, v.ProposalID, v.Kind = true, rec.ID, rec.Kind
		recs = append(recs, rec)
		captured = append(captured, rec.Kind)
	}
	out.Acknowledgement = proposals.Acknowledgement(captured)
	return out, recs, nil
}

// CaptureProposals is the first validation of a proposal message: every call is checked
// against the registry (strict schema, policy) and the turn's stored context snapshot. It
// writes nothing; SettleProposals records.
func (a *Activities) CaptureProposals(ctx context.Context, in CaptureInput) (CaptureOutput, error) {
	out, _, err := a.capture(ctx, in)
	return out, err
}

// SettleInput is a captured message's settlement: the calls (validated again), the answer
// (visible text, or the fixed acknowledgement) and the turn's final result.
type SettleInput struct {
	Capture CaptureInput `json:"capture"`
	// Verdicts are CaptureProposals' verdicts; settlement must reach the same ones.
	Verdicts []CallVerdict `json:"verdicts"`
	// Seqs are the proposal sequence numbers of the calls in the turn (audit rows).
	Seqs   []int           `json:"seqs"`
	Answer string          `json:"answer"`
	Result json.RawMessage `json:"result"`
}

// CapturedNote is the tool result recorded in the conversation for a captured call: capture
// ran and created a durable inert proposal; approval and application are pending.
const CapturedNote = `{"airlock":"captured","detail":"a durable, inert proposal was created; approval and application are pending a human decision"}`

// SettleProposals is the trusted recorder: it validates the calls again against the stored
// snapshot (the second validation; the verdicts must equal capture's) and writes, in one store
// transaction, the proposals, the canonical conversation entries (the captured calls with
// their canonical arguments and a stable synthetic id, the capture notes, the answer), the
// audit rows (content-free) and the turn's result. Ids are deterministic: a retry converges.
func (a *Activities) SettleProposals(ctx context.Context, in SettleInput) error {
	c := in.Capture
	out, recs, err := a.capture(ctx, c)
	if err != nil {
		return err
	}
	if len(out.Verdicts) != len(in.Verdicts) || len(in.Seqs) != len(in.Verdicts) {
		return temporal.NewNonRetryableApplicationError("settlement does not match the capture", ErrTypeBadInput, nil)
	}
	for i := range out.Verdicts {
		if out.Verdicts[i] != in.Verdicts[i] {
			return temporal.NewNonRetryableApplicationError("the second validation disagrees with the first", ErrTypeBadInput, nil)
		}
	}
	st := store.Settlement{WorkflowID: c.WorkflowID, Conversation: c.Conversation, Result: in.Result, At: a.now()}
	assistant := inference.Message{Role: inference.RoleAssistant}
	var notes []inference.Message
	for n, r := range recs {
		st.Proposals = append(st.Proposals, store.ProposalRow{ID: r.ID, Kind: r.Kind, WorkflowID: c.WorkflowID, Conversation: c.Conversation,
			OutputID: r.Proposer.OutputID, SnapshotID: r.Proposer.SnapshotID, Payload: r.Encode()})
		callID := fmt.Sprintf("proposal_%d", n+1)
		capb, _ := a.reg().ByKey(fmt.Sprintf("%s@%d", r.Proposer.CapabilityID, r.Proposer.Version))
		assistant.ToolCalls = append(assistant.ToolCalls, inference.ToolCall{ID: callID, Name: capb.Airlock.ToolName, Arguments: canonicalCall(r)})
		notes = append(notes, inference.Message{Role: inference.RoleTool, ToolCallID: callID, Content: CapturedNote})
	}
	key := fmt.Sprintf("%s/r%d", c.WorkflowID, c.Round)
	add := func(k string, m inference.Message) {
		b, _ := json.Marshal(m)
		st.Context = append(st.Context, store.ContextEntry{Conversation: c.Conversation, Key: k, WorkflowID: c.WorkflowID, Payload: b})
	}
	if len(assistant.ToolCalls) > 0 {
		add(key+"/assistant", assistant)
		for i, m := range notes {
			add(fmt.Sprintf("%s/captured/%d", key, i), m)
		}
	}
	add(c.WorkflowID+"/output", inference.Message{Role: inference.RoleAssistant, Content: in.Answer})
	for i, v := range out.Verdicts {
		call := c.Calls[i]
		e := store.AuditEvent{Key: fmt.Sprintf("%s/%s/%d/proposal", c.WorkflowID, c.RunID, in.Seqs[i]), WorkflowID: c.WorkflowID, RunID: c.RunID,
			Seq: in.Seqs[i], CallID: call.CallID, At: a.now()}
		switch {
		case v.Captured:
			e.Outcome, e.Stage, e.Reason, e.Detail = string(OutcomeCaptured), string(StageRecord), v.Kind, v.ProposalID
		case v.Parse:
			e.Outcome, e.Stage, e.Reason, e.Detail = string(OutcomeParseFailed), string(StageParse), v.Code, v.Detail
		default:
			e.Outcome, e.Stage, e.Reason, e.Detail = string(OutcomeRejected), string(StageValidate), v.Code, v.Detail
		}
		for _, ref := range c.Catalog {
			if ref.Name == call.Name {
				e.CapabilityID, e.Version = ref.CapabilityID, ref.Version
			}
		}
		st.Audit = append(st.Audit, e)
	}
	if err := a.Store.Settle(ctx, st); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadInput, err)
		}
		return err
	}
	if pn, ok := a.Notices.(ProposalNotifier); ok && len(st.Proposals) > 0 {
		// Approvers are told of the stored proposals (issue 23); idempotent by delivery id, so
		// a retry of this settlement writes nothing twice.
		if err := pn.Proposals(ctx, st.Proposals); err != nil {
			return err
		}
	}
	return nil
}

// canonicalCall is the canonical arguments of a captured call as the conversation keeps them:
// rebuilt from the record (a resolved correction target, never the literal latest).
func canonicalCall(r proposals.Proposal) string {
	var v any
	switch r.Kind {
	case proposals.KindMemory:
		v = map[string]any{"operation": r.Operation, "proposed_text": r.ProposedText, "reason": r.Reason, "evidence_event_ids": r.Evidence}
	case proposals.KindCorrection:
		v = map[string]any{"target_output": r.Target.OutputID, "replacement": r.Replacement, "reason": r.Reason, "evidence_event_ids": r.Evidence}
	default:
		return string(r.Declaration)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ApplyInput names the proposal and decision a proposal workflow applies.
type ApplyInput struct {
	ProposalID string `json:"proposal_id"`
	DecisionID string `json:"decision_id"`
}

// ApplyOutput is the receipt the decision led to.
type ApplyOutput struct {
	ReceiptID string `json:"receipt_id"`
	Kind      string `json:"kind"`
	Reason    string `json:"reason,omitempty"`
}

// ApplyProposalDecision replays the authority chain of the proposal and its decision
// (proposals.VerifyProposal, VerifyDecision) and applies the decision once: a rejected
// proposal gets a rejected receipt; an accepted or edited correction becomes a judgment
// (kind correct, criterion agent-self-correction v1, quality-eligible, not external-export
// eligible); an accepted or edited memory change is materialized (a materialized receipt, or
// a materialization.failed one with a content-free reason code); a focus decision is recorded
// only. A chain that does not verify is ErrTypeUntrusted and writes nothing. Idempotent: the
// first receipt of a decision stands.
func (a *Activities) ApplyProposalDecision(ctx context.Context, in ApplyInput) (ApplyOutput, error) {
	// It may wait on the memory document's lock: heartbeat, so a dead worker is noticed within
	// the workflow's heartbeat timeout rather than after the StartToClose minute.
	stop := keepAlive(ctx)
	defer stop()
	untrusted := func(err error) (ApplyOutput, error) {
		return ApplyOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUntrusted, err)
	}
	row, err := a.Store.GetProposal(ctx, in.ProposalID)
	if errors.Is(err, store.ErrNotFound) {
		return untrusted(err)
	}
	if err != nil {
		return ApplyOutput{}, err
	}
	p, err := proposals.VerifyProposal(ctx, a.Store, row)
	if err != nil {
		return untrusted(err)
	}
	d, err := a.Store.GetProposalDecision(ctx, p.ID)
	if errors.Is(err, store.ErrNotFound) {
		return untrusted(err)
	}
	if err != nil {
		return ApplyOutput{}, err
	}
	if d.ID != in.DecisionID {
		return untrusted(fmt.Errorf("%w: the signalled decision is not the proposal's", proposals.ErrUntrusted))
	}
	if a.Approvers == nil {
		return untrusted(fmt.Errorf("%w: no approvers file", proposals.ErrUntrusted))
	}
	set, err := a.Approvers()
	if err != nil {
		return untrusted(fmt.Errorf("%w: approvers file: %v", proposals.ErrUntrusted, err))
	}
	if err := proposals.VerifyDecision(p, d, set); err != nil {
		return untrusted(err)
	}
	if r, err := a.Store.GetReceipt(ctx, d.ID); err == nil {
		return ApplyOutput{ReceiptID: r.ID, Kind: r.Kind, Reason: r.Reason}, nil
	}
	rc := store.Receipt{ID: proposals.ReceiptID(d.ID), DecisionID: d.ID, ProposalID: p.ID}
	text := d.Replacement
	switch {
	case d.Disposition == proposals.Reject:
		rc.Kind = proposals.ReceiptRejected
	case p.Kind == proposals.KindFocus:
		rc.Kind = proposals.ReceiptFocusRecorded
	case p.Kind == proposals.KindCorrection:
		if d.Disposition == proposals.Accept {
			text = p.Replacement
		}
		j, err := a.Store.RecordJudgment(ctx, store.Judgment{ID: proposals.JudgmentID(d.ID), Kind: proposals.JudgmentKindCorrect,
			Criterion: proposals.CriterionSelfCorrection, CriterionVersion: proposals.CriterionSelfCorrectionV1, Actor: d.Actor,
			TargetWorkflowID: p.Target.WorkflowID, TargetOutputID: p.Target.OutputID, FeedbackSource: d.ID, Replacement: text,
			QualityEligible: true, ExternalExportEligible: false, CreatedAt: a.now()})
		if err != nil {
			return ApplyOutput{}, err
		}
		rc.Kind, rc.Detail = proposals.ReceiptProjected, mustJSON(map[string]string{"judgment_id": j.ID, "target_output_id": j.TargetOutputID})
	case p.Kind == proposals.KindMemory:
		if d.Disposition == proposals.Accept {
			text = p.ProposedText
		}
		res, err := a.Memory.Materialize(ctx, a.Store, *p.Memory, p.Operation, text)
		var f *proposals.Failure
		switch {
		case errors.As(err, &f):
			rc.Kind, rc.Reason = proposals.ReceiptMaterializionFailed, f.Code
		case err != nil:
			return ApplyOutput{}, err
		default:
			rc.Kind, rc.Detail = proposals.ReceiptMaterialized, mustJSON(res)
		}
	}
	stored, err := a.Store.AppendReceipt(ctx, rc)
	if err != nil {
		return ApplyOutput{}, err
	}
	return ApplyOutput{ReceiptID: stored.ID, Kind: stored.Kind, Reason: stored.Reason}, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
