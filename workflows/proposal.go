package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
)

// ProposalWorkflowName is the registered type name of ProposalWorkflow.
const ProposalWorkflowName = "ProposalWorkflow"

// SignalProposalDecision carries a ProposalDecisionSignal to a ProposalWorkflow.
const SignalProposalDecision = "decision"

// QueryProposal returns the ProposalStatus of a ProposalWorkflow.
const QueryProposal = "proposal"

// ParentClosePolicyAbandon: a proposal outlives the turn that captured it.
const ParentClosePolicyAbandon = enumspb.PARENT_CLOSE_POLICY_ABANDON

// ProposalWorkflowID is the workflow id of the pending proposal id: "proposal/<id>".
func ProposalWorkflowID(proposalID string) string { return "proposal/" + proposalID }

// ProposalRequest starts the workflow of one captured proposal.
type ProposalRequest struct {
	ProposalID     string `json:"proposal_id"`
	Kind           string `json:"kind"`
	TurnWorkflowID string `json:"turn_workflow_id"`
}

// ProposalDecisionSignal tells a proposal workflow that a decision was appended to the store
// (the decision itself is read and verified from the store, never from the signal).
type ProposalDecisionSignal struct {
	DecisionID string `json:"decision_id"`
}

// ProposalStatus is what QueryProposal returns and the workflow's result.
type ProposalStatus struct {
	ProposalID string `json:"proposal_id"`
	Kind       string `json:"kind"`
	// State is pending, applied, or refused (a signalled decision whose chain did not verify;
	// the workflow keeps waiting).
	State     string `json:"state"`
	ReceiptID string `json:"receipt_id,omitempty"`
	Receipt   string `json:"receipt,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// MaxProposalSignals bounds the decision signals one proposal workflow judges (history bound).
const MaxProposalSignals = 32

// ProposalWorkflow is one pending agent proposal: it waits for a decision signal, then applies
// the decision (ApplyProposalDecision: chain replay, projection or materialization, receipt)
// as an activity, so an interruption between the decision and its application is resumed by
// Temporal, not lost. A signal whose decision does not verify leaves it waiting.
func ProposalWorkflow(ctx workflow.Context, req ProposalRequest) (ProposalStatus, error) {
	st := ProposalStatus{ProposalID: req.ProposalID, Kind: req.Kind, State: "pending"}
	if err := workflow.SetQueryHandler(ctx, QueryProposal, func() (ProposalStatus, error) { return st, nil }); err != nil {
		return st, err
	}
	ch := workflow.GetSignalChannel(ctx, SignalProposalDecision)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeUntrusted, activities.ErrTypeBadInput}},
		Summary: summarize("apply decision on proposal " + req.Kind)})
	for i := 0; i < MaxProposalSignals; i++ {
		// Read raw and decoded strictly here: a payload that is not a decision signal is
		// refused (and counts towards MaxProposalSignals), never dropped by the SDK unseen.
		var raw json.RawMessage
		ch.Receive(ctx, &raw)
		var sig ProposalDecisionSignal
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		derr := dec.Decode(&sig) //workflowcheck:ignore decoding the signal's bytes: a pure function
		if derr != nil || sig.DecisionID == "" {
			st.Reason = "malformed_signal: the decision signal's payload is not {\"decision_id\": \"…\"}"
			workflow.GetLogger(ctx).Warn("a proposal decision signal that is not a decision", "proposal", req.ProposalID, "payload", bounded(string(raw), 160))
			continue
		}
		var out activities.ApplyOutput
		err := workflow.ExecuteActivity(actx, a.ApplyProposalDecision, activities.ApplyInput{ProposalID: req.ProposalID, DecisionID: sig.DecisionID}).Get(ctx, &out)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeUntrusted {
			st.State, st.Reason = "refused", "untrusted"
			continue
		}
		if err != nil {
			return st, err
		}
		st.State, st.ReceiptID, st.Receipt, st.Reason = "applied", out.ReceiptID, out.Kind, out.Reason
		return st, nil
	}
	return st, nil
}
