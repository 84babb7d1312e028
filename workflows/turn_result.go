package workflows

// Recording (executor stage 6: Record, a local activity), the status search attributes
// operators filter turns by, and the turn's end: its result saved in the store (FinishTurn) and
// returned.

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/inference"
)

// setStatus sets the AirlockStatus and AirlockPendingConfirmations (the pending count now) the
// turn shows operators; settle upserts them. Visibility only ever sees a workflow task's end
// state, so a status that changes again before the task ends (running after a decision, then
// completed in the same task) costs no upsert of its own.
func (t *turn) setStatus(ctx workflow.Context, status string) {
	t.status, t.statusPending = status, int64(len(t.pending))
	if status == StatusCompleted || status == StatusFailed {
		t.expired = nil // the turn ends: its timers end with it, no cancellation needed
		t.settle(ctx)
	}
}

// settle makes the turn's state durable before it blocks on anything outside its workflow task
// (a regular activity, a wait for decisions) or ends: the status set since the last upsert (one
// search-attribute upsert, a history event and a visibility write) and the cancellation of
// expiry timers whose waits ended (a TimerCanceled event each; a turn that ends first drops
// them with it, and one that blocks must not be woken by them later).
func (t *turn) settle(ctx workflow.Context) {
	for _, cancel := range t.expired {
		cancel()
	}
	t.expired = nil
	if t.status == t.shown && t.statusPending == t.shownPending {
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStatus.ValueSet(t.status), AttrPending.ValueSet(t.statusPending))
	t.shown, t.shownPending = t.status, t.statusPending
}

// record runs stage 6 and appends msgs to the in-memory context.
func (t *turn) record(ctx workflow.Context, audit *activities.AuditRecord, decision *activities.Decision, key string, msgs ...inference.Message) error {
	summary := "record"
	if audit != nil {
		summary = fmt.Sprintf("record %s #%d", audit.Kind, audit.Seq)
	}
	return t.recordAs(ctx, summary, audit, decision, key, msgs...)
}

// recordAs is record with the local activity's summary (escaped and bounded by localCtx).
func (t *turn) recordAs(ctx workflow.Context, summary string, audit *activities.AuditRecord, decision *activities.Decision, key string, msgs ...inference.Message) error {
	t.messages = append(t.messages, msgs...)
	in := activities.RecordInput{Audit: audit, Decision: decision, Conversation: t.req.Conversation, ContextKey: key, Messages: msgs}
	return workflow.ExecuteLocalActivity(localCtx(ctx, summary), a.Record, in).Get(ctx, nil)
}

// finish ends the turn completed, with reason as its TurnResult.EndReason.
func (t *turn) finish(ctx workflow.Context, reason string) (TurnResult, error) {
	t.drainLateSignals(ctx)
	t.result.Catalog = t.catalogControl()
	t.result.Status = StatusCompleted
	t.result.EndReason = reason
	t.setStatus(ctx, StatusCompleted)
	t.save(ctx)
	return t.result, nil
}

// fail ends the turn failed with err (its EndReason names it); the result is saved all the same.
func (t *turn) fail(ctx workflow.Context, err error) (TurnResult, error) {
	t.drainLateSignals(ctx)
	t.result.Catalog = t.catalogControl()
	t.result.Status = StatusFailed
	t.result.EndReason = "error: " + err.Error()
	if t.stop != "" {
		t.result.EndReason = t.stop
	}
	t.setStatus(ctx, StatusFailed)
	t.save(ctx)
	return t.result, err
}

// save stores the turn's result (FinishTurn) so clients read it whatever way the turn ended.
func (t *turn) save(ctx workflow.Context) {
	// Marshalling a struct without maps is deterministic.
	b, err := json.Marshal(t.result) //workflowcheck:ignore
	if err != nil {
		workflow.GetLogger(ctx).Error("encode turn result", "error", err)
		return
	}
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, "finish turn"), a.FinishTurn,
		activities.FinishInput{WorkflowID: t.workflowID, RunID: t.runID, Conversation: t.req.Conversation, Result: b}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("save turn result", "error", err)
	}
}
