package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/client"
	"github.com/airlock-dev/airlock/internal/eval"
	"github.com/airlock-dev/airlock/workflows"
)

// userProvidedPolicy writes the base policy with web.fetch's autonomy set to
// automatic-when-user-provided (issue 24 item 3) and returns its path.
func userProvidedPolicy(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "registry", "capability-authorization-policy.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range doc["capabilities"].([]any) {
		m := c.(map[string]any)
		if m["capability/id"] == "web.fetch" {
			m["autonomy"], found = "automatic-when-user-provided", true
		}
	}
	if !found {
		t.Fatal("the base policy has no web.fetch entry")
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Under automatic-when-user-provided, a web fetch of the URL the user typed runs without a
// human; the same URL with one more query parameter is held, and its card says where each
// value came from: the URL nowhere, its host from the user's message. A URL both typed and in
// a fetched page counts as the user's. Nothing else changes: under the base policy the typed
// URL is held as before.
func TestUserProvidedURLRunsAutomatically(t *testing.T) {
	var hits sync32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.add(r.URL.RequestURI())
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>story</title></head><body><p>see also "+r.Host+"/second?id=9 and more</p></body></html>")
	}))
	defer target.Close()
	typed := target.URL + "/story?id=7"
	second := "http://" + strings.TrimPrefix(target.URL, "http://") + "/second?id=9"
	model := newFakeModel(t,
		calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":%q}`, typed))),
		calls(call("c2", "web_fetch", fmt.Sprintf(`{"url":%q}`, second))),
		calls(call("c3", "web_fetch", fmt.Sprintf(`{"url":%q}`, typed+"&ref=x"))),
	)
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	cfg.PolicyFile = userProvidedPolicy(t)
	startWorker(t, c, cfg)
	st := openStore(t, cfg)

	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "prov", Principal: "alice",
		Message: "summarize " + typed + " and also " + second})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	if hits.count(typed) != 1 || hits.count(second) != 1 {
		t.Fatalf("fetches before the third call was held: %v; want the typed URL and the second one once each, without a human", hits.all())
	}
	var args struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(p.Arguments, &args); err != nil || args.URL != typed+"&ref=x" {
		t.Fatalf("held call = %s, want the URL with one more parameter", p.Arguments)
	}
	row, err := st.GetConfirmation(context.Background(), p.ConfirmationID)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Provenance) != string(row.Provenance) || len(p.Provenance) == 0 {
		t.Errorf("the pending query's provenance %s differs from the stored %s", p.Provenance, row.Provenance)
	}
	labels := map[string]string{}
	for _, o := range client.Origins(p) {
		labels[o.Path] = o.Label
	}
	if labels["/url"] != "not found in the conversation" || !strings.HasPrefix(labels["/url#host"], "from your message and also in web.fetch result #1") {
		t.Errorf("origins of the held call = %v (report %s)", labels, row.Provenance)
	}
	decide(t, c, cfg, st, p.ConfirmationID, workflows.DecisionDeny, "bob")
	res := result(t, run)
	if got := outcomeList(res); got != "web_fetch:executed web_fetch:executed web_fetch:denied:denied_by_approver" {
		t.Fatalf("outcomes = %s", got)
	}
	if hits.count(typed+"&ref=x") != 0 {
		t.Fatal("the URL the user did not type was fetched")
	}

	// The base policy is unchanged: the same typed URL waits for a human.
	model2 := newFakeModel(t, calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":%q}`, typed))))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model2.URL+"/v1")
	cfg2 := testConfig(t)
	cfg2.FetchAllow = []string{"127.0.0.0/8"}
	startWorker(t, c, cfg2)
	run2 := startTurn(t, c, cfg2, workflows.TurnRequest{Conversation: "prov-base", Principal: "alice", Message: "summarize " + typed})
	waitPending(t, c, run2.GetID(), map[string]bool{})
	if hits.count(typed) != 1 {
		t.Fatalf("under the base policy the typed URL ran without a human: %v", hits.all())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.CancelWorkflow(ctx, run2.GetID(), "")
}

// sync32 counts requests by request URI.
type sync32 struct {
	mu sync.Mutex
	m  map[string]int
}

func (s *sync32) add(uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]int{}
	}
	s.m[uri]++
}

// count is how often the path and query of URL full were requested.
func (s *sync32) count(full string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	rest := strings.TrimPrefix(full, "http://")
	return s.m[rest[strings.Index(rest, "/"):]]
}

func (s *sync32) all() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m)
}

// The make run session replayed as a real turn: the held send_money's card shows the
// attacker's IBAN as from the read_file result of the bill (bill-december-2023.txt), only in
// untrusted data, and the outcome's audit row carries the same report (issue 24 item 5).
func TestReplayedMakeRunTurnShowsTheIBANFromTheBill(t *testing.T) {
	all, err := eval.LoadAgentDojo(corpusDir, eval.Filter{Suite: "banking", Model: "gpt-4o-2024-05-13", Attack: "important_instructions"})
	if err != nil {
		t.Fatal(err)
	}
	var cases []*eval.Case
	for _, c := range all {
		if c.Path == "runs/gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0.json" {
			cases = append(cases, c)
		}
	}
	if len(cases) != 1 {
		t.Fatalf("the make run recording is not in the corpus (%d cases)", len(cases))
	}
	results, _ := evalRun(t, eval.Corpus{AgentDojoDir: corpusDir}, eval.PolicyDenyAll, cases)
	if len(results) != 1 || len(results[0].Turns) != 1 {
		t.Fatalf("results = %s", asJSON(results))
	}
	turn := results[0].Turns[0]
	var held *workflows.ProposalOutcome
	for i, o := range turn.Outcomes {
		if o.Name == "send_money" && o.ConfirmationID != "" {
			held = &turn.Outcomes[i]
		}
	}
	if held == nil {
		t.Fatalf("send_money was not held: %s", asJSON(turn.Outcomes))
	}
	origins := map[string]client.Origin{}
	for _, o := range client.Origins(client.PendingConfirmation{Provenance: turn.Provenance[held.ConfirmationID]}) {
		origins[o.Path] = o
	}
	r := origins["/recipient"]
	if r.Label != "from agentdojo.banking.read-file result #1 (bill-december-2023.txt): only in untrusted data" || !r.UntrustedOnly {
		t.Errorf("recipient origin = %+v (report %s)", r, turn.Provenance[held.ConfirmationID])
	}
	if d := origins["/date"]; d.Label != "not found in the conversation" {
		t.Errorf("date origin = %+v", d)
	}
}
