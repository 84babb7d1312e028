package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/recording"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
)

// Application error types that workflows branch on (temporal.ApplicationError.Type()).
const (
	ErrTypeSessionExhausted = "SessionExhausted"
	ErrTypeProviderRejected = "ProviderRejected"
	// ErrTypeResponseTooLarge: the model's answer is over inference.MaxResponseBytes; it
	// is refused once, never asked again.
	ErrTypeResponseTooLarge = "ResponseTooLarge"
	ErrTypeBadInput         = "BadInput"
	// ErrTypeUnsupportedRecording: the replay provider refused a recording one turn cannot
	// serve faithfully (recording.ErrUnsupported: a second user message, an assistant message
	// before the user's task). Non-retryable; the turn fails with the reason, never "answered".
	ErrTypeUnsupportedRecording = "UnsupportedRecording"
)

// Activities holds the dependencies of every activity. Fields are set once at worker start.
type Activities struct {
	// Registry is the registry served when Served is nil (tests, tools).
	Registry *registry.Registry
	// Served, when set, is the live registry this worker serves (reloaded without a restart);
	// every activity takes one snapshot of it and uses that throughout.
	Served *registry.Live
	Store  *store.Store
	// Live serves turns without a Session; Replay serves turns with one. Either may be nil,
	// in which case such turns fail with a non-retryable error that says what to configure.
	Live   inference.Provider
	Replay inference.Provider
	// ApproverKey seals tokens for approver surfaces.
	ApproverKey token.Key
	// Approvers returns the approvers file decisions are authenticated against
	// (approvers.NewSource(path).Current, or approvers.Static). Nil, or an error from it,
	// refuses every decision approver_unauthenticated: nobody is proven, nothing is approved.
	Approvers func() (*approvers.Set, error)
	// Clients returns the clients file turn requests are authenticated against
	// (clients.NewSource(path).Current, or clients.Static). Nil, or an error from it, refuses
	// every turn before its first inference (clients_unavailable): nobody is proven, nothing
	// runs.
	Clients func() (*clients.Set, error)
	// Now is the clock (time.Now when nil); tests may fix it.
	Now func() time.Time
	// Memory is the memory root agent memory proposals bind to and materialize into (zero:
	// request_memory_change is never offered).
	Memory proposals.Memory
	// Events writes the turn's client-stream events (internal/stream; zero: none, and Infer
	// asks the model unstreamed). Set, Infer consumes the provider's stream.
	Events stream.Writer
	// Notices, when set, is told of every confirmation issued (notify.Outbox: webhook, Slack and
	// e-mail notices through the store's outbox, issue 23); nil sends none.
	Notices Notifier
	// Passkeys is the relying party passkey assertions are verified against (the approver
	// page's RP id and origins, passkey.FromEnv; zero: "localhost" on any loopback port).
	Passkeys passkey.Config
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

// reg is the registry this activity runs against: one snapshot of Served, else Registry.
func (a *Activities) reg() *registry.Registry {
	if a.Served != nil {
		return a.Served.Current()
	}
	return a.Registry
}

func keyOf(id string, version int) string { return fmt.Sprintf("%s@%d", id, version) }

// loadWindow reads the last limit messages of a conversation. A window that starts inside a
// tool exchange drops the leading tool results, whose assistant message fell outside it
// (providers reject a tool message that answers no call). The conversation's system prompt
// (its first entry, when a system message) always leads: a conversation longer than the
// window keeps its instructions, and the prompt takes one of the window's limit places; prompt
// reports that the first message is that system prompt. Entries whose key stale reports (nil: none) are deleted first: they are the
// newest of the conversation, so they show in the window if they exist.
func (a *Activities) loadWindow(ctx context.Context, conversation string, limit int, stale func(key string) bool) (msgs []inference.Message, prompt bool, err error) {
	var entries []store.ContextEntry
	for {
		entries, err = a.Store.LoadContext(ctx, conversation, limit)
		if err != nil {
			return nil, false, fmt.Errorf("load context of %q: %w", conversation, err)
		}
		var discard []string
		for _, e := range entries {
			if stale != nil && stale(e.Key) {
				discard = append(discard, e.Key)
			}
		}
		if len(discard) == 0 {
			break
		}
		if err := a.Store.DeleteContext(ctx, conversation, discard); err != nil {
			return nil, false, err
		}
	}
	var pinned *inference.Message
	// atStart: entries[0] is the conversation's first entry.
	atStart := limit <= 0 || len(entries) < limit
	if limit > 0 && len(entries) == limit {
		// The window may have cut the conversation's start: one query, only for long ones.
		first, ok, err := a.Store.FirstContext(ctx, conversation)
		if err != nil {
			return nil, false, fmt.Errorf("load context of %q: %w", conversation, err)
		}
		atStart = ok && first.ID == entries[0].ID
		if ok && !atStart {
			var m inference.Message
			if err := json.Unmarshal(first.Payload, &m); err != nil {
				return nil, false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("stored context entry %d is not a message", first.ID), ErrTypeBadInput, err)
			}
			if m.Role == inference.RoleSystem {
				pinned = &m
				entries = entries[1:]
			}
		}
	}
	out := make([]inference.Message, 0, len(entries)+1)
	if pinned != nil {
		out = append(out, *pinned)
	}
	rest := len(out)
	for i, e := range entries {
		var m inference.Message
		if err := json.Unmarshal(e.Payload, &m); err != nil {
			return nil, false, temporal.NewNonRetryableApplicationError(fmt.Sprintf("stored context entry %d is not a message", e.ID), ErrTypeBadInput, err)
		}
		if len(out) == rest && m.Role == inference.RoleTool {
			continue
		}
		// A window that starts at the conversation's first entry leads with its prompt.
		if i == 0 && atStart && m.Role == inference.RoleSystem {
			prompt = true
		}
		out = append(out, m)
	}
	return out, prompt || pinned != nil, nil
}

// Infer generates the catalog from the registry now, sends the bounded context to the model
// and returns its raw response, unparsed.
func (a *Activities) Infer(ctx context.Context, in InferInput) (InferOutput, error) {
	// Heartbeat through the whole round, store writes included: a folded round also loads,
	// records and admits, and a store that is slow to answer must not look like a dead worker.
	stop := keepAlive(ctx)
	defer stop()
	leaveDeadWorker(ctx)
	var allow func(string) bool
	if len(in.Scope) > 0 {
		allow = func(id string) bool { return slices.Contains(in.Scope, id) }
	}
	reg := a.reg()
	now := in.Now
	if now.IsZero() {
		now = a.now()
	}
	cat := reg.Catalog(allow, now)
	var msgs []inference.Message
	var err error
	if in.Fold == nil {
		// Every turn folds its rounds (issue 20: one code path).
		return InferOutput{}, temporal.NewNonRetryableApplicationError("infer: the input has no fold (InferInput.Fold)", ErrTypeBadInput, nil)
	}
	if in.Fold.Opening {
		// The requester is proven before the user's message is stored or the model is asked.
		if err := a.verifyRequester(ctx, in); err != nil {
			return InferOutput{}, err
		}
		msgs, err = a.foldOpening(ctx, in)
	} else {
		msgs, _, err = a.loadWindow(ctx, in.Conversation, in.ContextLimit, in.Fold.unrecorded(in))
	}
	if err != nil {
		return InferOutput{}, err
	}
	p := a.Live
	if in.Session != "" {
		p = a.Replay
	}
	if p == nil {
		what := "a live model (set AIRLOCK_OPENAI_BASE_URL, or AIRLOCK_ANTHROPIC_API_KEY / AIRLOCK_ANTHROPIC_BASE_URL)"
		if in.Session != "" {
			what = "replay sessions (start the worker with a corpus)"
		}
		return InferOutput{RegistryRevision: reg.Revision()}, temporal.NewNonRetryableApplicationError("this worker is not configured for "+what, ErrTypeBadInput, nil)
	}
	o, err := a.buildOffer(ctx, in, reg, allow, now)
	if err != nil {
		return InferOutput{RegistryRevision: reg.Revision()}, err
	}
	// At most twice: a second time only when an earlier attempt of this round stored another
	// snapshot (keepOffer), whose offer the round is then asked with.
	var spent inference.Usage // of an answer asked again: its tokens were paid for all the same
	for asked := 1; ; asked++ {
		out, err := a.inferWith(ctx, p, in, reg, cat, msgs, o, asked)
		out.Response.Usage.InputTokens += spent.InputTokens
		out.Response.Usage.OutputTokens += spent.OutputTokens
		if err != nil || o == nil || out.Folded == nil || !namesProposal(out.Catalog, out.Folded.Parsed.Calls) {
			return out, err
		}
		same, stored, err := a.keepOffer(ctx, in, o)
		if err != nil || same {
			return out, err
		}
		if asked == 2 {
			return out, fmt.Errorf("infer round %d: the stored proposal snapshot changed while the round was asked again", in.Round)
		}
		spent = out.Response.Usage
		if o, err = offerStored(stored, reg, allow, now); err != nil {
			return out, err
		}
	}
}

// inferWith asks provider p once for round in.Round with the catalog cat and the proposal
// offer o (nil: none) over the context msgs, then folds the answer (foldAfter). ask is which
// asking of the round this is within the attempt (1, or 2 with a stored snapshot's offer).
func (a *Activities) inferWith(ctx context.Context, p inference.Provider, in InferInput, reg *registry.Registry, cat []registry.CatalogEntry, msgs []inference.Message, o *offer, ask int) (InferOutput, error) {
	req := inference.Request{Model: in.Model, Session: in.Session, Round: in.Round, Messages: msgs}
	out := InferOutput{RegistryRevision: reg.Revision()}
	for _, c := range cat {
		req.Tools = append(req.Tools, inference.Tool{Name: c.Name, Description: c.Description, Parameters: c.Parameters})
		out.Catalog = append(out.Catalog, CatalogRef{Name: c.Name, CapabilityID: c.CapabilityID, Version: c.Version, PerTurnCap: c.PerTurnCap})
	}
	o.add(&req, &out)
	resp, err := a.complete(ctx, p, in, req, ask)
	if errors.Is(err, inference.ErrSessionExhausted) {
		return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeSessionExhausted, err)
	}
	if errors.Is(err, recording.ErrUnsupported) {
		return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUnsupportedRecording, err)
	}
	if errors.Is(err, inference.ErrProviderRejected) {
		return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeProviderRejected, err)
	}
	if errors.Is(err, inference.ErrResponseTooLarge) {
		// Asked again, the model would answer as large and be paid again (issue 31 item 6).
		return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeResponseTooLarge, err)
	}
	if err != nil {
		// The model's answer failed (its stream broke, its connection reset): never the store's.
		return out, fmt.Errorf("infer round %d: %w", in.Round, store.Elsewhere(err))
	}
	out.Response = resp
	out.Folded = &FoldedRound{}
	if in.Fold.Opening {
		out.Folded.Context = msgs
	}
	if err := a.foldAfter(ctx, in, &out, reg); err != nil {
		return out, fmt.Errorf("infer round %d: %w", in.Round, err)
	}
	return out, nil
}

// Parse runs the strict parser over the raw response. A body that is not a provider response
// at all is non-retryable: parsing is deterministic.
func (a *Activities) Parse(ctx context.Context, in ParseInput) (parse.Result, error) {
	versions := make(map[string]int, len(in.Catalog))
	for _, c := range in.Catalog {
		versions[c.Name] = c.Version
	}
	res, err := parse.Parse(parse.Format(in.Response.Format), in.Response.Raw, parse.Options{Versions: versions, Round: in.Round, Turn: parse.TurnToken(in.WorkflowID)})
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadInput, err)
	}
	return res, nil
}

// Admit runs executor stages 1-3 (resolve, validate, policy) for one candidate against one
// snapshot of the served registry. Rejections are results, not errors. A deprecated capability
// admitted before its deadline is logged and audited (deprecated_admitted) so operators see it.
func (a *Activities) Admit(ctx context.Context, in AdmitInput) (Admission, error) {
	if in.Now.IsZero() {
		in.Now = a.now()
	}
	in.UserProvided = a.userProvided(ctx, turnConversation("", in.WorkflowID), in.Call.Arguments)
	in.Provenance = a.provenanceHook(ctx, turnConversation("", in.WorkflowID), in.Call.Arguments)
	in.Groups = a.principalGroups(in.Principal)
	ad := Admit(a.reg(), in)
	if err := a.recordShadow(ctx, in, ad); err != nil {
		return ad, err
	}
	if ad.Warning != "" {
		activity.GetLogger(ctx).Warn("deprecated capability admitted", "capability", ad.Key(), "warning", ad.Warning, "workflow", in.WorkflowID, "seq", in.Seq)
		if a.Store != nil && in.WorkflowID != "" {
			if _, err := a.Store.AppendAudit(ctx, store.AuditEvent{Key: fmt.Sprintf("%s/%s/%d/%s", in.WorkflowID, in.RunID, in.Seq, AuditDeprecatedAdmitted),
				WorkflowID: in.WorkflowID, RunID: in.RunID, Seq: in.Seq, CallID: in.Call.CallID, CapabilityID: ad.CapabilityID, Version: ad.Version,
				Outcome: AuditDeprecatedAdmitted, Stage: string(StageResolve), Detail: ad.Warning, ArgsDigest: ad.ArgsDigest, At: a.now()}); err != nil {
				return ad, fmt.Errorf("audit deprecated admission: %w", err)
			}
		}
	}
	return ad, nil
}

// Admit is the pure form of the Admit activity, shared with tools that classify proposals
// without a worker (for example `airlock parse`). Three gates stay distinct:
//
// Stage 1 resolve (registry admission): the name must be a registered tool name exactly (never
// corrected), the entry admitted for resolve at in.Now (active, or deprecated before its
// removal/deadline; never reserved), dispatchable, offered to the model, and the version the
// one advertised. Stage 2 validate: strict JSON Schema (formats asserted) and, for Go types,
// strict decode plus validator/v10 rules. Stage 3 policy (runtime policy): the turn's
// capability scope, then the authorization policy sidecar for in.Principal (no policy entry,
// autonomy deny, an unknown principal or a missing grant are rejections). Confirmation is
// required unless the policy says automatic and the registry declares the capability local
// and read-only. A zero in.Now is the wall clock.
func Admit(reg *registry.Registry, in AdmitInput) Admission {
	c := in.Call
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	rej := func(stage Stage, code, detail string) Admission {
		return Admission{Stage: stage, Code: code, Detail: detail, RegistryRevision: reg.Revision()}
	}
	cap, ok := reg.ByToolName(c.Name)
	if !ok {
		return rej(StageResolve, registry.RefusalUnregistered, fmt.Sprintf("no capability is registered under the tool name %q", c.Name))
	}
	ad := Admission{CapabilityID: cap.ID, Version: cap.Version, SideEffect: cap.Airlock.SideEffect, Network: cap.Airlock.Network,
		Timeout: cap.TimeoutDuration(), RegistryRevision: cap.Fingerprint()}
	reject := func(stage Stage, code, detail string) Admission {
		ad.Stage, ad.Code, ad.Detail = stage, code, detail
		ad.Automatic, ad.Warning = false, ""
		return ad
	}
	el := reg.Eligible(cap, registry.UseCatalog, now)
	if !el.Admitted() {
		code := el.Code
		if code == registry.RefusalNotModelVisible {
			code = registry.RefusalNotDispatchable // as before: not offered to the model
		}
		return reject(StageResolve, code, el.Detail)
	}
	if cap.IsProposal() {
		// A proposal tool reaches Admit only when the round did not offer it (an offered one
		// goes to the proposal hook, never here): e.g. a round asked again with a stored
		// snapshot's offer that lacks it. It is captured or refused, never a capability call:
		// without this it was admitted and a human was asked to confirm a call that can never
		// run (registry proposal tools are dispatchable to the capture only).
		return reject(StageResolve, registry.RefusalNotDispatchable, c.Name+" is a proposal tool not offered in this round")
	}
	ad.Warning = el.Warning
	if err := cap.Unavailable(); err != nil {
		// Not offered now (an MCP server down, a tool whose live definition left its pin):
		// refused at resolve, back to the model, the turn goes on (issue 19).
		return reject(StageResolve, registry.RefusalUnavailable, err.Error())
	}
	if c.Version != 0 && c.Version != cap.Version {
		return reject(StageResolve, "version_mismatch", fmt.Sprintf("%s requested at version %d", cap.ID, c.Version))
	}
	if _, err := cap.ValidateArguments(c.Arguments); err != nil {
		var ae *registry.ArgumentError
		if errors.As(err, &ae) {
			return reject(StageValidate, ae.Code, ae.Detail)
		}
		return reject(StageValidate, "invalid_arguments", err.Error())
	}
	if len(in.Scope) > 0 && !slices.Contains(in.Scope, cap.ID) {
		return reject(StagePolicy, "out_of_scope", cap.ID+" is not in this turn's capability scope")
	}
	auth := reg.Authorize(cap, in.Principal)
	if auth.Code != "" {
		return reject(StagePolicy, auth.Code, auth.Detail)
	}
	digest, err := canonical.Digest(c.Arguments)
	if err != nil {
		return reject(StageValidate, "schema_mismatch", err.Error())
	}
	canon, _ := canonical.Canonicalize(c.Arguments)
	ad.Admitted = true
	ad.Automatic = auth.Automatic
	set, shadow := reg.Cedar(), reg.CedarShadow()
	var req cedarpolicy.Request
	if set != nil || shadow != nil {
		rep := provenance.Report{Rules: provenance.Rules, Error: "the turn's context was not read"}
		if in.Provenance != nil {
			rep = in.Provenance()
		}
		req = CedarRequest(cap, in.Principal, in.Groups, c.Arguments, rep, now, in.Calls)
	}
	if shadow != nil {
		// A candidate policy in shadow (issue 37): decided on the same facts, recorded by the
		// Admit activity (policy_shadow), never acted on.
		ad.Shadow, ad.facts = VerdictOf(shadow.Decide(req), shadow.Digest()), &req
	}
	if set != nil {
		// A Cedar policy decides how (issue 37): permit runs without a human, forbid refuses
		// with its reason, no decision asks (with the ask rules' groups and quorum). The JSON
		// policy above still decides whether the principal may call the capability at all.
		d := set.Decide(req)
		ad.Cedar = VerdictOf(d, set.Digest())
		switch d.Outcome {
		case cedarpolicy.OutcomeForbid:
			ad.Admitted = false
			return reject(StagePolicy, PolicyForbidden, d.Reason)
		case cedarpolicy.OutcomePermit:
			ad.Automatic = true
		default:
			ad.Automatic = false
		}
	} else if auth.IfUserProvided && !ad.Automatic && in.UserProvided != nil && in.UserProvided(leavingFields(cap)) {
		ad.Automatic, ad.UserProvided = true, true
	}
	ad.DistinctApprover = auth.DistinctApprover
	ad.ArgsDigest = digest
	ad.Display = fmt.Sprintf("%s %s", c.Name, canon)
	if ad.Warning != "" {
		ad.Detail = ad.Warning
	}
	return ad
}

// ConfirmationID is the deterministic id of the confirmation for one proposal: "cf-" plus 20
// hex digits of SHA-256(workflow id, run id, seq). Deterministic so an activity retry finds the
// row the first attempt created instead of minting a second token.
func ConfirmationID(workflowID, runID string, seq int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", workflowID, runID, seq)))
	return "cf-" + hex.EncodeToString(h[:10])
}

// IssueConfirmation mints a token (crypto/rand), stores its hash with the binding and expiry,
// and seals the plaintext for approvers. The token is not returned.
func (a *Activities) IssueConfirmation(ctx context.Context, in IssueInput) (IssueOutput, error) {
	id := ConfirmationID(in.WorkflowID, in.RunID, in.Seq)
	if in.Surfaced > 0 {
		id = ConfirmationID(in.WorkflowID, fmt.Sprintf("%s/surfaced/%d", in.RunID, in.Surfaced), in.Seq)
	}
	now := a.now()
	rev := in.RegistryRevision
	if rev == "" {
		rev = a.reg().CapabilityRevision(keyOf(in.CapabilityID, in.Version))
	}
	// A repeat grant may answer it (issue 37, item 4), unless an earlier attempt of this
	// issue already stored it as a pending confirmation (then it stays one).
	if prev, err := a.Store.GetConfirmation(ctx, id); errors.Is(err, store.ErrNotFound) || (err == nil && strings.HasPrefix(prev.Reason, GrantReasonPrefix)) {
		if out, ok, err := a.useGrant(ctx, id, rev, in, now); err != nil {
			return IssueOutput{}, err
		} else if ok {
			return out, nil
		} else if prev.Decision != "" {
			// An earlier attempt approved this confirmation by a grant that no longer covers
			// the call (the registry, the policy or the approver changed while the worker
			// restarted). The id holds that decision, so no person can be asked on it:
			// the call is refused, never run (found by an attack helper).
			return IssueOutput{}, errGrantVoided(id)
		}
	} else if err != nil {
		return IssueOutput{}, fmt.Errorf("issue confirmation %s: %w", id, err)
	}
	plain, hash, err := token.Mint()
	if err != nil {
		return IssueOutput{}, err
	}
	sealed, err := token.Seal(a.ApproverKey, plain, id)
	if err != nil {
		return IssueOutput{}, err
	}
	disc, discJSON := a.disclose(in.CapabilityID, in.Version, in.Arguments)
	policy := a.approvalPolicy(ConsumeInput{CapabilityID: in.CapabilityID, Version: in.Version, Cedar: in.Cedar})
	prov, userRequest := a.issueContext(ctx, turnConversation(in.Conversation, in.WorkflowID), in.Arguments)
	row, err := a.Store.CreateConfirmation(ctx, store.Confirmation{
		ID: id, TokenHash: hash, SealedToken: sealed, WorkflowID: in.WorkflowID, RunID: in.RunID, Seq: in.Seq,
		CallID: in.CallID, CapabilityID: in.CapabilityID, Version: in.Version, ArgsDigest: in.ArgsDigest,
		Arguments: in.Arguments, Display: in.Display, CreatedAt: now, ExpiresAt: now.Add(in.TTL),
		RegistryRevision: rev, Disclosure: discJSON,
		Provenance: prov, ApproverGroups: policy.ApproverGroups, PasskeyRequired: policy.Passkey,
		Quorum: policy.Approvals(), DistinctApprover: policy.DistinctApprover, UserRequest: userRequest,
	})
	if err != nil {
		return IssueOutput{}, fmt.Errorf("issue confirmation %s: %w", id, err)
	}
	if row.Decision != "" {
		return IssueOutput{}, errGrantVoided(id) // decided before this attempt: never put to people as if pending
	}
	pol := a.approvalPolicy(ConsumeInput{CapabilityID: in.CapabilityID, Version: in.Version, Cedar: in.Cedar})
	quorum := row.Quorum // what the stored row was issued with (a retry reports the first attempt's)
	if quorum < 1 {
		quorum = pol.Approvals()
	}
	if err := a.auditIssued(ctx, in, row, quorum, row.DistinctApprover); err != nil {
		return IssueOutput{}, fmt.Errorf("issue confirmation %s: %w", id, err)
	}
	a.emitPending(ctx, in, row)
	if a.Notices != nil {
		// Written on every attempt and idempotent by delivery id: a crash between the
		// confirmation's row and its notices is healed by this activity's retry.
		if err := a.Notices.Pending(ctx, row); err != nil {
			return IssueOutput{}, fmt.Errorf("issue confirmation %s: %w", id, err)
		}
	}
	if len(row.Disclosure) > 0 {
		// A retried issue finds the row its first attempt stored: report what it shows.
		var stored registry.Disclosure
		if json.Unmarshal(row.Disclosure, &stored) == nil {
			disc = &stored
		}
	}
	return IssueOutput{ConfirmationID: row.ID, ExpiresAt: row.ExpiresAt, Disclosure: disc, Provenance: row.Provenance,
		ApproverGroups: row.ApproverGroups, Quorum: pol.Approvals(), PasskeyRequired: row.PasskeyRequired,
		DistinctApprover: row.DistinctApprover}, nil
}

// ErrTypeGrantVoided is the application error type of a confirmation an earlier attempt of
// its issue approved by a repeat grant that no longer covers the call (errGrantVoided).
const ErrTypeGrantVoided = "GrantVoided"

// errGrantVoided refuses, non-retryably, to put confirmation id to people or run it: its row
// holds a grant's approval that no longer stands. The turn fails closed; nothing runs.
func errGrantVoided(id string) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"confirmation %s was approved by a repeat grant that no longer covers the call (the registry, the policy or the approver changed while the worker restarted): the call is not run", id),
		ErrTypeGrantVoided, nil)
}

// auditIssued writes the AuditConfirmationIssued row of confirmation row (idempotent by its
// key, so an activity retry writes none): who may decide, how many approvals it needs and when
// it expires, in the stored row's terms (a retry reports what the first attempt stored).
func (a *Activities) auditIssued(ctx context.Context, in IssueInput, row store.Confirmation, quorum int, fourEyes bool) error {
	who := "any approver"
	if len(row.ApproverGroups) > 0 {
		who = "an approver of " + strings.Join(row.ApproverGroups, ", ")
	}
	if fourEyes {
		who += " other than the requester"
	}
	detail := fmt.Sprintf("put to people: %d approval(s) needed from %s; expires %s", quorum, who, row.ExpiresAt.UTC().Format(time.RFC3339))
	if row.PasskeyRequired {
		detail += "; a passkey is required"
	}
	_, err := a.Store.AppendAudit(ctx, store.AuditEvent{Key: "issued/" + row.ID, WorkflowID: row.WorkflowID, RunID: row.RunID,
		Seq: row.Seq, CallID: row.CallID, CapabilityID: row.CapabilityID, Version: row.Version, Outcome: AuditConfirmationIssued,
		Stage: string(StageConfirm), Detail: detail, ArgsDigest: row.ArgsDigest, At: row.CreatedAt, ConfirmationID: row.ID})
	return err
}

// disclose is the Disclosure of a call of id@version with args under the registry served now
// (nil when it is not registered), and its JSON for the store.
func (a *Activities) disclose(id string, version int, args json.RawMessage) (*registry.Disclosure, json.RawMessage) {
	c, ok := a.reg().ByKey(keyOf(id, version))
	if !ok {
		return nil, nil
	}
	d := c.Disclose(args)
	b, err := json.Marshal(d)
	if err != nil {
		return nil, nil
	}
	return &d, b
}

// ConsumeConfirmation is stage 4 for one presentation of a decision to the proposal the
// workflow waits on (DESIGN "Tokens"). It first consumes the confirmation's current token
// (any presentation consumes it, whatever else is wrong with the decision), then checks, in
// order: the binding of the row to this proposal, the decision MAC under the token (opened
// from its sealed copy with the approver key), the nonce (recorded, so a copy of the decision
// read from history is a replay), the approver, the decision, the four-eyes rule, the expiry
// and, for an approval, the registry revision. A presentation that consumed the token without
// a valid decision gets the proposal a fresh token (audited as token_reissued), so it stays
// decidable. Refusals are results, not errors; retries of one presentation are idempotent.
func (a *Activities) ConsumeConfirmation(ctx context.Context, in ConsumeInput) (ConsumeOutput, error) {
	now := a.now()
	if out, detail := a.ineligible(in); out {
		return a.refuseEarly(ctx, in, ApproverIneligible, detail, now)
	}
	row, err := a.Store.PresentToken(ctx, in.ConfirmationID, in.Presentation, now)
	if errors.Is(err, store.ErrTokenConsumed) && row.Decision == "" {
		// The token was consumed by an earlier presentation that ended without a verdict or a
		// reissue (its consume failed for good, e.g. the store went away mid-way). Presentations
		// to one proposal run one at a time in its workflow, so that one is over: this one takes
		// the token over and is judged, and the proposal never stays undecidable.
		row, err = a.Store.TakeOverToken(ctx, in.ConfirmationID, row.ConsumedBy, in.Presentation, now)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return a.refuseEarly(ctx, in, RefusalNotPending, "no such confirmation", now)
	case errors.Is(err, store.ErrTokenConsumed) && row.Decision != "":
		return a.refuseEarly(ctx, in, RefusalNotPending, "the confirmation is already "+row.Decision, now)
	case errors.Is(err, store.ErrTokenConsumed):
		return a.refuseEarly(ctx, in, TokenReplayed, "the token was consumed by another presentation at the same moment", now)
	case err != nil:
		return ConsumeOutput{}, fmt.Errorf("present decision for %s: %w", in.ConfirmationID, err)
	}
	code, detail, err := a.judge(ctx, row, in, now)
	if err != nil {
		return ConsumeOutput{}, fmt.Errorf("judge decision for %s: %w", in.ConfirmationID, err)
	}
	// A capability that needs several approvals counts this one (recorded below, once its
	// nonce is known fresh): the decision is final only with the last.
	var countApproval bool
	if code == "" {
		if code, detail, countApproval, err = a.quorum(ctx, row, in); err != nil {
			return ConsumeOutput{}, fmt.Errorf("count approvals of %s: %w", in.ConfirmationID, err)
		}
	}
	if why := a.refuseGrant(in); why != "" && (code == "" || code == QuorumPending) {
		// A repeat grant only where one approver decides the call (issue 37, item 4).
		code, detail, countApproval = RepeatGrantRefused, why, false
	}
	rec := store.DecisionNonce{Nonce: in.Nonce, ConfirmationID: in.ConfirmationID, Presentation: in.Presentation,
		Approver: in.Approver, Decision: in.Decision, Verdict: store.VerdictAccepted, Detail: detail, At: now}
	if code != "" {
		rec.Verdict = code
	}
	if in.Nonce != "" {
		// Every verdict is recorded by nonce, so the approver surface that sent the decision
		// can read what became of it. Nonces are 128-bit random: one copied from history is
		// already recorded, and a sender cannot burn a nonce a surface has not used yet.
		prev, err := a.Store.RecordNonce(ctx, rec)
		if err != nil {
			return ConsumeOutput{}, fmt.Errorf("present decision for %s: %w", in.ConfirmationID, err)
		}
		if prev != nil && prev.Presentation != in.Presentation {
			code, detail = NonceReplayed, "this decision was presented before; a decision counts once"
		} else if prev != nil {
			code, detail = "", prev.Detail // a retry of this presentation: its first verdict
			if prev.Verdict != store.VerdictAccepted {
				code = prev.Verdict
			}
		}
	}
	if countApproval && (code == "" || code == QuorumPending) {
		if _, err := a.Store.AddApproval(ctx, store.Approval{ConfirmationID: row.ID, Approver: in.Approver, Generation: row.Generation, Nonce: in.Nonce,
			Proof: ProofOf(in.Attestation.Signer, len(in.Passkey) > 0 && a.passkeyRequired(row, in)), At: now}); err != nil {
			return ConsumeOutput{}, fmt.Errorf("record approval of %s: %w", in.ConfirmationID, err)
		}
	}
	if code != "" {
		return a.refuseAndReissue(ctx, row, in, code, detail, now)
	}
	// The decision is final from here: record it now, not only after the call executed, so an
	// approver who lost the race is told at once who decided (approval.Decide, approval.Wait)
	// and `airlock pending` stops listing it. Stage 6 records the same decision again (a no-op).
	if in.Decision == DecisionEdit {
		return a.recordEdit(ctx, row, in, now)
	}
	decided, reason := store.DecisionApproved, ""
	if in.Decision == DecisionDeny {
		decided, reason = store.DecisionDenied, in.Reason
	}
	// The decision and how its approver was proven, in one statement.
	if err := a.Store.DecideProved(ctx, in.ConfirmationID, decided, in.Approver, reason, a.proofOf(ctx, row, in), now); err != nil {
		return ConsumeOutput{}, fmt.Errorf("record decision for %s: %w", in.ConfirmationID, err)
	}
	if decided == store.DecisionApproved && in.RepeatCount > 0 {
		if err := a.grant(ctx, row, in, now); err != nil {
			return ConsumeOutput{}, err
		}
	}
	return ConsumeOutput{Valid: true, Generation: row.Generation}, nil
}

// recordEdit records a valid edit: the proposal is denied (edited_by_approver) and the digest
// of the arguments the edit's MAC authorized is kept for the new proposal's confirmation.
func (a *Activities) recordEdit(ctx context.Context, row store.Confirmation, in ConsumeInput, now time.Time) (ConsumeOutput, error) {
	digest, _, _ := editedDigest(in) // judged valid: it computes
	if err := a.Store.EditConfirmation(ctx, row.ID, in.Approver, digest, now); err != nil {
		return ConsumeOutput{}, fmt.Errorf("record edit for %s: %w", row.ID, err)
	}
	if err := a.recordProof(ctx, row, in); err != nil {
		return ConsumeOutput{}, err
	}
	return ConsumeOutput{Valid: true, Generation: row.Generation, EditedDigest: digest}, nil
}

// ConfirmEdit records the confirmation of a proposal an approver's edit created, approved by
// that approver: the edit is its confirmation (the approver signed exactly these arguments),
// so Execute's check that a confirmed call runs only with an approval on record, and the
// at-most-once ledger, hold for it as for any confirmed call. It records nothing unless the
// store shows the original confirmation decided by this approver's edit (denied,
// edited_by_approver) of exactly these arguments, for this turn's proposal in.EditOf.
func (a *Activities) ConfirmEdit(ctx context.Context, in ConfirmEditInput) (ConfirmEditOutput, error) {
	orig, err := a.Store.GetConfirmation(ctx, in.Original)
	if errors.Is(err, store.ErrNotFound) {
		return ConfirmEditOutput{Detail: "the edited confirmation " + in.Original + " is not on record"}, nil
	}
	if err != nil {
		return ConfirmEditOutput{}, fmt.Errorf("confirm edit of %s: %w", in.Original, err)
	}
	digest, derr := canonical.Digest(in.Arguments)
	switch {
	case orig.WorkflowID != in.WorkflowID || orig.RunID != in.RunID || orig.Seq != in.EditOf ||
		orig.CapabilityID != in.CapabilityID || orig.Version != in.Version:
		return ConfirmEditOutput{Detail: fmt.Sprintf("confirmation %s is not bound to proposal #%d of this turn", in.Original, in.EditOf)}, nil
	case orig.Decision != store.DecisionDenied || orig.Reason != store.ReasonEditedByApprover || orig.Approver != in.Approver:
		return ConfirmEditOutput{Detail: fmt.Sprintf("confirmation %s is not recorded as edited by %q", in.Original, in.Approver)}, nil
	case derr != nil || digest != orig.EditedDigest || digest != in.ArgsDigest:
		return ConfirmEditOutput{Detail: fmt.Sprintf("the edit recorded on %s authorized other arguments", in.Original)}, nil
	}
	_, hash, err := token.Mint() // a token no one holds: the row is decided at once
	if err != nil {
		return ConfirmEditOutput{}, err
	}
	id := ConfirmationID(in.WorkflowID, in.RunID, in.Seq)
	now := a.now()
	rev := in.RegistryRevision
	if rev == "" {
		rev = a.Registry.Revision()
	}
	_, discJSON := a.disclose(in.CapabilityID, in.Version, in.Arguments)
	row, err := a.Store.CreateApprovedConfirmation(ctx, store.Confirmation{ID: id, TokenHash: hash, WorkflowID: in.WorkflowID,
		RunID: in.RunID, Seq: in.Seq, CallID: in.CallID, CapabilityID: in.CapabilityID, Version: in.Version,
		ArgsDigest: in.ArgsDigest, Arguments: in.Arguments, Display: in.Display, CreatedAt: now, ExpiresAt: orig.ExpiresAt,
		RegistryRevision: rev, Approver: in.Approver, Reason: "edit of " + in.Original, Disclosure: discJSON})
	if err != nil {
		return ConfirmEditOutput{}, fmt.Errorf("confirm edit of %s: %w", in.Original, err)
	}
	if row.Decision != store.DecisionApproved || row.Approver != in.Approver || row.ArgsDigest != in.ArgsDigest || row.Seq != in.Seq {
		return ConfirmEditOutput{Detail: fmt.Sprintf("confirmation %s already holds another decision", id)}, nil
	}
	return ConfirmEditOutput{Confirmed: true, ConfirmationID: id}, nil
}

// judge checks one presented decision against the consumed confirmation row; it returns ""
// for a valid decision, else a refusal code and a detail for the audit and the approver.
func (a *Activities) judge(ctx context.Context, row store.Confirmation, in ConsumeInput, now time.Time) (code, detail string, err error) {
	if row.WorkflowID != in.WorkflowID || row.RunID != in.RunID || row.Seq != in.Seq ||
		row.CapabilityID != in.CapabilityID || row.Version != in.Version || row.ArgsDigest != in.ArgsDigest {
		return TokenBindingMismatch, "the confirmation is not bound to this proposal", nil
	}
	if in.DisplayedDigest != "" && in.DisplayedDigest != row.ArgsDigest {
		return StaleDigest, "the approver was shown other arguments than this proposal's (a stale page); decide again on what it asks now", nil
	}
	plain, oerr := token.Open(a.ApproverKey, row.SealedToken, token.SealAAD(row.ID, row.Generation))
	if oerr != nil || !token.Equal(token.Hash(plain), row.TokenHash) {
		return DecisionMACInvalid, "the worker's approver key does not open this confirmation's token", nil
	}
	edited, code, detail := editedDigest(in)
	if code != "" {
		return code, detail, nil
	}
	d := token.Decision{ConfirmationID: row.ID, Decision: in.Decision, Approver: in.Approver, Reason: in.Reason,
		ArgsDigest: row.ArgsDigest, Nonce: in.Nonce, EditedDigest: edited, Repeat: grantTerms(in)}
	if token.VerifyDecision(plain, d, in.MAC) != nil {
		return DecisionMACInvalid, "the decision is not signed with this confirmation's current token", nil
	}
	// An edit is an approval of new arguments: the four-eyes rule and the registry check
	// apply to it as to an approval.
	approves := in.Decision == DecisionApprove || in.Decision == DecisionEdit
	switch {
	case in.Nonce == "":
		return NonceMissing, "a decision must carry a fresh nonce", nil
	case in.Approver == "":
		return ApproverMissing, "a decision must name its approver", nil
	case in.Decision != DecisionApprove && in.Decision != DecisionDeny && in.Decision != DecisionEdit:
		return BadDecision, fmt.Sprintf("decision %q is not approve, deny or edit", in.Decision), nil
	}
	// The approver is proven before any rule compares it (four-eyes), and where the policy
	// says so, proven again by their passkey's assertion over this MAC.
	if err := a.authenticate(in); err != nil {
		return ApproverUnauthenticated, err.Error(), nil
	}
	if code, detail, err := a.checkPasskey(ctx, row, in, now); err != nil || code != "" {
		return code, detail, err
	}
	switch {
	case in.DistinctApprover && approves && (in.Principal == "" || a.samePerson(in.Approver, in.Principal)):
		return ApproverIsRequester, fmt.Sprintf("%s requires an approver other than the requester %q", keyOf(in.CapabilityID, in.Version), in.Principal), nil
	case in.DistinctApprover && approves && a.samePerson(in.Approver, in.Requester):
		return ApproverIsRequester, fmt.Sprintf("%s requires an approver other than the requester: client %s started this turn", keyOf(in.CapabilityID, in.Version), in.Requester), nil
	case !now.Before(row.ExpiresAt):
		return TokenExpired, "the confirmation expired at " + row.ExpiresAt.Format(time.RFC3339), nil
	case approves && row.RegistryRevision != a.reg().CapabilityRevision(keyOf(in.CapabilityID, in.Version)):
		// The approver saw the call under another registry (side-effect class, policy): the
		// approval does not carry over. A denial still stands.
		return TokenRegistryChanged, "the registry changed since the confirmation was issued", nil
	}
	return "", "", nil
}

// authenticate verifies the decision's attestation against the approvers file.
func (a *Activities) authenticate(in ConsumeInput) error {
	if a.Approvers == nil {
		return errors.New("this worker has no approvers file, so no decision can be authenticated")
	}
	set, err := a.Approvers()
	if err != nil {
		return fmt.Errorf("the worker cannot read its approvers file: %w", err)
	}
	return set.Verify(in.Approver, in.ConfirmationID, in.MAC, in.Attestation)
}

// editedDigest is the canonical digest of an edit's arguments, which its MAC binds ("" for
// approve and deny, which carry none); a refusal code and detail when they are unusable.
func editedDigest(in ConsumeInput) (digest, code, detail string) {
	if in.Decision != DecisionEdit {
		if len(in.Arguments) > 0 {
			return "", BadDecision, "only an edit carries arguments"
		}
		return "", "", ""
	}
	if len(in.Arguments) == 0 || len(in.Arguments) > MaxEditArgumentBytes {
		return "", BadDecision, fmt.Sprintf("an edit needs its arguments (at most %d bytes)", MaxEditArgumentBytes)
	}
	digest, err := canonical.Digest(in.Arguments)
	if err != nil {
		return "", BadDecision, "the edited arguments are not canonical JSON: " + err.Error()
	}
	return digest, "", ""
}

// refuseEarly answers a presentation refused before it could be judged (no token of the
// proposal was touched by it), recording its verdict by nonce so the approver surface that
// sent it learns of it at once (approval.Wait) instead of waiting for a verdict that never
// comes.
func (a *Activities) refuseEarly(ctx context.Context, in ConsumeInput, code, detail string, now time.Time) (ConsumeOutput, error) {
	if in.Nonce != "" {
		if _, err := a.Store.RecordNonce(ctx, store.DecisionNonce{Nonce: in.Nonce, ConfirmationID: in.ConfirmationID,
			Presentation: in.Presentation, Approver: in.Approver, Decision: in.Decision, Verdict: code, Detail: detail, At: now}); err != nil {
			return ConsumeOutput{}, fmt.Errorf("present decision for %s: %w", in.ConfirmationID, err)
		}
	}
	return ConsumeOutput{Refusal: code, Detail: detail}, nil
}

// refuseAndReissue answers a presentation that consumed the token without a valid decision:
// the proposal gets a fresh token (sealed for approvers, audited) and stays decidable.
func (a *Activities) refuseAndReissue(ctx context.Context, row store.Confirmation, in ConsumeInput, code, detail string, now time.Time) (ConsumeOutput, error) {
	out := ConsumeOutput{Refusal: code, Detail: detail, Generation: row.Generation}
	if row.Decision != "" || row.ConsumedBy != in.Presentation {
		return out, nil
	}
	gen := row.Generation + 1
	plain, hash, err := token.Mint()
	if err != nil {
		return ConsumeOutput{}, err
	}
	sealed, err := token.Seal(a.ApproverKey, plain, token.SealAAD(row.ID, gen))
	if err != nil {
		return ConsumeOutput{}, err
	}
	ok, err := a.Store.ReissueToken(ctx, row.ID, in.Presentation, gen, hash, sealed)
	if err != nil {
		return ConsumeOutput{}, fmt.Errorf("reissue token for %s: %w", row.ID, err)
	}
	if ok {
		// A counted quorum vote also takes the token (each vote is single-use); it is no
		// refusal, and the audit says what it was.
		why := fmt.Sprintf("token generation %d consumed by a refused decision; generation %d issued", row.Generation, gen)
		if code == QuorumPending {
			why = fmt.Sprintf("%s's approval counted towards the quorum (%s); token generation %d issued for the next approver", in.Approver, detail, gen)
		}
		if _, err := a.Store.AppendAudit(ctx, store.AuditEvent{Key: fmt.Sprintf("%s/%s/%d/%s/%d", row.WorkflowID, row.RunID, row.Seq, AuditTokenReissued, gen),
			WorkflowID: row.WorkflowID, RunID: row.RunID, Seq: row.Seq, CallID: row.CallID, CapabilityID: row.CapabilityID,
			Version: row.Version, Outcome: AuditTokenReissued, Stage: string(StageConfirm), Reason: code,
			Detail:     why,
			ArgsDigest: row.ArgsDigest, Approver: in.Approver, At: now}); err != nil {
			return ConsumeOutput{}, fmt.Errorf("audit token reissue for %s: %w", row.ID, err)
		}
	}
	out.Reissued, out.Generation = true, gen
	return out, nil
}

// Execute is stage 5. Every capability that needs a confirmation, and every one with a side
// effect, runs at most once per proposal (registry.Entry.AtMostOnce): the ledger row is
// written before the call, so a retry or a new worker after a crash finds it and reports
// outcome_unknown (or the recorded result) instead of running the effect again; a capability
// the registry declares idempotent is started again instead, and the outcome counts the
// attempts. Automatic calls (local and read-only) skip the ledger and may be retried: they are
// at least once. A regular Execute heartbeats, so a dead worker is noticed in seconds.
func (a *Activities) Execute(ctx context.Context, in ExecuteInput) (ExecuteOutput, error) {
	var conf *store.Confirmation
	return a.executeChecked(ctx, in, &conf)
}

// executeChecked is Execute; it leaves in *conf the confirmation row a confirmed call was
// checked against (nil when none was read), which ExecuteRecorded's record reuses instead of
// reading the row again.
func (a *Activities) executeChecked(ctx context.Context, in ExecuteInput, conf **store.Confirmation) (ExecuteOutput, error) {
	leaveDeadWorker(ctx)
	now := a.now()
	ledgerKey := fmt.Sprintf("%s/%d", in.WorkflowID, in.Seq)
	// refuse answers a call this worker will not run, unless an earlier attempt of this
	// proposal (possibly on a worker with another registry) already claimed its ledger slot:
	// then the effect may have run and the ledger's record is the answer, never "not run".
	refuse := func(out ExecuteOutput, err error) (ExecuteOutput, error) {
		existing, gerr := a.Store.GetExecution(ctx, ledgerKey)
		if errors.Is(gerr, store.ErrNotFound) {
			return out, err
		}
		if gerr != nil {
			return ExecuteOutput{}, fmt.Errorf("execution ledger: %w", gerr)
		}
		digest, _ := canonical.Digest(in.Arguments)
		return fromLedger(ctx, &existing, in, digest, now), nil
	}
	reg := a.reg() // one snapshot: resolved, checked and (for catalog reads) projected alike
	c, ok := reg.ByKey(keyOf(in.CapabilityID, in.Version))
	if !ok || c.Impl.Invoke == nil {
		return refuse(ExecuteOutput{}, temporal.NewNonRetryableApplicationError("capability "+keyOf(in.CapabilityID, in.Version)+" is not bound in this worker's registry", ErrTypeBadInput, nil))
	}
	if rev := c.Fingerprint(); in.RegistryRevision != "" && in.RegistryRevision != rev {
		// The call was admitted (and approved) under another registry: its side-effect class,
		// network and policy were checked against entries this worker does not serve. Nothing
		// runs; a fresh proposal is admitted under this registry.
		return refuse(ExecuteOutput{Outcome: OutcomeRejected, Reason: TokenRegistryChanged, RetrievedAt: now, Output: registry.Output{Error: fmt.Sprintf(
			"the call was admitted under registry revision %q and this worker serves %q; it was not run", in.RegistryRevision, rev)}}, nil)
	}
	decoded, err := c.ValidateArguments(in.Arguments) // defense in depth: the registry may have changed since Admit
	if err != nil {
		return refuse(ExecuteOutput{}, temporal.NewNonRetryableApplicationError("arguments no longer valid: "+err.Error(), ErrTypeBadInput, err))
	}
	// A confirmed call, whether the registry or the policy asked for the confirmation (a policy
	// may confirm a local read-only capability), runs only as approved and at most once.
	confirmed := !c.Automatic() || in.ConfirmationID != ""
	if confirmed && in.ConfirmationID == "" && reg.Cedar() == nil && a.runsAsUserProvided(ctx, reg, c, in) {
		confirmed = false // automatic-when-user-provided, checked again here on the stored context
	}
	if confirmed && in.ConfirmationID == "" && a.runsAsCedarPermit(ctx, reg, c, in) {
		confirmed = false // a Cedar permit, checked again here on the stored context
	}
	if confirmed {
		out, row, ok := a.approved(ctx, in, now)
		*conf = row
		if !ok {
			return refuse(out, nil)
		}
	}
	var digest string
	attempts := 1
	ledger := c.AtMostOnce() || confirmed
	if ledger {
		if digest, err = canonical.Digest(in.Arguments); err != nil {
			return refuse(ExecuteOutput{}, temporal.NewNonRetryableApplicationError("arguments not canonicalizable: "+err.Error(), ErrTypeBadInput, err))
		}
		existing, err := a.Store.BeginExecution(ctx, store.Execution{Key: ledgerKey, WorkflowID: in.WorkflowID, Seq: in.Seq,
			CapabilityID: in.CapabilityID, Version: in.Version, State: store.ExecStarted, StartedAt: now})
		if err != nil {
			return ExecuteOutput{}, fmt.Errorf("execution ledger: %w", err)
		}
		if existing != nil {
			if !c.Airlock.Idempotent || existing.State != store.ExecStarted || existing.CapabilityID != in.CapabilityID || existing.Version != in.Version {
				return fromLedger(ctx, existing, in, digest, now), nil
			}
			// Declared idempotent: an interrupted attempt may be started again.
			if attempts, err = a.Store.RetryExecution(ctx, ledgerKey, now); err != nil {
				return ExecuteOutput{}, fmt.Errorf("execution ledger: %w", err)
			}
		}
	}
	cctx := ctx
	if d := c.TimeoutDuration(); d > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	stop := keepAlive(ctx)
	res, invErr := c.Impl.Invoke(cctx, registry.Invocation{Arguments: in.Arguments, Decoded: decoded, WorkflowID: in.WorkflowID,
		Seq: in.Seq, CallID: in.CallID, Round: in.Round, Session: in.Session, Now: now,
		Registry: reg, Principal: in.Principal, Scope: in.Scope})
	stop()
	out := ExecuteOutput{Outcome: OutcomeExecuted, Output: res, RetrievedAt: now}
	if ledger && c.Airlock.Idempotent {
		out.Attempts = attempts
	}
	var notRun *registry.NotRunError
	switch {
	case invErr != nil && errors.As(invErr, &notRun):
		// Refused before anything reached the provider (issue 19: a changed MCP tool, a
		// server that is down): nothing ran, so the ledger records a failure, not an unknown.
		out.Outcome = OutcomeRejected
		out.Reason = notRun.Code
		out.Output.Error = "the call was not run: " + notRun.Detail
	case invErr != nil && errors.Is(invErr, registry.ErrOutcomeUnknown) && ledger:
		// The request reached the provider and its answer was lost: the effect may have
		// happened. Reported as such and recorded so, never run again.
		out.Outcome = OutcomeUnknown
		out.Reason = ReasonCapabilityError
		out.Output.Error = invErr.Error()
	case invErr != nil:
		out.Outcome = OutcomeFailed
		out.Reason = ReasonCapabilityError
		out.Output.Error = invErr.Error()
	case res.Error != "":
		out.Outcome = OutcomeFailed
	}
	out.Output.Data = boundData(out.Output.Data)
	out.Output.Citation = boundCitation(out.Output.Citation)
	if ledger {
		state := store.ExecCompleted
		if out.Outcome != OutcomeExecuted {
			state = store.ExecFailed
		}
		b, _ := json.Marshal(ledgerEntry{ExecuteOutput: out, ArgsDigest: digest})
		if err := a.finishLedger(ctx, ledgerKey, state, b); err != nil {
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || ctx.Err() != nil {
				return ExecuteOutput{}, fmt.Errorf("execution ledger: %w", err)
			}
			// The store stayed away until this attempt's end (finishLedger stops finishDeadline
			// before it): the effect ran and its outcome is in hand, so it goes to the turn,
			// whose history keeps it. Failing instead would make the next attempt read the
			// ledger row started and report outcome_unknown for a call that completed. The row
			// stays started: it is read again only if this completion is lost as well, and
			// then outcome_unknown is the truth (never a second run).
			if activity.IsActivity(ctx) {
				activity.GetLogger(ctx).Warn("the execution ledger could not record the outcome before the attempt's end (the store is away): the outcome goes to the turn's history instead",
					"ledger", ledgerKey, "outcome", out.Outcome, "error", display.Visible(err.Error()))
			}
		}
	}
	return out, nil
}

// finishDeadline is how long before the attempt's deadline finishLedger stops trying, so the
// outcome still reaches the server within the attempt.
const finishDeadline = 2 * time.Second

// finishLedger records a started execution's outcome (store.FinishExecution). The effect has
// run and its outcome is in hand: a store that fails now (a restart, a failover, dropped
// connections) must not make the next attempt find the row still started and report
// outcome_unknown for a call that completed. So a failed finish is tried again, 100 ms doubling
// to 2 s apart and heartbeating, until it lands or finishDeadline before the attempt's
// deadline; a conflict or a missing row is final at once (stop-30 attack: two failed finishes
// in a row after a completed effect).
func (a *Activities) finishLedger(ctx context.Context, key, state string, result json.RawMessage) error {
	stop := keepAlive(ctx)
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-finishDeadline))
		defer cancel()
	}
	wait := 100 * time.Millisecond
	for {
		err := a.Store.FinishExecution(ctx, key, state, result, a.now())
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// approved checks, for a confirmed call, that the store records its confirmation as approved
// for this proposal and these arguments; otherwise it returns the rejection to answer with.
// It also returns the row it read (nil when it read none).
func (a *Activities) approved(ctx context.Context, in ExecuteInput, now time.Time) (ExecuteOutput, *store.Confirmation, bool) {
	var read *store.Confirmation
	no := func(why string) (ExecuteOutput, *store.Confirmation, bool) {
		return ExecuteOutput{Outcome: OutcomeRejected, Reason: ReasonNotApproved, RetrievedAt: now,
			Output: registry.Output{Error: "the call was not run: " + why}}, read, false
	}
	if in.ConfirmationID == "" {
		return no("it needs a confirmation and none was named")
	}
	row, err := a.Store.GetConfirmation(ctx, in.ConfirmationID)
	if err != nil {
		return no(fmt.Sprintf("confirmation %s could not be read: %v", in.ConfirmationID, err))
	}
	read = &row
	digest, derr := canonical.Digest(in.Arguments)
	switch {
	case row.WorkflowID != in.WorkflowID || row.Seq != in.Seq || row.CapabilityID != in.CapabilityID || row.Version != in.Version:
		return no(fmt.Sprintf("confirmation %s is bound to another proposal", in.ConfirmationID))
	case derr != nil || row.ArgsDigest != digest:
		return no(fmt.Sprintf("confirmation %s approved other arguments", in.ConfirmationID))
	case row.Decision != store.DecisionApproved:
		return no(fmt.Sprintf("confirmation %s is not approved (%q)", in.ConfirmationID, row.Decision))
	}
	// The approval is judged again now, when the call would run (issue 33, item 3).
	if why, err := a.holds(ctx, row); err != nil {
		return no(fmt.Sprintf("the approvals of confirmation %s could not be judged: %v", in.ConfirmationID, err))
	} else if why != "" {
		return no(why)
	}
	return ExecuteOutput{}, read, true
}

// fromLedger answers a proposal whose ledger slot an earlier attempt already claimed: the
// recorded result, outcome_unknown when the effect started and its result was lost, or a
// refusal when the slot holds a different call. digest is that of in.Arguments.
func fromLedger(ctx context.Context, existing *store.Execution, in ExecuteInput, digest string, now time.Time) ExecuteOutput {
	// The slot may hold a different call: a new run of this workflow (a whole-workflow
	// retry or a reset) numbers its proposals from 1 again. Handing that call the recorded
	// result would report an approved call as executed when it never ran.
	var rec ledgerEntry
	finished := existing.State == store.ExecCompleted || existing.State == store.ExecFailed
	recorded := finished && json.Unmarshal(existing.Result, &rec) == nil
	if existing.CapabilityID != in.CapabilityID || existing.Version != in.Version ||
		(recorded && rec.ArgsDigest != "" && rec.ArgsDigest != digest) {
		return ExecuteOutput{Outcome: OutcomeRejected, RetrievedAt: now, Output: registry.Output{Error: fmt.Sprintf(
			"proposal #%d of this turn is held by a different call (%s@%d) from an earlier run of the workflow; this call was not run",
			in.Seq, existing.CapabilityID, existing.Version)}}
	}
	if recorded {
		return rec.ExecuteOutput
	}
	activity.GetLogger(ctx).Warn("effect already started by an earlier attempt; not re-running", "key", existing.Key)
	return ExecuteOutput{Outcome: OutcomeUnknown, RetrievedAt: now, Output: registry.Output{
		Error: "the effect was started by an earlier attempt whose result was lost; it was not run again"}}
}

// ledgerEntry is the result the execution ledger keeps for a finished effect, with the digest
// of the arguments it ran with, so a later call that reaches the same ledger key can be told
// apart from the one that ran. Rows written before the digest was kept decode with ArgsDigest
// empty and are trusted as before.
type ledgerEntry struct {
	ExecuteOutput
	ArgsDigest string `json:"args_digest,omitempty"`
}

// Bounds on what one capability result puts in workflow history, the TurnResult and model
// context. Temporal refuses payloads over 2 MB: a turn's default budget of 16 calls, each at
// most MaxResultBytes of data plus MaxCitationBytes of citation, stays under it.
const (
	MaxResultBytes   = 64 << 10
	MaxCitationBytes = 32 << 10
)

// boundCitation cuts a citation's content to MaxCitationBytes on a rune boundary, saying so.
func boundCitation(c *registry.Citation) *registry.Citation {
	if c == nil || len(c.Content) <= MaxCitationBytes {
		return c
	}
	cut := *c
	n := MaxCitationBytes
	for n > 0 && !utf8.RuneStart(cut.Content[n]) {
		n--
	}
	cut.Content = cut.Content[:n] + "\n[airlock: content cut at 32 KiB]"
	return &cut
}

func boundData(d json.RawMessage) json.RawMessage {
	if len(d) == 0 {
		return json.RawMessage("null")
	}
	if len(d) <= MaxResultBytes {
		return d
	}
	// An eighth of the bound as raw text: even if every byte needs a 6-byte JSON escape, the
	// envelope stays under MaxResultBytes.
	n := MaxResultBytes / 8
	for n > 0 && !utf8.RuneStart(d[n]) {
		n--
	}
	b, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(d), "prefix": string(d[:n])})
	return b
}

// Record is stage 6: append the audit row (idempotent by key), record a confirmation decision
// and persist context messages to the conversation store, so nothing returned is lost if a
// later step of the turn fails.
func (a *Activities) Record(ctx context.Context, in RecordInput) error {
	return a.record(ctx, in, nil)
}

// record is Record; read, when not nil, is the confirmation row the caller read in this
// attempt (ExecuteRecorded's check), whose provenance the outcome row takes instead of reading
// the row again. A confirmation's provenance is fixed when it is issued.
func (a *Activities) record(ctx context.Context, in RecordInput, read *store.Confirmation) error {
	now := a.now()
	rec := store.Recording{ReplaceContext: in.Replace}
	if in.Audit != nil {
		r := in.Audit
		// The run is part of the key: a whole-workflow retry or a reset is a new run that numbers
		// its proposals from 1 again, and its outcomes are new events, not replays of the old.
		key := fmt.Sprintf("%s/%s/%d/%s", r.WorkflowID, r.RunID, r.Seq, r.Kind)
		if r.Kind == AuditConfirmationRefused || r.Kind == AuditApprovalCounted {
			key = fmt.Sprintf("%s/%s/%d/%s/%d", r.WorkflowID, r.RunID, r.Seq, r.Kind, r.Attempt)
		}
		rec.Audit = &store.AuditEvent{Key: key, WorkflowID: r.WorkflowID, RunID: r.RunID, Seq: r.Seq,
			CallID: r.CallID, CapabilityID: r.CapabilityID, Version: r.Version, Outcome: r.Kind, Stage: string(r.Stage),
			Reason: r.Reason, Detail: r.Detail, ArgsDigest: r.ArgsDigest, OriginalDigest: r.OriginalDigest, Approver: r.Approver, At: now}
		rec.Audit.Facts = a.receiptFacts(r, in.Messages)
		if heldForAHuman(r) {
			// The outcome row of a call a human was asked about carries the provenance the
			// approver saw (issue 24): read from its confirmation (deterministic id).
			id := ConfirmationID(r.WorkflowID, r.RunID, r.Seq)
			if read != nil && read.ID == id {
				rec.Audit.Provenance = read.Provenance
			} else if row, err := a.Store.GetConfirmation(ctx, id); err == nil {
				rec.Audit.Provenance = row.Provenance
			} else if !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("record: provenance of %s seq %d: %w", r.WorkflowID, r.Seq, err)
			}
		}
	}
	if d := in.Decision; d != nil {
		rec.Decision = &store.RecordedDecision{ConfirmationID: d.ConfirmationID, Decision: d.Decision, Approver: d.Approver, Reason: d.Reason, At: now}
	}
	for i, m := range in.Messages {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode context message: %w", err)
		}
		rec.Context = append(rec.Context, store.ContextEntry{Conversation: in.Conversation, Key: fmt.Sprintf("%s/%d", in.ContextKey, i),
			Payload: b, CreatedAt: now})
	}
	// Audit row, decision and context messages in one transaction (store.Record).
	if err := a.Store.Record(ctx, rec); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if dn, ok := a.Notices.(DecisionNotifier); ok && in.Decision != nil && a.Notices != nil {
		// The decided or expired notice (issue 34), after the decision is stored: a retry of
		// this activity writes it if a crash came between.
		row, err := a.Store.GetConfirmation(ctx, in.Decision.ConfirmationID)
		if err == nil {
			err = dn.Decided(ctx, row)
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("record: decision notice of %s: %w", in.Decision.ConfirmationID, err)
		}
	}
	a.emitRecorded(ctx, in)
	return nil
}

// FinishTurn persists the TurnResult for `airlock turn show` and the approver page.
func (a *Activities) FinishTurn(ctx context.Context, in FinishInput) error {
	if err := a.Store.SaveTurnResult(ctx, in.WorkflowID, in.Conversation, in.Result, a.now()); err != nil {
		return fmt.Errorf("save turn result: %w", err)
	}
	var res struct {
		Status    string `json:"status"`
		EndReason string `json:"end_reason"`
	}
	if json.Unmarshal(in.Result, &res) == nil && res.Status == "failed" {
		// A turn that failed is audited with the reason, once (the key is the turn's).
		reason, detail := res.EndReason, res.EndReason
		if strings.HasPrefix(reason, "error: ") {
			reason = "error"
		}
		if _, err := a.Store.AppendAudit(ctx, store.AuditEvent{Key: in.WorkflowID + "/" + in.RunID + "/" + AuditTurnFailed,
			WorkflowID: in.WorkflowID, RunID: in.RunID, Outcome: AuditTurnFailed, Reason: reason, Detail: detail, At: a.now()}); err != nil {
			return fmt.Errorf("audit the failed turn: %w", err)
		}
	}
	a.emitFinished(ctx, in)
	return nil
}
