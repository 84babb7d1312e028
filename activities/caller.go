package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/store"
)

// Callers of single calls (issue 35): an MCP client Airlock does not run proves itself to the
// MCP server with a bearer token signed by its registered client credential
// (clients.MintBearer). The server checks it on every request and starts the call with an
// attestation bound to that one call (clients.CallAttestation, signed by the server's gateway
// credential, or by the caller's own credential over stdio); VerifyCaller checks it in the
// worker before the call's first stage, so a workflow started by anyone without a registered
// key runs nothing, and nothing in the call's history can start another call.

// AuditCallRefused is the audit kind of a single call whose caller did not prove itself:
// Reason is the refusal code (clients.Refusal*), Detail says why.
const AuditCallRefused = "call_refused"

// CallWorkflowPrefix starts every call workflow id (workflows.CallWorkflowPrefix, which a test
// holds equal).
const CallWorkflowPrefix = "mcp/"

// VerifyCallerInput is what VerifyCaller checks: the call's workflow, the attestation its
// starter presented, the tool and argument digest the call runs, the principal and client the
// starter claims for it, and the time the call started (Temporal's, not the worker's clock).
type VerifyCallerInput struct {
	WorkflowID  string                   `json:"workflow_id"`
	RunID       string                   `json:"run_id"`
	FirstRunID  string                   `json:"first_run_id"`
	Attestation *clients.CallAttestation `json:"attestation,omitempty"`
	Tool        string                   `json:"tool"`
	ArgsDigest  string                   `json:"args_digest"`
	Principal   string                   `json:"principal"`
	Client      string                   `json:"client"`
	StartedAt   time.Time                `json:"started_at"`
}

// VerifyCallerOutput is the proven caller.
type VerifyCallerOutput struct {
	Principal string `json:"principal"`
	Client    string `json:"client"`
}

// VerifyCaller verifies a single call's attestation (clients.Set.VerifyCall: this workflow id,
// tool and arguments, signed in time by the client or a gateway, the client still registered
// and in scope) against the clients file as of the call's start and records the proven requester (store.RecordRequester), which every approver surface
// shows and the four-eyes rule compares the approver with. A refused caller is audited
// (AuditCallRefused) and fails with a non-retryable ErrTypeRequesterRefused error whose
// details are the refusal code and detail; a store failure is retried.
func (a *Activities) VerifyCaller(ctx context.Context, in VerifyCallerInput) (VerifyCallerOutput, error) {
	var err error
	switch {
	case a.Clients == nil:
		err = &clients.RefusedError{Code: clients.RefusalNoClients, Detail: "this worker has no clients file, so no caller can be authenticated"}
	default:
		set, lerr := a.Clients()
		if lerr != nil {
			err = &clients.RefusedError{Code: clients.RefusalNoClients, Detail: "the worker cannot read its clients file: " + lerr.Error()}
		} else if _, err = set.VerifyCall(CallWorkflowPrefix, in.WorkflowID, in.Tool, in.ArgsDigest, in.Attestation, in.StartedAt); err == nil &&
			(in.Attestation.Principal != in.Principal || in.Attestation.Client != in.Client) {
			err = &clients.RefusedError{Code: clients.RefusalMisattested, Detail: fmt.Sprintf(
				"the call claims client %s for principal %s; its attestation is client %s's for %s", in.Client, in.Principal, in.Attestation.Client, in.Attestation.Principal)}
		}
	}
	if err == nil {
		// One requester row per call workflow, keyed by the attestation's signature: it is
		// bound to this workflow id, so a second start of the id is the replay the store refuses.
		att := in.Attestation
		sum := sha256.Sum256([]byte(att.Signature))
		_, rerr := a.Store.RecordRequester(ctx, store.TurnRequester{WorkflowID: in.WorkflowID, RunID: in.RunID, FirstRunID: in.FirstRunID,
			Principal: att.Principal, Client: att.Client, Signature: "mcp-call:" + hex.EncodeToString(sum[:]), At: in.StartedAt})
		switch {
		case errors.Is(rerr, store.ErrAttestationUsed):
			err = &clients.RefusedError{Code: clients.RefusalReplayed, Detail: "this call's workflow id already ran under another start"}
		case rerr != nil:
			return VerifyCallerOutput{}, fmt.Errorf("record the call's requester: %w", rerr)
		default:
			return VerifyCallerOutput{Principal: att.Principal, Client: att.Client}, nil
		}
	}
	var ref *clients.RefusedError
	if !errors.As(err, &ref) {
		return VerifyCallerOutput{}, err
	}
	ev := store.AuditEvent{Key: in.WorkflowID + "/" + in.RunID + "/" + AuditCallRefused, WorkflowID: in.WorkflowID, RunID: in.RunID,
		Stage: "request", Outcome: AuditCallRefused, Reason: ref.Code, Detail: ref.Detail, At: a.now()}
	if _, aerr := a.Store.AppendAudit(ctx, ev); aerr != nil {
		return VerifyCallerOutput{}, fmt.Errorf("audit the call's refused caller: %w", aerr)
	}
	return VerifyCallerOutput{}, temporal.NewNonRetryableApplicationError(ref.Error(), ErrTypeRequesterRefused, nil, ref.Code, ref.Detail)
}
