package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"

	airlockclient "github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// A turn terminated from outside runs no code: the worker's sweep closes what it left behind
// (issue 20, item 4): its confirmation leaves the inbox (expired, turn_terminated, audited) and a
// failed result says how the turn ended.
func TestTerminatedTurnLeavesNothingPending(t *testing.T) {
	target := statusPage(t)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL))))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	deps := startWorker(t, c, cfg)
	st := openStore(t, cfg)
	ctx := context.Background()
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "terminated", Principal: "ops", Message: "fetch the page"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	if n, err := workers.SweepClosedTurns(ctx, c, deps.Activities); err != nil || n != 0 {
		t.Fatalf("sweep while the turn runs closed %d (%v), want 0", n, err)
	}
	if err := c.TerminateWorkflow(ctx, run.GetID(), "", "operator stopped it"); err != nil {
		t.Fatal(err)
	}
	// The terminated run keeps the attribute it last wrote (Temporal updates no closed run);
	// every surface reads its status as terminated, and no list of waiting turns shows it.
	d, err := c.DescribeWorkflow(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	attr, _ := d.TypedSearchAttributes.GetKeyword(workflows.AttrStatus)
	if got := workflows.TurnStatus(d.RawResponse.GetWorkflowExecutionInfo().GetStatus(), attr); attr != workflows.StatusAwaitingConfirmation || got != "terminated" {
		t.Fatalf("attribute %q, TurnStatus %q: want awaiting-confirmation read as terminated", attr, got)
	}
	cl, err := airlockclient.New(ctx, c, airlockclient.Options{TaskQueue: cfg.TaskQueue})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := cl.ListPending(ctx, airlockclient.ListFilter{Conversation: "terminated"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListPending still lists the terminated turn: %+v", ps)
		}
		time.Sleep(200 * time.Millisecond)
	}
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: workflows.QueryAwaiting + ` AND WorkflowId = "` + run.GetID() + `"`})
	if err != nil || len(resp.GetExecutions()) != 0 {
		t.Fatalf("QueryAwaiting lists %d executions (%v), want 0", len(resp.GetExecutions()), err)
	}
	n, err := workers.SweepClosedTurns(ctx, c, deps.Activities)
	if err != nil || n != 1 {
		t.Fatalf("sweep after terminate closed %d (%v), want 1", n, err)
	}
	row, err := st.GetConfirmation(ctx, p.ConfirmationID)
	if err != nil || row.Decision != store.DecisionExpired || row.Reason != "turn_terminated" {
		t.Fatalf("confirmation = %+v, %v: want expired, turn_terminated", row, err)
	}
	pend, err := st.ListPendingConfirmations(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range pend {
		if q.WorkflowID == run.GetID() {
			t.Fatalf("the terminated turn's confirmation %s is still pending", q.ID)
		}
	}
	saved, err := st.GetTurnResult(ctx, run.GetID())
	if err != nil || !strings.Contains(string(saved), `"end_reason":"turn_terminated"`) || !strings.Contains(string(saved), `"status":"failed"`) {
		t.Fatalf("saved result = %s, %v", saved, err)
	}
	rows, err := st.ListAudit(ctx, run.GetID())
	if err != nil || len(rows) == 0 || rows[len(rows)-1].Outcome != "expired" || rows[len(rows)-1].Reason != "turn_terminated" {
		t.Fatalf("audit = %+v, %v: want the proposal expired, turn_terminated", rows, err)
	}
	if n, err := workers.SweepClosedTurns(ctx, c, deps.Activities); err != nil || n != 0 {
		t.Fatalf("a second sweep closed %d (%v), want 0", n, err)
	}
}

// Whoever may signal a turn can grow its history: big signals land in history before any code
// judges them. A waiting turn flooded with 1.5 MB signals ends cleanly before Temporal's limit
// (the server would terminate it, saving nothing): failed with history_limit, its confirmation
// closed, its result saved and its status attribute recorded.
func TestSignalFloodEndsTheTurnBeforeTheHistoryLimit(t *testing.T) {
	target := statusPage(t)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL))))
	c, cfg, st := liveModelStack(t, model)
	ctx := context.Background()
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "flood", Principal: "ops", Message: "fetch the page"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	big := strings.Repeat("x", 1500<<10)
	sent := 0
	for ; sent < 30; sent++ {
		d := workflows.Decision{ConfirmationID: p.ConfirmationID, Decision: workflows.DecisionApprove, Approver: "mallory",
			Nonce: fmt.Sprintf("flood-%d", sent), MAC: "00", Reason: big}
		if err := c.SignalWorkflow(ctx, run.GetID(), "", workflows.SignalConfirmation, d); err != nil {
			break // the turn has ended
		}
		time.Sleep(50 * time.Millisecond)
	}
	var res workflows.TurnResult
	err := run.Get(ctx, &res)
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != workflows.ErrTypeHistoryLimit {
		t.Fatalf("after %d signals the turn ended with %v, want a %s failure", sent, err, workflows.ErrTypeHistoryLimit)
	}
	d, err := c.DescribeWorkflow(ctx, run.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	desc := d.RawResponse
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		t.Fatalf("status %s, want failed by the turn itself (not terminated by the server)", info.GetStatus())
	}
	if size := info.GetHistorySizeBytes(); size >= 50<<20 {
		t.Fatalf("history %d bytes: past Temporal's limit", size)
	}
	status := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.AttrStatus.GetName()]
	if status == nil || !strings.Contains(string(status.GetData()), workflows.StatusFailed) {
		t.Fatalf("AirlockStatus = %s, want failed", status.GetData())
	}
	row, err := st.GetConfirmation(ctx, p.ConfirmationID)
	if err != nil || row.Decision != store.DecisionExpired || row.Reason != workflows.StopHistoryLimit {
		t.Fatalf("confirmation = %+v, %v: want expired, history_limit", row, err)
	}
	saved, err := st.GetTurnResult(ctx, run.GetID())
	if err != nil || !strings.Contains(string(saved), `"end_reason":"history_limit"`) || !strings.Contains(string(saved), `"status":"failed"`) {
		t.Fatalf("saved result = %.300s, %v", saved, err)
	}
	t.Logf("ended after %d signals of 1.5 MB, history %d bytes, %d events", sent, info.GetHistorySizeBytes(), info.GetHistoryLength())
}
