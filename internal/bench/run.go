package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the admin connection that creates the row's schema
	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	airlock "github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// Variants and classes.
const (
	VariantPlain    = "plain"
	VariantApproval = "approval"
	ClassRecorded   = "recorded"
	ClassNetwork    = "network"
)

// Approver is the approver who confirms the approval variant's round-2 calls; Principal is the
// turns' principal (a distinct approver is required by the bench policy).
const (
	Approver  = "bench-approver"
	Principal = "bench-user"
)

// HistorySample is how many evenly spaced turns history_events_per_turn averages over.
const HistorySample = 20

// Spec names one row: a variant, a model class and an infer mode.
type Spec struct {
	Variant string
	Class   string
	// InferMode is TurnRequest.InferMode: "" for recorded (local), workflows.InferRegular or
	// workflows.InferLocal for network.
	InferMode string
}

// Name is the row's class label: recorded, network-regular or network-local.
func (s Spec) Name() string {
	if s.Class == ClassNetwork {
		return s.Class + "-" + s.InferMode
	}
	return s.Class
}

// effectiveMode is the infer mode the workflow uses for the row.
func (s Spec) effectiveMode() string {
	if s.InferMode != "" {
		return s.InferMode
	}
	if s.Class == ClassRecorded {
		return workflows.InferLocal
	}
	return workflows.InferRegular
}

// Specs lists the rows for the classes and variants asked for (network gives two rows, one
// per infer mode; network-regular or network-local gives one of them). Unknown names are an
// error.
func Specs(classes, variants []string) ([]Spec, error) {
	var out []Spec
	for _, v := range variants {
		if v != VariantPlain && v != VariantApproval {
			return nil, fmt.Errorf("bench: unknown variant %q (plain, approval)", display.Visible(v))
		}
		for _, c := range classes {
			switch c {
			case ClassRecorded:
				out = append(out, Spec{Variant: v, Class: c})
			case ClassNetwork:
				out = append(out, Spec{Variant: v, Class: c, InferMode: workflows.InferRegular},
					Spec{Variant: v, Class: c, InferMode: workflows.InferLocal})
			case ClassNetwork + "-" + workflows.InferRegular, ClassNetwork + "-" + workflows.InferLocal:
				// One of network's two rows alone, by its row name.
				out = append(out, Spec{Variant: v, Class: ClassNetwork, InferMode: strings.TrimPrefix(c, ClassNetwork+"-")})
			default:
				return nil, fmt.Errorf("bench: unknown class %q (recorded, network, network-regular, network-local)", display.Visible(c))
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("bench: no rows to run (name at least one class and one variant)")
	}
	for i, a := range out {
		if slices.Contains(out[:i], a) {
			return nil, fmt.Errorf("bench: row %s %s asked twice (--class network already includes network-regular and network-local)", a.Variant, a.Name())
		}
	}
	return out, nil
}

// Row is one measured row, printed as one JSON line with the same keys as the peers'.
type Row struct {
	System               string  `json:"system"`
	Variant              string  `json:"variant"`
	Class                string  `json:"class"`
	InferMode            string  `json:"infer_mode"`
	Turns                int     `json:"turns"`
	Concurrency          int     `json:"concurrency"`
	WallS                float64 `json:"wall_s"`
	TurnsPerS            float64 `json:"turns_per_s"`
	P50Ms                float64 `json:"p50_ms"`
	P95Ms                float64 `json:"p95_ms"`
	HistoryEventsPerTurn float64 `json:"history_events_per_turn"`
	C1P50Ms              float64 `json:"c1_p50_ms"`
	C1Turns              int     `json:"c1_turns"`
}

// Config is what every row runs with.
type Config struct {
	// Temporal is a client of the server the rows run on (its namespace must have Airlock's
	// search attributes).
	Temporal tclient.Client
	// DatabaseURL is a PostgreSQL URL; each row runs on a fresh schema of it, dropped after.
	DatabaseURL string
	// Turns and Concurrency are the throughput run (defaults 200, 16); C1Turns the latency
	// run at one turn in flight (default 50; negative skips it).
	Turns, Concurrency, C1Turns int
	// Progress receives progress lines (nil: none).
	Progress io.Writer
}

func (c *Config) defaults() {
	if c.Turns <= 0 {
		c.Turns = 200
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.C1Turns == 0 {
		c.C1Turns = 50
	}
}

// rig is one row's worker, store, approver and model.
type rig struct {
	cfg     Config
	spec    Spec
	queue   string
	tag     string
	st      *store.Store
	decider *airlock.Client
	decided atomic.Int64
	// starter attests every turn the rig starts.
	starter clients.Credential
	// fail ends the row with an error (the approver's).
	fail context.CancelCauseFunc
}

// Run measures one row: a fresh schema and worker, cfg.Turns turns at cfg.Concurrency in
// flight, then cfg.C1Turns turns one at a time. Every turn is checked (CheckResult); any
// failure fails the row.
func Run(ctx context.Context, cfg Config, spec Spec) (Row, error) {
	cfg.defaults()
	row := Row{System: "airlock", Variant: spec.Variant, Class: spec.Name(), InferMode: spec.effectiveMode(),
		Turns: cfg.Turns, Concurrency: cfg.Concurrency}
	tmp, err := os.MkdirTemp("", "airlock-bench-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(tmp)
	dbURL, drop, err := freshSchema(ctx, cfg.DatabaseURL)
	if err != nil {
		return row, err
	}
	defer drop()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return row, err
	}
	defer st.Close()
	// The receipts log signs and sequences every audit row's records in the background, as a
	// worker's store does (workers.BuildWith): its cost is part of every turn measured.
	rkey, err := receipts.LoadOrCreateKey(tmp, receipts.Origin())
	if err != nil {
		return row, fmt.Errorf("bench: receipts log key: %w", err)
	}
	st.UseReceiptKey(rkey)

	// The approver: a real credential in a real approvers file, and the approver key.
	approversFile, credFile := filepath.Join(tmp, "approvers.json"), filepath.Join(tmp, "credential.json")
	cred, err := approvers.NewCredential("approver:" + Approver)
	if err == nil {
		err = approvers.SaveCredential(credFile, cred)
	}
	if err == nil {
		err = approvers.Add(approversFile, approvers.Approver{Name: Approver, PublicKey: cred.Public()})
	}
	if err != nil {
		return row, fmt.Errorf("bench: approver credential: %w", err)
	}
	var key token.Key
	if _, err := rand.Read(key[:]); err != nil {
		return row, err
	}

	reg, err := workers.LoadRegistryWith(config.Config{Home: tmp}, nil, st.Ping, Sources(), Implementations())
	if err != nil {
		return row, fmt.Errorf("bench: registry: %w", err)
	}
	// Turns are attested by an in-memory client allowed to speak for Principal (issue 21): the
	// benchmark measures the verification every turn pays.
	clientSet, starter, err := clients.Ephemeral("bench-client", Principal)
	if err != nil {
		return row, err
	}
	acts := &activities.Activities{Registry: reg, Served: registry.NewLive(reg), Store: st, ApproverKey: key,
		Approvers: approvers.NewSource(approversFile).Current, Clients: clients.Static(clientSet), Replay: inference.NewReplay(Recorded)}
	if spec.Class == ClassNetwork {
		ms, err := StartModelServer(spec.Variant)
		if err != nil {
			return row, err
		}
		defer ms.Close()
		if acts.Live, err = inference.NewOpenAI(inference.OpenAIConfig{BaseURL: ms.URL, Model: "bench-network"}); err != nil {
			return row, err
		}
	}
	r := &rig{cfg: cfg, spec: spec, st: st, queue: "bench-" + randHex(4), starter: starter}
	r.tag = r.queue
	w := workers.New(cfg.Temporal, acts, r.queue)
	if err := w.Start(); err != nil {
		return row, fmt.Errorf("bench: start the worker: %w", err)
	}
	defer w.Stop()
	if r.decider, err = airlock.New(ctx, cfg.Temporal, airlock.Options{TaskQueue: r.queue, DatabaseURL: dbURL,
		ApproverKey: hex.EncodeToString(key[:]), CredentialFile: credFile}); err != nil {
		return row, err
	}
	defer r.decider.Close()

	// A decision that fails fails the row at once (its turn would otherwise wait for the
	// confirmation's expiry).
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	r.fail = fail
	actx, stopApprover := context.WithCancel(ctx)
	var approverDone sync.WaitGroup
	if spec.Variant == VariantApproval {
		approverDone.Add(1)
		go func() { defer approverDone.Done(); r.approve(actx) }()
	}
	defer func() { stopApprover(); approverDone.Wait() }()

	lat, ids, wall, err := r.runTurns(ctx, "t", cfg.Turns, cfg.Concurrency)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return row, cause
	}
	if err != nil {
		return row, err
	}
	row.WallS = round3(wall.Seconds())
	row.TurnsPerS = round3(float64(cfg.Turns) / wall.Seconds())
	row.P50Ms, row.P95Ms = ms(Percentile(lat, 0.50)), ms(Percentile(lat, 0.95))
	if row.HistoryEventsPerTurn, err = r.historyEvents(ctx, ids); err != nil {
		return row, err
	}
	if cfg.C1Turns > 0 {
		lat1, _, _, err := r.runTurns(ctx, "s", cfg.C1Turns, 1)
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return row, cause
		}
		if err != nil {
			return row, err
		}
		row.C1P50Ms, row.C1Turns = ms(Percentile(lat1, 0.50)), cfg.C1Turns
	}
	if spec.Variant == VariantApproval {
		// A turn can end before its approver's Decide call returns (the decision's workflow task
		// runs the rest of the turn): give the last answers a moment to arrive.
		want := int64(cfg.Turns + max(cfg.C1Turns, 0))
		for deadline := time.Now().Add(10 * time.Second); r.decided.Load() < want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if r.decided.Load() != want {
			return row, fmt.Errorf("bench: %s: the approver decided %d confirmations, want %d", spec.Name(), r.decided.Load(), want)
		}
	}
	return row, nil
}

// runTurns runs n turns with c in flight and returns each turn's latency (start call to
// result, in turn order), the turn ids and the wall time from the first start to the last
// result.
func (r *rig) runTurns(ctx context.Context, phase string, n, c int) ([]time.Duration, []string, time.Duration, error) {
	lat := make([]time.Duration, n)
	ids := make([]string, n)
	var next, done atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopProgress := r.progress(phase, n, &done)
	defer stopProgress()
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				id, d, err := r.turn(ctx, fmt.Sprintf("%s-%s-%d", r.tag, phase, i))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				lat[i], ids[i] = d, id
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return nil, nil, 0, firstErr
	}
	return lat, ids, wall, nil
}

// progress prints how many turns are done every 5 s until the returned stop is called.
func (r *rig) progress(phase string, n int, done *atomic.Int64) func() {
	if r.cfg.Progress == nil {
		return func() {}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintf(r.cfg.Progress, "  %s %s: %d/%d turns\n", r.spec.Variant, r.spec.Name(), done.Load(), n)
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}

// turn starts one turn as every Airlock client does (workflows.StartOptions; eager start, as
// airlock turn start does with a worker in the same process), waits for its result and checks
// it.
func (r *rig) turn(ctx context.Context, conversation string) (string, time.Duration, error) {
	req := workflows.TurnRequest{Conversation: conversation, Principal: Principal,
		Message: "look up k1, k2 and k3", InferMode: r.spec.InferMode}
	if r.spec.Class == ClassRecorded {
		req.Session = SessionName(r.spec.Variant)
	}
	if err := req.Validate(); err != nil {
		return "", 0, err
	}
	id := workflows.TurnWorkflowID(conversation, 1)
	workflows.SignRequest(r.starter, &req, 1, time.Now())
	opts := workflows.StartOptions(id, r.queue, req)
	opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	opts.EnableEagerStart = true
	opts.StaticSummary = display.Summary("turn 1 of "+conversation, workflows.SummaryLimit)
	start := time.Now()
	run, err := r.cfg.Temporal.ExecuteWorkflow(ctx, opts, workers.TurnWorkflowName, req)
	if err != nil {
		return id, 0, fmt.Errorf("bench: start turn %s: %w", id, err)
	}
	var res workflows.TurnResult
	if err := run.Get(ctx, &res); err != nil {
		return id, 0, fmt.Errorf("bench: turn %s: %w", id, err)
	}
	d := time.Since(start)
	if err := CheckResult(r.spec.Variant, res); err != nil {
		return id, d, fmt.Errorf("bench: turn %s: %w", id, err)
	}
	return id, d, nil
}

// CheckResult checks that a turn did the workload: answered after 4 rounds, with 3 executed
// lookups of k1, k2, k3 returning v1, v2, v3 and, in the approval variant, the round-2 call
// approved by Approver before it ran.
func CheckResult(variant string, res workflows.TurnResult) error {
	var errs []string
	if res.EndReason != "answered" || res.Status != workflows.StatusCompleted {
		errs = append(errs, fmt.Sprintf("ended %s/%s, want completed/answered", res.Status, res.EndReason))
	}
	if res.Rounds != Rounds {
		errs = append(errs, fmt.Sprintf("%d rounds, want %d", res.Rounds, Rounds))
	}
	if res.Prose != Answer {
		errs = append(errs, fmt.Sprintf("answer %q, want %q", res.Prose, Answer))
	}
	if len(res.Outcomes) != Rounds-1 {
		errs = append(errs, fmt.Sprintf("%d outcomes, want %d", len(res.Outcomes), Rounds-1))
	}
	for i, o := range res.Outcomes {
		r := i + 1
		if o.Outcome != activities.OutcomeExecuted || o.Name != toolFor(variant, r) || o.Round != r {
			errs = append(errs, fmt.Sprintf("outcome %d: %s %s in round %d (%s), want %s executed in round %d",
				i, o.Name, o.Outcome, o.Round, o.Reason, toolFor(variant, r), r))
		}
		wantApprover := ""
		if variant == VariantApproval && r == approvalRound {
			wantApprover = Approver
		}
		if o.Approver != wantApprover {
			errs = append(errs, fmt.Sprintf("outcome %d: approver %q, want %q", i, o.Approver, wantApprover))
		}
	}
	if len(res.Results) != Rounds-1 {
		errs = append(errs, fmt.Sprintf("%d results, want %d", len(res.Results), Rounds-1))
	}
	for i, c := range res.Results {
		var v struct {
			Value string `json:"value"`
		}
		if err := json.Unmarshal(c.Data, &v); err != nil || v.Value != fmt.Sprintf("v%d", i+1) || c.Error != "" {
			errs = append(errs, fmt.Sprintf("result %d: %s %s", i, c.Data, c.Error))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// approve is the approver: one goroutine watches the store's confirmations as they change
// (store.WatchConfirmationIDs: PostgreSQL LISTEN/NOTIFY, each notification naming the
// confirmation its commit created or decided) and approves each new one at once with the
// client's Decide, which reads the confirmation it signs for (a signed, attested decide update,
// waiting for the turn's verdict). When it must re-read (a notification without an id, a
// reconnection, the 2 s fallback) it reads the pending ids (store.PendingIDs). The channel is
// database-wide: an id from another schema (an earlier row's late decision) is not pending
// here, so it is set aside, and left to the re-read should it be ours after all.
func (r *rig) approve(ctx context.Context) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	defer wg.Wait()
	changes := r.st.WatchConfirmationIDs(ctx)
	for {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-changes:
		}
		todo := []string{id}
		if id == "" {
			ids, err := r.st.PendingIDs(ctx, time.Now())
			if err != nil {
				continue
			}
			todo = ids
		}
		notified := id != ""
		for _, id := range todo {
			mu.Lock()
			again := seen[id]
			seen[id] = true
			mu.Unlock()
			if again {
				continue
			}
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				err := r.decider.Decide(ctx, airlock.DecideRequest{ConfirmationID: id, Decision: airlock.Approve})
				switch {
				case err == nil:
					r.decided.Add(1)
				case notified && errors.Is(err, airlock.ErrNotPending):
					mu.Lock()
					delete(seen, id)
					mu.Unlock()
				case ctx.Err() == nil:
					r.fail(fmt.Errorf("bench: the approver could not approve %s: %w", id, err))
				}
			}(id)
		}
	}
}

// historyEvents is the mean history length of up to HistorySample evenly spaced turns.
func (r *rig) historyEvents(ctx context.Context, ids []string) (float64, error) {
	k := min(HistorySample, len(ids))
	if k == 0 {
		return 0, nil
	}
	total := 0
	for j := range k {
		id := ids[j*len(ids)/k]
		it := r.cfg.Temporal.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			if _, err := it.Next(); err != nil {
				return 0, fmt.Errorf("bench: history of %s: %w", id, err)
			}
			total++
		}
	}
	return round3(float64(total) / float64(k)), nil
}

// Percentile is the nearest-rank p-quantile of ds (0 for none).
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freshSchema creates an empty schema in the database at base and returns a URL whose
// search_path is it, and a function that drops it.
func freshSchema(ctx context.Context, base string) (string, func(), error) {
	// The admin connection is lib/pq's own: without Airlock's airlock_prepare parameter,
	// which PostgreSQL would refuse as an unknown run-time parameter.
	adminURL, _, err := store.PrepareOption(base)
	if err != nil {
		return "", nil, fmt.Errorf("bench: database URL: %w", err)
	}
	admin, err := sqlx.Open("postgres", adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("bench: database: %w", err)
	}
	defer admin.Close()
	schema := "bench_" + randHex(6)
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("bench: create schema %s (is PostgreSQL up? scripts/ensure-postgres.sh): %w", schema, err)
	}
	drop := func() {
		if a, err := sqlx.Open("postgres", adminURL); err == nil {
			a.Exec("DROP SCHEMA " + schema + " CASCADE")
			a.Close()
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, fmt.Errorf("bench: database URL: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}
