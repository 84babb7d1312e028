package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

func quietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// modelServer is a real HTTP server speaking the OpenAI chat-completions wire format. It
// answers the n-th request (0-based, across turns) with reply(n, body) and keeps every body.
type modelServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newModelServer(t *testing.T, reply func(n int, body []byte) (status int, resp string)) *modelServer {
	m := &modelServer{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		n := len(m.bodies)
		m.bodies = append(m.bodies, string(b))
		m.mu.Unlock()
		status, resp := reply(n, b)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, resp)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *modelServer) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...)
}

// newFakeModel answers round r (the number of assistant messages in the request, plus one)
// with rounds[r-1], and with a final answer after the last one.
func newFakeModel(t *testing.T, rounds ...string) *modelServer {
	return newModelServer(t, func(_ int, b []byte) (int, string) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return http.StatusBadRequest, `{"error":{"message":"bad json"}}`
		}
		round := 1
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				round++
			}
		}
		if round <= len(rounds) {
			return http.StatusOK, rounds[round-1]
		}
		return http.StatusOK, answer("all done")
	})
}

func call(id, name, args string) string {
	b, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, id, name, b)
}

func calls(cs ...string) string {
	return `{"id":"chatcmpl-it","object":"chat.completion","created":1700000000,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		strings.Join(cs, ",") + `]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
}

func answer(text string) string {
	b, _ := json.Marshal(text)
	return `{"id":"chatcmpl-it","object":"chat.completion","created":1700000000,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":` +
		string(b) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
}

// testConfig is a worker configuration on a fresh PostgreSQL schema and a private task queue.
func testConfig(t *testing.T, layers ...string) config.Config {
	return config.Config{Home: t.TempDir(), DatabaseURL: freshDB(t), CorpusDir: corpusDir, Layers: layers,
		TaskQueue: taskQueue(t), TemporalUI: "http://localhost:8233", ApproversFile: itApprovers, ClientsFile: itClients, ClientCredential: itStarterFile}
}

// startWorker runs an in-process worker for cfg until the test ends.
func startWorker(t *testing.T, c client.Client, cfg config.Config) *workers.Deps {
	t.Helper()
	deps, err := workers.Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := workers.New(c, deps.Activities, cfg.TaskQueue)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(); deps.Close() })
	return deps
}

// liveModelStack starts a worker serving model as the live (OpenAI-compatible) model, with
// web.fetch allowed to reach loopback test servers, and returns a client, the worker's config
// and its store.
func liveModelStack(t *testing.T, model *modelServer) (client.Client, config.Config, *store.Store) {
	t.Helper()
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	startWorker(t, c, cfg)
	return c, cfg, openStore(t, cfg)
}

func openStore(t *testing.T, cfg config.Config) *store.Store {
	st, err := store.Open(context.Background(), cfg.StoreURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func startTurn(t *testing.T, c client.Client, cfg config.Config, req workflows.TurnRequest) client.WorkflowRun {
	t.Helper()
	req.Conversation += "-" + cfg.TaskQueue // unique per test: workflow ids never collide
	id := workflows.TurnWorkflowID(req.Conversation, 1)
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: cfg.TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.AttrConversation.ValueSet(req.Conversation),
			workflows.AttrStatus.ValueSet(workflows.StatusRunning)),
	}, workers.TurnWorkflowName, req)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// pending queries the turn's pending confirmations.
func pending(t *testing.T, c client.Client, id string) []workflows.PendingConfirmation {
	v, err := c.QueryWorkflow(context.Background(), id, "", workflows.QueryPending)
	if err != nil {
		return nil
	}
	var out []workflows.PendingConfirmation
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitPending waits until confirmation number n (1-based, in order of appearance) is pending.
func waitPending(t *testing.T, c client.Client, id string, seen map[string]bool) workflows.PendingConfirmation {
	t.Helper()
	var got workflows.PendingConfirmation
	eventually(t, 60*time.Second, "a new pending confirmation on "+id, func() bool {
		for _, p := range pending(t, c, id) {
			if !seen[p.ConfirmationID] {
				seen[p.ConfirmationID] = true
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// decide signs a decision with the confirmation's token and signals the turn, as an approver
// surface does (internal/approval).
func decide(t *testing.T, c client.Client, cfg config.Config, st *store.Store, confirmationID, decision, approver string) {
	t.Helper()
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := approval.Send(context.Background(), c, st, key, approval.Request{ConfirmationID: confirmationID,
		Decision: decision, Approver: approver, Reason: "test decision", Signer: signer(t, approver)}); err != nil {
		t.Fatal(err)
	}
}

func result(t *testing.T, run client.WorkflowRun) workflows.TurnResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res workflows.TurnResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("turn %s: %v", run.GetID(), err)
	}
	return res
}

func outcomeList(res workflows.TurnResult) string {
	var s []string
	for _, o := range res.Outcomes {
		x := o.Name + ":" + string(o.Outcome)
		if o.Reason != "" {
			x += ":" + o.Reason
		}
		s = append(s, x)
	}
	return strings.Join(s, " ")
}

// historyEvents counts the turn's history events.
func historyEvents(t *testing.T, c client.Client, id string) int {
	it := c.GetWorkflowHistory(context.Background(), id, "", false, 0)
	n := 0
	kinds := map[string]int{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		kinds[e.GetEventType().String()]++
		n++
	}
	t.Logf("history of %s: %v", id, kinds)
	return n
}

// outcomeRows drops the confirmation_issued rows of a turn's audit (when a call was put to
// people): what remains says what became of each call, the rows the at-most-once and
// no-duplicate checks count. issuedRows counts the dropped ones, for tests that assert them.
func outcomeRows(rows []store.AuditEvent) []store.AuditEvent {
	out := make([]store.AuditEvent, 0, len(rows))
	for _, r := range rows {
		if r.Outcome != activities.AuditConfirmationIssued {
			out = append(out, r)
		}
	}
	return out
}

// issuedRows counts a turn's confirmation_issued audit rows.
func issuedRows(rows []store.AuditEvent) int { return len(rows) - len(outcomeRows(rows)) }
