package workflows

// The turn workflow, in four files a stranger can read in order:
//
//   - turn.go: TurnWorkflow, the turn's state and its main loop (one inference round after
//     another until an answer, a stop or the round budget).
//   - turn_calls.go: one model message's calls through budgets and the six executor stages
//     (admit, confirm, execute, record), and an approver's edit.
//   - turn_confirm.go: confirmations: the wait on pending decisions, the decide update and
//     the confirmation signal, and how each decision is judged and audited.
//   - turn_result.go: recording (stage 6), the status search attributes and the turn's end.
//
// catalog.go (the catalog controller) and proposals.go (agent proposals) are the two kinds of
// message the loop hands off before the executor.
//
// A turn is Pinned to the build it started on (Worker Versioning, workers.RegisterWorkflows):
// it finishes on that build's code, so this code has one path and no workflow.GetVersion. A
// change that would not replay a running turn's history needs a new build id, never a branch.

import (
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
	terms := RequestTerms(req) // as the starter signed them, before the defaults
	req.applyDefaults()
	info := workflow.GetInfo(ctx)
	t := &turn{
		req:        req,
		terms:      terms,
		workflowID: info.WorkflowExecution.ID,
		runID:      info.WorkflowExecution.RunID,
		perCap:     map[string]int{},
		denied:     map[string]bool{},
		catalog:    map[string]activities.CatalogRef{},
		nonces:     map[string]bool{},
		retryIn:    deferredFirstRetry,
	}
	t.result.WorkflowID = t.workflowID
	t.result.Citations = []registry.Citation{}
	t.result.Results = []CapabilityResult{}
	t.result.Outcomes = []ProposalOutcome{}
	if err := t.setup(ctx); err != nil {
		return t.result, err
	}
	// The turn runs on a context a cancellation does not cut: a cancelled turn stops at its
	// next step and still records how it ended (its pending confirmations closed, its result
	// saved), then reports the cancellation (issue 20, item 4).
	run, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(run, func(gctx workflow.Context) {
		ctx.Done().Receive(gctx, nil)
		if t.stop == "" {
			t.stop = StopCancelled
		}
		t.wake.SendAsync(true)
	})
	return t.run(run)
}

// turn is the state of one TurnWorkflow run.
type turn struct {
	req TurnRequest
	// terms is RequestTerms of the request as started (before defaults): round 1 passes it to
	// the attestation check.
	terms             string
	workflowID, runID string
	// messages is the turn's context as the model saw it (QueryTranscript).
	messages []inference.Message
	// pending lists the confirmations waiting now (QueryPending).
	pending []PendingConfirmation
	result  TurnResult
	// catalog is this round's tool names, as offered to the model.
	catalog map[string]activities.CatalogRef
	// seq numbers the turn's proposals; calls and perCap count them against the turn's and
	// each capability's budget; denied holds the calls an approver denied (deniedKey).
	seq    int
	calls  int
	perCap map[string]int
	denied map[string]bool
	// refusals numbers the refused decisions' audit rows; presentations numbers the
	// decisions presented to ConsumeConfirmation.
	refusals      int
	presentations int
	sigCh         workflow.ReceiveChannel
	// awaits are the confirmations the turn waits on now, in call order (empty between
	// waits; several when one model message proposed several confirmed calls); presenting
	// serializes presentations (the signal path and every decide update share one
	// ConsumeConfirmation at a time); wake tells the waiting loop that an update decided a
	// proposal or was refused.
	awaits     []*awaited
	presenting bool
	wake       workflow.Channel
	// ctl is the catalog controller, nil until a message proposes a catalog read.
	ctl *catalog.Controller
	// pre holds the admissions the round's Infer computed, by proposal number.
	pre map[int]activities.Admission
	// nonces holds the nonce and MAC of every decision presented to this turn (turn.seen): a
	// decision is never judged twice, whatever the store remembers. deferred are the decisions whose consume
	// failed for good, judged again after retryIn.
	nonces   map[string]bool
	deferred []deferred
	retryIn  time.Duration
	// stop, once set (StopCancelled, StopHistoryLimit), ends every wait and runs nothing more:
	// the turn records what it has and ends.
	stop string
	// status and statusPending are what the turn shows operators; shown and shownPending what
	// it last upserted; expired cancels the expiry timers of ended waits (settle).
	status, shown               string
	statusPending, shownPending int64
	expired                     []workflow.CancelFunc
}

// Why a turn stops before its end (turn.stop; the TurnResult.EndReason of the turn it ends).
const (
	// StopCancelled: the turn was cancelled from outside; it ends as cancelled.
	StopCancelled = "cancelled"
	// StopHistoryLimit: the turn's history reached MaxHistoryBytes or MaxHistoryEvents, the
	// bounds it keeps below Temporal's own limits (50 MB, 51,200 events by default), past which
	// the server terminates a workflow without letting it record anything. Whoever may signal a
	// turn can grow its history (a signal lands in history before any code judges it); the turn
	// ends failed, its result saved and its status recorded, while it still can.
	StopHistoryLimit = "history_limit"
)

// Bounds of a turn's history (StopHistoryLimit): a fifth of Temporal's default error limits of
// size and length; a turn within its own budgets writes well under 1 MB and 300 events.
const (
	MaxHistoryBytes  = 10 << 20
	MaxHistoryEvents = 10_000
)

// historyFull reports whether the turn's history reached MaxHistoryBytes or MaxHistoryEvents
// (as of the current workflow task).
func (t *turn) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistorySize() >= MaxHistoryBytes || info.GetCurrentHistoryLength() >= MaxHistoryEvents
}

// errStopped is the error a stopping turn fails with (turn.stop names why).
func (t *turn) errStopped() error {
	if t.stop == StopCancelled {
		return temporal.NewCanceledError("the turn was cancelled")
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("the turn's history reached %d bytes or %d events, the bound it keeps below Temporal's limit: it ended, its pending calls closed without running", MaxHistoryBytes, MaxHistoryEvents),
		ErrTypeHistoryLimit, nil)
}

// ErrTypeHistoryLimit is the application error type of a turn ended by StopHistoryLimit.
const ErrTypeHistoryLimit = "HistoryLimit"

// run is the turn's main loop: infer, hand the message to agent proposals or the catalog
// controller if it is theirs, else take its calls through the executor; an answer, a stop or
// the round budget ends the turn.
func (t *turn) run(ctx workflow.Context) (TurnResult, error) {
	// Clients set AirlockStatus=running at start; upsert only when they did not (an upsert is
	// a history event and a server-side visibility write).
	t.status = StatusRunning
	if st, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(AttrStatus); ok && st == StatusRunning {
		t.shown = StatusRunning
	}
	for round := 1; round <= t.req.MaxRounds; round++ {
		if err := t.stopping(ctx); err != nil {
			return t.fail(ctx, err)
		}
		if t.ctl != nil && !t.ctl.MayInfer() {
			t.ctl.Fire(catalog.EventBudget, catalog.Correlation{}, catalog.BudgetRounds)
			return t.finish(ctx, EndCatalogStopped)
		}
		t.result.Rounds = round
		inf, parsed, err := t.inferRound(ctx, round)
		var refused *requesterRefused
		if errors.Is(err, errSessionEnded) {
			return t.finish(ctx, EndSessionEnded)
		} else if errors.As(err, &refused) {
			t.result.EndDetail = refused.code + ": " + refused.detail
			return t.finish(ctx, EndUnattested)
		} else if err == nil && t.stop != "" {
			err = t.errStopped() // cancelled while the model answered: nothing of it runs
		}
		if err != nil {
			return t.fail(ctx, err)
		}
		if done, res, err := t.proposalHook(ctx, round, inf, &parsed); done {
			return res, err
		}
		if err := t.keepAssistant(ctx, round, inf, parsed); err != nil {
			return t.fail(ctx, err)
		}
		if handled, stop, err := t.catalogMessage(ctx, round, parsed.Calls); err != nil {
			return t.fail(ctx, err)
		} else if stop {
			return t.finish(ctx, EndCatalogStopped)
		} else if handled {
			continue
		}
		switch {
		case len(parsed.Calls) == 0 && parsed.Incomplete != "":
			// The provider marked the message as not a finished answer (cut off, filtered,
			// refused, paused): its prose is kept, never reported as the answer.
			return t.finish(ctx, EndIncomplete)
		case len(parsed.Calls) == 0:
			return t.finish(ctx, EndAnswered)
		}
		diverged, err := t.handleCalls(ctx, round, parsed.Calls)
		if err == nil && t.stop != "" {
			err = t.errStopped()
		}
		if err != nil {
			return t.fail(ctx, err)
		}
		if t.req.StopOnDivergence && diverged {
			return t.finish(ctx, EndDiverged)
		}
	}
	return t.finish(ctx, EndMaxRounds)
}

// stopping returns the error a stopping turn ends with (turn.stop, set by a cancellation or
// here when the history reached its bound), nil while the turn goes on.
func (t *turn) stopping(ctx workflow.Context) error {
	if t.stop == "" && t.historyFull(ctx) {
		t.stop = StopHistoryLimit
	}
	if t.stop == "" {
		return nil
	}
	return t.errStopped()
}

// keepAssistant adds round's assistant message to the turn's context and prose: the round's
// Infer stored it, except for a message with agent-proposal calls (the proposal hook may
// rewrite them first), which is recorded here.
func (t *turn) keepAssistant(ctx workflow.Context, round int, inf activities.InferOutput, parsed parse.Result) error {
	msg := activities.AssistantMessage(parsed)
	if inf.Folded.AssistantRecorded {
		t.messages = append(t.messages, msg)
	} else if err := t.record(ctx, nil, nil, t.assistantKey(round), msg); err != nil {
		return err
	}
	t.result.Prose = parsed.Text
	return nil
}

// End reasons of the main loop (TurnResult.EndReason).
const (
	EndAnswered     = "answered"
	EndMaxRounds    = "max_rounds"
	EndDiverged     = "diverged"
	EndSessionEnded = "session_ended"
)

// errSessionEnded: a recorded session has no more rounds (the turn completes).
var errSessionEnded = errors.New("the recorded session has no more rounds")

// inferRound runs round's inference (the Infer activity, which also loads the context,
// records the opening on round 1, parses the response, records the assistant message and
// admits its calls: activities.FoldedRound) and takes its results into the turn.
func (t *turn) inferRound(ctx workflow.Context, round int) (activities.InferOutput, parse.Result, error) {
	var inf activities.InferOutput
	err := t.infer(ctx, round, &inf)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeSessionExhausted {
		return inf, parse.Result{}, errSessionEnded
	}
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeRequesterRefused {
		return inf, parse.Result{}, newRequesterRefused(appErr)
	}
	if err == nil && inf.Folded == nil {
		err = temporal.NewNonRetryableApplicationError("inference returned no folded round", activities.ErrTypeBadInput, nil)
	}
	if err != nil {
		return inf, parse.Result{}, fmt.Errorf("inference round %d: %w", round, err)
	}
	t.catalog = map[string]activities.CatalogRef{}
	for _, c := range inf.Catalog {
		t.catalog[c.Name] = c
	}
	t.result.Usage.InputTokens += inf.Response.Usage.InputTokens
	t.result.Usage.OutputTokens += inf.Response.Usage.OutputTokens
	folded := inf.Folded
	if round == 1 {
		t.messages = folded.Context
	}
	if folded.ParseError != "" {
		return inf, parse.Result{}, fmt.Errorf("parse round %d: %w", round,
			temporal.NewNonRetryableApplicationError(folded.ParseError, activities.ErrTypeBadInput, nil))
	}
	t.pre = make(map[int]activities.Admission, len(folded.Admissions))
	for _, p := range folded.Admissions {
		t.pre[p.Seq] = p.Admission
	}
	return inf, folded.Parsed, nil
}

// infer runs one inference round. A network model is a regular activity: slow, costly, its
// result durable on its own (DESIGN). A recorded session (replay or scripted: in-process, zero
// latency, deterministic) is a local activity, recorded as a marker: no server round trip, and
// 2 workflow tasks fewer per round (TurnRequest.InferMode chooses either way).
func (t *turn) infer(ctx workflow.Context, round int, out *activities.InferOutput) error {
	in := activities.InferInput{WorkflowID: t.workflowID, Round: round, Model: t.req.Model, Session: t.req.Session,
		Conversation: t.req.Conversation, ContextLimit: t.req.ContextLimit, Scope: t.req.Scope, Now: workflow.Now(ctx),
		Fold: &activities.InferFold{AssistantKey: t.assistantKey(round), FirstSeq: t.seq + 1, RunID: t.runID, Principal: t.req.Principal}}
	if round == 1 {
		in.Fold.Opening, in.Fold.UserMessage, in.Fold.SystemPrompt, in.Fold.OpeningKey = true, t.req.Message, t.req.SystemPrompt, t.workflowID+"/input"
		info := workflow.GetInfo(ctx)
		in.Fold.Attestation, in.Fold.StartedAt, in.Fold.FirstRunID = t.req.Attestation.internal(), info.WorkflowStartTime, info.FirstRunID
		in.Fold.Terms = t.terms
	}
	// A retry after a dead worker (heartbeat timeout) starts after 0.1 s; provider and store
	// errors back off 0.1, 0.4, 1.6, 6.4 s, then every 10 s (StoreOutageAttempts: about 78 s,
	// so a store outage of a minute as the round starts or folds costs the turn nothing).
	retry := &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 4, MaximumInterval: 10 * time.Second,
		MaximumAttempts: StoreOutageAttempts, NonRetryableErrorTypes: []string{activities.ErrTypeRequesterRefused, activities.ErrTypeSessionExhausted, activities.ErrTypeProviderRejected, activities.ErrTypeBadInput, activities.ErrTypeUnsupportedRecording}}
	summary := fmt.Sprintf("infer round %d", round)
	if t.localInfer() {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second,
			ScheduleToCloseTimeout: 30*time.Second + StoreOutageWindow, RetryPolicy: retry, Summary: summarize(summary)})
		return workflow.ExecuteLocalActivity(lctx, a.Infer, in).Get(ctx, out)
	}
	t.settle(ctx)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 3 * time.Minute,
		HeartbeatTimeout: HeartbeatTimeout, RetryPolicy: retry, Summary: summarize(summary)})
	return workflow.ExecuteActivity(actx, a.Infer, in).Get(ctx, out)
}

// localInfer reports whether the turn's rounds run as local activities (TurnRequest.InferMode;
// without one, a recorded session does and a live model does not).
func (t *turn) localInfer() bool {
	switch t.req.InferMode {
	case InferLocal:
		return true
	case InferRegular:
		return false
	}
	return t.req.Session != ""
}

// assistantKey is the context key of round's assistant message.
func (t *turn) assistantKey(round int) string {
	return fmt.Sprintf("%s/r%d/assistant", t.workflowID, round)
}

// StoreOutageAttempts bounds the attempts of the turn's Infer and Execute activities: with
// their backoff (0.1 s, times 4, at most 10 s) twelve attempts span about 78 s, so a store
// (PostgreSQL) outage of up to a minute at any step is waited out, not a failed turn (issue 38).
// The worker logs each attempt that failed for want of the store (workers: storeWait).
const StoreOutageAttempts = 12

// StoreOutageWindow is the time the turn's local activities keep retrying beyond one
// attempt's own timeout (their ScheduleToCloseTimeout, which for a local activity otherwise
// defaults to its StartToCloseTimeout and would cut the retries short): a store outage of a
// minute and the backoff after it.
const StoreOutageWindow = 90 * time.Second

// localStoreAttempts bounds the attempts of the turn's short local activities: 0.2 s doubling
// to 5 s, twenty attempts span about 76 s (a store outage of a minute, as StoreOutageAttempts).
const localStoreAttempts = 20

// localCtx is the options of the turn's short local activities (store operations, admission):
// retried with backoff for about 76 s (localStoreAttempts), bad input not at all.
func localCtx(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    15 * time.Second,
		ScheduleToCloseTimeout: 15*time.Second + StoreOutageWindow,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 5 * time.Second, MaximumAttempts: localStoreAttempts,
			NonRetryableErrorTypes: []string{activities.ErrTypeBadInput}},
		Summary: summarize(summary),
	})
}
