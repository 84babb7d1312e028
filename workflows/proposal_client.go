package workflows

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
)

// DeliverProposalDecision signals the ProposalWorkflow of req (starting it on taskQueue if it
// is not running) that decision decisionID was appended, and waits for its status: the
// receipt of the applied decision. Client-side code (the CLI and the approver page) calls it;
// it is not workflow code. ctx bounds the wait.
func DeliverProposalDecision(ctx context.Context, c client.Client, taskQueue string, req ProposalRequest, decisionID string) (ProposalStatus, error) {
	id := ProposalWorkflowID(req.ProposalID)
	run, err := c.SignalWithStartWorkflow(ctx, id, SignalProposalDecision, ProposalDecisionSignal{DecisionID: decisionID},
		client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, ProposalWorkflowName, req)
	if err != nil {
		return ProposalStatus{}, fmt.Errorf("workflows: signal proposal %s: %w", req.ProposalID, err)
	}
	var s ProposalStatus
	if err := run.Get(ctx, &s); err != nil {
		return s, fmt.Errorf("workflows: proposal %s: %w", req.ProposalID, err)
	}
	return s, nil
}
