package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/mcpserver"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// The worker process (the real binary) is killed while an MCP client's call waits for an
// approver; the MCP request stays open. A new worker process takes the call over: the approval
// given after the crash is judged, the call runs exactly once, the waiting client gets its
// result, and the audit has one executed row for it.
func TestMCPServeWorkerKilledWhileCallWaits(t *testing.T) {
	var hits atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello after the crash")
	}))
	t.Cleanup(page.Close)
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	cfg.PolicyFile = gatewayPolicy(t)
	env := []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_POLICY=" + cfg.PolicyFile, "AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_MCP_SERVERS=",
		"AIRLOCK_APPROVER_KEY=", "AIRLOCK_APPROVER_KEY_FILE=",
	}
	w1 := startWorkerProcess(t, env)
	reg, err := workers.LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &mcpGateway{notified: map[string]int{}}
	g.srv = mcpserver.New(mcpserver.Options{Registry: func() *registry.Registry { return reg }, Temporal: c, TaskQueue: cfg.TaskQueue,
		Clients: clients.NewSource(itClients).Current, Gateway: itGateway, Progress: 200 * time.Millisecond})
	hs := httptest.NewServer(g.srv.Handler())
	t.Cleanup(hs.Close)
	g.url = hs.URL
	alice, err := g.connect(t, "alice", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"url": page.URL + "/crash"}
	rawArgs, _ := json.Marshal(args)
	id := workflows.CallWorkflowID("it-client", "alice", clients.KeyDigest("key:k-crash"), "web_fetch", rawArgs)
	type out struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "web_fetch", Arguments: args, Meta: mcp.Meta{mcpserver.MetaIdempotencyKey: "k-crash"}}
		p.SetProgressToken("p-crash")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		r, err := alice.CallTool(ctx, p)
		done <- out{r, err}
	}()
	p := waitPending(t, c, id, map[string]bool{})
	w1.kill(t)
	w2 := startWorkerProcess(t, env)
	decide(t, c, cfg, openStore(t, cfg), p.ConfirmationID, workflows.DecisionApprove, "bob")
	var o out
	select {
	case o = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the waiting client got no answer after the crash\nworker 1:\n%s\nworker 2:\n%s", w1.out.String(), w2.out.String())
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.res.IsError || !strings.Contains(textOf(o.res), "hello after the crash") || o.res.Meta[mcpserver.MetaWorkflow] != id {
		t.Fatalf("the call after the crash = %+v (%s)", o.res, textOf(o.res))
	}
	if hits.Load() != 1 {
		t.Fatalf("page hits = %d, want exactly 1", hits.Load())
	}
	rows, err := openStore(t, cfg).ListAudit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	executed := 0
	for _, r := range rows {
		if r.Outcome == string(activities.OutcomeExecuted) {
			executed++
		}
	}
	if executed != 1 {
		t.Fatalf("audit rows = %+v, want one executed row", rows)
	}
}
