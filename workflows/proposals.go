package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/proposals"
)

// ReasonMixedProposalAndInvocation is the parse failure of every call of a message that mixes
// proposal calls with capability calls.
const ReasonMixedProposalAndInvocation = proposals.RefusedMixed

// proposalHook runs after the parse of round: it returns done when the message held proposal
// calls and was captured (the turn has ended: res, err are the turn's). A mixed message is
// rewritten into parse failures (its arguments dropped from the calls) and left to the
// normal path, which answers the model.
func (t *turn) proposalHook(ctx workflow.Context, round int, inf activities.InferOutput, parsed *parse.Result) (bool, TurnResult, error) {
	props, caps := 0, 0
	for _, c := range parsed.Calls {
		if ref, ok := t.catalog[c.Name]; ok && ref.Kind == activities.KindProposal {
			props++
		} else if ok {
			caps++
		}
	}
	if props == 0 {
		return false, TurnResult{}, nil
	}
	if caps > 0 {
		for i := range parsed.Calls {
			c := &parsed.Calls[i]
			c.Reason = parse.Reason(ReasonMixedProposalAndInvocation)
			c.Detail = "a message may hold proposal calls or capability calls, not both: every call of it was refused"
			c.Arguments, c.Raw = nil, "{}"
		}
		return false, TurnResult{}, nil
	}
	res, err := t.captureProposals(ctx, round, inf, *parsed)
	return true, res, err
}

// captureProposals validates a proposal message (CaptureProposals), settles it atomically
// (SettleProposals: proposals, conversation entries, audit and the turn's result in one store
// transaction), starts one ProposalWorkflow per captured proposal and ends the turn without
// another inference request. The answer is the model's visible text when it wrote any, else
// the fixed acknowledgement of the captured kinds (NothingSaved when none was captured).
func (t *turn) captureProposals(ctx workflow.Context, round int, inf activities.InferOutput, parsed parse.Result) (TurnResult, error) {
	in := activities.CaptureInput{WorkflowID: t.workflowID, RunID: t.runID, Conversation: t.req.Conversation, Principal: t.req.Principal,
		Model: t.req.Model, Round: round, SnapshotID: inf.ProposalSnapshot, Calls: parsed.Calls, Catalog: inf.Catalog}
	var cap activities.CaptureOutput
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, fmt.Sprintf("capture proposals round %d", round)), a.CaptureProposals, in).Get(ctx, &cap); err != nil {
		return t.fail(ctx, fmt.Errorf("capture proposals round %d: %w", round, err))
	}
	seqs := make([]int, len(parsed.Calls))
	var started []activities.CallVerdict
	for i, c := range parsed.Calls {
		t.seq++
		seqs[i] = t.seq
		v := cap.Verdicts[i]
		po := ProposalOutcome{Seq: t.seq, Round: round, CallID: c.CallID, CallIDAssigned: c.IDAssigned, Name: c.Name, Origin: OriginModel}
		if ref, ok := t.catalog[c.Name]; ok {
			po.CapabilityID, po.Version = ref.CapabilityID, ref.Version
		}
		switch {
		case v.Captured:
			po.Outcome, po.Stage, po.Reason, po.Detail = activities.OutcomeCaptured, activities.StageRecord, v.Kind, v.ProposalID
			started = append(started, v)
		case v.Parse:
			po.Outcome, po.Stage, po.Reason, po.Detail = activities.OutcomeParseFailed, activities.StageParse, v.Code, v.Detail
		default:
			po.Outcome, po.Stage, po.Reason, po.Detail = activities.OutcomeRejected, activities.StageValidate, v.Code, v.Detail
		}
		t.result.Outcomes = append(t.result.Outcomes, po)
	}
	answer, end := parsed.Text, activities.EndProposed
	if len(started) == 0 {
		end = activities.EndProposalsRefused
	}
	if answer == "" {
		answer = cap.Acknowledgement
		if len(started) == 0 {
			answer = proposals.NothingSaved
		}
	}
	t.result.Prose, t.result.Status, t.result.EndReason = answer, StatusCompleted, end
	// Marshalling a struct without maps is deterministic.
	b, err := json.Marshal(t.result) //workflowcheck:ignore
	if err != nil {
		return t.fail(ctx, fmt.Errorf("encode turn result: %w", err))
	}
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, fmt.Sprintf("settle proposals round %d", round)), a.SettleProposals,
		activities.SettleInput{Capture: in, Verdicts: cap.Verdicts, Seqs: seqs, Answer: answer, Result: b}).Get(ctx, nil); err != nil {
		return t.fail(ctx, fmt.Errorf("settle proposals round %d: %w", round, err))
	}
	for _, v := range started {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        ProposalWorkflowID(v.ProposalID),
			ParentClosePolicy: ParentClosePolicyAbandon,
			StaticSummary:     summarize("proposal " + v.Kind),
		})
		f := workflow.ExecuteChildWorkflow(cctx, ProposalWorkflowName, ProposalRequest{ProposalID: v.ProposalID, Kind: v.Kind, TurnWorkflowID: t.workflowID})
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Error("start proposal workflow", "proposal", v.ProposalID, "error", err)
		}
	}
	return t.finish(ctx, end)
}
