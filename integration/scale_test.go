//go:build scale

package integration

// Scale harness (issue 12 item 4), behind the "scale" build tag: `make bench-scale`.
//
// TestScalePendingConfirmations starts AIRLOCK_SCALE_TURNS (default 10,000) turns whose
// first model round proposes web_fetch (confirmed by policy) against ONE `airlock worker`
// process, waits until every one is waiting for its confirmation, and reports the worker's
// RSS (VmRSS, VmHWM from /proc), the time to start them, the pending list's latency (the
// store's list behind `airlock pending`, the approver inbox's list and the inbox page), then
// approves a sample and checks each ran, and terminates the rest.
//
// TestScaleLongConversation runs AIRLOCK_SCALE_CONVERSATION_TURNS (default 500) turns back
// to back in one conversation and compares per-turn latency, history events and the size of
// the context sent to the model for the first and the last ten turns.
//
// Both report numbers with t.Logf (run with -v); neither asserts on time.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/web"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// scaleWorker is an `airlock worker` process (the binary TestMain built) on cfg's store and
// task queue, serving model as the live model.
type scaleWorker struct {
	cmd *exec.Cmd
	log string
}

func startScaleWorker(t *testing.T, cfg workerCfg) *scaleWorker {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "worker.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(airlockBin, "worker")
	cmd.Env = append(os.Environ(),
		"AIRLOCK_HOME="+cfg.Home, "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE="+cfg.TaskQueue,
		"AIRLOCK_CORPUS="+corpusDir, "AIRLOCK_FETCH_ALLOW=127.0.0.0/8",
		"AIRLOCK_OPENAI_BASE_URL="+cfg.ModelURL+"/v1", "AIRLOCK_OPENAI_API_KEY=test",
		"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
	if v := os.Getenv(workers.WorkflowCacheSizeEnv); v != "" {
		cmd.Env = append(cmd.Env, workers.WorkflowCacheSizeEnv+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &scaleWorker{cmd: cmd, log: logPath}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
		f.Close()
	})
	eventually(t, 60*time.Second, "the worker process polling", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "worker polling")
	})
	return p
}

type workerCfg struct {
	Home, DatabaseURL, TaskQueue, ModelURL string
}

// mem reads the process's VmRSS and VmHWM in MiB.
func (p *scaleWorker) mem() (rss, hwm float64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fs[1], 64)
		switch fs[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// timings is p50 and max of d.
func timings(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("p50 %s max %s (n=%d)", s[len(s)/2].Round(100*time.Microsecond), s[len(s)-1].Round(100*time.Microsecond), len(s))
}

// scaleAuth signs in any name with password "pw" (the inbox is measured, not its sign-in).
type scaleAuth struct{}

func (scaleAuth) Has(string) bool { return true }
func (scaleAuth) Authenticate(name, password string) (string, error) {
	if password != "pw" {
		return "", fmt.Errorf("bad password")
	}
	return name, nil
}

func TestScalePendingConfirmations(t *testing.T) {
	n := envInt("AIRLOCK_SCALE_TURNS", 10000)
	startWidth := envInt("AIRLOCK_SCALE_START_WIDTH", 32)
	sample := envInt("AIRLOCK_SCALE_APPROVE", 20)
	target := newHitServer(t)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/page"}`, target.URL))))
	cfg := testConfig(t)
	st := openStore(t, cfg)
	p := startScaleWorker(t, workerCfg{Home: cfg.Home, DatabaseURL: cfg.DatabaseURL, TaskQueue: cfg.TaskQueue, ModelURL: model.URL})
	c := dial(t)
	db, err := sqlx.Open("postgres", cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() int {
		var k int
		if err := db.Get(&k, `SELECT count(*) FROM confirmations WHERE decision = ''`); err != nil {
			t.Fatal(err)
		}
		return k
	}
	rss0, _ := p.mem()
	t.Logf("worker pid %d idle: VmRSS %.0f MiB; cache size env %q; load %s", p.cmd.Process.Pid, rss0, os.Getenv(workers.WorkflowCacheSizeEnv), loadavg())

	// RSS sampler: the highest VmRSS seen and a line every 30 s.
	var maxRSS atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			rss, _ := p.mem()
			if int64(rss) > maxRSS.Load() {
				maxRSS.Store(int64(rss))
			}
		}
	}()
	defer func() { close(stopSampling); <-sampled }()

	conv := func(i int) string { return fmt.Sprintf("scale-%s-%05d", cfg.TaskQueue, i) }
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	var startErr atomic.Value
	for w := 0; w < startWidth; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cv := conv(i)
				_, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
					ID: workflows.TurnWorkflowID(cv, 1), TaskQueue: cfg.TaskQueue,
					TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrConversation.ValueSet(cv),
						workflows.AttrStatus.ValueSet(workflows.StatusRunning)),
				}, workers.TurnWorkflowName, workflows.TurnRequest{Conversation: cv, Principal: "ops",
					Message: "fetch the page", ConfirmationTTL: 3 * time.Hour})
				if err != nil {
					startErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	// Progress while starting and until every turn waits.
	lastLog := time.Now()
	startedAll := time.Duration(0)
	startDone := make(chan struct{})
	go func() { wg.Wait(); close(startDone) }()
	deadline := time.Now().Add(time.Duration(envInt("AIRLOCK_SCALE_WAIT_MINUTES", 40)) * time.Minute)
	for {
		select {
		case <-startDone:
			if startedAll == 0 {
				startedAll = time.Since(start)
				if e := startErr.Load(); e != nil {
					t.Fatalf("start: %v", e)
				}
				t.Logf("started %d turns in %s (%.0f starts/s, %d at once); pending so far %d; load %s",
					n, startedAll.Round(time.Millisecond), float64(n)/startedAll.Seconds(), startWidth, count(), loadavg())
			}
		default:
		}
		k := count()
		if k >= n && startedAll > 0 {
			break
		}
		if time.Since(lastLog) > 30*time.Second {
			rss, _ := p.mem()
			t.Logf("%5.0fs: %d started, %d waiting, worker VmRSS %.0f MiB, load %s", time.Since(start).Seconds(), min(int(next.Load()), n), k, rss, loadavg())
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.log)
			t.Fatalf("only %d of %d turns waiting after %s; worker log tail:\n%s", k, n, time.Since(start), tail(string(b), 3000))
		}
		time.Sleep(2 * time.Second)
	}
	allWaiting := time.Since(start)
	rss, hwm := p.mem()
	t.Logf("all %d turns waiting for confirmation after %s (%.1f turns/s to waiting); worker VmRSS %.0f MiB, VmHWM %.0f MiB; load %s",
		n, allWaiting.Round(time.Millisecond), float64(n)/allWaiting.Seconds(), rss, hwm, loadavg())
	time.Sleep(20 * time.Second)
	rss, hwm = p.mem()
	t.Logf("20 s later: worker VmRSS %.0f MiB, VmHWM %.0f MiB (sampled max %d MiB)", rss, hwm, maxRSS.Load())

	// The pending list's latency with n pending.
	ctx := context.Background()
	var dPending, dUndecided, dPage []time.Duration
	var rows []store.Confirmation
	for i := 0; i < 9; i++ {
		t0 := time.Now()
		rows, err = st.ListPendingConfirmations(ctx, time.Now())
		dPending = append(dPending, time.Since(t0))
		if err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		if _, err := st.ListUndecidedConfirmations(ctx, 0); err != nil {
			t.Fatal(err)
		}
		dUndecided = append(dUndecided, time.Since(t0))
		t0 = time.Now()
		if _, err := st.CountUndecided(ctx, store.UndecidedFilter{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ListUndecidedPage(ctx, store.UndecidedFilter{}, web.InboxPageSize, n/2); err != nil {
			t.Fatal(err)
		}
		dPage = append(dPage, time.Since(t0))
	}
	t.Logf("store.ListPendingConfirmations (airlock pending): %d rows, %s", len(rows), timings(dPending))
	t.Logf("store.ListUndecidedConfirmations (500 newest): %s", timings(dUndecided))
	t.Logf("store.CountUndecided + ListUndecidedPage (the inbox's page of %d, from the middle): %s", web.InboxPageSize, timings(dPage))
	var dCLI []time.Duration
	var cliLines int
	for i := 0; i < 3; i++ {
		cmd := exec.Command(airlockBin, "pending")
		cmd.Env = append(os.Environ(), "AIRLOCK_DATABASE_URL="+cfg.DatabaseURL, "AIRLOCK_HOME="+cfg.Home)
		t0 := time.Now()
		out, err := cmd.Output()
		dCLI = append(dCLI, time.Since(t0))
		if err != nil {
			t.Fatalf("airlock pending: %v", err)
		}
		cliLines = strings.Count(string(out), "\n")
	}
	t.Logf("`airlock pending` (process start to exit): %d lines of output, %s", cliLines, timings(dCLI))
	measureInbox(t, st, c, cfg.TaskQueue)

	// Decisions still work: approve a sample (spread over the start order, so some turns were
	// evicted from the worker's cache long ago) and check each ran.
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var dDecide, dResult []time.Duration
	hitsBefore := len(strings.Fields(target.paths()))
	decided := map[string]bool{}
	for i := 0; i < sample && len(rows) > 0; i++ {
		r := rows[i*len(rows)/sample]
		t0 := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := approval.Decide(dctx, c, st, key, approval.Request{ConfirmationID: r.ID, Decision: workflows.DecisionApprove,
			Approver: "alice", Signer: signer(t, "alice")})
		cancel()
		dDecide = append(dDecide, time.Since(t0))
		if err != nil {
			t.Fatalf("approve %s: %v", r.WorkflowID, err)
		}
		var res workflows.TurnResult
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = c.GetWorkflow(rctx, r.WorkflowID, "").Get(rctx, &res)
		cancel()
		dResult = append(dResult, time.Since(t0))
		if err != nil {
			t.Fatalf("turn %s: %v", r.WorkflowID, err)
		}
		if got := outcomeList(res); got != "web_fetch:executed" || res.Outcomes[0].Approver != "alice" {
			t.Fatalf("turn %s: outcomes %s", r.WorkflowID, got)
		}
		decided[r.WorkflowID] = true
	}
	t.Logf("approved %d sampled turns: decide round trip %s; decision to turn result %s; target hits %d",
		len(decided), timings(dDecide), timings(dResult), len(strings.Fields(target.paths()))-hitsBefore)
	rss, hwm = p.mem()
	t.Logf("after the approvals: worker VmRSS %.0f MiB, VmHWM %.0f MiB; load %s", rss, hwm, loadavg())

	// The rest: terminated, so the dev server is left with nothing running.
	t0 := time.Now()
	ids := make(chan string)
	var twg sync.WaitGroup
	var terminated atomic.Int64
	for w := 0; w < 32; w++ {
		twg.Add(1)
		go func() {
			defer twg.Done()
			for id := range ids {
				if err := c.TerminateWorkflow(ctx, id, "", "scale test done"); err == nil {
					terminated.Add(1)
				}
			}
		}()
	}
	for _, r := range rows {
		if !decided[r.WorkflowID] {
			ids <- r.WorkflowID
		}
	}
	close(ids)
	twg.Wait()
	t.Logf("terminated %d turns in %s", terminated.Load(), time.Since(t0).Round(time.Millisecond))
}

// measureInbox times the approver page's inbox (internal/web) over the store and Temporal,
// signed in, and counts the cards it renders.
func measureInbox(t *testing.T, st *store.Store, c client.Client, queue string) {
	t.Helper()
	s, err := web.New(web.Options{Store: st, Temporal: c,
		Approvers: func() (web.Authenticator, error) { return scaleAuth{}, nil },
		Decide:    func(context.Context, approval.Request) error { return nil },
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var sid string
	do := func(method, path string, form url.Values) (int, string) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, srv.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", srv.URL)
		}
		if sid != "" {
			req.AddCookie(&http.Cookie{Name: web.SessionCookie, Value: sid})
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, ck := range resp.Cookies() {
			if ck.Name == web.SessionCookie {
				sid = ck.Value
			}
		}
		return resp.StatusCode, string(b)
	}
	if code, _ := do("POST", "/login", url.Values{"name": {"alice"}, "password": {"pw"}}); code != http.StatusSeeOther && code != http.StatusFound {
		t.Fatalf("sign in: HTTP %d", code)
	}
	for _, path := range []string{"/", "/?page=100", "/?conversation=" + url.QueryEscape(fmt.Sprintf("scale-%s-%05d", queue, 0))} {
		var d []time.Duration
		var page string
		for i := 0; i < 5; i++ {
			t0 := time.Now()
			code, body := do("GET", path, nil)
			d = append(d, time.Since(t0))
			if code != http.StatusOK {
				t.Fatalf("GET %s: HTTP %d", path, code)
			}
			page = body
		}
		count := ""
		if i := strings.Index(page, `id="count"`); i >= 0 {
			count = page[i:min(len(page), i+120)]
			if j := strings.Index(count, "</p>"); j >= 0 {
				count = count[:j]
			}
		}
		t.Logf("inbox GET %s: %s; %d cards rendered, %d KiB; %s", path, timings(d), strings.Count(page, "data-confirmation="), len(page)/1024, count)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestScaleLongConversation runs turns back to back in one conversation, each proposing one
// automatic call (system_health) and then answering, and compares the first and last ten.
func TestScaleLongConversation(t *testing.T) {
	n := envInt("AIRLOCK_SCALE_CONVERSATION_TURNS", 500)
	var mu sync.Mutex
	var ctxSizes []int    // messages in each first-round request, in order
	var withSystem []bool // whether that request opened with the conversation's system prompt
	model := newModelServer(t, func(_ int, b []byte) (int, string) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &req); err != nil || len(req.Messages) == 0 {
			return http.StatusBadRequest, `{"error":{"message":"bad json"}}`
		}
		if req.Messages[len(req.Messages)-1].Role == "user" {
			mu.Lock()
			ctxSizes = append(ctxSizes, len(req.Messages))
			withSystem = append(withSystem, req.Messages[0].Role == "system")
			mu.Unlock()
			return http.StatusOK, calls(call("c1", "system_health", `{}`))
		}
		return http.StatusOK, answer("healthy")
	})
	c, cfg, _ := liveModelStack(t, model)
	conv := "long-" + cfg.TaskQueue
	type turnStat struct {
		latency     time.Duration
		events, ctx int
		system      bool
	}
	stats := make([]turnStat, n)
	t.Logf("load before: %s", loadavg())
	start := time.Now()
	for i := 1; i <= n; i++ {
		id := workflows.TurnWorkflowID(conv, i)
		t0 := time.Now()
		run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			ID: id, TaskQueue: cfg.TaskQueue, EnableEagerStart: true,
			TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrConversation.ValueSet(conv),
				workflows.AttrStatus.ValueSet(workflows.StatusRunning)),
		}, workers.TurnWorkflowName, workflows.TurnRequest{Conversation: conv, Principal: "ops", Message: fmt.Sprintf("how is the host now (%d)?", i),
			SystemPrompt: "You are the operations assistant of this host."})
		if err != nil {
			t.Fatal(err)
		}
		var res workflows.TurnResult
		if err := run.Get(context.Background(), &res); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		stats[i-1].latency = time.Since(t0)
		if got := outcomeList(res); got != "system_health:executed" || res.EndReason != "answered" {
			t.Fatalf("turn %d: %s %s", i, got, res.EndReason)
		}
		it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
		for it.HasNext() {
			if _, err := it.Next(); err != nil {
				t.Fatal(err)
			}
			stats[i-1].events++
		}
		if i%50 == 0 {
			t.Logf("turn %d: %s, %d events; load %s", i, stats[i-1].latency.Round(time.Millisecond), stats[i-1].events, loadavg())
		}
	}
	elapsed := time.Since(start)
	mu.Lock()
	for i := range stats {
		if i < len(ctxSizes) {
			stats[i].ctx, stats[i].system = ctxSizes[i], withSystem[i]
		}
	}
	mu.Unlock()
	for i, s := range stats {
		if i < len(ctxSizes) && !s.system {
			t.Errorf("turn %d: the model's first request did not open with the conversation's system prompt", i+1)
			break
		}
	}
	window := func(from, to int) string {
		var d []time.Duration
		ev, cx, sys := 0, 0, 0
		for _, s := range stats[from-1 : to] {
			d = append(d, s.latency)
			ev += s.events
			cx += s.ctx
			if s.system {
				sys++
			}
		}
		k := to - from + 1
		return fmt.Sprintf("turns %d-%d: latency %s, mean %.1f history events/turn, mean %.0f messages sent to the model in round 1, %d of %d opened by the system prompt",
			from, to, timings(d), float64(ev)/float64(k), float64(cx)/float64(k), sys, k)
	}
	t.Logf("%d turns in one conversation in %s; load after %s", n, elapsed.Round(time.Millisecond), loadavg())
	t.Logf("%s", window(1, min(10, n)))
	if n >= 20 {
		t.Logf("%s", window(n/2-4, n/2+5))
		t.Logf("%s", window(n-9, n))
	}
}
