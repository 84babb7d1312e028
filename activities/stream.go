package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
)

// This file writes a turn's client-stream events (internal/stream, issue 22 item 2) from the
// activities that do each step. Events live in the store, never in Temporal history: the
// activities' inputs and outputs are the same with and without them.

// complete asks the model for the round's answer: streamed when the worker writes stream
// events and the provider can stream (the deltas become TEXT_MESSAGE_* and TOOL_CALL_*
// events), else unstreamed. Either way the Response is the complete message, parsed after
// this returns: no call is acted on before its message is complete and parsed.
func (a *Activities) complete(ctx context.Context, p inference.Provider, in InferInput, req inference.Request, ask int) (inference.Response, error) {
	turn := in.WorkflowID
	if a.Events.Store == nil || turn == "" {
		return p.Complete(ctx, req)
	}
	a.Events.Emit(ctx, turn, "run_started", stream.Event{Type: stream.RunStarted, ThreadID: in.Conversation, RunID: turn})
	s, ok := p.(inference.Streamer)
	if !ok {
		return p.Complete(ctx, req)
	}
	var attempt int32 = 1
	if activity.IsActivity(ctx) {
		attempt = activity.GetInfo(ctx).Attempt
	}
	// A second ask of the round in this attempt (Infer) streams as a message of its own: its
	// events share the first ask's dedup keys otherwise, and the store dropped them as repeats
	// (the client saw the discarded answer and lost the one the turn kept).
	round := a.Events.RoundAsk(ctx, turn, in.Round, attempt, ask)
	resp, err := s.Stream(ctx, req, round.Sink())
	round.End()
	return resp, err
}

// workflowOf is the workflow id of the activity's turn ("" outside an activity).
func workflowOf(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).WorkflowExecution.ID
}

// emitPending writes airlock.confirmation_pending: what the approver card shows.
func (a *Activities) emitPending(ctx context.Context, in IssueInput, row store.Confirmation) {
	if a.Events.Store == nil {
		return
	}
	a.Events.Emit(ctx, in.WorkflowID, "pending/"+row.ID, stream.CustomEvent(stream.ConfirmationPending, stream.Pending{
		ConfirmationID: row.ID, Seq: in.Seq, CallID: in.CallID, Capability: in.CapabilityID, Version: in.Version,
		ArgsDigest: in.ArgsDigest, Arguments: in.Arguments, Display: in.Display, ExpiresAt: row.ExpiresAt}))
}

// emitRecorded writes airlock.decided for a recorded decision and airlock.executed,
// airlock.refused or airlock.captured for a recorded outcome (audit kinds that are not outcomes, such as
// token_reissued or deprecated_admitted, are not client events).
func (a *Activities) emitRecorded(ctx context.Context, in RecordInput) {
	if a.Events.Store == nil {
		return
	}
	turn := workflowOf(ctx)
	if in.Audit != nil && in.Audit.WorkflowID != "" {
		turn = in.Audit.WorkflowID
	}
	if d := in.Decision; d != nil {
		a.Events.Emit(ctx, turn, "decided/"+d.ConfirmationID, stream.CustomEvent(stream.Decided,
			stream.DecidedValue{ConfirmationID: d.ConfirmationID, Decision: d.Decision, Approver: d.Approver}))
	}
	r := in.Audit
	if r == nil || !isOutcome(r.Kind) {
		return
	}
	name := stream.Refused
	switch Outcome(r.Kind) {
	case OutcomeExecuted:
		name = stream.Executed
	case OutcomeCaptured:
		name = stream.Captured
	}
	a.Events.Emit(ctx, turn, fmt.Sprintf("outcome/%s/%d/%s", r.RunID, r.Seq, r.Kind), stream.CustomEvent(name, stream.Outcome{
		Seq: r.Seq, CallID: r.CallID, Capability: r.CapabilityID, Version: r.Version, Outcome: r.Kind, Stage: string(r.Stage), Reason: r.Reason}))
}

// isOutcome reports whether an audit kind is a proposal's outcome.
func isOutcome(kind string) bool {
	switch Outcome(kind) {
	case OutcomeExecuted, OutcomeRejected, OutcomeDenied, OutcomeExpired, OutcomeParseFailed, OutcomeBudgetExhausted,
		OutcomeCaptured, OutcomeUnknown:
		return true
	}
	return false
}

// emitFinished writes RUN_FINISHED (outcome success, result: the TurnResult) for a turn that
// completed and RUN_ERROR for one that failed.
func (a *Activities) emitFinished(ctx context.Context, in FinishInput) {
	if a.Events.Store == nil {
		return
	}
	var res struct {
		Status    string `json:"status"`
		EndReason string `json:"end_reason"`
	}
	_ = json.Unmarshal(in.Result, &res)
	if res.Status == "failed" {
		a.Events.Emit(ctx, in.WorkflowID, "finished", stream.Event{Type: stream.RunError, Message: res.EndReason, Code: "turn_failed"})
		return
	}
	a.Events.Emit(ctx, in.WorkflowID, "finished", stream.Event{Type: stream.RunFinished, ThreadID: in.Conversation, RunID: in.WorkflowID,
		Outcome: "success", Result: in.Result})
}
