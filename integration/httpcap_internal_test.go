package integration

// External capabilities declare only what matters to them (issue 34, item 5): an HTTP entry
// written with no built-in-only field (no surfaces, flags, wire/name, status, cap, timeout),
// declared a read of a named internal service, runs without a human in a real worker on the
// dev server, and its call reaches only the internal address.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

const internalReadLayer = `{"schema/v":"capability-registry.v1","revision":"inventory.1","entries":[
 {"capability/id":"inventory.lookup","version":1,"owner":"platform",
  "airlock":{"tool/name":"inventory_lookup","description":"Look up a host in the internal inventory.","side-effect":"none","network":"external",
   "destination":{"kind":"host","name":"127.0.0.1","fields":["host"],"internal":true},
   "http":{"method":"GET","url":"%s/inventory","path":"/hosts/{host}","accept/status":[200],
    "arguments":{"type":"object","additionalProperties":false,"required":["host"],"properties":{"host":{"type":"string","maxLength":64}}}}}}]}`

func TestInternalReadRunsWithoutAHuman(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"host":"db-3","rack":"r12"}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	layer := filepath.Join(dir, "inventory.v1.json")
	doc := fmt.Sprintf(internalReadLayer, srv.URL)
	if err := os.WriteFile(layer, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	// The policy Airlock writes for the layer makes the internal read automatic, as it does a
	// local read: the registry, not the policy author, says it may run alone.
	pol := registry.StructuralPolicy("inventory policy", "inventory.1", nil, registry.Source{Name: layer, Data: []byte(doc)})
	if !strings.Contains(string(pol.Data), `"automatic"`) {
		t.Fatalf("structural policy for an internal read: %s", pol.Data)
	}
	if err := os.WriteFile(filepath.Join(dir, "inventory.v1.policy.json"), pol.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	model := newFakeModel(t, calls(call("c1", "inventory_lookup", `{"host":"db-3"}`)))
	t.Setenv("AIRLOCK_OPENAI_BASE_URL", model.URL+"/v1")
	t.Setenv("AIRLOCK_OPENAI_API_KEY", "test")
	c := dial(t)
	cfg := testConfig(t, layer)
	cfg.FetchAllow = []string{strings.TrimPrefix(srv.URL, "http://")}
	startWorker(t, c, cfg)
	st := openStore(t, cfg)

	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "inventory", Principal: "alice", Message: "which rack is db-3 in?"})
	res := result(t, run)
	if outcomeList(res) != "inventory_lookup:executed" || hits.Load() != 1 || len(res.Results) != 1 ||
		!strings.Contains(string(res.Results[0].Data), `"rack":"r12"`) {
		t.Fatalf("outcomes %s, %d requests, results %+v", outcomeList(res), hits.Load(), res.Results)
	}
	if o := res.Outcomes[0]; o.Approver != "" || o.ConfirmationID != "" {
		t.Fatalf("the internal read was put to a person: %+v", o)
	}
	rows, err := st.ListAudit(t.Context(), run.GetID())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Outcome == "confirmation_issued" {
			t.Fatalf("audit holds a confirmation for the internal read: %+v", rows)
		}
	}
}
