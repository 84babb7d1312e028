package workflows

// CallWorkflow (issue 35): one tool call from an agent Airlock does not run (an MCP client of
// `airlock mcp serve`), taken through exactly the executor a turn's calls go through: resolve,
// validate and policy (Admit), confirm (IssueConfirmation, the decide update and the
// confirmation signal, ConsumeConfirmation, the expiry timer), execute through the ledger
// (Execute / ExecuteRecorded) and record (Record). It is a turn of one proposal without
// inference: it runs the turn's own code (turn.handleCalls), so approver surfaces decide its
// confirmation as they decide a turn's, and nothing about a call's origin changes the executor.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/registry"
)

// CallWorkflowName is the registered type name of CallWorkflow.
const CallWorkflowName = "CallWorkflow"

// CallWorkflowPrefix starts every call workflow id ("mcp/<client>/<key digest>").
const CallWorkflowPrefix = "mcp/"

// MaxCallArgumentBytes bounds a call's arguments (they travel through workflow history).
const MaxCallArgumentBytes = 256 << 10

// CallRequest starts one call.
type CallRequest struct {
	// Client and Principal are the caller as the MCP server authenticated it.
	Client    string `json:"client"`
	Principal string `json:"principal"`
	// Attestation proves the caller for exactly this call (clients.CallAttestation: signed by
	// the caller's own credential, or by the MCP server's gateway credential after it verified
	// the caller's bearer token). It names the digest of the caller's idempotency key, from
	// which, with the client, principal, tool and arguments, the worker recomputes the workflow
	// id (CallWorkflowID) before anything runs: a call started under another id runs nothing. The bearer token itself never enters the workflow's input:
	// history readers could lift it; an attestation copied from history starts nothing else.
	Attestation *clients.CallAttestation `json:"attestation,omitempty"`
	// Tool is the tool name exactly as the caller sent it (never corrected: an unknown name is
	// rejected at resolve); Arguments its arguments, a JSON object.
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// CallID identifies the call in the audit and the result envelope.
	CallID string `json:"call_id"`
	// ConfirmationTTL is how long a confirmation stays valid (default 5 minutes).
	ConfirmationTTL time.Duration `json:"confirmation_ttl,omitempty"`
}

// ErrBadCall: a CallRequest no caller could have sent.
var ErrBadCall = errors.New("workflows: malformed call request")

// Validate reports what makes r unusable before its call starts.
func (r CallRequest) Validate() error {
	switch {
	case r.Tool == "" || len(r.Tool) > 256:
		return fmt.Errorf("%w: the tool name is empty or over 256 bytes", ErrBadCall)
	case len(r.Arguments) > MaxCallArgumentBytes:
		return fmt.Errorf("%w: arguments over %d bytes", ErrBadCall, MaxCallArgumentBytes)
	case r.Client == "" || r.Principal == "":
		return fmt.Errorf("%w: no client or principal", ErrBadCall)
	case r.ConfirmationTTL < 0:
		return fmt.Errorf("%w: a negative confirmation expiry", ErrBadCall)
	}
	return nil
}

// CallResult is how a call ended.
type CallResult struct {
	WorkflowID string `json:"workflow_id"`
	// Refusal is the refusal code of a caller the worker did not authenticate
	// (clients.Refusal*; Detail says why): nothing was resolved, asked or run.
	Refusal string `json:"refusal,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Outcome is the call's outcome (for an approver's edit: the edited call's, which answers
	// the caller); Outcomes every proposal the call produced, in order.
	Outcome  ProposalOutcome   `json:"outcome"`
	Outcomes []ProposalOutcome `json:"outcomes,omitempty"`
	// Envelope is the tool-result content exactly as a turn's model receives it
	// (activities.Envelope: capability data labelled untrusted, with provenance; Airlock's
	// verdicts labelled as its own).
	Envelope string `json:"envelope"`
	// Result is the capability's result, when it ran (executed, or failed with its error).
	Result *CapabilityResult `json:"result,omitempty"`
	// Citation is the result's citation, when the capability gave one.
	Citation *registry.Citation `json:"citation,omitempty"`
}

// CallWorkflowID is the workflow id of a call: "mcp/<client>/" and 32 hex digits of the SHA-256
// of the principal, the digest of the caller's idempotency key (clients.KeyDigest), the tool
// name and the canonical digest of the arguments (clients.CallID). The same call with the same
// key is the same workflow: a retry attaches to it and never runs the call twice; another tool
// or other arguments under one key are another call.
func CallWorkflowID(client, principal, keyDigest, tool string, args json.RawMessage) string {
	return clients.CallID(CallWorkflowPrefix, client, principal, keyDigest, tool, CallArgsDigest(args))
}

// CallArgsDigest is the digest a call's id and attestation name its arguments by: the
// canonical digest of a JSON object, else "raw:" and the SHA-256 of the bytes (such arguments
// are rejected at validate; they are still one call).
func CallArgsDigest(args json.RawMessage) string {
	digest, err := canonical.Digest(args)
	if err != nil {
		sum := sha256.Sum256(args)
		return "raw:" + hex.EncodeToString(sum[:])
	}
	return digest
}

// SignCall attests req for exactly one call (clients.CallAttestation) with signer at time at and
// returns the call's workflow id, which the attestation names: the caller's own credential
// (bearer nil), or a gateway credential vouching for the caller whose bearer token it verified.
// key is the caller's idempotency key (only its digest is kept). Errors: a credential without
// a key.
func SignCall(signer clients.Credential, req *CallRequest, key string, bearer *clients.Bearer, at time.Time) (string, error) {
	keyDigest := clients.KeyDigest(key)
	claims := clients.CallClaims{Client: req.Client, Principal: req.Principal, KeyDigest: keyDigest, Tool: req.Tool,
		ArgsDigest: CallArgsDigest(req.Arguments)}
	claims.WorkflowID = CallWorkflowID(req.Client, req.Principal, keyDigest, req.Tool, req.Arguments)
	if bearer != nil {
		claims.TokenID, claims.TokenExpires = clients.TokenID(*bearer), bearer.Expires
	}
	att, err := signer.AttestCall(claims, at)
	if err != nil {
		return "", err
	}
	req.Attestation = att
	return claims.WorkflowID, nil
}

// CallStartOptions are the start options of a call: its deterministic id, attached to when it
// runs (USE_EXISTING) and never started twice (REJECT_DUPLICATE: a retry of a finished call
// reads its result), and the operators' search attributes.
func CallStartOptions(id, taskQueue string, req CallRequest) client.StartWorkflowOptions {
	if taskQueue == "" {
		taskQueue = TaskQueue
	}
	return client.StartWorkflowOptions{
		ID: id, TaskQueue: taskQueue, WorkflowTaskTimeout: WorkflowTaskTimeout,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes: temporal.NewSearchAttributes(AttrConversation.ValueSet(id), AttrPrincipal.ValueSet(req.Principal),
			AttrStatus.ValueSet(StatusRunning), AttrPending.ValueSet(0)),
		StaticSummary: summarize("call " + req.Tool + " for " + req.Principal + " (" + req.Client + ")"),
	}
}

// CallWorkflow runs one call (see the file comment). It fails only on a malformed request or
// a store that stays down; every executor outcome, and a refused caller, is a CallResult.
func CallWorkflow(ctx workflow.Context, req CallRequest) (CallResult, error) {
	info := workflow.GetInfo(ctx)
	res := CallResult{WorkflowID: info.WorkflowExecution.ID}
	if err := req.Validate(); err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypeBadInput, err)
	}
	var who activities.VerifyCallerOutput
	argsDigest := CallArgsDigest(req.Arguments) //workflowcheck:ignore canonical JSON of the input: a pure function
	err := workflow.ExecuteLocalActivity(localCtx(ctx, "verify caller "+req.Client), a.VerifyCaller, activities.VerifyCallerInput{
		WorkflowID: res.WorkflowID, RunID: info.WorkflowExecution.RunID, FirstRunID: info.FirstRunID, Attestation: req.Attestation,
		Tool: req.Tool, ArgsDigest: argsDigest, Principal: req.Principal, Client: req.Client,
		StartedAt: info.WorkflowStartTime}).Get(ctx, &who)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeRequesterRefused {
		r := newRequesterRefused(appErr)
		res.Refusal, res.Detail = r.code, r.detail
		res.Envelope = activities.Envelope{Outcome: activities.OutcomeRejected, Stage: "request", Reason: r.code, Detail: r.detail, CallID: req.CallID}.String()
		return res, nil
	} else if err != nil {
		return res, fmt.Errorf("verify the caller: %w", err)
	}
	t := &turn{
		req: TurnRequest{Conversation: res.WorkflowID, Principal: who.Principal, MaxRounds: 1, MaxCalls: 1,
			ConfirmationTTL: req.ConfirmationTTL, Attestation: &Attestation{Client: who.Client}},
		workflowID: res.WorkflowID,
		runID:      info.WorkflowExecution.RunID,
		perCap:     map[string]int{},
		denied:     map[string]bool{},
		catalog:    map[string]activities.CatalogRef{},
		nonces:     map[string]bool{},
		retryIn:    deferredFirstRetry,
		status:     StatusRunning,
		shown:      StatusRunning, // CallStartOptions set it
	}
	t.req.applyDefaults()
	t.result.WorkflowID = t.workflowID
	if err := t.setup(ctx); err != nil {
		return res, err
	}
	// As a turn does: a cancelled call stops at its next step and still records how it ended
	// (its open confirmation closed, the call not run), then reports the cancellation.
	run, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(run, func(gctx workflow.Context) {
		ctx.Done().Receive(gctx, nil)
		if t.stop == "" {
			t.stop = StopCancelled
		}
		t.wake.SendAsync(true)
	})
	call := parse.Call{CallID: req.CallID, Name: req.Tool, Arguments: req.Arguments}
	_, err = t.handleCalls(run, 1, []parse.Call{call})
	if err == nil && t.stop != "" {
		err = t.errStopped()
	}
	t.drainLateSignals(run)
	t.setStatus(run, StatusCompleted)
	t.settle(run)
	res.Outcomes = t.result.Outcomes
	if n := len(res.Outcomes); n > 0 {
		res.Outcome = res.Outcomes[n-1]
		for i := range t.result.Results {
			if r := t.result.Results[i]; r.Seq == res.Outcome.Seq {
				res.Result = &r
			}
		}
	}
	if n := len(t.result.Citations); n > 0 {
		res.Citation = &t.result.Citations[n-1]
	}
	res.Envelope = lastToolMessage(t.messages)
	if err != nil {
		return res, fmt.Errorf("call %s: %w", req.Tool, err)
	}
	return res, nil
}

// lastToolMessage is the content of the last message that answers a call (a tool message, or
// Airlock's own note for a call that could not be answered).
func lastToolMessage(msgs []inference.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.Role == inference.RoleTool || (m.Role == inference.RoleSystem && strings.HasPrefix(m.Content, "airlock: ")) {
			return strings.TrimPrefix(m.Content, "airlock: ")
		}
	}
	return ""
}
