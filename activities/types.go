package activities

import (
	"encoding/json"
	"time"

	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
)

// Outcome is the final disposition of one proposal; every outcome is audited exactly once.
type Outcome string

// Outcomes (DESIGN vocabulary).
const (
	OutcomeExecuted        Outcome = "executed"
	OutcomeRejected        Outcome = "rejected"
	OutcomeDenied          Outcome = "denied"
	OutcomeExpired         Outcome = "expired"
	OutcomeParseFailed     Outcome = "parse_failed"
	OutcomeBudgetExhausted Outcome = "budget_exhausted"
	OutcomeCaptured        Outcome = "captured"
	// OutcomeUnknown: an effect started but its result was lost (a crash mid-execute); it is
	// reported, never silently re-run.
	OutcomeUnknown Outcome = "outcome_unknown"
	// OutcomeFailed: the capability ran and returned an error (reported to the model as data).
	OutcomeFailed Outcome = "failed"
)

// Stage is an executor stage name (RFC-0004 six stages).
type Stage string

// Executor stages.
const (
	StageParse    Stage = "parse"
	StageBudget   Stage = "budget"
	StageResolve  Stage = "resolve"
	StageValidate Stage = "validate"
	StagePolicy   Stage = "policy"
	StageConfirm  Stage = "confirm"
	StageExecute  Stage = "execute"
	StageRecord   Stage = "record"
	// StageCatalog is the turn's catalog controller (issue 14): a catalog read refused by its
	// transitions (a mixed catalog-and-effect message, reads after the controller ended, a
	// read the policy would not run automatically), never by the three gates.
	StageCatalog Stage = "catalog"
)

// AuditKind distinguishes outcome rows from refused confirmation attempts and edits.
const (
	AuditConfirmationRefused = "confirmation_refused"
	// AuditApprovalCounted: a valid approval counted towards the capability's quorum
	// ("approval/quorum"); the call waits for more (Reason QuorumPending). It is no refusal:
	// the approver's decision stands, in confirmation_approvals too.
	AuditApprovalCounted = "approval_counted"
	// AuditProposalEdited: an approver's edit created a proposal (the row's Seq) from a model
	// proposal; the row carries both digests (ArgsDigest the edited arguments',
	// OriginalDigest the model's) and the approver.
	AuditProposalEdited = "proposal_edited"
	// AuditConfirmationIssued: the call was put to people (stage confirm): its confirmation
	// was issued, bound to the argument digest, with who may decide (groups), how many must
	// approve (quorum) and when it expires in Detail. Written once per confirmation (key
	// "issued/<confirmation id>"), before any notice or page shows it, so the audit says when
	// the human step began as well as how it ended (issue 34, item 3).
	AuditConfirmationIssued = "confirmation_issued"
)

// CatalogRef is what the workflow needs from the catalog advertised for one round: the tool
// name, the entry it maps to and its per-turn cap (budgets are enforced in workflow code).
type CatalogRef struct {
	Name         string `json:"name"`
	CapabilityID string `json:"capability_id"`
	Version      int    `json:"version"`
	PerTurnCap   int    `json:"per_turn_cap"`
	// Kind is KindProposal for an agent proposal tool ("" for a capability).
	Kind string `json:"kind,omitempty"`
}

// InferInput is one inference round. The context is not carried in the input: Infer loads it
// from the conversation store, where Record has already put every message of the turn. This
// keeps the history linear in the turn's length instead of quadratic, and keeps large tool
// results out of activity payloads (Temporal bounds each payload at 2 MB).
type InferInput struct {
	WorkflowID   string `json:"workflow_id"`
	Round        int    `json:"round"`
	Model        string `json:"model,omitempty"`
	Session      string `json:"session,omitempty"`
	Conversation string `json:"conversation"`
	// ContextLimit bounds the stored messages sent to the model.
	ContextLimit int `json:"context_limit"`
	// Scope limits the catalog to these capability ids (empty: every model-visible entry).
	Scope []string `json:"scope,omitempty"`
	// Now is the workflow's clock at the round: the catalog leaves out deprecated entries past
	// their deadline as of it. Zero: the activity's clock.
	Now time.Time `json:"now,omitzero"`
	// Fold, when set, folds the steps around the round into Infer (FoldedRound).
	Fold *InferFold `json:"fold,omitempty"`
}

// InferOutput is the raw provider response plus the catalog refs advertised with it.
type InferOutput struct {
	Response inference.Response `json:"response"`
	Catalog  []CatalogRef       `json:"catalog"`
	// RegistryRevision is the registry revision the catalog was generated from.
	RegistryRevision string `json:"registry_revision"`
	// ProposalSnapshot is the id of the stored context snapshot the round's proposal tools
	// were offered from ("" when none was offered).
	ProposalSnapshot string `json:"proposal_snapshot,omitempty"`
	// Folded is what a folded round did besides inferring (InferInput.Fold).
	Folded *FoldedRound `json:"folded,omitempty"`
}

// ParseInput is one raw response to parse strictly.
type ParseInput struct {
	Response inference.Response `json:"response"`
	Catalog  []CatalogRef       `json:"catalog"`
	// Round is the 1-based inference round the response answers; it enters the ids Airlock
	// assigns to structured calls sent without one (parse.AssignedCallID). 0 in inputs
	// recorded before it was carried.
	Round int `json:"round,omitempty"`
	// WorkflowID is the turn's workflow id; its parse.TurnToken enters assigned ids, so they do
	// not repeat across the turns of a conversation ("" in inputs recorded before it was carried).
	WorkflowID string `json:"workflow_id,omitempty"`
}

// AdmitInput is one candidate for stages 1-3.
type AdmitInput struct {
	Call  parse.Call `json:"call"`
	Scope []string   `json:"scope,omitempty"`
	// Principal is the turn's requester, checked against the authorization policy (stage 3).
	Principal string `json:"principal,omitempty"`
	// Now is the workflow's clock at the proposal (workflow.Now): deprecation deadlines are
	// judged on it. Zero (inputs recorded before it was carried): the activity's clock.
	Now time.Time `json:"now,omitzero"`
	// WorkflowID, RunID and Seq identify the proposal, for the deprecated_admitted audit row.
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	Seq        int    `json:"seq,omitempty"`
	// UserProvided, when set, answers for the automatic-when-user-provided policy whether
	// every value of the given top-level argument fields (all when nil) appears in the
	// principal's own messages (the Admit activity computes it from the stored context; nil:
	// the policy confirms). Never serialized: workflows cannot pass code.
	UserProvided func(fields []string) bool `json:"-"`
	// Calls is how many capability calls the turn made before this one (the Cedar policy's
	// context.turn.calls).
	Calls int `json:"calls,omitempty"`
	// Provenance, when set, computes the provenance of the call's arguments for the Cedar
	// policy (the Admit activity reads the stored context; nil: every origin is none, so no
	// rule over provenance permits). Groups are the principal's groups (the approvers file).
	// Never serialized.
	Provenance func() provenance.Report `json:"-"`
	Groups     []string                 `json:"-"`
}

// AuditDeprecatedAdmitted is the audit kind of a deprecated capability admitted before its
// removal/deadline (the operator-visible warning P072 asks for).
const AuditDeprecatedAdmitted = "deprecated_admitted"

// AuditMessageIncomplete is the audit kind of a model message refused as a whole: a refusal,
// a provider error, an unread part, a stream fault, or an end that is not normal (Reason is
// the parse reason, Detail names what was refused). One per round at most.
const AuditMessageIncomplete = "message_incomplete"

// Admission is the result of stages 1-3. When Admitted is false, Stage and Code say where and
// why the candidate was rejected.
type Admission struct {
	Admitted     bool                `json:"admitted"`
	Stage        Stage               `json:"stage,omitempty"`
	Code         string              `json:"code,omitempty"`
	Detail       string              `json:"detail,omitempty"`
	CapabilityID string              `json:"capability_id,omitempty"`
	Version      int                 `json:"version,omitempty"`
	SideEffect   registry.SideEffect `json:"side_effect,omitempty"`
	Network      registry.Network    `json:"network,omitempty"`
	// Automatic is true only for local, read-only capabilities, or for a capability without
	// side effect whose policy is automatic-when-user-provided and whose leaving argument values
	// all appear in the principal's own messages (UserProvided).
	Automatic bool `json:"automatic"`
	// UserProvided: Automatic because of the automatic-when-user-provided policy (issue 24);
	// Execute checks it again on the stored context before it runs the call.
	UserProvided bool `json:"user_provided,omitempty"`
	// DistinctApprover requires an approver other than the turn's principal (from the
	// authorization policy).
	DistinctApprover bool `json:"distinct_approver,omitempty"`
	// Warning is set when a deprecated capability was admitted before its deadline.
	Warning string `json:"warning,omitempty"`
	// ArgsDigest is the hex SHA-256 of the canonical arguments (the confirmation binding).
	ArgsDigest string `json:"args_digest,omitempty"`
	// Display is the literal, human-readable form of the call shown to approvers.
	Display string        `json:"display,omitempty"`
	Timeout time.Duration `json:"timeout,omitempty"`
	// Cedar is the Cedar policy's verdict when the registry serves one (issue 37): permit
	// made the call automatic, forbid rejected it (Code PolicyForbidden), ask sent it to a
	// confirmation decided by Cedar.Groups and Cedar.Quorum.
	Cedar *CedarVerdict `json:"cedar,omitempty"`
	// Shadow is the candidate Cedar policy's would-be verdict (AIRLOCK_CEDAR_SHADOW), recorded
	// in the audit and never acted on; nil when no candidate runs.
	Shadow *CedarVerdict `json:"shadow,omitempty"`
	// facts is the policy request the verdicts were made on (for the shadow audit row).
	facts *cedarpolicy.Request
	// RegistryRevision is what the admission is bound to: the capability's registry
	// Fingerprint (entry, policy entry, principals' grants, argument schema) when it resolved,
	// else the whole registry's revision. A confirmation issued and an execution run under
	// another fingerprint are refused registry_changed.
	RegistryRevision string `json:"registry_revision,omitempty"`
}

// Key is "id@version".
func (a Admission) Key() string { return keyOf(a.CapabilityID, a.Version) }

// IssueInput asks for a confirmation token for one admitted candidate.
type IssueInput struct {
	// Cedar is the admission's Cedar verdict (an ask): its groups and quorum decide the
	// confirmation instead of the JSON policy entry's (nil: the JSON policy's).
	Cedar      *CedarVerdict `json:"cedar,omitempty"`
	WorkflowID string        `json:"workflow_id"`
	// Conversation is the turn's conversation, whose context provenance reads ("" for inputs
	// recorded before it was carried: the one the workflow id holds).
	Conversation string          `json:"conversation,omitempty"`
	RunID        string          `json:"run_id"`
	Seq          int             `json:"seq"`
	CallID       string          `json:"call_id"`
	CapabilityID string          `json:"capability_id"`
	Version      int             `json:"version"`
	ArgsDigest   string          `json:"args_digest"`
	Arguments    json.RawMessage `json:"arguments"`
	Display      string          `json:"display"`
	TTL          time.Duration   `json:"ttl"`
	// RegistryRevision is the revision the candidate was admitted under; the confirmation is
	// bound to it ("" for inputs recorded before it was carried: the worker's own revision).
	RegistryRevision string `json:"registry_revision,omitempty"`
	// Surfaced counts how often this proposal was surfaced again because the registry
	// changed under an earlier confirmation (0 the first time); each time gets its own
	// confirmation id.
	Surfaced int `json:"surfaced,omitempty"`
	// Principal is the turn's principal: with Conversation, the scope in which a repeat grant
	// (issue 37, item 4) may answer this confirmation instead of a human.
	Principal string `json:"principal,omitempty"`
	// Requester is the client credential that started the turn (its attestation): a repeat
	// grant never answers a call of a requester who is its own approver where the policy
	// asks for four eyes.
	Requester string `json:"requester,omitempty"`
}

// IssueOutput names the confirmation. It never carries the token: the token is sealed for
// approvers in the store and never enters workflow state or model context.
type IssueOutput struct {
	ConfirmationID string    `json:"confirmation_id"`
	ExpiresAt      time.Time `json:"expires_at"`
	// Provenance is the confirmation's provenance report (issue 24), for the pending query.
	Provenance json.RawMessage `json:"provenance,omitempty"`
	// Disclosure is where the call sends what, from the registry it was admitted under (nil
	// when the capability is no longer registered): what every approver surface shows.
	Disclosure *registry.Disclosure `json:"disclosure,omitempty"`
	// ApproverGroups and Quorum are who may decide it and how many approvals it needs, from
	// the capability's policy when issued (issue 21), for the pending query.
	ApproverGroups []string `json:"approver_groups,omitempty"`
	Quorum         int      `json:"quorum,omitempty"`
	// PasskeyRequired: a decision counts only with the approver's passkey assertion
	// (policy "approval/passkey", issue 21 item 3).
	PasskeyRequired bool `json:"passkey_required,omitempty"`
	// DistinctApprover: only an approver other than the turn's requester may decide it (policy
	// "approval/distinct-approver", four eyes), as the stored confirmation was issued.
	DistinctApprover bool `json:"distinct_approver,omitempty"`
	// Granted: a repeat grant (issue 37, item 4) answered this confirmation. It is recorded
	// approved by Approver (store: reason "repeat grant <id>"), and the call runs without a
	// human; GrantID names the grant and GrantRemaining the uses left after this one.
	Granted        bool   `json:"granted,omitempty"`
	GrantID        string `json:"grant_id,omitempty"`
	Approver       string `json:"approver,omitempty"`
	GrantRemaining int    `json:"grant_remaining,omitempty"`
}

// ConsumeInput presents one decision to the confirmation the workflow is waiting on, with the
// binding the workflow expects. The decision carries a MAC, never the token.
type ConsumeInput struct {
	// Cedar is the admission's Cedar verdict (an ask), whose groups and quorum decide who
	// may approve and how many approvals the call needs (nil: the JSON policy entry's).
	Cedar          *CedarVerdict `json:"cedar,omitempty"`
	ConfirmationID string        `json:"confirmation_id"`
	WorkflowID     string        `json:"workflow_id"`
	RunID          string        `json:"run_id"`
	Seq            int           `json:"seq"`
	CapabilityID   string        `json:"capability_id"`
	Version        int           `json:"version"`
	ArgsDigest     string        `json:"args_digest"`
	// Presentation identifies this presentation (deterministic in the workflow), so a retry
	// of the consume whose reply was lost is told apart from a replayed decision.
	Presentation string `json:"presentation,omitempty"`
	// The decision as presented: approve or deny, by whom, why, its nonce and its MAC
	// (token.SignDecision).
	Decision string `json:"decision,omitempty"`
	Approver string `json:"approver,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Nonce    string `json:"nonce,omitempty"`
	MAC      string `json:"mac,omitempty"`
	// DisplayedDigest is the argument digest the approver was shown ("" from surfaces that
	// predate it: then the bound digest is assumed); Attestation proves the approver.
	DisplayedDigest string                `json:"displayed_digest,omitempty"`
	Attestation     approvers.Attestation `json:"attestation,omitzero"`
	// Arguments are an edit's arguments (DecisionEdit only); the MAC binds their canonical
	// digest, which the consumer computes itself.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Passkey is the approver's WebAuthn assertion over MAC (workflows.Decision.Passkey),
	// required by a capability whose policy says "approval/passkey".
	Passkey json.RawMessage `json:"passkey,omitempty"`
	// Principal is the turn's attested principal and Requester the client credential that
	// started the turn (proven on round 1, issue 21); DistinctApprover is the capability's
	// four-eyes rule, which compares the approver with both (clients.SamePerson).
	Principal        string `json:"principal,omitempty"`
	Requester        string `json:"requester,omitempty"`
	DistinctApprover bool   `json:"distinct_approver,omitempty"`
	// RepeatCount and RepeatMinutes are an approval's repeat grant (workflows.Decision;
	// issue 37, item 4), 0 for none; Conversation scopes the grant (with Principal).
	RepeatCount   int    `json:"repeat_count,omitempty"`
	RepeatMinutes int    `json:"repeat_minutes,omitempty"`
	Conversation  string `json:"conversation,omitempty"`
}

// Decisions an approver may present (ConsumeInput.Decision). An edit is judged like an
// approval (of the edited arguments: four-eyes rule, registry revision) and decides the
// proposal as denied with ReasonEditedByApprover.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	DecisionEdit    = "edit"
)

// ReasonEditedByApprover is the reason a proposal an approver's edit replaced is denied with.
const ReasonEditedByApprover = store.ReasonEditedByApprover

// MaxEditArgumentBytes bounds an edit's arguments (they travel through workflow history).
const MaxEditArgumentBytes = 64 << 10

// Refusal codes of a presented decision (audited as confirmation_refused; also the verdict an
// approver surface reads back).
const (
	// RefusalNotPending: the confirmation is not the one pending (unknown, decided, expired).
	RefusalNotPending    = "not_pending"
	TokenReplayed        = "token_replayed"
	TokenBindingMismatch = "token_binding_mismatch"
	TokenExpired         = "token_expired"
	// TokenRegistryChanged: the registry revision changed between issue and approval.
	TokenRegistryChanged = "registry_changed"
	// DecisionMACInvalid: the MAC does not verify under the confirmation's current token.
	DecisionMACInvalid = "decision_mac_invalid"
	// NonceMissing / NonceReplayed: a decision needs a fresh nonce, used once.
	NonceMissing  = "nonce_missing"
	NonceReplayed = "nonce_replayed"
	// ApproverMissing, BadDecision, ApproverIsRequester: an authenticated decision that is
	// not acceptable (no approver, neither approve nor deny, four-eyes rule broken).
	ApproverMissing     = "approver_missing"
	BadDecision         = "bad_decision"
	ApproverIsRequester = "approver_is_requester"
	// ApproverUnauthenticated: the decision's attestation does not prove its approver
	// (missing, unknown signer, bad signature, approver not in the approvers file).
	ApproverUnauthenticated = "approver_unauthenticated"
	// StaleDigest: the approver was shown other arguments than the proposal is bound to.
	StaleDigest = "stale_digest"
)

// AuditTokenReissued is the audit kind of a fresh token issued to a proposal whose token a
// refused decision consumed.
const AuditTokenReissued = "token_reissued"

// ConsumeOutput says whether the presented decision decides the waiting proposal. When it
// does not, Refusal is one of the refusal codes, Detail says why, and Reissued reports that
// the proposal got a fresh token (Generation) and stays decidable.
type ConsumeOutput struct {
	Valid      bool   `json:"valid"`
	Refusal    string `json:"refusal,omitempty"`
	Detail     string `json:"detail,omitempty"`
	Reissued   bool   `json:"reissued,omitempty"`
	Generation int    `json:"generation,omitempty"`
	// EditedDigest is, for a valid edit, the canonical digest of the edited arguments the MAC
	// authorized (recorded on the confirmation; ConfirmEdit checks the new proposal against it).
	EditedDigest string `json:"edited_digest,omitempty"`
}

// ConfirmEditInput asks for the confirmation of the proposal an approver's edit created (Seq),
// from the model proposal it replaced (EditOf, whose confirmation Original an edit decided),
// as stages 1-3 admitted it.
type ConfirmEditInput struct {
	WorkflowID   string          `json:"workflow_id"`
	RunID        string          `json:"run_id"`
	Seq          int             `json:"seq"`
	EditOf       int             `json:"edit_of"`
	Original     string          `json:"original"`
	CallID       string          `json:"call_id"`
	CapabilityID string          `json:"capability_id"`
	Version      int             `json:"version"`
	ArgsDigest   string          `json:"args_digest"`
	Arguments    json.RawMessage `json:"arguments"`
	Display      string          `json:"display"`
	Approver     string          `json:"approver"`
	// RegistryRevision is the revision the edited proposal was admitted under.
	RegistryRevision string `json:"registry_revision,omitempty"`
}

// ConfirmEditOutput names the edited proposal's confirmation, recorded as approved by the
// editor; when Confirmed is false nothing was recorded and Detail says why (the store does not
// show the original decided by this approver's edit of exactly these arguments).
type ConfirmEditOutput struct {
	Confirmed      bool   `json:"confirmed"`
	ConfirmationID string `json:"confirmation_id,omitempty"`
	Detail         string `json:"detail,omitempty"`
}

// ExecuteInput is stage 5 for one authorized candidate.
type ExecuteInput struct {
	WorkflowID string `json:"workflow_id"`
	Seq        int    `json:"seq"`
	// Round is the inference round that proposed the call (0 in inputs recorded before it was
	// carried); replay capabilities find the recorded result by it.
	Round        int             `json:"round,omitempty"`
	CallID       string          `json:"call_id"`
	CapabilityID string          `json:"capability_id"`
	Version      int             `json:"version"`
	Arguments    json.RawMessage `json:"arguments"`
	Session      string          `json:"session,omitempty"`
	// ConfirmationID names the approved confirmation of a confirmed call ("" for automatic
	// ones). Execute runs a confirmed call only when the store records that confirmation as
	// approved for this very proposal and arguments (defense in depth: workflow history alone
	// is not proof of a human decision).
	ConfirmationID string `json:"confirmation_id,omitempty"`
	// RegistryRevision is the revision the candidate was admitted (and, when confirmed,
	// approved) under. A worker on another revision refuses to run it: its side-effect class
	// and policy may differ from what was checked. "" for inputs recorded before it was carried.
	RegistryRevision string `json:"registry_revision,omitempty"`
	// Principal and Scope are the turn's principal and capability scope (TurnRequest), handed
	// to the capability as host context (registry.Invocation): catalog reads derive the
	// caller's visibility from them, never from the model's arguments.
	Principal string   `json:"principal,omitempty"`
	Scope     []string `json:"scope,omitempty"`
	// Calls is the turn's calls before this one (AdmitInput.Calls), for Execute's own Cedar check.
	Calls int `json:"calls,omitempty"`
}

// ExecuteOutput is the capability result. Outcome is executed, failed (the capability reported
// an error, passed to the model as data) or outcome_unknown (an earlier attempt started the
// effect and its result was lost: never re-run).
type ExecuteOutput struct {
	Outcome     Outcome         `json:"outcome"`
	Output      registry.Output `json:"output"`
	RetrievedAt time.Time       `json:"retrieved_at"`
	// Reason is the code of a refusal to run (Outcome rejected), e.g. registry_changed, or
	// ReasonCapabilityError for a failed call whose capability returned a Go error rather than
	// reporting the error as data.
	Reason string `json:"reason,omitempty"`
	// Attempts is how many times an idempotent capability was started for this proposal (set
	// only for capabilities the registry declares idempotent; 0 otherwise: at most once).
	Attempts int `json:"attempts,omitempty"`
}

// ReasonExecuteError marks a failed outcome whose Execute activity itself failed (every retry,
// or bad input refused before the capability ran): no result came back at all.
const ReasonExecuteError = "execute_error"

// ReasonNotApproved marks a confirmed call Execute refused to run because the store does not
// record an approval of this proposal with these arguments.
const ReasonNotApproved = "not_approved"

// ReasonCapabilityError marks a failed outcome whose capability returned an error (it could
// not produce a result, e.g. a replay with no recording for the call), as opposed to a result
// that reports an error as data (Output.Error, e.g. a recorded ValidationError).
const ReasonCapabilityError = "capability_error"

// AuditRecord is one audit row as the workflow describes it.
type AuditRecord struct {
	Kind         string `json:"kind"` // an Outcome or AuditConfirmationRefused
	WorkflowID   string `json:"workflow_id"`
	RunID        string `json:"run_id"`
	Seq          int    `json:"seq"`
	Attempt      int    `json:"attempt,omitempty"`
	CallID       string `json:"call_id,omitempty"`
	CapabilityID string `json:"capability_id,omitempty"`
	Version      int    `json:"version,omitempty"`
	Stage        Stage  `json:"stage,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Detail       string `json:"detail,omitempty"`
	ArgsDigest   string `json:"args_digest,omitempty"`
	Approver     string `json:"approver,omitempty"`
	// OriginalDigest is set on a proposal_edited row: the digest of the arguments the edit replaced.
	OriginalDigest string `json:"original_digest,omitempty"`
}

// Decision records a confirmation's final decision in the store.
type Decision struct {
	ConfirmationID string `json:"confirmation_id"`
	Decision       string `json:"decision"` // approved | denied | expired
	Approver       string `json:"approver,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// RecordInput is stage 6: the audit row, the confirmation decision (if any) and the context
// messages to persist in the conversation store, all idempotent.
type RecordInput struct {
	Audit        *AuditRecord        `json:"audit,omitempty"`
	Decision     *Decision           `json:"decision,omitempty"`
	Conversation string              `json:"conversation"`
	ContextKey   string              `json:"context_key,omitempty"`
	Messages     []inference.Message `json:"messages,omitempty"`
	// Replace: a message already stored under the key takes these contents (store.Recording).
	Replace bool `json:"replace,omitempty"`
}

// AuditTurnFailed is the audit kind of a turn that ended failed (FinishTurn): its reason is
// "error" with the error in the detail, or the stop that ended it (cancelled, history_limit).
// Its row has no proposal (seq 0).
const AuditTurnFailed = "turn_failed"

// FinishInput persists the TurnResult.
type FinishInput struct {
	WorkflowID string `json:"workflow_id"`
	// RunID is the run that ends (a failed run's audit row names it; a workflow retry's next
	// run is audited apart).
	RunID        string          `json:"run_id,omitempty"`
	Conversation string          `json:"conversation"`
	Result       json.RawMessage `json:"result"`
}
