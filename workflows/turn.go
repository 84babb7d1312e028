package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/catalog"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/parse"
	"github.com/airlock-dev/airlock/registry"
)

// a is the nil activity struct the workflow refers to activities through.
var a *activities.Activities

// TurnWorkflow runs one conversation turn. It returns the TurnResult; it fails only when
// inference fails for good (results already returned stay in the conversation store).
func TurnWorkflow(ctx workflow.Context, req TurnRequest) (TurnResult, error) {
	if err := req.Validate(); err != nil {
		return TurnResult{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, Status: StatusFailed},
			temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrTypeBadInput, err)
	}
	req.applyDefaults()
	info := workflow.GetInfo(ctx)
	t := &turn{
		req:        req,
		workflowID: info.WorkflowExecution.ID,
		runID:      info.WorkflowExecution.RunID,
		perCap:     map[string]int{},
		denied:     map[string]bool{},
		catalog:    map[string]activities.CatalogRef{},
	}
	t.result.WorkflowID = t.workflowID
	t.result.Citations = []registry.Citation{}
	t.result.Results = []CapabilityResult{}
	t.result.Outcomes = []ProposalOutcome{}
	if err := t.setup(ctx); err != nil {
		return t.result, err
	}
	return t.run(ctx)
}

// turn is the state of one TurnWorkflow run.
type turn struct {
	req               TurnRequest
	workflowID, runID string
	messages          []inference.Message
	pending           []PendingConfirmation
	result            TurnResult
	catalog           map[string]activities.CatalogRef
	seq               int
	calls             int
	perCap            map[string]int
	denied            map[string]bool
	refusals          int
	presentations     int
	sigCh             workflow.ReceiveChannel
	// awaits are the confirmations the turn waits on now, in call order (empty between
	// waits; several when one model message proposed several confirmed calls); presenting
	// serializes presentations (the signal path and every decide update share one
	// ConsumeConfirmation at a time); wake tells the waiting loop that an update decided a
	// proposal or was refused.
	awaits     []*awaited
	presenting bool
	wake       workflow.Channel
	// ctl is the catalog controller, nil until a message proposes a catalog read
	// (versionCatalogController).
	ctl *catalog.Controller
	// fold: the turn runs folded rounds (versionFoldedRounds); pre holds the admissions the
	// round's Infer computed, by proposal number.
	fold bool
	pre  map[int]activities.Admission
}

// waitEnd is how a confirmation wait ended.
type waitEnd int

const (
	endOpen     waitEnd = iota // still waiting
	endDecided                 // a valid decision (awaited.decided) decided the proposal
	endExpired                 // the token's time ran out
	endRefusals                // MaxRefusedDecisions decisions were refused
	endVoided                  // the registry changed under the confirmation (versionRegistryChangeResurfaces)
)

// MaxResurfaced bounds how often one proposal is surfaced again because the registry changed
// under its confirmation; past it the call is closed without running.
const MaxResurfaced = 4

// MaxRefusedDecisions bounds the refused decisions one proposal accepts (each consumed its
// token and got it a fresh one). Whoever can signal a turn could otherwise keep an approver's
// decisions failing and grow the turn's history toward Temporal's limit; past the bound the
// call is closed without running (fail closed), the model is told, and it is not retried.
const MaxRefusedDecisions = 16

// ReasonTooManyRefusedDecisions is the outcome reason of a call closed by MaxRefusedDecisions.
const ReasonTooManyRefusedDecisions = "too_many_refused_decisions"

// awaited is one proposal a turn waits on, with what stage 4 needs to judge a decision.
type awaited struct {
	p   PendingConfirmation
	adm activities.Admission
	// legacy: the wait started on a code path recorded before decide updates existed.
	legacy bool
	// refused counts decisions presented to it and refused (MaxRefusedDecisions).
	refused int
	// timer fires at its expiry; fired records that it did.
	timer workflow.Future
	fired bool
	// decided is the decision that decided it (editedDigest: the digest an edit authorized);
	// end says how the wait ended (endOpen while it goes on).
	decided      *Decision
	editedDigest string
	end          waitEnd
	// voided: an approval was refused registry_changed; the wait ends and the proposal is
	// surfaced again under the served registry (versionRegistryChangeResurfaces).
	voided bool
}

// awaitedFor returns the confirmation id the turn waits on now, or nil.
func (t *turn) awaitedFor(id string) *awaited {
	for _, w := range t.awaits {
		if w.p.ConfirmationID == id {
			return w
		}
	}
	return nil
}

func (t *turn) setup(ctx workflow.Context) error {
	t.sigCh = workflow.GetSignalChannel(ctx, SignalConfirmation)
	if err := workflow.SetQueryHandler(ctx, QueryPending, func() ([]PendingConfirmation, error) {
		out := make([]PendingConfirmation, len(t.pending))
		copy(out, t.pending)
		return out, nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", QueryPending, err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryTranscript, func() ([]inference.Message, error) {
		return t.messages, nil
	}); err != nil {
		return fmt.Errorf("register %s query: %w", QueryTranscript, err)
	}
	t.wake = workflow.NewBufferedChannel(ctx, 1)
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide, t.present, workflow.UpdateHandlerOptions{
		Validator: t.validateDecision,
	}); err != nil {
		return fmt.Errorf("register %s update: %w", UpdateDecide, err)
	}
	return nil
}

// validateDecision admits a decide update only for a confirmation pending now. It touches no
// token: a decision for anything else never reaches history.
func (t *turn) validateDecision(d Decision) error {
	notPending := func(msg string) error { return temporal.NewNonRetryableApplicationError(msg, ErrTypeNotPending, nil) }
	w := t.awaitedFor(d.ConfirmationID)
	switch {
	case len(t.awaits) == 0:
		return notPending("no confirmation is pending in this turn")
	case w == nil:
		return notPending(fmt.Sprintf("confirmation %q is not pending in this turn", d.ConfirmationID))
	case w.legacy:
		return notPending("this wait began before decide updates; send the " + SignalConfirmation + " signal")
	case w.decided != nil:
		return notPending(fmt.Sprintf("confirmation %q was already decided (%s by %s)", d.ConfirmationID, w.decided.Decision, w.decided.Approver))
	case w.end != endOpen:
		return notPending(fmt.Sprintf("confirmation %q is no longer pending", d.ConfirmationID))
	case d.Decision == DecisionEdit && (len(d.Arguments) == 0 || len(d.Arguments) > MaxEditArgumentBytes):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("an edit needs its arguments (at most %d bytes)", MaxEditArgumentBytes), ErrTypeBadDecision, nil)
	}
	return nil
}

func localCtx(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 5 * time.Second, MaximumAttempts: 10,
			NonRetryableErrorTypes: []string{activities.ErrTypeBadInput}},
		Summary: summarize(summary),
	})
}

func (t *turn) setStatus(ctx workflow.Context, status string) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, AttrStatus.ValueSet(status), AttrPending.ValueSet(int64(len(t.pending))))
}

// record runs stage 6 and appends msgs to the in-memory context.
func (t *turn) record(ctx workflow.Context, audit *activities.AuditRecord, decision *activities.Decision, key string, msgs ...inference.Message) error {
	summary := "record"
	if audit != nil {
		summary = fmt.Sprintf("record %s #%d", audit.Kind, audit.Seq)
	}
	return t.recordAs(ctx, summary, audit, decision, key, msgs...)
}

// recordAs is record with the local activity's summary (escaped and bounded by localCtx).
func (t *turn) recordAs(ctx workflow.Context, summary string, audit *activities.AuditRecord, decision *activities.Decision, key string, msgs ...inference.Message) error {
	t.messages = append(t.messages, msgs...)
	in := activities.RecordInput{Audit: audit, Decision: decision, Conversation: t.req.Conversation, ContextKey: key, Messages: msgs}
	return workflow.ExecuteLocalActivity(localCtx(ctx, summary), a.Record, in).Get(ctx, nil)
}

func (t *turn) run(ctx workflow.Context) (TurnResult, error) {
	req := t.req
	// Clients set AirlockStatus=running at start; upsert only when they did not (an upsert is
	// a history event and a server-side visibility write).
	if st, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(AttrStatus); !ok || st != StatusRunning {
		t.setStatus(ctx, StatusRunning)
	}
	// Folded rounds: the context is loaded and the opening recorded by round 1's Infer.
	t.fold = workflow.GetVersion(ctx, versionFoldedRounds, workflow.DefaultVersion, 1) >= 1
	if !t.fold {
		var stored []inference.Message
		if err := workflow.ExecuteLocalActivity(localCtx(ctx, "load context"), a.LoadContext,
			activities.LoadContextInput{Conversation: req.Conversation, Limit: req.ContextLimit}).Get(ctx, &stored); err != nil {
			return t.fail(ctx, fmt.Errorf("load context: %w", err))
		}
		t.messages = stored
		var opening []inference.Message
		if len(stored) == 0 && req.SystemPrompt != "" {
			opening = append(opening, inference.Message{Role: inference.RoleSystem, Content: req.SystemPrompt})
		}
		opening = append(opening, inference.Message{Role: inference.RoleUser, Content: req.Message})
		if err := t.record(ctx, nil, nil, t.workflowID+"/input", opening...); err != nil {
			return t.fail(ctx, err)
		}
	}

	for round := 1; round <= req.MaxRounds; round++ {
		if t.ctl != nil && !t.ctl.MayInfer() {
			t.ctl.Fire(catalog.EventBudget, catalog.Correlation{}, catalog.BudgetRounds)
			return t.finish(ctx, EndCatalogStopped)
		}
		t.result.Rounds = round
		var inf activities.InferOutput
		err := t.infer(ctx, round, &inf)
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeSessionExhausted {
			return t.finish(ctx, "session_ended")
		}
		if err != nil {
			return t.fail(ctx, fmt.Errorf("inference round %d: %w", round, err))
		}
		t.catalog = map[string]activities.CatalogRef{}
		for _, c := range inf.Catalog {
			t.catalog[c.Name] = c
		}
		t.result.Usage.InputTokens += inf.Response.Usage.InputTokens
		t.result.Usage.OutputTokens += inf.Response.Usage.OutputTokens

		var parsed parse.Result
		folded := inf.Folded
		t.pre = nil
		if folded != nil {
			if round == 1 {
				t.messages = folded.Context
			}
			if folded.ParseError != "" {
				return t.fail(ctx, fmt.Errorf("parse round %d: %w", round,
					temporal.NewNonRetryableApplicationError(folded.ParseError, activities.ErrTypeBadInput, nil)))
			}
			parsed = folded.Parsed
			t.pre = make(map[int]activities.Admission, len(folded.Admissions))
			for _, p := range folded.Admissions {
				t.pre[p.Seq] = p.Admission
			}
		} else if err := workflow.ExecuteLocalActivity(localCtx(ctx, fmt.Sprintf("parse round %d", round)), a.Parse,
			activities.ParseInput{Response: inf.Response, Catalog: inf.Catalog, Round: round, WorkflowID: t.workflowID}).Get(ctx, &parsed); err != nil {
			return t.fail(ctx, fmt.Errorf("parse round %d: %w", round, err))
		}
		if done, res, err := t.proposalHook(ctx, round, inf, &parsed); done {
			return res, err
		}
		assistant := activities.AssistantMessage(parsed)
		if folded != nil && folded.AssistantRecorded {
			t.messages = append(t.messages, assistant)
		} else if err := t.record(ctx, nil, nil, t.assistantKey(round), assistant); err != nil {
			return t.fail(ctx, err)
		}
		t.result.Prose = parsed.Text
		if handled, stop, err := t.catalogMessage(ctx, round, parsed.Calls); err != nil {
			return t.fail(ctx, err)
		} else if stop {
			return t.finish(ctx, EndCatalogStopped)
		} else if handled {
			continue
		}
		if len(parsed.Calls) == 0 {
			if parsed.Incomplete != "" {
				// The provider marked the message as not a finished answer (cut off, filtered,
				// refused, paused): its prose is kept, never reported as the answer.
				return t.finish(ctx, EndIncomplete)
			}
			return t.finish(ctx, "answered")
		}
		diverged := false
		add := func(pos []ProposalOutcome) {
			for _, po := range pos {
				t.result.Outcomes = append(t.result.Outcomes, po)
				if po.Outcome != activities.OutcomeExecuted && !t.failureIsRecorded(ctx, po) {
					diverged = true
				}
			}
		}
		// One call goes the same way on either path, so only a message with several calls
		// asks for (and records) the version marker.
		if len(parsed.Calls) > 1 && t.version(ctx, versionBatchConfirmations, 1) >= 1 {
			pos, err := t.handleBatch(ctx, round, parsed.Calls)
			add(pos) // the outcomes recorded before a failure stay in the result
			if err != nil {
				return t.fail(ctx, err)
			}
		} else {
			for _, call := range parsed.Calls {
				pos, err := t.handle(ctx, round, call)
				if err != nil {
					return t.fail(ctx, err)
				}
				add(pos)
			}
		}
		if req.StopOnDivergence && diverged {
			return t.finish(ctx, "diverged")
		}
	}
	return t.finish(ctx, "max_rounds")
}

// Version markers of TurnWorkflow changes (workflow.GetVersion): running turns replay with
// the code path they started on.
const (
	// versionLocalInferForSessions: recorded sessions infer through a local activity.
	versionLocalInferForSessions = "local-infer-for-sessions"
	// versionCorruptSignalKeepsExpiry: an undecodable confirmation signal is dropped and the
	// wait goes on watching the expiry timer (it used to block until the next signal).
	versionCorruptSignalKeepsExpiry = "corrupt-signal-keeps-expiry"
	// versionFailedIsRecorded: in a replayed session a capability that ran and reported an
	// error (outcome failed) served the recording's own tool error, so the replay goes on (it
	// used to stop there as a divergence). Version 2 also marks a failed outcome whose Execute
	// activity itself failed (reason execute_error), so only a tool-reported error counts as
	// the recording's.
	versionFailedIsRecorded = "failed-is-recorded"
	// versionDecisionMAC: decisions carry a MAC instead of the token; any presentation to the
	// pending proposal consumes its token (a refused one gets a fresh token); decide updates;
	// a confirmed call whose Execute failed is outcome_unknown, whatever its side effect.
	versionDecisionMAC = "decision-mac"
	// versionBatchConfirmations: the calls of one model message are admitted together, every
	// confirmation among them is pending at once and decided in any order, then the calls
	// execute and are recorded in call order (handleBatch). They used to go one by one, each
	// confirmation blocking the next call's admission.
	versionBatchConfirmations = "batch-confirmations"
	// versionRegistryChangeResurfaces: an approval refused because the capability's entry or
	// policy changed since its confirmation was issued voids that confirmation; the proposal
	// is admitted again and surfaced again under the served registry (it used to wait for
	// expiry).
	versionRegistryChangeResurfaces = "registry-change-resurfaces"
	// versionCatalogController: a message that proposes capability.catalog.list or
	// capability.catalog.describe goes through the turn's catalog controller (catalogMessage):
	// per-turn read, page, round and context bounds, a mixed catalog-and-effect message refused
	// as ambiguous, and a stopped controller ends the turn. Asked only when such a message
	// occurs.
	versionCatalogController = "catalog-controller"
	// versionFoldedRounds: the steps around each inference round run inside the activities
	// that already run (issue 12): round 1's Infer loads the context and records the opening;
	// every Infer parses, records the assistant message and admits the message's calls
	// (activities.FoldedRound); a local read-only call (automatic, or confirmed and approved)
	// runs and is recorded in one local activity (ExecuteRecorded); older changes' versions are
	// taken without markers (turn.version). The 4-round reference turn went from 11 events a round to 2 (Infer
	// local) or 7 (Infer regular).
	versionFoldedRounds = "folded-rounds"
)

// RefusalNotPending is the refusal of a decision for a confirmation that is not pending.
const RefusalNotPending = activities.RefusalNotPending

// RefusalConsumeFailed is the refusal of a decision whose consume failed for good (the store
// was away): the proposal keeps waiting and the approver decides again.
const RefusalConsumeFailed = "consume_failed"

// failureIsRecorded reports whether po is a capability error of a replayed session: the
// recorded run saw the same error, so it is not a divergence. The version marker is written
// only when such an outcome occurs.
func (t *turn) failureIsRecorded(ctx workflow.Context, po ProposalOutcome) bool {
	if !po.ToolReportedError() || t.req.Session == "" {
		return false
	}
	return t.version(ctx, versionFailedIsRecorded, 2) >= 1
}

// infer runs one inference round. A network model is a regular activity: slow, costly, its
// result durable on its own (DESIGN). A recorded session (replay or scripted: in-process, zero
// latency, deterministic) is a local activity, recorded as a marker: no server round trip, and
// 2 workflow tasks fewer per round.
func (t *turn) infer(ctx workflow.Context, round int, out *activities.InferOutput) error {
	in := activities.InferInput{WorkflowID: t.workflowID, Round: round, Model: t.req.Model, Session: t.req.Session,
		Conversation: t.req.Conversation, ContextLimit: t.req.ContextLimit, Scope: t.req.Scope, Now: workflow.Now(ctx)}
	if t.fold {
		in.Fold = &activities.InferFold{AssistantKey: t.assistantKey(round), FirstSeq: t.seq + 1, RunID: t.runID, Principal: t.req.Principal}
		if round == 1 {
			in.Fold.Opening, in.Fold.UserMessage, in.Fold.SystemPrompt, in.Fold.OpeningKey = true, t.req.Message, t.req.SystemPrompt, t.workflowID+"/input"
		}
	}
	// A retry after a dead worker (heartbeat timeout) starts at once; provider errors back
	// off 0.25, 0.75, 2.25, 6.75 s.
	retry := &temporal.RetryPolicy{InitialInterval: 250 * time.Millisecond, BackoffCoefficient: 3, MaximumInterval: 30 * time.Second,
		MaximumAttempts: 5, NonRetryableErrorTypes: []string{activities.ErrTypeSessionExhausted, activities.ErrTypeProviderRejected, activities.ErrTypeBadInput, activities.ErrTypeUnsupportedRecording}}
	summary := fmt.Sprintf("infer round %d", round)
	if t.localInfer(ctx) {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry, Summary: summarize(summary)})
		return workflow.ExecuteLocalActivity(lctx, a.Infer, in).Get(ctx, out)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 3 * time.Minute,
		HeartbeatTimeout: HeartbeatTimeout, RetryPolicy: retry, Summary: summarize(summary)})
	return workflow.ExecuteActivity(actx, a.Infer, in).Get(ctx, out)
}

// version is workflow.GetVersion(ctx, changeID, DefaultVersion, max) for the changes that
// predate versionFoldedRounds. A folded turn was started by code that already had every one of
// them, so it takes max without asking: no marker and no search-attribute upsert (2 history
// events and a visibility write each), and histories recorded with markers for them keep
// replaying because they are not folded.
func (t *turn) version(ctx workflow.Context, changeID string, max workflow.Version) workflow.Version {
	if t.fold {
		return max
	}
	return workflow.GetVersion(ctx, changeID, workflow.DefaultVersion, max)
}

// assistantKey is the context key of round's assistant message.
func (t *turn) assistantKey(round int) string {
	return fmt.Sprintf("%s/r%d/assistant", t.workflowID, round)
}

// localInfer reports whether the turn's rounds run as local activities (TurnRequest.InferMode).
// A recorded session without a mode keeps the version marker it always had; a mode the
// request names explicitly needs none (histories before InferMode never set it).
func (t *turn) localInfer(ctx workflow.Context) bool {
	switch t.req.InferMode {
	case InferLocal:
		return true
	case InferRegular:
		return false
	}
	return t.req.Session != "" && t.version(ctx, versionLocalInferForSessions, 1) == 1
}

// proposal is one call on its way through budgets and the executor stages.
type proposal struct {
	call  parse.Call
	round int
	po    ProposalOutcome
	audit *activities.AuditRecord
	env   activities.Envelope
	adm   activities.Admission
	// early is the verdict of a proposal that ended before stage 4 (parse, budget, stages
	// 1-3, denied earlier in the turn); nil when it goes on.
	early *earlyVerdict
	// wait is its confirmation (nil for an automatic call); deniedKey identifies the call for
	// the denied_earlier_in_turn rule.
	wait      *awaited
	deniedKey string
	// surfaced counts how often a registry change voided its confirmation and it was
	// surfaced again (MaxResurfaced).
	surfaced int
	// silent: its verdict adds no context message (an edited proposal, whose call id the
	// approver's proposal answers: one tool message per call id).
	silent bool
	// egress, set for a catalog read, admits its result into model context (or replaces it
	// with a budget refusal) before it is recorded.
	egress func(out *activities.ExecuteOutput)
}

type earlyVerdict struct {
	outcome        activities.Outcome
	stage          activities.Stage
	reason, detail string
}

// newProposal numbers a call as the turn's next proposal.
func (t *turn) newProposal(round int, call parse.Call) *proposal {
	t.seq++
	return &proposal{call: call, round: round,
		po: ProposalOutcome{Seq: t.seq, Round: round, CallID: call.CallID, CallIDAssigned: call.IDAssigned, Name: call.Name,
			Arguments: call.Arguments, Origin: OriginModel},
		audit: &activities.AuditRecord{WorkflowID: t.workflowID, RunID: t.runID, Seq: t.seq, CallID: call.CallID},
		env:   activities.Envelope{CallID: call.CallID},
	}
}

// verdict records pr's outcome (stage 6): its audit row, the confirmation decision if any, and
// its context message (unless pr is silent).
func (t *turn) verdict(ctx workflow.Context, pr *proposal, o activities.Outcome, stage activities.Stage, reason, detail string, decision *activities.Decision) (ProposalOutcome, error) {
	msgs := t.fillVerdict(pr, o, stage, reason, detail)
	// The summary names the call as the model did (escaped): operators read which call it was.
	summary := fmt.Sprintf("record %s #%d %s", o, pr.po.Seq, pr.call.Name)
	return pr.po, t.recordAs(ctx, summary, pr.audit, decision, t.proposalKey(pr), msgs...)
}

// fillVerdict writes an outcome into pr (activities.FillVerdict) and returns its context
// messages (none when pr is silent).
func (t *turn) fillVerdict(pr *proposal, o activities.Outcome, stage activities.Stage, reason, detail string) []inference.Message {
	po := &pr.po
	po.Outcome, po.Stage, po.Reason, po.Detail = o, stage, reason, detail
	activities.FillVerdict(pr.audit, &pr.env, o, stage, reason, detail, po.CapabilityID, po.Version, po.Approver)
	if pr.silent {
		return nil
	}
	return []inference.Message{activities.ResultMessage(pr.call, pr.env)}
}

// proposalKey is the context key of pr's outcome message.
func (t *turn) proposalKey(pr *proposal) string {
	return fmt.Sprintf("%s/p%d", t.workflowID, pr.po.Seq)
}

// handle takes one proposal through budgets and the executor stages and records its outcome
// (two outcomes when an approver edited it: the original's and the approver's proposal's).
// It is the path of a message with one call, and of every message of histories recorded
// before versionBatchConfirmations.
func (t *turn) handle(ctx workflow.Context, round int, call parse.Call) ([]ProposalOutcome, error) {
	pr := t.newProposal(round, call)
	if err := t.admit(ctx, pr); err != nil {
		return nil, err
	}
	if pr.early == nil && !pr.adm.Automatic {
		if err := t.issue(ctx, pr); err != nil {
			return nil, err
		}
		if err := t.await(ctx, pr.wait); err != nil {
			return nil, err
		}
		for pr.wait != nil && pr.wait.end == endVoided {
			again, err := t.resurface(ctx, pr)
			if err != nil || !again {
				if err != nil {
					return nil, err
				}
				break
			}
			if err := t.await(ctx, pr.wait); err != nil {
				return nil, err
			}
		}
	}
	return t.finalize(ctx, pr)
}

// handleBatch takes the calls of one model message through the executor together: every call
// passes budgets and stages 1-3 in call order; every call that needs a confirmation gets its
// own (own token, own id), all pending at once; the turn waits until each is decided, expired
// or closed, in any order; then the calls execute and are recorded in call order, so their
// context messages keep the order of the calls (versionBatchConfirmations).
func (t *turn) handleBatch(ctx workflow.Context, round int, calls []parse.Call) ([]ProposalOutcome, error) {
	prs := make([]*proposal, 0, len(calls))
	for _, call := range calls {
		pr := t.newProposal(round, call)
		if err := t.admit(ctx, pr); err != nil {
			return nil, err
		}
		prs = append(prs, pr)
	}
	var ws []*awaited
	for _, pr := range prs {
		if pr.early != nil || pr.adm.Automatic {
			continue
		}
		if err := t.issue(ctx, pr); err != nil {
			return nil, err
		}
		ws = append(ws, pr.wait)
	}
	for len(ws) > 0 {
		if err := t.awaitBatch(ctx, ws); err != nil {
			return nil, err
		}
		// Confirmations a registry change voided: those proposals are admitted again and,
		// still needing a human, surfaced again together.
		ws = ws[:0:0]
		for _, pr := range prs {
			if pr.wait == nil || pr.wait.end != endVoided {
				continue
			}
			again, err := t.resurface(ctx, pr)
			if err != nil {
				return nil, err
			}
			if again {
				ws = append(ws, pr.wait)
			}
		}
	}
	var out []ProposalOutcome
	for _, pr := range prs {
		pos, err := t.finalize(ctx, pr)
		if err != nil {
			return out, err
		}
		out = append(out, pos...)
	}
	return out, nil
}

// admit runs the checks before stage 4 on pr: parse, the turn and capability budgets, stages
// 1-3 (Admit) and the denied_earlier_in_turn rule. A proposal they end gets pr.early.
func (t *turn) admit(ctx workflow.Context, pr *proposal) error {
	call := pr.call
	end := func(o activities.Outcome, stage activities.Stage, reason, detail string) error {
		pr.early = &earlyVerdict{outcome: o, stage: stage, reason: reason, detail: detail}
		return nil
	}
	if !call.Candidate() {
		return end(activities.OutcomeParseFailed, activities.StageParse, string(call.Reason), call.Detail)
	}
	// Budgets, each on its own: the per-turn cap (turn config) and the per-capability cap
	// (registry). Exhaustion is surfaced to the model, never dropped.
	ref, known := t.catalog[call.Name]
	if t.calls >= t.req.MaxCalls {
		return end(activities.OutcomeBudgetExhausted, activities.StageBudget, "turn_budget",
			fmt.Sprintf("this turn may make at most %d capability calls", t.req.MaxCalls))
	}
	if known {
		k := fmt.Sprintf("%s@%d", ref.CapabilityID, ref.Version)
		if t.perCap[k] >= ref.PerTurnCap {
			pr.po.CapabilityID, pr.po.Version = ref.CapabilityID, ref.Version
			return end(activities.OutcomeBudgetExhausted, activities.StageBudget, "capability_budget",
				fmt.Sprintf("%s may be called at most %d times a turn", k, ref.PerTurnCap))
		}
		t.perCap[k]++
	}
	t.calls++

	if pre, ok := t.pre[pr.po.Seq]; ok {
		pr.adm = pre // stages 1-3 ran in this round's Infer (versionFoldedRounds)
	} else if err := workflow.ExecuteLocalActivity(localCtx(ctx, "admit "+call.Name), a.Admit,
		t.admitInput(ctx, pr)).Get(ctx, &pr.adm); err != nil {
		return fmt.Errorf("admit #%d: %w", pr.po.Seq, err)
	}
	adm := pr.adm
	pr.po.CapabilityID, pr.po.Version = adm.CapabilityID, adm.Version
	pr.audit.ArgsDigest = adm.ArgsDigest
	if !adm.Admitted {
		return end(activities.OutcomeRejected, adm.Stage, adm.Code, adm.Detail)
	}
	if !adm.Automatic {
		pr.deniedKey = adm.Key() + "/" + adm.ArgsDigest
		if t.denied[pr.deniedKey] {
			return end(activities.OutcomeDenied, activities.StageConfirm, "denied_earlier_in_turn",
				"an identical call was denied earlier in this turn; it is not asked again")
		}
	}
	return nil
}

// admitInput is the Admit input of pr: the call, the turn's scope and principal (checked
// against the policy) and the workflow's clock (deprecation deadlines).
func (t *turn) admitInput(ctx workflow.Context, pr *proposal) activities.AdmitInput {
	return activities.AdmitInput{Call: pr.call, Scope: t.req.Scope, Principal: t.req.Principal, Now: workflow.Now(ctx),
		WorkflowID: t.workflowID, RunID: t.runID, Seq: pr.po.Seq}
}

// resurface handles pr's confirmation voided by a registry change (versionRegistryChangeResurfaces):
// the old confirmation is closed (expired, registry_changed), the call is admitted again under
// the served registry and, when it still needs a human, issued a new confirmation (again is
// true: wait on pr.wait). Past MaxResurfaced, or when it is no longer admitted or now
// automatic, pr gets its verdict without another wait.
func (t *turn) resurface(ctx workflow.Context, pr *proposal) (again bool, err error) {
	old := pr.wait
	if err := t.record(ctx, nil, &activities.Decision{ConfirmationID: old.p.ConfirmationID, Decision: "expired",
		Reason: activities.TokenRegistryChanged}, ""); err != nil {
		return false, err
	}
	pr.wait = nil
	pr.surfaced++
	end := func(o activities.Outcome, stage activities.Stage, reason, detail string) (bool, error) {
		pr.early = &earlyVerdict{outcome: o, stage: stage, reason: reason, detail: detail}
		return false, nil
	}
	if pr.surfaced >= MaxResurfaced {
		return end(activities.OutcomeExpired, activities.StageConfirm, activities.TokenRegistryChanged,
			fmt.Sprintf("the registry changed under this call's confirmation %d times; it was closed without running", MaxResurfaced))
	}
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, summarize("admit again "+pr.adm.Key())), a.Admit, t.admitInput(ctx, pr)).Get(ctx, &pr.adm); err != nil {
		return false, fmt.Errorf("admit #%d again: %w", pr.po.Seq, err)
	}
	adm := pr.adm
	pr.po.CapabilityID, pr.po.Version = adm.CapabilityID, adm.Version
	pr.audit.ArgsDigest = adm.ArgsDigest
	if !adm.Admitted {
		return end(activities.OutcomeRejected, adm.Stage, adm.Code, adm.Detail)
	}
	if adm.Automatic {
		return false, nil
	}
	pr.deniedKey = adm.Key() + "/" + adm.ArgsDigest
	if err := t.issue(ctx, pr); err != nil {
		return false, err
	}
	return true, nil
}

// issue asks for pr's confirmation (IssueConfirmation: its own token and id) and sets pr.wait.
func (t *turn) issue(ctx workflow.Context, pr *proposal) error {
	call, adm := pr.call, pr.adm
	var iss activities.IssueOutput
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, "issue confirmation "+adm.Key()), a.IssueConfirmation, activities.IssueInput{
		WorkflowID: t.workflowID, RunID: t.runID, Seq: pr.po.Seq, CallID: call.CallID, CapabilityID: adm.CapabilityID,
		Version: adm.Version, ArgsDigest: adm.ArgsDigest, Arguments: call.Arguments, Display: adm.Display, TTL: t.req.ConfirmationTTL,
		RegistryRevision: adm.RegistryRevision, Surfaced: pr.surfaced,
	}).Get(ctx, &iss); err != nil {
		return fmt.Errorf("issue confirmation #%d: %w", pr.po.Seq, err)
	}
	pr.po.ConfirmationID = iss.ConfirmationID
	pr.wait = &awaited{adm: adm, p: PendingConfirmation{ConfirmationID: iss.ConfirmationID, WorkflowID: t.workflowID, Seq: pr.po.Seq,
		CallID: call.CallID, ToolName: call.Name, CapabilityID: adm.CapabilityID, Version: adm.Version, Arguments: call.Arguments,
		Display: adm.Display, ArgsDigest: adm.ArgsDigest, ExpiresAt: iss.ExpiresAt, Disclosure: iss.Disclosure}}
	return nil
}

// finalize records pr's outcome once nothing is left to wait for: its early verdict, the end
// of its confirmation (expired, closed, denied, edited) or its execution.
func (t *turn) finalize(ctx workflow.Context, pr *proposal) ([]ProposalOutcome, error) {
	one := func(po ProposalOutcome, err error) ([]ProposalOutcome, error) { return []ProposalOutcome{po}, err }
	if e := pr.early; e != nil {
		return one(t.verdict(ctx, pr, e.outcome, e.stage, e.reason, e.detail, nil))
	}
	var decision *activities.Decision
	if w := pr.wait; w != nil {
		id := w.p.ConfirmationID
		switch {
		case w.end == endExpired:
			return one(t.verdict(ctx, pr, activities.OutcomeExpired, activities.StageConfirm, "confirmation_expired",
				fmt.Sprintf("no decision within %s; the call was not run and will not be retried", t.req.ConfirmationTTL),
				&activities.Decision{ConfirmationID: id, Decision: "expired"}))
		case w.end == endRefusals:
			return one(t.verdict(ctx, pr, activities.OutcomeExpired, activities.StageConfirm, ReasonTooManyRefusedDecisions,
				fmt.Sprintf("%d decisions presented for this call were refused; it was closed without running and will not be retried", MaxRefusedDecisions),
				&activities.Decision{ConfirmationID: id, Decision: "expired", Reason: ReasonTooManyRefusedDecisions}))
		case w.decided == nil:
			return nil, fmt.Errorf("proposal #%d: its wait ended without a decision", pr.po.Seq)
		}
		d := *w.decided
		pr.po.Approver = d.Approver
		switch d.Decision {
		case DecisionDeny:
			t.denied[pr.deniedKey] = true
			return one(t.verdict(ctx, pr, activities.OutcomeDenied, activities.StageConfirm, "denied_by_approver", d.Reason,
				&activities.Decision{ConfirmationID: id, Decision: "denied", Approver: d.Approver, Reason: d.Reason}))
		case DecisionEdit:
			return t.edit(ctx, pr, d, w.editedDigest)
		}
		decision = &activities.Decision{ConfirmationID: id, Decision: "approved", Approver: d.Approver}
	}
	return one(t.execute(ctx, pr, decision))
}

// edit applies an approver's edit of pr: pr is recorded denied (edited_by_approver, no context
// message of its own) and the approver's arguments become a new proposal (the next seq) of the
// same tool, recorded as approver-originated (proposal_edited, with both digests). It counts
// toward the turn's call budget (the capability's cap was taken by pr), passes stages 1-3
// again, and the edit is its confirmation: the approver signed exactly these arguments. Its
// result answers the model's call id, with the arguments that ran.
func (t *turn) edit(ctx workflow.Context, pr *proposal, d Decision, editedDigest string) ([]ProposalOutcome, error) {
	call := pr.call
	call.Arguments = d.Arguments
	ed := t.newProposal(pr.round, call)
	ed.po.Origin, ed.po.EditOf, ed.po.Approver = OriginApprover, pr.po.Seq, d.Approver
	ed.env.Origin, ed.env.EditedBy, ed.env.Arguments = OriginApprover, d.Approver, d.Arguments

	t.denied[pr.deniedKey] = true
	pr.silent = true
	orig, err := t.verdict(ctx, pr, activities.OutcomeDenied, activities.StageConfirm, ReasonEditedByApprover,
		fmt.Sprintf("the approver replaced the arguments; the edited call is proposal #%d", ed.po.Seq),
		&activities.Decision{ConfirmationID: pr.wait.p.ConfirmationID, Decision: "denied", Approver: d.Approver, Reason: ReasonEditedByApprover})
	if err != nil {
		return nil, err
	}
	out := []ProposalOutcome{orig}
	adm := pr.adm
	if err := t.record(ctx, &activities.AuditRecord{Kind: activities.AuditProposalEdited, WorkflowID: t.workflowID, RunID: t.runID,
		Seq: ed.po.Seq, CallID: call.CallID, CapabilityID: adm.CapabilityID, Version: adm.Version, Stage: activities.StageConfirm,
		Reason: ReasonEditedByApprover, Detail: fmt.Sprintf("proposal #%d (%s) edited by the approver into proposal #%d", pr.po.Seq, pr.wait.p.ConfirmationID, ed.po.Seq),
		ArgsDigest: editedDigest, OriginalDigest: adm.ArgsDigest, Approver: d.Approver}, nil, ""); err != nil {
		return out, err
	}
	last := func(po ProposalOutcome, err error) ([]ProposalOutcome, error) { return append(out, po), err }
	if t.calls >= t.req.MaxCalls {
		ed.po.CapabilityID, ed.po.Version = adm.CapabilityID, adm.Version
		return last(t.verdict(ctx, ed, activities.OutcomeBudgetExhausted, activities.StageBudget, "turn_budget",
			fmt.Sprintf("this turn may make at most %d capability calls", t.req.MaxCalls), nil))
	}
	t.calls++
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, fmt.Sprintf("admit #%d, edit of #%d (%s)", ed.po.Seq, pr.po.Seq, adm.Key())), a.Admit,
		t.admitInput(ctx, ed)).Get(ctx, &ed.adm); err != nil {
		return out, fmt.Errorf("admit #%d: %w", ed.po.Seq, err)
	}
	ed.po.CapabilityID, ed.po.Version = ed.adm.CapabilityID, ed.adm.Version
	ed.audit.ArgsDigest = ed.adm.ArgsDigest
	if !ed.adm.Admitted {
		return last(t.verdict(ctx, ed, activities.OutcomeRejected, ed.adm.Stage, ed.adm.Code, ed.adm.Detail, nil))
	}
	var decision *activities.Decision
	if !ed.adm.Automatic {
		var conf activities.ConfirmEditOutput
		if err := workflow.ExecuteLocalActivity(localCtx(ctx, "confirm edit "+ed.adm.Key()), a.ConfirmEdit, activities.ConfirmEditInput{
			WorkflowID: t.workflowID, RunID: t.runID, Seq: ed.po.Seq, EditOf: pr.po.Seq, Original: pr.wait.p.ConfirmationID,
			CallID: call.CallID, CapabilityID: ed.adm.CapabilityID, Version: ed.adm.Version, ArgsDigest: ed.adm.ArgsDigest,
			Arguments: call.Arguments, Display: ed.adm.Display, Approver: d.Approver, RegistryRevision: ed.adm.RegistryRevision,
		}).Get(ctx, &conf); err != nil {
			return out, fmt.Errorf("confirm edit #%d: %w", ed.po.Seq, err)
		}
		if !conf.Confirmed {
			return last(t.verdict(ctx, ed, activities.OutcomeRejected, activities.StageConfirm, activities.ReasonNotApproved, conf.Detail, nil))
		}
		ed.po.ConfirmationID = conf.ConfirmationID
		decision = &activities.Decision{ConfirmationID: conf.ConfirmationID, Decision: "approved", Approver: d.Approver}
	}
	return last(t.execute(ctx, ed, decision))
}

// execute runs stage 5 for an admitted (and, when it needs one, approved) proposal and
// records its outcome.
func (t *turn) execute(ctx workflow.Context, pr *proposal, decision *activities.Decision) (ProposalOutcome, error) {
	call, adm, po, env := pr.call, pr.adm, &pr.po, &pr.env
	// Stage 5. Local read-only capabilities run as local activities (no server round trip);
	// external or effectful ones as regular activities with a durable result.
	in := activities.ExecuteInput{WorkflowID: t.workflowID, Seq: po.Seq, Round: pr.round, CallID: call.CallID, CapabilityID: adm.CapabilityID,
		Version: adm.Version, Arguments: call.Arguments, Session: t.req.Session, RegistryRevision: adm.RegistryRevision,
		ConfirmationID: po.ConfirmationID, Principal: t.req.Principal, Scope: t.req.Scope}
	summary := summarize("execute " + adm.Key())
	retry := &temporal.RetryPolicy{InitialInterval: 250 * time.Millisecond, BackoffCoefficient: 4, MaximumInterval: 10 * time.Second,
		MaximumAttempts: 3, NonRetryableErrorTypes: []string{activities.ErrTypeBadInput}}
	var out activities.ExecuteOutput
	var err error
	recorded := false
	// A folded turn runs every local read-only call as a local activity, confirmed or not (DESIGN:
	// local read-only capabilities need no server round trip; a confirmed one is still
	// at most once through the execution ledger, which answers a re-run after a crash), and
	// records its outcome in the same activity (versionFoldedRounds).
	localRead := t.fold && adm.SideEffect == registry.SideEffectNone && adm.Network == registry.NetworkLocal
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: adm.Timeout + 5*time.Second, RetryPolicy: retry, Summary: summary})
	if localRead && pr.egress == nil && !pr.silent {
		err = workflow.ExecuteLocalActivity(lctx, a.ExecuteRecorded,
			activities.ExecuteRecordedInput{Execute: in, Audit: *pr.audit, Envelope: pr.env, Call: call, Approver: po.Approver,
				Decision: decision, Conversation: t.req.Conversation, ContextKey: t.proposalKey(pr)}).Get(ctx, &out)
		recorded = err == nil
	} else if adm.Automatic || localRead {
		err = workflow.ExecuteLocalActivity(lctx, a.Execute, in).Get(ctx, &out)
	} else {
		err = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: adm.Timeout + 5*time.Second, HeartbeatTimeout: HeartbeatTimeout, RetryPolicy: retry, Summary: summary}),
			a.Execute, in).Get(ctx, &out)
	}
	if err != nil {
		out = activities.ExecuteOutput{Outcome: activities.OutcomeFailed}
		out.Output.Error = err.Error()
		if t.version(ctx, versionFailedIsRecorded, 2) >= 2 {
			out.Reason = activities.ReasonExecuteError
		}
		var appErr *temporal.ApplicationError
		atMostOnce := adm.SideEffect != registry.SideEffectNone ||
			(!adm.Automatic && t.version(ctx, versionDecisionMAC, 1) >= 1)
		if atMostOnce && !(errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeBadInput) {
			// Execute refuses bad input before the effect starts; any other failure may come
			// after it (the effect ran, then the ledger or every retry failed): unknown, not failed.
			out.Outcome = activities.OutcomeUnknown
			out.Output.Error = "the effect may have started before execution failed; it was not run again: " + err.Error()
		}
	}
	if pr.egress != nil {
		pr.egress(&out)
	}
	activities.ApplyExecuted(env, out)
	if out.Outcome == activities.OutcomeExecuted || out.Outcome == activities.OutcomeFailed {
		t.result.Results = append(t.result.Results, CapabilityResult{Seq: po.Seq, CapabilityID: adm.CapabilityID, Version: adm.Version,
			Data: out.Output.Data, SourceURL: out.Output.SourceURL, Error: out.Output.Error, RetrievedAt: out.RetrievedAt})
	}
	po.Attempts = out.Attempts
	if out.Output.Citation != nil {
		t.result.Citations = append(t.result.Citations, *out.Output.Citation)
	}
	detail := out.Output.Error
	if recorded {
		// ExecuteRecorded stored exactly these messages and this audit row.
		t.messages = append(t.messages, t.fillVerdict(pr, out.Outcome, activities.StageExecute, out.Reason, detail)...)
		return pr.po, nil
	}
	return t.verdict(ctx, pr, out.Outcome, activities.StageExecute, out.Reason, detail, decision)
}

// await waits for a valid decision on w, its expiry or its closing (MaxRefusedDecisions), and
// sets w.end (and w.decided). Refused decisions are audited and the proposal keeps waiting
// (with a fresh token when the refused one consumed it). It is the wait of one proposal at a
// time (handle).
func (t *turn) await(ctx workflow.Context, w *awaited) error {
	p := w.p
	t.pending = append(t.pending, p)
	t.setStatus(ctx, StatusAwaitingConfirmation)
	defer func() {
		t.pending = t.pending[:0]
		t.setStatus(ctx, StatusRunning)
	}()
	w.legacy = t.version(ctx, versionDecisionMAC, 1) == workflow.DefaultVersion
	t.awaits = []*awaited{w}
	defer func() { t.awaits = nil }()
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	w.timer = workflow.NewTimerWithOptions(tctx, t.req.ConfirmationTTL, workflow.TimerOptions{Summary: summarize("confirmation " + p.ConfirmationID + " expires")})
	if w.legacy {
		sig, expired, err := t.awaitLegacy(ctx, p, w.adm, w.timer)
		if expired {
			w.end = endExpired
		} else if err == nil {
			w.end, w.decided = endDecided, &sig
		}
		return err
	}
	return t.waitAll(ctx, []*awaited{w})
}

// awaitBatch waits on the confirmations of one model message together: all are pending at
// once (the pending query lists them, AirlockPendingConfirmations counts them), each with its
// own expiry timer; decisions come in any order; it returns when each wait has ended.
func (t *turn) awaitBatch(ctx workflow.Context, ws []*awaited) error {
	for _, w := range ws {
		t.pending = append(t.pending, w.p)
	}
	t.setStatus(ctx, StatusAwaitingConfirmation)
	t.awaits = ws
	cancels := make([]workflow.CancelFunc, 0, len(ws))
	for _, w := range ws {
		tctx, cancel := workflow.WithCancel(ctx)
		cancels = append(cancels, cancel)
		w.timer = workflow.NewTimerWithOptions(tctx, t.req.ConfirmationTTL, workflow.TimerOptions{Summary: summarize("confirmation " + w.p.ConfirmationID + " expires")})
	}
	err := t.waitAll(ctx, ws)
	for _, cancel := range cancels {
		cancel()
	}
	t.awaits = nil
	t.pending = t.pending[:0]
	t.setStatus(ctx, StatusRunning)
	return err
}

// waitAll runs the wait loop over ws (their timers started) until every wait has ended. A
// decision reaches present from the signal (here) or a decide update (its handler); a
// presentation in flight when a timer fired is judged before that wait ends as expired.
func (t *turn) waitAll(ctx workflow.Context, ws []*awaited) error {
	shown := len(t.pending)
	for {
		var sig Decision
		fired, got := false, false
		sel := workflow.NewSelector(ctx)
		// ReceiveAsync, not Receive: a buffered payload that does not decode is dropped by the
		// SDK, and a blocking Receive would wait for the next signal with the timer unwatched.
		sel.AddReceive(t.sigCh, func(c workflow.ReceiveChannel, _ bool) { got = c.ReceiveAsync(&sig) })
		sel.AddReceive(t.wake, func(c workflow.ReceiveChannel, _ bool) { c.ReceiveAsync(nil) })
		for _, w := range ws {
			if w.end == endOpen && !w.fired {
				sel.AddFuture(w.timer, func(workflow.Future) { w.fired, fired = true, true })
			}
		}
		sel.Select(ctx)
		if got {
			if _, err := t.present(ctx, sig); err != nil {
				return err
			}
		}
		if fired {
			// A presentation in flight when the timer fired is judged first (its consume
			// checks the expiry on the worker's clock); only then does the wait end.
			if err := workflow.Await(ctx, func() bool { return !t.presenting }); err != nil {
				return err
			}
		}
		open := 0
		for _, w := range ws {
			if w.end != endOpen {
				continue
			}
			switch {
			case w.decided != nil:
				w.end = endDecided
			case w.voided:
				w.end = endVoided
			case w.fired:
				w.end = endExpired
			case w.refused >= MaxRefusedDecisions:
				w.end = endRefusals
			default:
				open++
				continue
			}
			t.unpend(w.p.ConfirmationID)
		}
		if open == 0 {
			return nil
		}
		if len(t.pending) != shown {
			// Some of a batch were decided: operators see how many still wait.
			shown = len(t.pending)
			t.setStatus(ctx, StatusAwaitingConfirmation)
		}
	}
}

// unpend drops confirmation id from the pending query's list.
func (t *turn) unpend(id string) {
	for i, p := range t.pending {
		if p.ConfirmationID == id {
			t.pending = append(t.pending[:i], t.pending[i+1:]...)
			return
		}
	}
}

// present judges one decision (from the signal or a decide update) against the pending
// proposal it names: any presentation to it consumes its token, a valid one decides it, a
// refused one is audited and leaves the proposal waiting with a fresh token. Presentations
// run one at a time, in arrival order.
func (t *turn) present(ctx workflow.Context, d Decision) (DecisionResult, error) {
	if err := workflow.Await(ctx, func() bool { return !t.presenting }); err != nil {
		return DecisionResult{}, err
	}
	w := t.awaitedFor(d.ConfirmationID)
	if w == nil || w.legacy || w.decided != nil || w.end != endOpen {
		detail := fmt.Sprintf("confirmation %q is not pending in this turn", d.ConfirmationID)
		if w != nil && w.decided != nil {
			detail = fmt.Sprintf("confirmation %q was already decided (%s by %s)", d.ConfirmationID, w.decided.Decision, w.decided.Approver)
		}
		// Audited against the proposal it names, or the one proposal waiting now, if any.
		if w == nil && len(t.awaits) == 1 {
			w = t.awaits[0]
		}
		seq, waiting := t.seq, (*PendingConfirmation)(nil)
		if w != nil {
			seq, waiting = w.p.Seq, &w.p
		}
		return DecisionResult{Refusal: RefusalNotPending, Detail: detail}, t.refuse(ctx, seq, waiting, d.Approver, RefusalNotPending, detail)
	}
	t.presenting = true
	defer func() { t.presenting = false }()
	p := w.p
	cons, err := t.consume(ctx, p, w.adm, d)
	if err != nil {
		// The consume failed for good (the store was away through every retry). The turn goes
		// on waiting: the next presentation takes the token over (ConsumeConfirmation), so the
		// proposal stays decidable. The refusal is audited if the store lets it.
		detail := "the decision could not be judged: " + err.Error()
		w.refused++
		t.wake.SendAsync(true)
		if aerr := t.refuse(ctx, p.Seq, &p, d.Approver, RefusalConsumeFailed, detail); aerr != nil {
			workflow.GetLogger(ctx).Error("audit a decision that could not be judged", "confirmation", p.ConfirmationID, "error", aerr)
		}
		return DecisionResult{Refusal: RefusalConsumeFailed, Detail: detail}, nil
	}
	if !cons.Valid {
		detail := cons.Detail
		if cons.Reissued {
			detail += "; its token was consumed and a fresh one issued: the proposal is still waiting"
		}
		if cons.Refusal == activities.TokenRegistryChanged &&
			t.version(ctx, versionRegistryChangeResurfaces, 1) >= 1 {
			w.voided = true
			detail = cons.Detail + "; the confirmation is void and the call is surfaced again under the new registry"
		}
		res := DecisionResult{Refusal: cons.Refusal, Detail: detail, Reissued: cons.Reissued}
		w.refused++
		t.wake.SendAsync(true)
		return res, t.refuse(ctx, p.Seq, &p, d.Approver, cons.Refusal, detail)
	}
	w.decided, w.editedDigest = &d, cons.EditedDigest
	t.unpend(p.ConfirmationID)
	t.wake.SendAsync(true)
	return DecisionResult{Accepted: true}, nil
}

// consume presents d to the pending proposal p (stage 4: ConsumeConfirmation, a local
// activity), as presentation number t.presentations of this run.
func (t *turn) consume(ctx workflow.Context, p PendingConfirmation, adm activities.Admission, d Decision) (activities.ConsumeOutput, error) {
	t.presentations++
	var cons activities.ConsumeOutput
	err := workflow.ExecuteLocalActivity(localCtx(ctx, "consume confirmation "+p.ConfirmationID), a.ConsumeConfirmation, activities.ConsumeInput{
		ConfirmationID: p.ConfirmationID, WorkflowID: t.workflowID, RunID: t.runID, Seq: p.Seq,
		CapabilityID: adm.CapabilityID, Version: adm.Version, ArgsDigest: adm.ArgsDigest,
		Presentation: fmt.Sprintf("%s/%s/%d/%d", t.workflowID, t.runID, p.Seq, t.presentations),
		Decision:     d.Decision, Approver: d.Approver, Reason: d.Reason, Nonce: d.Nonce, MAC: d.MAC, Arguments: d.Arguments,
		DisplayedDigest: d.ArgsDigest, Attestation: d.Attestation,
		Principal: t.req.Principal, DistinctApprover: adm.DistinctApprover,
	}).Get(ctx, &cons)
	if err != nil {
		return cons, fmt.Errorf("consume confirmation %s: %w", p.ConfirmationID, err)
	}
	return cons, nil
}

// refuse audits a refused decision (confirmation_refused); p is the proposal it was presented
// to, nil when none was pending.
func (t *turn) refuse(ctx workflow.Context, seq int, p *PendingConfirmation, approver, code, detail string) error {
	t.refusals++
	r := &activities.AuditRecord{Kind: activities.AuditConfirmationRefused, WorkflowID: t.workflowID, RunID: t.runID,
		Seq: seq, Attempt: t.refusals, Stage: activities.StageConfirm, Reason: code, Detail: detail, Approver: approver}
	if p != nil {
		r.CallID, r.CapabilityID, r.Version, r.ArgsDigest = p.CallID, p.CapabilityID, p.Version, p.ArgsDigest
	}
	return t.record(ctx, r, nil, "")
}

// awaitLegacy is the wait as histories recorded before versionDecisionMAC ran it: checks
// before the consume, a refused consume leaves the proposal without a usable token. Kept
// only so those histories replay; new waits never take it.
func (t *turn) awaitLegacy(ctx workflow.Context, p PendingConfirmation, adm activities.Admission, timer workflow.Future) (Decision, bool, error) {
	for {
		var sig Decision
		fired, got := false, false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(t.sigCh, func(c workflow.ReceiveChannel, _ bool) { got = c.ReceiveAsync(&sig) })
		sel.AddFuture(timer, func(workflow.Future) { fired = true })
		sel.Select(ctx)
		if fired {
			return sig, true, nil
		}
		if !got {
			if t.version(ctx, versionCorruptSignalKeepsExpiry, 1) == workflow.DefaultVersion {
				t.sigCh.Receive(ctx, &sig) // as histories recorded before the change ran
			} else {
				continue
			}
		}
		refuse := func(code, detail string) error { return t.refuse(ctx, p.Seq, &p, sig.Approver, code, detail) }
		var err error
		switch {
		case sig.ConfirmationID != p.ConfirmationID:
			err = refuse(RefusalNotPending, fmt.Sprintf("confirmation %q is not pending in this turn", sig.ConfirmationID))
		case sig.Approver == "":
			err = refuse(activities.ApproverMissing, "a decision must name its approver")
		case adm.DistinctApprover && sig.Decision == DecisionApprove && sig.Approver == t.req.Principal:
			err = refuse(activities.ApproverIsRequester, fmt.Sprintf("%s requires an approver other than the requester %q", adm.Key(), t.req.Principal))
		case sig.Decision != DecisionApprove && sig.Decision != DecisionDeny:
			err = refuse(activities.BadDecision, fmt.Sprintf("decision %q is not approve or deny", sig.Decision))
		default:
			cons, cerr := t.consume(ctx, p, adm, sig)
			if cerr != nil {
				return sig, false, cerr
			}
			if cons.Valid {
				return sig, false, nil
			}
			err = refuse(cons.Refusal, "the presented token does not authorize this proposal")
		}
		if err != nil {
			return sig, false, err
		}
	}
}

// drainLateSignals refuses and audits decisions that arrived for confirmations no longer
// pending (expired or already decided), so a late approval leaves a trace instead of
// vanishing with the workflow, and lets decide updates in flight get their answer.
func (t *turn) drainLateSignals(ctx workflow.Context) {
	for {
		var sig Decision
		if !t.sigCh.ReceiveAsync(&sig) {
			break
		}
		t.refusals++
		err := t.record(ctx, &activities.AuditRecord{Kind: activities.AuditConfirmationRefused, WorkflowID: t.workflowID, RunID: t.runID,
			Seq: t.seq, Attempt: t.refusals, Stage: activities.StageConfirm, Reason: RefusalNotPending, Approver: sig.Approver,
			Detail: fmt.Sprintf("decision for %q arrived after it stopped pending", sig.ConfirmationID)}, nil, "")
		if err != nil {
			workflow.GetLogger(ctx).Error("audit a late confirmation signal", "error", err)
		}
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		workflow.GetLogger(ctx).Error("wait for decide updates in flight", "error", err)
	}
}

func (t *turn) finish(ctx workflow.Context, reason string) (TurnResult, error) {
	t.drainLateSignals(ctx)
	t.result.Catalog = t.catalogControl()
	t.result.Status = StatusCompleted
	t.result.EndReason = reason
	t.setStatus(ctx, StatusCompleted)
	t.save(ctx)
	return t.result, nil
}

func (t *turn) fail(ctx workflow.Context, err error) (TurnResult, error) {
	t.drainLateSignals(ctx)
	t.result.Catalog = t.catalogControl()
	t.result.Status = StatusFailed
	t.result.EndReason = "error: " + err.Error()
	t.setStatus(ctx, StatusFailed)
	t.save(ctx)
	return t.result, err
}

func (t *turn) save(ctx workflow.Context) {
	// Marshalling a struct without maps is deterministic.
	b, err := json.Marshal(t.result) //workflowcheck:ignore
	if err != nil {
		workflow.GetLogger(ctx).Error("encode turn result", "error", err)
		return
	}
	if err := workflow.ExecuteLocalActivity(localCtx(ctx, "finish turn"), a.FinishTurn,
		activities.FinishInput{WorkflowID: t.workflowID, Conversation: t.req.Conversation, Result: b}).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("save turn result", "error", err)
	}
}
