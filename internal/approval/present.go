package approval

import (
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/workflows"
)

// PendingInput is the presentation.Input of a turn's pending query result (what a surface
// without the store knows: no votes; the user's request as the turn's query states it).
func PendingInput(p workflows.PendingConfirmation) presentation.Input {
	in := presentation.Input{ID: p.ConfirmationID, WorkflowID: p.WorkflowID, CallID: p.CallID, Seq: p.Seq,
		CapabilityID: p.CapabilityID, Version: p.Version, ToolName: p.ToolName, Arguments: p.Arguments, ArgsDigest: p.ArgsDigest,
		Disclosure: p.Disclosure, Provenance: p.Provenance, Groups: p.ApproverGroups, Quorum: p.Quorum, Approvals: p.Approvals,
		PasskeyRequired: p.PasskeyRequired, DistinctApprover: p.DistinctApprover, ExpiresAt: p.ExpiresAt, UserRequest: p.UserRequest}
	if p.Requester != nil {
		in.RequesterPrincipal, in.RequesterClient = p.Requester.Principal, p.Requester.Client
	}
	return in
}
