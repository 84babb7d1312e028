//go:build cluster

package integration

// TestCluster runs Airlock, unchanged, on the production topology of `make cluster`: the
// Temporal server v1.29.1 on PostgreSQL 15 (persistence and SQL visibility, schemas set up by
// the schema tool), its four services as separate processes, and `airlock worker` processes
// (the real binary). Each turn's model (a real HTTP server speaking the OpenAI wire format)
// proposes system_health (local, read-only: automatic) and web_fetch of a per-turn URL on a
// local server (external: always confirmed), which the harness approves through
// internal/approval as every approver surface does; then it answers.
//
// Three phases: throughput with one worker, throughput with two, and chaos with two workers:
// one worker is SIGKILLed and the history service is restarted once while turns run. It then
// asserts 0 turns lost (every turn answered with both calls executed), 0 confirmed effects run
// twice (the fetch server saw each turn's URL exactly once) and 0 audit gaps (every outcome
// has exactly one audit row of the same outcome).
//
// Run by `make test-cluster` (needs `make cluster-bin` and scripts/ensure-cluster-postgres.sh);
// -cluster.turns sets the total (default 200: a quarter per throughput phase, half under chaos).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

var (
	clusterTurns       = flag.Int("cluster.turns", 200, "turns the cluster test runs in all (a quarter with one worker, a quarter with two, half under chaos)")
	clusterConcurrency = flag.Int("cluster.concurrency", 16, "turns in flight at once")
)

// clusterEnv is one test's cluster, workers and fake model.
type clusterEnv struct {
	t       *testing.T
	cl      *stack.Cluster
	c       client.Client
	st      *store.Store
	key     token.Key
	queue   string
	env     []string
	hitsMu  sync.Mutex
	hits    map[string]int
	decided sync.Map // confirmation id → true once a decision was sent
}

func TestCluster(t *testing.T) {
	total := *clusterTurns
	if total < 8 {
		t.Fatalf("-cluster.turns=%d: need at least 8", total)
	}
	e := newClusterEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.decider(ctx)

	phase := total / 4
	e.startWorker(t, 1)
	wf1, d1 := e.runTurns(t, "one", phase, nil)
	e.checkCalm(t, wf1)
	t.Logf("throughput, 1 worker: %d turns in %.1f s = %.1f turns/s (each turn: 2 inference rounds, 1 automatic and 1 confirmed call)", phase, d1.Seconds(), float64(phase)/d1.Seconds())

	e.startWorker(t, 2)
	wf2, d2 := e.runTurns(t, "two", phase, nil)
	e.checkCalm(t, wf2)
	t.Logf("throughput, 2 workers: %d turns in %.1f s = %.1f turns/s", phase, d2.Seconds(), float64(phase)/d2.Seconds())

	chaos := total - 2*phase
	var killed, restarted atomic.Bool
	wf3, d3 := e.runTurns(t, "chaos", chaos, func(done int) {
		if done >= chaos/4 && killed.CompareAndSwap(false, true) {
			t.Logf("chaos: SIGKILL airlock-worker-1 after %d of %d turns completed", done, chaos)
			if err := e.cl.Kill("airlock-worker-1"); err != nil {
				t.Errorf("kill worker: %v", err)
			}
		}
		if done >= chaos/2 && restarted.CompareAndSwap(false, true) {
			began := time.Now()
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := e.cl.RestartService(rctx, "history"); err != nil {
				t.Errorf("restart history: %v", err)
			}
			t.Logf("chaos: history service restarted after %d of %d turns completed (down %.1f s)", done, chaos, time.Since(began).Seconds())
		}
	})
	if !killed.Load() || !restarted.Load() {
		t.Fatalf("chaos did not happen: killed=%v restarted=%v", killed.Load(), restarted.Load())
	}
	lost, twice, gaps, unknown := e.checkTurns(t, wf3)
	t.Logf("chaos: %d turns in %.1f s with 1 worker SIGKILLed and history restarted: %d lost, %d confirmed effects run twice, %d audit gaps, %d fetches outcome_unknown (claimed by the killed worker, not run again)",
		chaos, d3.Seconds(), lost, twice, gaps, unknown)
	fmt.Fprintf(os.Stdout, "cluster: 1 worker %.1f turns/s, 2 workers %.1f turns/s (%d turns each); chaos %d turns: lost %d, run twice %d, audit gaps %d, outcome_unknown %d\n",
		float64(phase)/d1.Seconds(), float64(phase)/d2.Seconds(), phase, chaos, lost, twice, gaps, unknown)
}

func newClusterEnv(t *testing.T) *clusterEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A service that exits while the cluster starts (its ports are picked free, then bound a
	// moment later: seen once here right after a whole `make test`) is retried on fresh ports
	// and databases, at most three times, each failure logged whole.
	var o stack.ClusterOptions
	var cl *stack.Cluster
	var err error
	for attempt := 1; ; attempt++ {
		var ports stack.ClusterPorts
		ports, err = stack.FreeClusterPorts()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4)
		rand.Read(b)
		suffix := hex.EncodeToString(b)
		o = stack.ClusterOptions{
			Dir: filepath.Join(t.TempDir(), "cluster"), Ports: ports, Namespace: "airlock-cluster", NoUI: true,
			SQL:              stack.SQLOptions{Password: "temporal", Database: "temporal_it_" + suffix, VisibilityDatabase: "temporal_vis_it_" + suffix},
			SearchAttributes: workflows.SearchAttributes(), Log: os.Stderr,
		}
		cl, err = stack.StartCluster(ctx, o)
		if err == nil {
			break
		}
		_ = stack.StopCluster(o.Dir)
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		_ = stack.DropDatabases(dctx, o)
		dcancel()
		if attempt == 3 {
			t.Fatalf("start the cluster (make cluster-bin; scripts/ensure-cluster-postgres.sh): %v", err)
		}
		t.Logf("the cluster did not start (attempt %d of 3), starting another: %v", attempt, err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := stack.DropDatabases(dctx, o); err != nil {
			t.Logf("drop databases: %v", err)
		}
	})
	e := &clusterEnv{t: t, cl: cl, hits: map[string]int{}, queue: taskQueue(t)}

	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hitsMu.Lock()
		e.hits[r.URL.Path]++
		e.hitsMu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>page</title></head><body><p>ok</p></body></html>")
	}))
	t.Cleanup(target.Close)
	model := newModelServer(t, func(_ int, body []byte) (int, string) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return http.StatusBadRequest, `{"error":{"message":"bad json"}}`
		}
		turn, assistants := "", 0
		for _, m := range req.Messages {
			if s, ok := m.Content.(string); ok && m.Role == "user" && strings.HasPrefix(s, "cluster turn ") {
				turn = strings.TrimPrefix(s, "cluster turn ")
			}
			if m.Role == "assistant" {
				assistants++
			}
		}
		if assistants == 0 {
			u, _ := json.Marshal(map[string]string{"url": target.URL + "/" + turn})
			return http.StatusOK, calls(call("call_1", "system_health", "{}"), call("call_2", "web_fetch", string(u)))
		}
		return http.StatusOK, answer("done with " + turn)
	})

	cfg := config.Config{Home: t.TempDir(), DatabaseURL: freshDB(t), TaskQueue: e.queue}
	keyFile := filepath.Join(cfg.Home, "approver.key")
	if e.key, err = token.LoadOrCreateKey(keyFile); err != nil {
		t.Fatal(err)
	}
	e.env = []string{
		"TEMPORAL_ADDRESS=" + cl.Address, "TEMPORAL_NAMESPACE=" + cl.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + e.queue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=" + keyFile,
		"AIRLOCK_LOG_FORMAT=json",
	}
	co := client.Options{HostPort: cl.Address, Namespace: cl.Namespace, Logger: quietLogger(), Interceptors: signing()}
	config.TuneForLoopback(&co)
	if e.c, err = client.Dial(co); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.c.Close)
	e.st = openStore(t, cfg)
	return e
}

// startWorker starts `airlock worker` number n as a process of the cluster and waits for its
// /healthz.
func (e *clusterEnv) startWorker(t *testing.T, n int) {
	t.Helper()
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("airlock-worker-%d", n)
	if err := e.cl.StartProcess(ctx, name, []string{airlockBin, "worker"}, append(e.env, "AIRLOCK_METRICS_ADDR="+addr),
		stack.HTTPReady("http://"+addr+"/healthz")); err != nil {
		t.Fatal(err)
	}
}

// decider approves every pending confirmation of this test's turns, as an approver surface
// does: signed with the token the approver key opens, sent as the turn's signal (durable
// while no worker runs). A confirmation reissued after a crash gets a new decision.
func (e *clusterEnv) decider(ctx context.Context) {
	cred, err := credentialFor("alice")
	if err != nil {
		e.t.Errorf("credential: %v", err)
		return
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := e.st.ListPendingConfirmations(ctx, time.Now())
		if err != nil {
			continue
		}
		for _, r := range rows {
			k := r.ID + "/" + hex.EncodeToString(r.TokenHash)
			if _, done := e.decided.LoadOrStore(k, true); done {
				continue
			}
			go func() { // decisions in parallel, as many approvers would
				sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				if _, err := approval.Send(sctx, e.c, e.st, e.key, approval.Request{ConfirmationID: r.ID, Decision: workflows.DecisionApprove,
					Approver: "alice", Reason: "cluster test", Signer: cred}); err != nil {
					e.decided.Delete(k) // try again on a later tick
				}
			}()
		}
	}
}

// runTurns runs n turns, *clusterConcurrency at a time, and returns their workflow ids and the
// wall time until the last completed. progress, if set, is called after each completion with
// the number completed so far.
func (e *clusterEnv) runTurns(t *testing.T, label string, n int, progress func(done int)) ([]string, time.Duration) {
	t.Helper()
	ids := make([]string, n)
	sem := make(chan struct{}, *clusterConcurrency)
	var wg sync.WaitGroup
	var done atomic.Int32
	began := time.Now()
	for i := range n {
		conv := fmt.Sprintf("%s-%s-%03d", e.queue, label, i)
		ids[i] = workflows.TurnWorkflowID(conv, 1)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			req := workflows.TurnRequest{Conversation: conv, Principal: "user", Message: "cluster turn " + conv}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := retry(ctx, func() error {
				_, err := e.c.ExecuteWorkflow(ctx, workflows.StartOptions(ids[i], e.queue, req), workers.TurnWorkflowName, req)
				var started *serviceErrAlreadyStarted
				if errors.As(err, &started) {
					return nil
				}
				return err
			}); err != nil {
				t.Errorf("start %s: %v", ids[i], err)
				return
			}
			if err := retry(ctx, func() error {
				var res workflows.TurnResult
				return e.c.GetWorkflow(ctx, ids[i], "").Get(ctx, &res)
			}); err != nil {
				t.Errorf("turn %s: %v", ids[i], err)
			}
			d := int(done.Add(1))
			if progress != nil {
				progress(d)
			}
		}()
	}
	wg.Wait()
	return ids, time.Since(began)
}

// serviceErrAlreadyStarted is the SDK's error for a workflow id already running (a start whose
// reply was lost during the history restart).
type serviceErrAlreadyStarted = serviceerror.WorkflowExecutionAlreadyStarted

// retry calls f until it succeeds, fails for a reason of the workflow itself, or ctx ends:
// while a service restarts, calls fail with transport errors and are repeated.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		var appErr *temporal.ApplicationError
		var timeout *temporal.TimeoutError
		var canceled *temporal.CanceledError
		var terminated *temporal.TerminatedError
		if err == nil || errors.As(err, &appErr) || errors.As(err, &timeout) || errors.As(err, &canceled) || errors.As(err, &terminated) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkTurns checks every turn answered with both calls executed (lost otherwise), that the
// fetch server saw each turn's URL exactly once (twice otherwise), and that each outcome has
// exactly one audit row with the same outcome (a gap otherwise).
// checkCalm checks turns run with no fault injected: every one must end answered with both
// calls executed (an outcome_unknown there would be a fault of Airlock's own).
func (e *clusterEnv) checkCalm(t *testing.T, ids []string) {
	t.Helper()
	if _, _, _, unknown := e.checkTurns(t, ids); unknown > 0 {
		t.Errorf("%d turns reported outcome_unknown with no worker killed", unknown)
	}
}

// killedMidEffect reports whether the turn's web_fetch ledger row is still "started": an
// attempt claimed it and never recorded a result, which only a worker dying mid-effect does.
func (e *clusterEnv) killedMidEffect(t *testing.T, res workflows.TurnResult) bool {
	t.Helper()
	for _, o := range res.Outcomes {
		if o.Name != "web_fetch" {
			continue
		}
		x, err := e.st.GetExecution(context.Background(), fmt.Sprintf("%s/%d", res.WorkflowID, o.Seq))
		if err != nil {
			t.Errorf("turn %s: ledger row of proposal #%d: %v", res.WorkflowID, o.Seq, err)
			return false
		}
		return x.State == store.ExecStarted
	}
	return false
}

// checkTurns checks each turn's end, outcomes, target hits and audit rows; it returns the
// faults found and how many fetches honestly ended outcome_unknown after a crash.
func (e *clusterEnv) checkTurns(t *testing.T, ids []string) (lost, twice, gaps, unknown int) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		var res workflows.TurnResult
		err := e.c.GetWorkflow(ctx, id, "").Get(ctx, &res)
		outcomes := outcomeList(res)
		conv := strings.TrimPrefix(strings.TrimSuffix(id, "/1"), "turn/")
		e.hitsMu.Lock()
		h := e.hits["/"+conv]
		e.hitsMu.Unlock()
		switch {
		case err != nil || res.EndReason != "answered":
			lost++
			t.Errorf("lost turn %s: %v end=%s outcomes=%s", id, err, res.EndReason, outcomes)
			continue
		case outcomes == "system_health:executed web_fetch:executed":
			if h > 1 {
				twice++
			}
			if h != 1 {
				t.Errorf("turn %s: its executed, confirmed fetch reached the target %d times, want exactly once", id, h)
			}
		case outcomes == "system_health:executed web_fetch:outcome_unknown" && e.killedMidEffect(t, res):
			// The SIGKILLed worker claimed the fetch's ledger slot and died before recording
			// its result: the honest answer is outcome_unknown, never a second run.
			unknown++
			if h > 1 {
				twice++
				t.Errorf("turn %s: its confirmed fetch reached the target %d times after a crash, want at most once", id, h)
			}
		default:
			lost++
			t.Errorf("lost turn %s: end=%s outcomes=%s (fetch reached the target %d times)", id, res.EndReason, outcomes, h)
			continue
		}
		rows, err := e.st.ListAudit(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		byCall := map[string][]store.AuditEvent{}
		issued := map[string]int{} // call → confirmation_issued rows (when it was put to people)
		for _, r := range rows {
			if r.Outcome == activities.AuditConfirmationIssued {
				issued[r.CallID]++
				continue
			}
			byCall[r.CallID] = append(byCall[r.CallID], r)
		}
		for _, o := range res.Outcomes {
			rs := byCall[o.CallID]
			if len(rs) != 1 || rs[0].Outcome != string(o.Outcome) {
				gaps++
				t.Errorf("turn %s call %s: outcome %s, audit rows %+v (want exactly one, same outcome)", id, o.CallID, o.Outcome, rs)
			}
			if want := map[bool]int{true: 1, false: 0}[o.ConfirmationID != ""]; issued[o.CallID] != want {
				gaps++
				t.Errorf("turn %s call %s: %d confirmation_issued rows, want %d (one per call put to people, none otherwise)", id, o.CallID, issued[o.CallID], want)
			}
		}
	}
	return lost, twice, gaps, unknown
}
