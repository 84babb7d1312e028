package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/mcpserver"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// bearerTransport adds "Authorization: Bearer <token>" to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// gatewayPolicy is the base policy with web.read held by alice only: every other principal
// ("*") lacks it, so web_fetch is neither listed nor callable for them.
func gatewayPolicy(t *testing.T) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(registry.EmbeddedPolicy, &doc); err != nil {
		t.Fatal(err)
	}
	all := []any{"host.observe", "web.read", "catalog.read", "agent.propose"}
	doc["principals"] = []any{
		map[string]any{"principal": "*", "grants": []any{"host.observe", "catalog.read", "agent.propose"}},
		map[string]any{"principal": "alice", "grants": all},
	}
	b, _ := json.Marshal(doc)
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mcpGateway is a worker and `airlock mcp serve`'s HTTP handler on one configuration.
type mcpGateway struct {
	url string
	srv *mcpserver.Server
	// notified counts the progress notifications sent, by call workflow id.
	mu       sync.Mutex
	notified map[string]int
}

// notifiedOf is how many progress notifications the gateway sent for workflow id.
func (g *mcpGateway) notifiedOf(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.notified[id]
}

func startGateway(t *testing.T) (*mcpGateway, func(string, string) string) {
	t.Helper()
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	cfg.PolicyFile = gatewayPolicy(t)
	startWorker(t, c, cfg)
	reg, err := workers.LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &mcpGateway{notified: map[string]int{}}
	g.srv = mcpserver.New(mcpserver.Options{Registry: func() *registry.Registry { return reg }, Temporal: c, TaskQueue: cfg.TaskQueue,
		Clients: clients.NewSource(itClients).Current, Gateway: itGateway, Progress: 100 * time.Millisecond, Notified: func(id, _ string) {
			g.mu.Lock()
			g.notified[id]++
			g.mu.Unlock()
		}})
	hs := httptest.NewServer(g.srv.Handler())
	t.Cleanup(hs.Close)
	st := openStore(t, cfg)
	approve := func(confirmationID, decision string) string {
		decide(t, c, cfg, st, confirmationID, decision, "bob")
		return confirmationID
	}
	g.url = hs.URL
	return g, approve
}

// connect opens a Go SDK client session as principal (itStarter's bearer token), collecting
// progress messages into *progress.
func (g *mcpGateway) connect(t *testing.T, principal string, progress *[]string, mu *sync.Mutex) (*mcp.ClientSession, error) {
	t.Helper()
	tok, err := itStarter.MintBearer(principal, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "it-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if progress != nil {
				mu.Lock()
				*progress = append(*progress, r.Params.Message)
				mu.Unlock()
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url, HTTPClient: &http.Client{Transport: bearerTransport{tok}}}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// The Go SDK's client against `airlock mcp serve` on a real Temporal dev server and
// PostgreSQL: an unauthenticated client is refused; each principal lists and calls only the
// tools the policy lets it use; an automatic call answers at once with untrusted, structured
// content; a confirmed call waits for an approver with progress notifications and runs once;
// a retry with the same idempotency key, from a new session, attaches to the same workflow and
// does not run again; a denied call is a tool error that says so.
func TestMCPServeGoClient(t *testing.T) {
	g, decideAs := startGateway(t)
	var hits atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello from the page")
	}))
	t.Cleanup(page.Close)

	t.Run("unauthenticated", func(t *testing.T) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "anon", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url}, nil); err == nil {
			cs.Close()
			t.Fatal("a client without a bearer token connected")
		}
		forged := &mcp.StreamableClientTransport{Endpoint: g.url, HTTPClient: &http.Client{Transport: bearerTransport{clients.BearerPrefix + "e30.AAAA"}}}
		if cs, err := cl.Connect(ctx, forged, nil); err == nil {
			cs.Close()
			t.Fatal("a client with a forged bearer token connected")
		}
	})

	var mu sync.Mutex
	var progress []string
	alice, err := g.connect(t, "alice", &progress, &mu)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := g.connect(t, "bob", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tools per principal", func(t *testing.T) {
		a, b := toolNames(t, alice), toolNames(t, bob)
		if strings.Join(a, ",") != "system_health,web_fetch" {
			t.Fatalf("alice's tools = %v", a)
		}
		if strings.Join(b, ",") != "system_health" {
			t.Fatalf("bob's tools = %v", b)
		}
		res, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_fetch", Arguments: map[string]any{"url": page.URL}})
		if err == nil && !res.IsError {
			t.Fatalf("bob called web_fetch: %+v", res)
		}
		if hits.Load() != 0 {
			t.Fatal("bob's refused call reached the page")
		}
	})

	t.Run("automatic", func(t *testing.T) {
		res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "system_health", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || res.Meta[mcpserver.MetaTrust] != "untrusted" || res.Meta[mcpserver.MetaOutcome] != "executed" ||
			!strings.Contains(textOf(res), `"trust":"untrusted"`) || res.StructuredContent == nil {
			t.Fatalf("system_health = %+v (%s)", res, textOf(res))
		}
		if !strings.HasPrefix(res.Meta[mcpserver.MetaWorkflow].(string), workflows.CallWorkflowPrefix+"it-client/") {
			t.Fatalf("workflow = %v", res.Meta[mcpserver.MetaWorkflow])
		}
	})

	args := map[string]any{"url": page.URL + "/doc"}
	callConfirmed := func(cs *mcp.ClientSession, key string) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: "web_fetch", Arguments: args, Meta: mcp.Meta{mcpserver.MetaIdempotencyKey: key}}
		p.SetProgressToken("p-" + key)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return cs.CallTool(ctx, p)
	}
	rawArgs, _ := json.Marshal(args)

	t.Run("confirmed, approved, retried", func(t *testing.T) {
		id := workflows.CallWorkflowID("it-client", "alice", clients.KeyDigest("key:k-approve"), "web_fetch", rawArgs)
		type out struct {
			res *mcp.CallToolResult
			err error
		}
		done := make(chan out, 2)
		go func() {
			r, err := callConfirmed(alice, "k-approve")
			done <- out{r, err}
		}()
		p := waitPending(t, dial(t), id, map[string]bool{})
		// A second session sends the same call while it waits: it attaches to the running
		// workflow (no second confirmation) and gets the same answer.
		var twinMu sync.Mutex
		var twinProgress []string
		twin, err := g.connect(t, "alice", &twinProgress, &twinMu)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			r, err := callConfirmed(twin, "k-approve")
			done <- out{r, err}
		}()
		if p.ToolName != "web_fetch" || p.Requester == nil || p.Requester.Client != "it-client" || p.Requester.Principal != "alice" {
			t.Fatalf("pending = %+v", p)
		}
		eventually(t, 30*time.Second, "a progress notification naming the confirmation", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range progress {
				if strings.Contains(m, p.ConfirmationID) && strings.Contains(m, "approver") {
					return true
				}
			}
			return false
		})
		if hits.Load() != 0 {
			t.Fatal("the confirmed call ran before its approval")
		}
		eventually(t, 30*time.Second, "progress for the twin call, waiting on the same confirmation", func() bool {
			twinMu.Lock()
			defer twinMu.Unlock()
			return len(twinProgress) > 0 && strings.Contains(twinProgress[0], p.ConfirmationID)
		})
		if ps := pending(t, dial(t), id); len(ps) != 1 || ps[0].ConfirmationID != p.ConfirmationID {
			t.Fatalf("pending with the twin attached = %+v", ps)
		}
		decideAs(p.ConfirmationID, workflows.DecisionApprove)
		o, o2 := <-done, <-done
		if o.err != nil || o2.err != nil {
			t.Fatal(o.err, o2.err)
		}
		if textOf(o.res) != textOf(o2.res) {
			t.Fatalf("the twin got another answer: %s / %s", textOf(o.res), textOf(o2.res))
		}
		if o.res.IsError || !strings.Contains(textOf(o.res), "hello from the page") || o.res.Meta[mcpserver.MetaWorkflow] != id {
			t.Fatalf("approved web_fetch = %+v (%s)", o.res, textOf(o.res))
		}
		if hits.Load() != 1 {
			t.Fatalf("page hits = %d, want 1", hits.Load())
		}
		// A reconnecting client retries the same call: it attaches to the same workflow.
		again, err := g.connect(t, "alice", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := callConfirmed(again, "k-approve")
		if err != nil {
			t.Fatal(err)
		}
		if r2.IsError || r2.Meta[mcpserver.MetaWorkflow] != id || textOf(r2) != textOf(o.res) || hits.Load() != 1 {
			t.Fatalf("retry = %+v, hits %d", r2, hits.Load())
		}
		writeHistory(t, dial(t), id, "call-approved.history.json")
		// The call's history names its caller by an attestation bound to this call, never by
		// the bearer token, which would start other calls for whoever reads histories.
		if historyHolds(t, dial(t), id, clients.BearerPrefix) {
			t.Fatal("the call's history holds a bearer token")
		}
		if !historyHolds(t, dial(t), id, `"signer":"mcp-gateway"`) {
			t.Fatal("the call's history has no attestation signed by the gateway")
		}
	})

	t.Run("denied", func(t *testing.T) {
		id := workflows.CallWorkflowID("it-client", "alice", clients.KeyDigest("key:k-deny"), "web_fetch", rawArgs)
		done := make(chan error, 1)
		var res *mcp.CallToolResult
		go func() {
			var err error
			res, err = callConfirmed(alice, "k-deny")
			done <- err
		}()
		p := waitPending(t, dial(t), id, map[string]bool{})
		decideAs(p.ConfirmationID, workflows.DecisionDeny)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(textOf(res), "denied") || res.Meta[mcpserver.MetaOutcome] != "denied" {
			t.Fatalf("denied web_fetch = %+v (%s)", res, textOf(res))
		}
		if hits.Load() != 1 {
			t.Fatalf("page hits = %d after a denial, want 1", hits.Load())
		}
		writeHistory(t, dial(t), id, "call-denied.history.json")
	})

	t.Run("bad idempotency key", func(t *testing.T) {
		res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "system_health", Arguments: map[string]any{},
			Meta: mcp.Meta{mcpserver.MetaIdempotencyKey: 7}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(textOf(res), mcpserver.MetaIdempotencyKey) {
			t.Fatalf("a numeric idempotency key = %+v", res)
		}
	})
}

// `airlock mcp serve --stdio` (the real binary) started by the Go SDK's client as its MCP
// server: the caller is the starting process's client credential and --principal; its tools
// and calls are that principal's, through the worker.
func TestMCPServeStdio(t *testing.T) {
	c := dial(t)
	cfg := testConfig(t)
	cfg.PolicyFile = gatewayPolicy(t)
	startWorker(t, c, cfg)
	session := func(principal string) *mcp.ClientSession {
		cmd := exec.Command(airlockBin, "mcp", "serve", "--stdio", "--principal", principal)
		cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_TASK_QUEUE="+cfg.TaskQueue, "AIRLOCK_POLICY="+cfg.PolicyFile,
			"AIRLOCK_CLIENTS="+itClients, "AIRLOCK_CLIENT_CREDENTIAL="+itStarterFile, "AIRLOCK_MCP_SERVERS=",
			"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("start airlock mcp serve --stdio: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice := session("alice")
	if got := strings.Join(toolNames(t, alice), ","); got != "system_health,web_fetch" {
		t.Fatalf("alice's tools over stdio = %s", got)
	}
	res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "system_health", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Meta[mcpserver.MetaOutcome] != "executed" || res.Meta[mcpserver.MetaTrust] != "untrusted" {
		t.Fatalf("system_health over stdio = %+v (%s)", res, textOf(res))
	}
	id, _ := res.Meta[mcpserver.MetaWorkflow].(string)
	st := openStore(t, cfg)
	if rq, err := st.GetRequester(context.Background(), id, ""); err != nil || rq.Client != "it-client" || rq.Principal != "alice" {
		t.Fatalf("the stdio call's requester = %+v, %v", rq, err)
	}
	if got := strings.Join(toolNames(t, session("bob")), ","); got != "system_health" {
		t.Fatalf("bob's tools over stdio = %s", got)
	}
}

// An HTTP session belongs to the client and principal whose token opened it: a request on it
// with another principal's valid token is refused, and a request without one is a 401 that
// names the bearer scheme.
func TestMCPServeSessionBelongsToItsCaller(t *testing.T) {
	g, _ := startGateway(t)
	mint := func(principal string) string {
		tok, err := itStarter.MintBearer(principal, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	post := func(token, session, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, g.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	init := post(mint("alice"), "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize as alice: %s, session %q", init.Status, session)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if r := post(mint("bob"), session, list); r.StatusCode < 400 {
		t.Fatalf("bob's token on alice's session: %s", r.Status)
	}
	if r := post("", session, list); r.StatusCode != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token on alice's session: %s %q", r.Status, r.Header.Get("WWW-Authenticate"))
	}
}

// historyHolds reports whether any event of workflow id's history holds text (payloads are
// plain JSON in these tests: no codec).
func historyHolds(t *testing.T, c client.Client, id, text string) bool {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(text)) {
			return true
		}
	}
	return false
}
