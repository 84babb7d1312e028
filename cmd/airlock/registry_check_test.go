package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

const checkLayer = `{"schema/v":"capability-registry.v1","revision":"tickets.1","entries":[
 {"capability/id":"tickets.create","version":1,"owner":"platform","surfaces":["host-local"],"wire/name":"app/tickets.create","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"create_ticket","description":"Create a ticket.","side-effect":"external-write","network":"external","per-turn/cap":2,"timeout":"5s","model-visible":true,
   "destination":{"kind":"host","name":"tickets.example.com","fields":["title"]},
   "http":{"method":"POST","url":"https://tickets.example.com/api","path":"/tickets","body":["title"],
    "headers":[{"name":"Authorization","secret":"tickets-token","prefix":"Bearer "}],
    "arguments":{"type":"object","additionalProperties":false,"required":["title"],"properties":{"title":{"type":"string"}}}}}},
 {"capability/id":"tickets.close","version":1,"owner":"platform","surfaces":["host-local"],"wire/name":"app/tickets.close","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"close_ticket","description":"Close a ticket.","side-effect":"external-write","network":"external","per-turn/cap":2,"timeout":"5s","model-visible":true,
   "destination":{"kind":"system","name":"ticket system","fields":["id"]}}}]}`

// registry check validates a layer file and its policy before deployment: a missing secret, a
// Go-bound entry without --go-bound, and a destination that is not the URL's host fail with
// their diagnostics; the complete layer passes.
func TestRegistryCheckValidatesALayerFile(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "tickets.v1.json")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(layer, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		pol := registry.StructuralPolicy("tickets policy", "tickets.1", nil, registry.Source{Name: layer, Data: []byte(doc)})
		if err := os.WriteFile(filepath.Join(dir, "tickets.v1.policy.json"), pol.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := cfg
	t.Cleanup(func() { cfg = old })
	cfg.Home = dir
	// The policy stub: written beside the layer, four-eyes on the writes, never overwritten.
	if err := os.WriteFile(layer, []byte(checkLayer), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "", "registry", "policy", layer, "--four-eyes"); err != nil {
		t.Fatal(err)
	}
	stub, err := os.ReadFile(filepath.Join(dir, "tickets.v1.policy.json"))
	if err != nil || !strings.Contains(string(stub), `"approval/distinct-approver": true`) || !strings.Contains(string(stub), `"autonomy": "confirm"`) {
		t.Fatalf("policy stub: %v\n%s", err, stub)
	}
	if _, err := run(t, "", "registry", "policy", layer); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("an existing policy must not be overwritten: %v", err)
	}
	write(checkLayer)
	if _, err := run(t, "", "registry", "check", "--layers", layer, "--go-bound"); err == nil || !strings.Contains(err.Error(), "AIRLOCK_SECRET_TICKETS_TOKEN") {
		t.Fatalf("a missing secret must fail the check naming where to set it: %v", err)
	}
	t.Setenv("AIRLOCK_SECRET_TICKETS_TOKEN", "t")
	out, err := run(t, "", "registry", "check", "--layers", layer)
	if err == nil || !strings.Contains(out, "tickets.close@1: [implementation-bound]") {
		t.Fatalf("a Go-bound entry without --go-bound: %v\n%s", err, out)
	}
	out, err = run(t, "", "registry", "check", "--layers", layer, "--go-bound")
	if err != nil || !strings.Contains(out, "tickets.close@1: checked as bound by Go code") || !strings.Contains(out, "ok: registry") {
		t.Fatalf("the complete layer must pass: %v\n%s", err, out)
	}
	write(strings.Replace(checkLayer, `"name":"tickets.example.com"`, `"name":"elsewhere.example"`, 1))
	out, err = run(t, "", "registry", "check", "--layers", layer, "--go-bound")
	if err == nil || !strings.Contains(out, "[http] destination host \"elsewhere.example\" is not the url's host \"tickets.example.com\"") {
		t.Fatalf("a destination that is not the url's host: %v\n%s", err, out)
	}
}

// The terminal shows the registry's disclosure of a pending call: description, classes,
// destination, the host contacted (flagged when written otherwise) and the fields sent.
func TestPendingShowsTheDeclaredDestination(t *testing.T) {
	var b strings.Builder
	printPending(&b, workflows.PendingConfirmation{ConfirmationID: "cf-1", WorkflowID: "turn/c/1", ToolName: "web_fetch",
		Arguments: []byte(`{"url":"https://ｅｘａｍｐｌｅ．com/x"}`),
		Disclosure: &registry.Disclosure{Description: "Fetch one public web page.", SideEffect: registry.SideEffectNone, Network: registry.NetworkExternal,
			Destination: registry.Destination{Kind: registry.DestinationHost, Name: registry.AnyHost, Fields: []string{"url"}},
			Hosts:       []registry.DisclosedHost{{Host: "example.com", Written: "ｅｘａｍｐｌｅ．com", Field: "url"}},
			Leaving:     []registry.LeavingField{{Field: "url", Value: []byte(`"https://ｅｘａｍｐｌｅ．com/x"`)}}}})
	out := b.String()
	for _, want := range []string{"does:        Fetch one public web page.", "effect:      side effect none, network external", "goes to:     host",
		"host:        example.com (from url)  [host_differs: written as ｅｘａｍｐｌｅ．com; example.com is the host contacted]",
		"sends:       url = https://ｅｘａｍｐｌｅ．com/x [host example.com] [flags: host_differs]"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "guessed") {
		t.Errorf("a declared destination must replace the guess from argument names:\n%s", out)
	}
}
