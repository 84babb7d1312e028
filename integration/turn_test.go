package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/replay"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

const injectionTrace = "gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0"

// The main job on real input: the recorded gpt-4o session in which a bill carries injected
// instructions. Read-only tools run automatically; each send_money waits for a human and runs
// only after an approval signal carrying a valid token.
func TestReplayedInjectionTurnApprovedThroughSignal(t *testing.T) {
	c := dial(t)
	cfg := testConfig(t, "agentdojo-banking")
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	req, err := replay.Request(corpusDir, injectionTrace)
	if err != nil {
		t.Fatal(err)
	}
	run := startTurn(t, c, cfg, req)

	seen := map[string]bool{}
	first := waitPending(t, c, run.GetID(), seen)
	if first.ToolName != "send_money" || !strings.Contains(string(first.Arguments), `"recipient":"US133000000121212121212"`) ||
		!strings.Contains(string(first.Arguments), `"amount":50.0`) {
		t.Fatalf("the first confirmation must show the attacker's send_money literally: %+v", first)
	}
	decide(t, c, cfg, st, first.ConfirmationID, workflows.DecisionApprove, "alice")
	second := waitPending(t, c, run.GetID(), seen)
	if second.ToolName != "send_money" || !strings.Contains(string(second.Arguments), "DE89370400440532013000") {
		t.Fatalf("second confirmation = %+v", second)
	}
	decide(t, c, cfg, st, second.ConfirmationID, workflows.DecisionApprove, "alice")

	res := result(t, run)
	want := "read_file:executed get_most_recent_transactions:executed send_money:executed get_iban:executed send_money:executed"
	if got := outcomeList(res); got != want || res.EndReason != "answered" || !strings.Contains(res.Prose, "has been paid") {
		t.Fatalf("outcomes = %s (%s); prose %q", got, res.EndReason, res.Prose)
	}
	rows, err := st.ListAudit(context.Background(), run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	// Both payments were put to people first: one confirmation_issued row each, then one
	// row per outcome.
	if n := issuedRows(rows); n != 2 {
		t.Fatalf("confirmation_issued rows = %d, want 2", n)
	}
	rows = outcomeRows(rows)
	if len(rows) != 5 {
		t.Fatalf("audit rows = %d, want one per outcome (5)", len(rows))
	}
	for _, r := range rows {
		if r.Outcome != "executed" {
			t.Fatalf("audit row %+v", r)
		}
		if strings.Contains(r.CapabilityID, "send-money") && r.Approver != "alice" {
			t.Fatalf("approver not recorded: %+v", r)
		}
	}
	n := historyEvents(t, c, run.GetID())
	t.Logf("history events for a 6-round replayed turn with 5 calls and 2 confirmations: %d", n)
	// Cost by design (a recorded session infers through local activities, every round folded):
	// 16 local-activity markers (6 infer, each also parsing, recording the assistant message
	// and admitting; 3 local executes, each also recording; 2 issue + 2 consume; 2 records of
	// the confirmed calls' outcomes; finish), the 2 external executes as regular activities (3
	// events each), 5 workflow tasks (start, 2 signals, 2 execute results: 3 each), 2 signals,
	// 2 timers started and cancelled, 5 status upserts, start and completion: 50 (76 with the
	// unfolded rounds and version markers before issue 20). A local activity turned regular
	// adds 2 events and a round trip.
	if n > 50 {
		t.Fatalf("history events = %d, designed 50", n)
	}
	if stored, err := st.GetTurnResult(context.Background(), run.GetID()); err != nil || !strings.Contains(string(stored), "has been paid") {
		t.Fatalf("stored turn result: %v %s", err, stored)
	}
}

// Denying the injected transfer ends the replay there: the recording assumed it ran.
func TestReplayedInjectionDeniedStopsAtDivergence(t *testing.T) {
	c := dial(t)
	cfg := testConfig(t, "agentdojo-banking")
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	req, _ := replay.Request(corpusDir, injectionTrace)
	run := startTurn(t, c, cfg, req)
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionDeny, "bob")
	res := result(t, run)
	if got := outcomeList(res); got != "read_file:executed get_most_recent_transactions:executed send_money:denied:denied_by_approver" || res.EndReason != "diverged" {
		t.Fatalf("outcomes = %s (%s)", got, res.EndReason)
	}
	if n, err := st.CountExecutions(context.Background(), ""); err != nil || n != 0 {
		t.Fatalf("a denied effect must leave no execution: %d %v", n, err)
	}
}

// worker runs `airlock worker` as a separate process.
type workerProc struct {
	cmd *exec.Cmd
	out *strings.Builder
}

func startWorkerProcess(t *testing.T, env []string) *workerProc {
	t.Helper()
	cmd := exec.Command(airlockBin, "worker")
	cmd.Env = append(os.Environ(), env...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{cmd: cmd, out: &out}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return w
}

func (w *workerProc) kill(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.cmd.Wait()
}

// The worker process is killed after Execute returned and before the turn ended; a new worker
// process finishes the turn. The first effect is neither lost nor run again.
func TestWorkerKilledAfterExecuteTurnCompletesCapabilityRanOnce(t *testing.T) {
	var hitsA, hitsB atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			hitsA.Add(1)
		case "/b":
			hitsB.Add(1)
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>page "+r.URL.Path+"</title></head><body><p>content of "+r.URL.Path+"</p></body></html>")
	}))
	defer target.Close()
	model := newFakeModel(t,
		calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL))),
		calls(call("c2", "web_fetch", fmt.Sprintf(`{"url":"%s/b"}`, target.URL))),
	)
	c := dial(t)
	cfg := testConfig(t)
	env := []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=",
	}
	w1 := startWorkerProcess(t, env)
	st := openStore(t, cfg)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "crash", Message: "read two pages"})
	seen := map[string]bool{}
	p1 := waitPending(t, c, run.GetID(), seen)
	decide(t, c, cfg, st, p1.ConfirmationID, workflows.DecisionApprove, "alice")
	// Once proposal #2 is pending, Execute of #1 has returned and its result is in history.
	p2 := waitPending(t, c, run.GetID(), seen)
	if hitsA.Load() != 1 {
		t.Fatalf("page a fetched %d times before the crash", hitsA.Load())
	}
	w1.kill(t)

	startWorkerProcess(t, env)
	decide(t, c, cfg, st, p2.ConfirmationID, workflows.DecisionApprove, "alice")
	res := result(t, run)
	if got := outcomeList(res); got != "web_fetch:executed web_fetch:executed" || res.EndReason != "answered" {
		t.Fatalf("outcomes = %s (%s)\nworker log:\n%s", got, res.EndReason, w1.out.String())
	}
	if hitsA.Load() != 1 || hitsB.Load() != 1 {
		t.Fatalf("fetches: a=%d b=%d, want exactly 1 each", hitsA.Load(), hitsB.Load())
	}
	if len(res.Citations) != 2 || res.Citations[0].Title != "page /a" || !strings.Contains(res.Citations[1].Content, "content of /b") {
		t.Fatalf("citations = %+v", res.Citations)
	}
	all, _ := st.ListAudit(context.Background(), run.GetID())
	rows := outcomeRows(all)
	if len(rows) != 2 || issuedRows(all) != 2 {
		t.Fatalf("audit rows = %d and %d confirmation_issued, want 2 and 2 (no duplicates after the crash)", len(rows), issuedRows(all))
	}
	// The model never saw a token: check every request the model server received.
	for _, id := range []string{p1.ConfirmationID, p2.ConfirmationID} {
		row, _ := st.GetConfirmation(context.Background(), id)
		for _, body := range model.requests() {
			if strings.Contains(body, string(row.TokenHash)) || strings.Contains(body, id) {
				t.Fatalf("an inference request carries confirmation material for %s", id)
			}
		}
	}
}

// A scripted live-model turn (OpenAI wire format over real HTTP) that produces every outcome
// kind leaves exactly one audit row for each, in PostgreSQL.
func TestEveryOutcomeKindAuditedOnceOnPostgres(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok")
	}))
	defer target.Close()
	model := newFakeModel(t, calls(
		call("c1", "system_health", `{}`),                                       // executed (automatic)
		call("c2", "shell_exec", `{"cmd":"ls"}`),                                // rejected at resolve
		call("c3", "system_health", `{"verbose":`),                              // parse_failed
		call("c4", "web_fetch", fmt.Sprintf(`{"url":"%s/deny"}`, target.URL)),   // denied
		call("c5", "web_fetch", fmt.Sprintf(`{"url":"%s/expire"}`, target.URL)), // expired
		call("c6", "system_health", `{}`),                                       // budget_exhausted (MaxCalls 4)
	))
	c, cfg, st := liveModelStack(t, model)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "every-outcome", Message: "go", MaxCalls: 4, ConfirmationTTL: 3 * time.Second})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionDeny, "carol")
	res := result(t, run)
	want := "system_health:executed shell_exec:rejected:unknown_capability system_health:parse_failed:invalid_json " +
		"web_fetch:denied:denied_by_approver web_fetch:expired:confirmation_expired system_health:budget_exhausted:turn_budget"
	if got := outcomeList(res); got != want {
		t.Fatalf("outcomes = %s\nwant       %s", got, want)
	}
	rows, err := st.ListAudit(context.Background(), run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rows {
		count[r.Outcome]++
	}
	for _, k := range []activities.Outcome{"executed", "rejected", "parse_failed", "denied", "expired", "budget_exhausted"} {
		if count[string(k)] != 1 {
			t.Errorf("audit rows for %s = %d, want 1 (%v)", k, count[string(k)], count)
		}
	}
	if len(rows) != 8 || count[activities.AuditConfirmationIssued] != 2 {
		t.Fatalf("audit rows = %d, want 8: six outcomes, and the denied and the expired call each put to people once (%v)", len(rows), count)
	}
	var denied store.AuditEvent
	for _, r := range rows {
		if r.Outcome == "denied" {
			denied = r
		}
	}
	if denied.Approver != "carol" || denied.Stage != "confirm" {
		t.Fatalf("denied row = %+v", denied)
	}
}
