package eval

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// Policy is how the evaluation's approver decides every confirmation.
type Policy string

// Approver policies.
const (
	// PolicyDenyAll denies every confirmation: the measure of what reaches a human.
	PolicyDenyAll Policy = "deny-all"
	// PolicyApproveAll approves every confirmation: the recorded run goes on as far as
	// Airlock's own checks allow.
	PolicyApproveAll Policy = "approve-all"
	// PolicyApproveAllRepeat approves every confirmation and grants, with each approval, the
	// next activities.MaxRepeatCalls identical calls for activities.MaxRepeatMinutes (a
	// repeat grant, issue 37 item 4): the most a repeat grant can spare an approver.
	PolicyApproveAllRepeat Policy = "approve-all-repeat"
)

// ParsePolicy accepts "deny-all", "approve-all" and "approve-all-repeat".
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyDenyAll, PolicyApproveAll, PolicyApproveAllRepeat:
		return p, nil
	}
	return "", fmt.Errorf("eval: approver policy %q: want deny-all or approve-all (or approve-all-repeat)", s)
}

// Principal is the principal of evaluation turns; Approver is the identity the evaluation's
// approver signs decisions with. They differ, so the four-eyes rule holds.
const (
	Principal = "eval-user"
	// Client is the in-memory client credential that starts evaluation turns.
	Client   = "eval-client"
	Approver = "eval-approver"
)

// Options configure Run.
type Options struct {
	// starter is the in-memory client credential Run attests its turns with.
	starter clients.Credential
	// Client is a connected Temporal client (the namespace must have Airlock's search
	// attributes); Store is the store the workers and the approver use.
	Client client.Client
	Store  *store.Store
	// Corpus provides the recordings and each suite's registry.
	Corpus Corpus
	// Policy decides confirmations (default deny-all).
	Policy Policy
	// Concurrency is how many cases replay at once (default 8).
	Concurrency int
	// MaxRounds and MaxCalls override the turn budgets (0: Airlock's defaults, 8 and 16).
	MaxRounds, MaxCalls int
	// RunID prefixes every conversation id (default: a fresh random id), so runs never share
	// turns.
	RunID string
	// Progress, when set, is called after each case with the number done and the total.
	Progress func(done, total int)
}

// Decision is Airlock's first decision that differs from the recording: the replay stops
// there.
type Decision struct {
	Turn    int    `json:"turn"`
	Round   int    `json:"round,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Outcome string `json:"outcome"`
	Stage   string `json:"stage,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// TurnRun is one replayed turn.
type TurnRun struct {
	WorkflowID string `json:"workflow_id"`
	Session    string `json:"session"`
	// EndReason is the TurnResult's: answered, diverged, max_rounds, session_ended.
	EndReason string `json:"end_reason"`
	Rounds    int    `json:"rounds"`
	// HistoryEvents is the workflow's history length in events.
	HistoryEvents int64 `json:"history_events"`
	// Seconds is the turn's wall time from start to result.
	Seconds  float64                     `json:"seconds"`
	Outcomes []workflows.ProposalOutcome `json:"outcomes"`
	// Provenance maps each confirmation of the turn to the provenance report its approver
	// saw (store.Confirmation.Provenance), for the report's injected-value accounting.
	Provenance map[string]json.RawMessage `json:"provenance,omitempty"`
}

// CaseResult is the replay of one case.
type CaseResult struct {
	Case  *Case     `json:"case"`
	Turns []TurnRun `json:"turns"`
	// Stop is nil when every turn was replayed to its recorded end.
	Stop *Decision `json:"stop,omitempty"`
	// Err is a failure of the evaluation itself (not an Airlock decision), e.g. a turn that
	// failed or could not start.
	Err string `json:"error,omitempty"`
}

// Run replays cases as real turns: one worker per suite on its own task queue
// ("airlock-eval-<run id>-<benchmark>-<suite>": suites sharing tool names never meet, and
// concurrent runs never take each other's turns), an approver
// deciding by opts.Policy, and opts.Concurrency cases at a time. Results are in the order of
// cases. Elapsed is the wall time of the replay (workers started to last result). It returns
// an error only when the evaluation cannot run (a registry that does not load, a worker that
// does not start); a case that fails is reported in its CaseResult.
func Run(ctx context.Context, opts Options, cases []*Case) (results []CaseResult, elapsed time.Duration, err error) {
	if opts.Client == nil || opts.Store == nil {
		return nil, 0, errors.New("eval: Run needs a Temporal client and a store")
	}
	if opts.Policy == "" {
		opts.Policy = PolicyDenyAll
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.RunID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		opts.RunID = fmt.Sprintf("%x", b)
	}
	var key token.Key
	if _, err := rand.Read(key[:]); err != nil {
		return nil, 0, fmt.Errorf("eval: approver key: %w", err)
	}
	// The evaluation's approver is in-process: an approvers set of its own, with one
	// credential, that only the evaluation's workers authenticate against.
	// The evaluation starts its turns as an in-memory client allowed to speak for Principal
	// only: its turns are attested like any other (issue 21).
	clientSet, starter, err := clients.Ephemeral(Client, Principal)
	if err != nil {
		return nil, 0, err
	}
	opts.starter = starter
	approverSet, creds, err := approvers.Ephemeral(Approver)
	if err != nil {
		return nil, 0, fmt.Errorf("eval: approver credential: %w", err)
	}
	// One loader for the replay provider and every suite's replay capabilities.
	load := opts.Corpus.Loader()
	replay := inference.NewReplay(load)

	// One worker per suite.
	queues := map[string]string{}
	var keys []string
	for _, c := range cases {
		k := c.Benchmark + "-" + c.Suite
		if _, ok := queues[k]; !ok {
			queues[k] = "airlock-eval-" + opts.RunID + "-" + k
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	scopes := map[string][]string{}
	var running []worker.Worker
	defer func() {
		for _, w := range running {
			w.Stop()
		}
	}()
	for _, k := range keys {
		bench, suite := BenchAgentDojo, strings.TrimPrefix(k, BenchAgentDojo+"-")
		if strings.HasPrefix(k, BenchTauBench+"-") {
			bench, suite = BenchTauBench, strings.TrimPrefix(k, BenchTauBench+"-")
		}
		reg, err := opts.Corpus.Registry(bench, suite, load)
		if err != nil {
			return nil, 0, err
		}
		for _, c := range reg.Capabilities() {
			scopes[k] = append(scopes[k], c.ID)
		}
		acts := &activities.Activities{Registry: reg, Store: opts.Store, ApproverKey: key, Replay: replay,
			Approvers: approvers.Static(approverSet), Clients: clients.Static(clientSet)}
		w := workers.New(opts.Client, acts, queues[k])
		if err := w.Start(); err != nil {
			return nil, 0, fmt.Errorf("eval: start worker for %s: %w", k, err)
		}
		running = append(running, w)
	}

	actx, stopApprover := context.WithCancel(ctx)
	approverDone := make(chan struct{})
	prefix := workflows.TurnWorkflowID("eval-"+opts.RunID+"-", 0)
	prefix = prefix[:len(prefix)-len("/0")]
	go func() {
		defer close(approverDone)
		approve(actx, opts, key, creds[Approver], prefix)
	}()
	defer func() {
		stopApprover()
		<-approverDone
	}()

	start := time.Now()
	results = make([]CaseResult, len(cases))
	for i, c := range cases {
		results[i].Case = c
	}
	sem := make(chan struct{}, opts.Concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, c := range cases {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return results, time.Since(start), ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			k := c.Benchmark + "-" + c.Suite
			results[i] = runCase(ctx, opts, c, fmt.Sprintf("eval-%s-%d", opts.RunID, i), queues[k], scopes[k])
			mu.Lock()
			done++
			n := done
			mu.Unlock()
			if opts.Progress != nil {
				opts.Progress(n, len(cases))
			}
		}()
	}
	wg.Wait()
	return results, time.Since(start), ctx.Err()
}

// runCase replays the turns of one case in order, stopping at Airlock's first decision that
// differs from the recording.
func runCase(ctx context.Context, opts Options, c *Case, conversation, queue string, scope []string) CaseResult {
	res := CaseResult{Case: c}
	for ti, t := range c.Turns {
		req := workflows.TurnRequest{
			Conversation: conversation, Principal: Principal, Message: t.Message, SystemPrompt: t.SystemPrompt,
			Session: t.Session, Scope: scope, StopOnDivergence: true, MaxRounds: opts.MaxRounds, MaxCalls: opts.MaxCalls,
		}
		run, err := replayTurn(ctx, opts, req, queue)
		if run.WorkflowID != "" {
			res.Turns = append(res.Turns, run) // its outcomes count even if describing it failed
		}
		if err != nil {
			res.Err = err.Error()
			return res
		}
		if d := stopOf(ti+1, run); d != nil {
			res.Stop = d
			return res
		}
	}
	return res
}

// stopOf returns the decision that ended a turn early, or nil when the turn reached its
// recorded end (answered, or the recording ran out).
func stopOf(turn int, r TurnRun) *Decision {
	switch r.EndReason {
	case "answered", "session_ended":
		return nil
	case "diverged":
		for _, o := range r.Outcomes {
			if o.Outcome != activities.OutcomeExecuted && !o.ToolReportedError() {
				return &Decision{Turn: turn, Round: o.Round, Tool: o.Name, Outcome: string(o.Outcome), Stage: string(o.Stage), Reason: o.Reason, Detail: o.Detail}
			}
		}
	}
	return &Decision{Turn: turn, Round: r.Rounds, Outcome: r.EndReason}
}

// replayTurn starts one turn, waits for its result and reads its history length.
func replayTurn(ctx context.Context, opts Options, req workflows.TurnRequest, queue string) (TurnRun, error) {
	seq, err := opts.Store.NextTurnSeq(ctx, req.Conversation)
	if err != nil {
		return TurnRun{}, err
	}
	id := workflows.TurnWorkflowID(req.Conversation, seq)
	if err := ctx.Err(); err != nil {
		return TurnRun{}, err // interrupted: start nothing new
	}
	// The start is not cancelled with ctx: a start cut off mid-request may still reach the
	// server, and its turn would then be left running unseen. Once started, an interrupted
	// turn is terminated (terminateIfInterrupted).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	start := time.Now()
	workflows.SignRequest(opts.starter, &req, seq, start)
	so := workflows.StartOptions(id, queue, req)
	so.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	so.EnableEagerStart = true
	so.StaticSummary = display.Summary("evaluation replay of "+req.Session, workflows.SummaryLimit)
	run, err := opts.Client.ExecuteWorkflow(sctx, so, workers.TurnWorkflowName, req)
	if err != nil {
		return TurnRun{}, fmt.Errorf("eval: start turn %s: %w", id, err)
	}
	var tr workflows.TurnResult
	if err := run.Get(ctx, &tr); err != nil {
		terminateIfInterrupted(ctx, opts.Client, id)
		return TurnRun{}, fmt.Errorf("eval: turn %s (%s): %w", id, req.Session, err)
	}
	out := TurnRun{WorkflowID: id, Session: req.Session, EndReason: tr.EndReason, Rounds: tr.Rounds,
		Seconds: time.Since(start).Seconds(), Outcomes: tr.Outcomes}
	confs, err := opts.Store.ListTurnConfirmations(ctx, id)
	if err != nil {
		return out, fmt.Errorf("eval: confirmations of turn %s: %w", id, err)
	}
	for _, c := range confs {
		if out.Provenance == nil {
			out.Provenance = map[string]json.RawMessage{}
		}
		out.Provenance[c.ID] = c.Provenance
	}
	desc, err := opts.Client.DescribeWorkflow(ctx, id, run.GetRunID())
	if err != nil {
		// The turn's outcomes stand; only its history length is unknown.
		return out, fmt.Errorf("eval: describe turn %s: %w", id, err)
	}
	out.HistoryEvents = int64(desc.HistoryLength)
	return out, nil
}

// terminateIfInterrupted ends turn id when ctx was cancelled (Ctrl-C): the run's workers stop
// with it, so the turn would otherwise stay open in the Temporal UI, a held one waiting out its
// confirmation.
func terminateIfInterrupted(ctx context.Context, c client.Client, id string) {
	if ctx.Err() == nil {
		return
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = c.TerminateWorkflow(tctx, id, "", "evaluation interrupted")
}

// approve is the evaluation's approver: it polls the store for confirmations of this run's
// turns and decides each once by policy, exactly as an approver surface does (it opens the
// sealed token with the approver key, signs the decision and signals the turn).
func approve(ctx context.Context, opts Options, key token.Key, cred approvers.Credential, prefix string) {
	decided := map[string]bool{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := opts.Store.ListPendingConfirmations(ctx, time.Now())
		if err != nil {
			continue // the store is shared with the workers; a failed poll is retried
		}
		for _, r := range rows {
			if decided[r.ID] || !strings.HasPrefix(r.WorkflowID, prefix) {
				continue
			}
			req := approval.Request{ConfirmationID: r.ID, Decision: workflows.DecisionDeny, Approver: Approver,
				Reason: "denied by the evaluation approver (deny-all)", Signer: cred}
			if opts.Policy == PolicyApproveAll || opts.Policy == PolicyApproveAllRepeat {
				req.Decision, req.Reason = workflows.DecisionApprove, ""
			}
			if opts.Policy == PolicyApproveAllRepeat {
				req.RepeatCount, req.RepeatMinutes = activities.MaxRepeatCalls, activities.MaxRepeatMinutes
			}
			d, err := approval.Sign(key, r, req, time.Now())
			if err != nil {
				continue
			}
			if err := opts.Client.SignalWorkflow(ctx, r.WorkflowID, r.RunID, workflows.SignalConfirmation, d); err == nil {
				decided[r.ID] = true
			}
		}
	}
}
