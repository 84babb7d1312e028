package workflows_test

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/airlock-dev/airlock/workflows"
)

// A proposal's decision signal whose payload is not {"decision_id": …} (a number, a string,
// unknown members, an empty id) is refused and counted, never dropped unseen: after
// MaxProposalSignals of them the proposal ends pending with the reason, having applied nothing.
func TestProposalRefusesMalformedDecisionSignals(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ProposalWorkflow)
	payloads := []any{42, "approve", map[string]any{"decision_id": "d1", "extra": true}, map[string]any{"decision_id": ""}}
	env.RegisterDelayedCallback(func() {
		for i := 0; i < workflows.MaxProposalSignals; i++ {
			env.SignalWorkflow(workflows.SignalProposalDecision, payloads[i%len(payloads)])
		}
	}, time.Second)
	env.ExecuteWorkflow(workflows.ProposalWorkflow, workflows.ProposalRequest{ProposalID: "p1", Kind: "memory"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st workflows.ProposalStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if st.State != "pending" || !strings.HasPrefix(st.Reason, "malformed_signal") || st.ReceiptID != "" {
		t.Fatalf("status = %+v", st)
	}
}
