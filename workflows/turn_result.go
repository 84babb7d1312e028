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

// setStatus upserts AirlockStatus and AirlockPendingConfirmations (the pending count now).
func (t *turn) setStatus(ctx workflow.Context, status string) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStatus.ValueSet(status), AttrPending.ValueSet(int64(len(t.pending))))
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
		activities.FinishInput{WorkflowID: t.workflowID, Conversation: t.req.Conversation, Result: b}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("save turn result", "error", err)
	}
}
