package integration

// HTTP capabilities declared in a registry layer file, no Go code (issue 19, item 2), in a real
// worker on the dev server and PostgreSQL, bound from a layer file: the create waits for its
// approval with its destination disclosed, is sent once with the secret header and the
// proposal's idempotency key, and a repeat of its execution answers from the execution ledger
// without sending again.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/capabilities"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

const httpLayer = `{"schema/v":"capability-registry.v1","revision":"http-tickets.1","entries":[
 {"capability/id":"httptickets.create","version":1,"owner":"platform","surfaces":["host-local"],"wire/name":"app/httptickets.create","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"open_ticket","description":"Open a ticket in the ticket system.","side-effect":"external-write","network":"external","per-turn/cap":2,"timeout":"10s","model-visible":true,
   "destination":{"kind":"host","name":"127.0.0.1","fields":["project","title"]},
   "http":{"method":"POST","url":"%s/api","path":"/projects/{project}/tickets","body":["title"],
    "headers":[{"name":"Authorization","secret":"it-tickets","prefix":"Bearer "}],
    "accept/status":[201],"idempotency/header":"Idempotency-Key",
    "arguments":{"type":"object","additionalProperties":false,"required":["project","title"],
     "properties":{"project":{"type":"string","maxLength":40},"title":{"type":"string","maxLength":200}}}}}}]}`

func TestHTTPCapabilityFromALayerFile(t *testing.T) {
	type req struct{ path, auth, key, body string }
	var mu sync.Mutex
	var got []req
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, req{r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":501}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	layer := filepath.Join(dir, "http-tickets.v1.json")
	doc := fmt.Sprintf(httpLayer, srv.URL)
	if err := os.WriteFile(layer, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := registry.StructuralPolicy("http tickets policy", "http-tickets.1", nil, registry.Source{Name: layer, Data: []byte(doc)})
	if err := os.WriteFile(filepath.Join(dir, "http-tickets.v1.policy.json"), pol.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_SECRET_IT_TICKETS", "it-secret-token")
	model := newFakeModel(t, calls(call("c1", "open_ticket", `{"project":"ops/infra","title":"Disk full on db-3"}`)))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t, layer)
	cfg.FetchAllow = []string{strings.TrimPrefix(srv.URL, "http://")}
	deps := startWorker(t, c, cfg)
	st := openStore(t, cfg)

	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "httpcap", Principal: "alice", Message: "open a ticket for the full disk"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	mu.Lock()
	sent := len(got)
	mu.Unlock()
	if sent != 0 {
		t.Fatalf("%d requests before the approval", sent)
	}
	if d := p.Disclosure; d == nil || len(d.Hosts) != 1 || d.Hosts[0].Host != "127.0.0.1" || d.Hosts[0].Differs() || len(d.Leaving) != 2 {
		t.Fatalf("disclosure %+v", p.Disclosure)
	}
	decide(t, c, cfg, st, p.ConfirmationID, "approve", "bob")
	res := result(t, run)
	if outcomeList(res) != "open_ticket:executed" || len(res.Results) != 1 || !strings.Contains(string(res.Results[0].Data), `"status":201`) ||
		!strings.HasPrefix(res.Results[0].SourceURL, srv.URL+"/api/projects/ops%2Finfra/tickets") {
		t.Fatalf("outcomes %s, results %+v", outcomeList(res), res.Results)
	}
	mu.Lock()
	if len(got) != 1 || got[0].path != "/api/projects/ops%2Finfra/tickets" || got[0].auth != "Bearer it-secret-token" ||
		got[0].key != capabilities.IdempotencyKey(run.GetID(), res.Outcomes[0].Seq) || got[0].body != `{"title":"Disk full on db-3"}` {
		t.Fatalf("requests %+v", got)
	}
	mu.Unlock()
	if strings.Contains(string(res.Results[0].Data), "it-secret-token") {
		t.Fatal("the secret reached the result")
	}
	// A repeat of the execution (an activity retry after a lost answer) is answered from the
	// ledger: nothing is sent again.
	cap, _ := deps.Served.Current().ByKey("httptickets.create@1")
	out, err := deps.Activities.Execute(context.Background(), activities.ExecuteInput{WorkflowID: run.GetID(), Seq: res.Outcomes[0].Seq,
		CallID: "c1", CapabilityID: "httptickets.create", Version: 1, Arguments: json.RawMessage(`{"project":"ops/infra","title":"Disk full on db-3"}`),
		ConfirmationID: p.ConfirmationID, RegistryRevision: cap.Fingerprint(), Principal: "alice"})
	if err != nil || out.Outcome != activities.OutcomeExecuted {
		t.Fatalf("repeat: %+v %v", out, err)
	}
	mu.Lock() // Execute returned: a request it sent has been received
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the repeat sent again: %d requests", len(got))
	}
}

// A sent write whose answer never comes (the server hangs past the entry's timeout) is
// outcome_unknown in the turn's result, never failed, and is not sent again.
func TestHTTPCapabilityWithoutAnAnswerIsOutcomeUnknown(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	dir := t.TempDir()
	layer := filepath.Join(dir, "slow.v1.json")
	doc := strings.Replace(fmt.Sprintf(httpLayer, srv.URL), `"timeout":"10s"`, `"timeout":"1s"`, 1)
	if err := os.WriteFile(layer, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := registry.StructuralPolicy("slow policy", "slow.1", nil, registry.Source{Name: layer, Data: []byte(doc)})
	if err := os.WriteFile(filepath.Join(dir, "slow.v1.policy.json"), pol.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_SECRET_IT_TICKETS", "it-secret-token")
	model := newFakeModel(t, calls(call("c1", "open_ticket", `{"project":"ops","title":"Disk full"}`)))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t, layer)
	cfg.FetchAllow = []string{strings.TrimPrefix(srv.URL, "http://")}
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "httpcap-slow", Principal: "alice", Message: "open a ticket"})
	p := waitPending(t, c, run.GetID(), map[string]bool{})
	decide(t, c, cfg, st, p.ConfirmationID, "approve", "bob")
	res := result(t, run)
	if got := outcomeList(res); got != "open_ticket:outcome_unknown:capability_error" {
		t.Fatalf("outcomes %s (%+v)", got, res.Outcomes)
	}
	if !strings.Contains(res.Outcomes[0].Detail, "sent, no answer") {
		t.Fatalf("detail %q", res.Outcomes[0].Detail)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 1 {
		t.Fatalf("the write was sent %d times", n)
	}
}
