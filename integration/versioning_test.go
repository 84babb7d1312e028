package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// buildWorker runs a versioned in-process worker of build id on cfg's task queue, talking to
// Temporal through a client of its own whose identity names the build (history events carry
// it), with the live model model. It returns once the worker polls and was promoted per p.
func buildWorker(t *testing.T, cfg config.Config, model *modelServer, build string, p workers.Promotion) {
	t.Helper()
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1") // read by workers.Build
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	o := client.Options{HostPort: devServer.Address, Namespace: devServer.Namespace, Logger: quietLogger(), Identity: "worker-" + build, Interceptors: signing()}
	config.TuneForLoopback(&o)
	c, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	deps, err := workers.Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := workers.NewVersioned(c, deps.Activities, cfg.TaskQueue, workers.Versioning{Deployment: cfg.TaskQueue, BuildID: build, Promote: p})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); deps.Close(); c.Close() })
}

// currentBuild is the build id of cfg's deployment's current version ("" when none).
func currentBuild(t *testing.T, c client.Client, deployment string) string {
	t.Helper()
	d, err := c.WorkerDeploymentClient().GetHandle(deployment).Describe(context.Background(), client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := d.Info.RoutingConfig.CurrentVersion; v != nil {
		return v.BuildID
	}
	return ""
}

// turnBuild checks that every workflow task of turn id was completed by a worker of build
// (its identity and the deployment version the event records) and that the turn is pinned to
// it; it returns the number of workflow tasks.
func turnBuild(t *testing.T, c client.Client, id, deployment, build string) int {
	t.Helper()
	ctx := context.Background()
	d, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	desc := d.RawResponse
	vi := desc.GetWorkflowExecutionInfo().GetVersioningInfo()
	if vi.GetBehavior() != enumspb.VERSIONING_BEHAVIOR_PINNED {
		t.Errorf("turn %s: versioning behavior %s, want pinned", id, vi.GetBehavior())
	}
	if got := vi.GetDeploymentVersion(); got.GetBuildId() != build || got.GetDeploymentName() != deployment {
		t.Errorf("turn %s runs on %s:%s, want %s:%s", id, got.GetDeploymentName(), got.GetBuildId(), deployment, build)
	}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	tasks := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		a := e.GetWorkflowTaskCompletedEventAttributes()
		if a == nil {
			continue
		}
		tasks++
		if a.GetIdentity() != "worker-"+build || a.GetDeploymentVersion().GetBuildId() != build {
			t.Errorf("turn %s: workflow task (event %d) completed by %q on build %q, want worker-%s on %s",
				id, e.GetEventId(), a.GetIdentity(), a.GetDeploymentVersion().GetBuildId(), build, build)
		}
	}
	return tasks
}

// TestTwoBuildsRainbow runs two builds of the turn worker at once on the dev server (issue 20,
// item 1): turns started while build A was current finish on A, including one that waited for
// a decision across the switch to B and inferred again after it; turns started after the
// switch run on B; a worker of A that restarts afterwards does not take routing back.
func TestTwoBuildsRainbow(t *testing.T) {
	target := statusPage(t)
	// Each build's model says which build it is, so the answers show where inference ran.
	modelA := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL))), answer("answered by build A"))
	modelB := newFakeModel(t, answer("answered by build B"))
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	c := dial(t)
	st := openStore(t, cfg)
	dep := cfg.TaskQueue

	buildWorker(t, cfg, modelA, "build-a", workers.PromoteAuto)
	if got := currentBuild(t, c, dep); got != "build-a" {
		t.Fatalf("current build after A started = %q, want build-a", got)
	}
	waiting := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "rainbow-waiting", Principal: "ops", Message: "fetch the status page"})
	p := waitPending(t, c, waiting.GetID(), map[string]bool{})

	buildWorker(t, cfg, modelB, "build-b", workers.PromoteAuto)
	if got := currentBuild(t, c, dep); got != "build-b" {
		t.Fatalf("current build after B started = %q, want build-b (a newer build is promoted)", got)
	}
	fresh := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "rainbow-fresh", Principal: "ops", Message: "hello"})
	if res := result(t, fresh); res.Prose != "answered by build B" {
		t.Fatalf("a turn started after the switch answered %q, want build B's answer", res.Prose)
	}
	turnBuild(t, c, fresh.GetID(), dep, "build-b")

	// The waiting turn is decided after the switch: its next workflow tasks, the fetch and
	// its second inference all stay on A.
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionApprove, "alice")
	res := result(t, waiting)
	if got := outcomeList(res); got != "web_fetch:executed" {
		t.Fatalf("outcomes of the waiting turn = %s", got)
	}
	if res.Prose != "answered by build A" {
		t.Fatalf("the turn that waited across the switch answered %q, want build A's answer", res.Prose)
	}
	if n := turnBuild(t, c, waiting.GetID(), dep, "build-a"); n < 2 {
		t.Fatalf("the waiting turn completed %d workflow tasks, want its tasks before and after the decision", n)
	}
	if reqs := modelB.requests(); len(reqs) != 1 || strings.Contains(reqs[0], "fetch the status page") {
		t.Fatalf("build B's model saw %d requests (want only the fresh turn's)", len(reqs))
	}

	// Operators find a build's turns by the server's own search attributes.
	for build, id := range map[string]string{"build-a": waiting.GetID(), "build-b": fresh.GetID()} {
		q := fmt.Sprintf("TemporalWorkerDeploymentVersion = '%s:%s' AND TemporalWorkflowVersioningBehavior = 'Pinned'", dep, build)
		eventually(t, 20*time.Second, "visibility lists "+id+" under "+build, func() bool {
			resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: q})
			if err != nil {
				t.Fatalf("list %s: %v", q, err)
			}
			ids := []string{}
			for _, e := range resp.GetExecutions() {
				ids = append(ids, e.GetExecution().GetWorkflowId())
			}
			return len(ids) == 1 && ids[0] == id
		})
	}

	// A worker of the old build restarting does not take new turns back (PromoteAuto).
	buildWorker(t, cfg, modelA, "build-a", workers.PromoteAuto)
	time.Sleep(200 * time.Millisecond)
	if got := currentBuild(t, c, dep); got != "build-b" {
		t.Fatalf("current build after an A worker restarted = %q, want build-b", got)
	}
}
