package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/registry"
)

// TaskQueue is the task queue turn workflows and their activities run on.
const TaskQueue = "airlock-turns"

// Update, signal and query names of TurnWorkflow.
const (
	// UpdateDecide carries a Decision and returns its DecisionResult: the caller learns at
	// once whether its decision decided the proposal, was refused (and why) or lost to
	// another approver's. Its validator refuses, without touching any token, a decision for a
	// confirmation that is not pending in this turn.
	UpdateDecide = "decide"
	// SignalConfirmation carries a Decision, for approver surfaces that must deliver while no
	// worker runs (a signal is durable at once); its verdict is audited and recorded by nonce
	// (store.GetNonce) instead of returned.
	SignalConfirmation = "confirmation"
	// QueryPending returns []PendingConfirmation (never tokens).
	QueryPending = "pending"
	// QueryTranscript returns []inference.Message (the turn's context so far).
	QueryTranscript = "transcript"
)

// Search attributes operators filter turns by (registered at dev-server start).
var (
	AttrConversation = temporal.NewSearchAttributeKeyKeyword("AirlockConversation")
	AttrPrincipal    = temporal.NewSearchAttributeKeyKeyword("AirlockPrincipal")
	AttrStatus       = temporal.NewSearchAttributeKeyKeyword("AirlockStatus")
	AttrPending      = temporal.NewSearchAttributeKeyInt64("AirlockPendingConfirmations")
)

// SearchAttributes lists every search attribute with its type, for registration.
func SearchAttributes() map[string]string {
	return map[string]string{
		AttrConversation.GetName(): "Keyword",
		AttrPrincipal.GetName():    "Keyword",
		AttrStatus.GetName():       "Keyword",
		AttrPending.GetName():      "Int",
	}
}

// Turn statuses (AirlockStatus and TurnResult.Status).
const (
	StatusRunning              = "running"
	StatusAwaitingConfirmation = "awaiting-confirmation"
	StatusCompleted            = "completed"
	StatusFailed               = "failed"
)

// TurnStatus is the status a turn really has, from its Temporal execution status and its
// AirlockStatus attribute (empty when unset). The attribute is written by the turn itself, so
// it is true only while the run is open or after the turn ended on its own: a turn terminated
// from outside (an operator's terminate, a namespace timeout) runs no more code, and Temporal
// lets nothing update a closed run's search attributes, so its attribute stays at what the turn
// last wrote ("awaiting-confirmation", say). Every Airlock surface reads status through this
// function: an open run gives the attribute (StatusRunning when unset); a run closed completed
// or failed gives the attribute when it is StatusCompleted or StatusFailed; any other closed
// run gives the execution status in lower case ("terminated", "timed_out", "canceled",
// "continued_as_new"), never a waiting status for a turn nobody can decide any more.
// Visibility queries that select waiting turns add ExecutionStatus = "Running" (QueryAwaiting).
func TurnStatus(exec enumspb.WorkflowExecutionStatus, attr string) string {
	if exec == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || exec == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		if attr == "" {
			return StatusRunning
		}
		return attr
	}
	if attr == StatusCompleted || attr == StatusFailed {
		return attr
	}
	switch exec {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return StatusCompleted
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return StatusFailed
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed_out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued_as_new"
	}
	return "closed"
}

// QueryAwaiting is the Temporal visibility query (list filter) of the turns waiting for a
// human: AirlockStatus "awaiting-confirmation" on a run that is still open. The second clause
// matters: a turn terminated while it waited keeps that attribute forever (TurnStatus).
var QueryAwaiting = fmt.Sprintf(`%s = %q AND ExecutionStatus = "Running"`, AttrStatus.GetName(), StatusAwaitingConfirmation)

// TurnWorkflowID is the workflow id of turn seq of a conversation: "turn/<conversation>/<seq>".
func TurnWorkflowID(conversation string, seq int) string {
	return fmt.Sprintf("turn/%s/%d", conversation, seq)
}

// Infer modes (TurnRequest.InferMode): how a turn runs its inference rounds (DESIGN "Choose
// regular or local activities"; issue 12).
const (
	// InferRegular runs each round as a regular activity: the model's answer is durable the
	// moment it returns (a crash never pays for the call twice) and the call may run for
	// minutes, heartbeating. It costs a server round trip and 6 history events per round. The
	// default for live models: slow, costly calls.
	InferRegular = "regular"
	// InferLocal runs each round as a local activity inside the workflow task, recorded as one
	// marker event: no server round trip, so a turn of fast rounds runs in one workflow task.
	// The trade-off: a worker that dies mid-task loses the rounds not yet recorded, and the
	// next worker asks the model again (one more paid call, possibly a different answer; only
	// the answer that was recorded ever acts), and a round longer than the workflow task
	// timeout costs a task heartbeat (3 events) every 1.6 s. For fast models, or when a rare
	// re-run is acceptable; the default for recorded sessions (deterministic, free).
	InferLocal = "local"
)

// Defaults applied when a TurnRequest leaves a limit at zero.
const (
	DefaultMaxRounds       = 8
	DefaultMaxCalls        = 16
	DefaultConfirmationTTL = 5 * time.Minute
	DefaultContextLimit    = 200
)

// TurnRequest starts one turn.
type TurnRequest struct {
	Conversation string `json:"conversation"`
	Principal    string `json:"principal,omitempty"`
	Message      string `json:"message"`
	// SystemPrompt, when set, opens the context of a conversation's first turn.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Session names a recorded session to replay (served by the replay provider and replay
	// capabilities); empty for a live model.
	Session string `json:"session,omitempty"`
	Model   string `json:"model,omitempty"`
	// InferMode is how inference rounds run (InferRegular, InferLocal; "" = InferLocal for a
	// recorded Session, InferRegular for a live model). See InferLocal for the trade-off.
	InferMode string `json:"infer_mode,omitempty"`
	// MaxRounds caps inference rounds (default 8); MaxCalls is the per-turn capability call
	// budget (default 16), enforced independently of each capability's registry cap.
	MaxRounds int `json:"max_rounds,omitempty"`
	MaxCalls  int `json:"max_calls,omitempty"`
	// ConfirmationTTL is how long a confirmation token stays valid (default 5 minutes).
	ConfirmationTTL time.Duration `json:"confirmation_ttl,omitempty"`
	// Scope, when non-empty, limits the catalog and policy to these capability ids.
	Scope []string `json:"scope,omitempty"`
	// ContextLimit bounds the stored messages loaded into context (default 200).
	ContextLimit int `json:"context_limit,omitempty"`
	// StopOnDivergence ends the turn after a round in which Airlock decided differently from a
	// recorded session (anything but executed, or a capability error the recording itself
	// shows): the recording's later steps assume otherwise.
	StopOnDivergence bool `json:"stop_on_divergence,omitempty"`
	// Attestation is the starter's proof that it asked for this turn, for this principal and
	// message (issue 21): a registered client's signature (internal/clients) over the
	// conversation, the turn's sequence number, Principal, the digest of Message and
	// SystemPrompt, and the time. The worker verifies it before the first inference and ends a
	// turn without one, or with one that does not verify, is stale or speaks for a principal
	// its client may not, as EndUnattested without calling the model. Sign it with
	// SignRequest (the client package and every airlock command do).
	Attestation *Attestation `json:"attestation,omitempty"`
}

// ErrBadInferMode: TurnRequest.InferMode names no infer mode.
var ErrBadInferMode = errors.New("infer mode must be \"regular\", \"local\" or empty")

// Validate reports what makes req unusable before a turn starts: for now an unknown InferMode
// (ErrBadInferMode). Clients call it before starting a turn; the workflow fails a turn whose
// request does not pass.
func (r TurnRequest) Validate() error {
	switch r.InferMode {
	case "", InferRegular, InferLocal:
	default:
		return fmt.Errorf("%w (got %q)", ErrBadInferMode, display.Visible(r.InferMode))
	}
	return nil
}

func (r *TurnRequest) applyDefaults() {
	if r.MaxRounds <= 0 {
		r.MaxRounds = DefaultMaxRounds
	}
	if r.MaxCalls <= 0 {
		r.MaxCalls = DefaultMaxCalls
	}
	if r.ConfirmationTTL <= 0 {
		r.ConfirmationTTL = DefaultConfirmationTTL
	}
	if r.ContextLimit <= 0 {
		r.ContextLimit = DefaultContextLimit
	}
}

// Decisions an approver may send. An edit never changes the proposal it decides: it denies it
// (ReasonEditedByApprover) and the turn goes on with the approver's Decision.Arguments as a
// new, approver-originated proposal that passes stages 1-3 again; the edit is that proposal's
// confirmation (its MAC binds the edited arguments' digest).
const (
	DecisionApprove = activities.DecisionApprove
	DecisionDeny    = activities.DecisionDeny
	DecisionEdit    = activities.DecisionEdit
)

// ReasonEditedByApprover is the outcome reason of a proposal an approver's edit denied.
const ReasonEditedByApprover = activities.ReasonEditedByApprover

// MaxEditArgumentBytes bounds the arguments of an edit (they travel in the decision, through
// workflow history).
const MaxEditArgumentBytes = 64 << 10

// Proposal origins (ProposalOutcome.Origin).
const (
	// OriginModel: the model emitted the call.
	OriginModel = "model"
	// OriginApprover: an approver's edit created the call from a model proposal (EditOf).
	OriginApprover = "approver"
)

// Decision is one approver's decision on one pending confirmation: the payload of UpdateDecide
// and SignalConfirmation. It never carries the confirmation token: MAC is
// token.SignDecision(token, {ConfirmationID, Decision, Approver, Reason, ArgsDigest, Nonce}),
// (and, for an edit, the digest of Arguments), so a copy read from history decides nothing
// else (DESIGN "Tokens"). Build one with
// internal/approval, which opens the sealed token with the approver key.
type Decision struct {
	ConfirmationID string `json:"confirmation_id"`
	// Decision is DecisionApprove, DecisionDeny or DecisionEdit.
	Decision string `json:"decision"`
	// Approver is the approver identity recorded in the audit, as the surface established it
	// (signed in on the approver page; self-declared by a holder of the approver key on the CLI).
	Approver string `json:"approver"`
	// Reason is shown to the model as the refusal detail of a denial.
	Reason string `json:"reason,omitempty"`
	// ArgsDigest is the digest of the arguments the approver was shown (the form's hidden
	// field on the approver page): a decision whose digest differs from the bound proposal's
	// is refused stale_digest, so a stale page never approves changed arguments.
	ArgsDigest string `json:"args_digest,omitempty"`
	// Nonce is fresh per decision (token.NewNonce); the worker records it.
	Nonce string `json:"nonce"`
	// MAC binds every field above and the proposal's argument digest to the current token;
	// for an edit it also binds the canonical digest of Arguments.
	MAC string `json:"mac"`
	// Attestation proves Approver made this decision: an ed25519 signature over the MAC by the
	// approver's own credential (CLI) or by an approver page's surface key, verified by the
	// worker against the approvers file (internal/approvers); without one the decision is
	// refused approver_unauthenticated.
	Attestation approvers.Attestation `json:"attestation"`
	// Arguments are, for DecisionEdit only, the approver's exact arguments (a JSON object of
	// at most MaxEditArgumentBytes); they run as a new proposal.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Passkey is, for a capability whose policy requires it ("approval/passkey"), the
	// approver's WebAuthn assertion (the browser's PublicKeyCredential JSON, at most
	// MaxPasskeyAssertionBytes) whose challenge is MAC: the worker verifies it against the
	// approver's registered passkey (internal/passkey) or refuses the decision
	// (passkey_required, passkey_invalid, passkey_unknown, passkey_replayed).
	Passkey json.RawMessage `json:"passkey,omitempty"`
	// RepeatCount and RepeatMinutes, on an approval only, grant a repeat (issue 37, item 4):
	// the next RepeatCount calls (1..activities.MaxRepeatCalls) of the same capability with the
	// same argument digest, by the same principal in the same conversation, within
	// RepeatMinutes minutes (1..activities.MaxRepeatMinutes), run without asking again, each
	// still admitted (stages 1-3) and audited. Both 0: no grant. The MAC binds them
	// (token.RepeatTerms). Refused (repeat_grant_refused) for a call that needs more than one
	// approval.
	RepeatCount   int `json:"repeat_count,omitempty"`
	RepeatMinutes int `json:"repeat_minutes,omitempty"`
}

// EndIncomplete is the TurnResult.EndReason of a turn whose last message had no call and did
// not end normally (parse.Result.Incomplete: truncated or abnormal_finish): its prose is not
// a finished answer.
const EndIncomplete = "incomplete"

// ErrTypeNotPending is the application error type with which the decide update's validator
// refuses a decision for a confirmation that is not pending in the turn.
const ErrTypeNotPending = "NotPending"

// ErrTypeBadDecision is the application error type with which the decide update's validator
// refuses a malformed decision before it reaches history (an edit without arguments, or with
// more than MaxEditArgumentBytes of them).
const ErrTypeBadDecision = "BadDecision"

// DecisionResult is what UpdateDecide returns: Accepted when the decision decided the
// proposal; otherwise Refusal is a code (not_pending when another decision or the expiry came
// first, decision_mac_invalid, nonce_replayed, approver_is_requester, …) with Detail, and
// Reissued says the proposal got a fresh token and is still waiting for a decision.
type DecisionResult struct {
	Accepted bool   `json:"accepted"`
	Refusal  string `json:"refusal,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Reissued bool   `json:"reissued,omitempty"`
}

// PendingConfirmation is one decision waiting for a human, as the pending query returns it.
type PendingConfirmation struct {
	ConfirmationID string          `json:"confirmation_id"`
	WorkflowID     string          `json:"workflow_id"`
	Seq            int             `json:"seq"`
	CallID         string          `json:"call_id"`
	ToolName       string          `json:"tool_name"`
	CapabilityID   string          `json:"capability_id"`
	Version        int             `json:"version"`
	Arguments      json.RawMessage `json:"arguments"`
	Display        string          `json:"display"`
	ArgsDigest     string          `json:"args_digest"`
	ExpiresAt      time.Time       `json:"expires_at"`
	// Provenance is the JSON report of where each argument value came from (issue 24;
	// internal/provenance), computed by the worker from the stored context when the
	// confirmation was issued; nil for confirmations issued before it existed.
	Provenance json.RawMessage `json:"provenance,omitempty"`
	// Disclosure is where the call sends what, as the registry declares it (description, side
	// effect, destination, hosts as contacted, the declared fields' values): every approver
	// surface shows it. Nil for confirmations issued before it was kept.
	Disclosure *registry.Disclosure `json:"disclosure,omitempty"`
	// Requester is the turn's authenticated requester (issue 21): the principal its request
	// was attested for and the client credential that attested it.
	Requester *Requester `json:"requester,omitempty"`
	// ApproverGroups are the approver groups that may decide it (empty: every approver) and
	// Quorum how many distinct approvals it needs (the capability's policy, issue 21).
	ApproverGroups []string `json:"approver_groups,omitempty"`
	Quorum         int      `json:"quorum,omitempty"`
	// UserRequest is what the user asked in this turn (activities.UserRequestExcerpt of the
	// turn's message): the line the approver reads the call against. Empty for a turn started
	// without a message (a replayed session's request is in its recording).
	UserRequest string `json:"user_request,omitempty"`
	// Approvals are the approvers whose approval counts so far towards Quorum (the store's;
	// surfaces that read the store fill it, the workflow's query leaves it empty).
	Approvals []string `json:"approvals,omitempty"`
	// PasskeyRequired: a decision counts only with the approver's passkey assertion
	// (policy "approval/passkey", issue 21 item 3).
	PasskeyRequired bool `json:"passkey_required,omitempty"`
	// DistinctApprover: only an approver other than the turn's requester may decide it (policy
	// "approval/distinct-approver", four eyes), as the confirmation was issued.
	DistinctApprover bool `json:"distinct_approver,omitempty"`
	// Presentation is the confirmation as every approver surface presents it (the one
	// presentation: user's request, votes so far, status, every hostile string made visible).
	// The turn's pending query leaves it nil; the client package and the application API fill
	// it from the store.
	Presentation *presentation.Confirmation `json:"presentation,omitempty"`
}

// Requester is who asked for a turn, as the worker proved it from the request's attestation.
type Requester struct {
	Principal string `json:"principal"`
	Client    string `json:"client"`
}

// ProposalOutcome is what happened to one proposal.
type ProposalOutcome struct {
	Seq    int    `json:"seq"`
	Round  int    `json:"round"`
	CallID string `json:"call_id,omitempty"`
	// CallIDAssigned reports that CallID was assigned by Airlock (parse.AssignedCallID) because
	// the provider sent the structured call without an id: it is not the model's own.
	CallIDAssigned bool               `json:"call_id_assigned,omitempty"`
	Name           string             `json:"name"`
	CapabilityID   string             `json:"capability_id,omitempty"`
	Version        int                `json:"version,omitempty"`
	Arguments      json.RawMessage    `json:"arguments,omitempty"`
	Outcome        activities.Outcome `json:"outcome"`
	Stage          activities.Stage   `json:"stage,omitempty"`
	Reason         string             `json:"reason,omitempty"`
	Detail         string             `json:"detail,omitempty"`
	ConfirmationID string             `json:"confirmation_id,omitempty"`
	// Approver decided the proposal (approved, denied or edited it); for an approver-originated
	// proposal, the approver whose edit created it.
	Approver string `json:"approver,omitempty"`
	// Origin is OriginModel for a call the model emitted and OriginApprover for one an
	// approver's edit created ("" in results recorded before it was set: the model); EditOf is
	// then the Seq of the model proposal it replaced, whose outcome is denied with
	// ReasonEditedByApprover.
	Origin string `json:"origin,omitempty"`
	EditOf int    `json:"edit_of,omitempty"`
	// Attempts is how many times an idempotent capability was started for this proposal
	// (0 for everything else, which runs at most once).
	Attempts int `json:"attempts,omitempty"`
	// AllowedBy names the policy rule that let a call run without a human when the registry
	// alone would not ("automatic-when-user-provided", or "cedar " and the permitting Cedar
	// policies; issue 37): a rule-allowed call, told apart from a violation. "" otherwise.
	AllowedBy string `json:"allowed_by,omitempty"`
	// Grant, for a call that ran without asking under a repeat grant (issue 37, item 4), names
	// the grant, who granted it and the uses it had left after this one; nil otherwise. The
	// call is confirmed (ConfirmationID, Approver), but no human was asked for it.
	Grant *GrantUse `json:"grant,omitempty"`
}

// GrantUse is one use of a repeat grant (ProposalOutcome.Grant): the grant's id ("rg-…"), the
// approver who granted it and how many uses it has left.
type GrantUse struct {
	ID        string `json:"id"`
	Approver  string `json:"approver"`
	Remaining int    `json:"remaining"`
}

// ToolReportedError reports whether the capability ran and returned its error as data (outcome
// failed without a reason), as opposed to an Execute that never returned (execute_error) or a
// capability that could not produce a result (capability_error). In a replayed session such an
// error is the recording's own, so it is not a divergence.
func (po ProposalOutcome) ToolReportedError() bool {
	return po.Outcome == activities.OutcomeFailed && po.Reason == ""
}

// CapabilityResult is one executed capability's structured result.
type CapabilityResult struct {
	Seq          int             `json:"seq"`
	CapabilityID string          `json:"capability_id"`
	Version      int             `json:"version"`
	Data         json.RawMessage `json:"data"`
	SourceURL    string          `json:"source_url,omitempty"`
	Error        string          `json:"error,omitempty"`
	RetrievedAt  time.Time       `json:"retrieved_at"`
}

// TurnResult is what a turn returns: the model's prose, citations, structured results and
// every proposal's outcome.
type TurnResult struct {
	WorkflowID string `json:"workflow_id"`
	Status     string `json:"status"`
	// EndReason says why the loop stopped: answered, incomplete (EndIncomplete), max_rounds,
	// session_ended, diverged.
	EndReason string              `json:"end_reason"`
	Prose     string              `json:"prose"`
	Citations []registry.Citation `json:"citations"`
	Results   []CapabilityResult  `json:"results"`
	Outcomes  []ProposalOutcome   `json:"outcomes"`
	// EndDetail says more about EndReason where it needs it: for EndUnattested, the refusal
	// code (clients.Refusal*) and why.
	EndDetail string `json:"end_detail,omitempty"`
	Rounds    int    `json:"rounds"`
	Usage     Usage  `json:"usage"`
	// Catalog is the turn's catalog controller when the model used catalog discovery (nil
	// otherwise): its final state and what it used of the per-turn bounds.
	Catalog *CatalogControl `json:"catalog,omitempty"`
}

// EndCatalogStopped is the TurnResult.EndReason of a turn whose catalog controller stopped
// (a refused read, an exhausted catalog bound, a mixed catalog-and-effect message): no further
// inference runs; Catalog.StopReason says why.
const EndCatalogStopped = "catalog_stopped"

// CatalogControl is the catalog controller's state at the end of a turn: completed (an answer
// or an effect proposal followed the reads) or stopped, or still awaiting inference when the
// turn ended otherwise; reads, list pages, inference rounds and catalog bytes used.
type CatalogControl struct {
	State      string `json:"state"`
	Reads      int    `json:"reads"`
	Pages      int    `json:"pages"`
	Rounds     int    `json:"rounds"`
	Bytes      int    `json:"bytes"`
	StopReason string `json:"stop_reason,omitempty"`
}

// Usage is the model tokens a turn used, summed over its inference rounds (as the providers
// reported them). It mirrors internal/inference.Usage field for field (same JSON), so the
// contract names no internal type and results recorded before it decode unchanged.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// HeartbeatTimeout is the heartbeat timeout of the regular activities that may run long
// (Execute, network Infer), which heartbeat every activities.HeartbeatInterval (250 ms, sent at
// once): a worker that died mid-activity is noticed after at most this long, not after the
// StartToClose timeout (issue 20, item 5: every resume within 2 s of a live worker polling).
const HeartbeatTimeout = time.Second

// WorkflowTaskTimeout is the workflow task timeout every client starts turns with: a task
// that was dispatched to a worker that then died is handed to a live worker after this long
// (the server's default is 10 s). Local activities longer than it are kept alive by the SDK.
const WorkflowTaskTimeout = 2 * time.Second

// StartOptions are the options every client starts a turn with: its workflow id, the task
// queue ("" = TaskQueue), the workflow task timeout, StartSearchAttributes and StartMemo.
func StartOptions(id, taskQueue string, req TurnRequest) client.StartWorkflowOptions {
	if taskQueue == "" {
		taskQueue = TaskQueue
	}
	return client.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             taskQueue,
		WorkflowTaskTimeout:   WorkflowTaskTimeout,
		TypedSearchAttributes: StartSearchAttributes(req),
		Memo:                  StartMemo(req),
	}
}

// MemoPreview is the memo key of a turn's message preview (StartMemo).
const MemoPreview = "preview"

// PreviewLimit bounds the memo preview of a turn's message, in runes.
const PreviewLimit = 120

// StartMemo is the memo a turn starts with, for operators reading Temporal's UI: under
// MemoPreview a short preview of the user's message, its hidden runes (controls, bidi and
// invisible characters) shown as <U+XXXX> and cut to PreviewLimit runes
// (display.Summary), so the UI never renders the raw message (DESIGN "Hostile text is shown
// faithfully": Temporal summaries and memos).
func StartMemo(req TurnRequest) map[string]any {
	return map[string]any{MemoPreview: display.Summary(req.Message, PreviewLimit)}
}

// StartSearchAttributes are the search attributes a turn starts with: its conversation and
// principal, status running and no pending confirmations (the workflow upserts the last two as
// it goes). Every client that starts turns uses it, so operators can filter all of them alike.
func StartSearchAttributes(req TurnRequest) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		AttrConversation.ValueSet(req.Conversation),
		AttrPrincipal.ValueSet(req.Principal),
		AttrStatus.ValueSet(StatusRunning),
		AttrPending.ValueSet(0))
}
