package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// Two worker builds on one task queue of the dev server (Worker Versioning), and the traps of
// issue 34: build-b becomes current and a turn pins to it; build-b's worker stops. Then
// `airlock deploy status`, `airlock doctor` and `airlock turn start` say that new turns and the
// pinned turn wait for a build no worker runs, and what to run; `airlock deploy rollback`
// makes build-a current again (new turns run on it); the turn pinned to build-b goes on once a
// build-b worker runs again.
func TestDeployTwoBuildsStoppingTheNewOne(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "<html><head><title>t</title></head><body><p>fetched</p></body></html>")
	}))
	t.Cleanup(target.Close)
	model := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/x"}`, target.URL))))
	c := dial(t)
	cfg := testConfig(t)
	env := []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_MCP_SERVERS=", "AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=",
		"AIRLOCK_WORKER_VERSIONING=on", "AIRLOCK_DEPLOYMENT=", "AIRLOCK_PROMOTE=auto",
	}
	build := func(id string) []string { return append(append([]string{}, env...), "AIRLOCK_BUILD_ID="+id) }
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(airlockBin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	status := func() (string, error) { return cli("deploy", "status") }

	startWorkerProcess(t, build("build-a"))
	eventually(t, 60*time.Second, "build-a current with a worker", func() bool {
		out, err := status()
		return err == nil && strings.Contains(out, "build-a") && strings.Contains(out, "current")
	})
	wb := startWorkerProcess(t, build("build-b"))
	eventually(t, 60*time.Second, "build-b current (auto promotion of the newer build)", func() bool {
		out, _ := status()
		return strings.Contains(out, "build-b                      current")
	})

	st := openStore(t, cfg)
	pinned := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "deploy-pinned", Message: "fetch it"})
	p := waitPending(t, c, pinned.GetID(), map[string]bool{})
	wb.kill(t)

	var out string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
		var err error
		out, err = status()
		if err != nil && strings.Contains(out, "new turns on task queue "+cfg.TaskQueue+" start on build build-b") &&
			strings.Contains(out, "1 running turn(s) are pinned to build build-b") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deploy status does not name the stranded builds (%v):\n%s", err, out)
		}
	}
	if !strings.Contains(out, "airlock deploy promote build-a") {
		t.Fatalf("deploy status names no fix:\n%s", out)
	}
	doc, err := cli("doctor")
	if err == nil || !strings.Contains(doc, "versions") || !strings.Contains(doc, "which no worker runs") {
		t.Fatalf("doctor passed a stranded deployment (%v):\n%s", err, doc)
	}
	started, err := cli("turn", "start", "--conversation", "deploy-new", "--principal", "alice", "hello")
	if !strings.Contains(started, "WARNING: new turns on task queue "+cfg.TaskQueue+" start on build build-b") {
		t.Fatalf("turn start did not warn (%v):\n%s", err, started)
	}
	// A direct diagnosis agrees with the CLI.
	d, err := workers.DiagnoseVersioning(t.Context(), c, devServer.Namespace, cfg.TaskQueue, cfg.TaskQueue, time.Now())
	if err != nil || d.Current != "build-b" || len(d.Problems) != 2 {
		t.Fatalf("diagnosis = %+v, %v", d, err)
	}

	if out, err := cli("deploy", "rollback"); err != nil || !strings.Contains(out, "now start on build build-a") {
		t.Fatalf("rollback (%v):\n%s", err, out)
	}
	fresh := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "deploy-after", Message: "fetch it"})
	pf := waitPending(t, c, fresh.GetID(), map[string]bool{})
	decide(t, c, cfg, st, pf.ConfirmationID, workflows.DecisionDeny, "bob")
	if res := result(t, fresh); res.EndReason == "" {
		t.Fatalf("the turn after the rollback = %+v", res)
	}
	// The turn pinned to build-b needs build-b: it goes on once a build-b worker runs again.
	startWorkerProcess(t, append(build("build-b"), "AIRLOCK_PROMOTE=never"))
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "bob")
	if res := result(t, pinned); outcomeList(res) != "web_fetch:executed" || hits.Load() != 1 {
		t.Fatalf("the pinned turn = %s (hits %d)", outcomeList(res), hits.Load())
	}
}
