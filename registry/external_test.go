package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// externalDoc is a registry with one HTTP entry written with only what matters to it: no
// surfaces, flags, wire/name, status, per-turn/cap, timeout or model-visible. extra is spliced
// into its airlock block, dest is its destination.
func externalDoc(sideEffect, dest, extra string) []byte {
	return []byte(fmt.Sprintf(`{"schema/v":"capability-registry.v1","revision":"x","entries":[
 {"capability/id":"inventory.lookup","version":2,"owner":"platform",
  "airlock":{"tool/name":"inventory_lookup","description":"Look up a host.","side-effect":%q,"network":"external",%s
   "destination":%s,
   "http":{"method":"GET","url":"https://inventory.corp.example/api","path":"/hosts/{host}","accept/status":[200],
    "arguments":{"type":"object","additionalProperties":false,"required":["host"],"properties":{"host":{"type":"string"}}}}}}]}`, sideEffect, extra, dest))
}

const internalDest = `{"kind":"host","name":"inventory.corp.example","fields":["host"],"internal":true}`

// loadExternal loads doc with its structural policy and its HTTP implementation.
func loadExternal(t *testing.T, doc []byte) (*Registry, error) {
	t.Helper()
	es, err := Entries(Source{Name: "x", Data: doc})
	if err != nil {
		return nil, err
	}
	impl := Implementation{ID: es[0].ID, Version: es[0].Version, Schema: es[0].Airlock.HTTP.ArgumentSchema(), Invoke: okInvoke}
	return Load(WithStructuralPolicy(Source{Name: "x", Data: doc}), []Implementation{impl})
}

// An HTTP entry needs none of the fields only built-in capabilities use: left out, they read
// as the documented defaults; written, they are kept as written (an explicit false too).
func TestExternalEntryNeedsNoBuiltInFields(t *testing.T) {
	r, err := loadExternal(t, externalDoc("none", internalDest, ""))
	if err != nil {
		t.Fatalf("a short HTTP entry must load: %v", err)
	}
	c, ok := r.ByKey("inventory.lookup@2")
	if !ok {
		t.Fatal("not registered")
	}
	if c.WireName != "app/inventory.lookup.v2" || c.Status != StatusActive || len(c.Surfaces) != 1 || c.Surfaces[0] != SurfaceHostLocal ||
		!c.Flags.Dispatchable || !c.Flags.HostRoute || c.Flags.Advertisable || c.Airlock.PerTurnCap != ExternalReadCap ||
		c.Airlock.Timeout != ExternalTimeout || !c.Airlock.ModelVisible {
		t.Fatalf("defaults: %+v", c.Entry)
	}
	r, err = loadExternal(t, externalDoc("none", internalDest, `"model-visible":false,"per-turn/cap":1,"timeout":"2s",`))
	if err != nil {
		t.Fatal(err)
	}
	c, _ = r.ByKey("inventory.lookup@2")
	if c.Airlock.ModelVisible || c.Airlock.PerTurnCap != 1 || c.Airlock.Timeout != "2s" {
		t.Fatalf("written values must be kept: %+v", c.Airlock)
	}
	// A write defaults to the smaller cap.
	write := strings.Replace(string(externalDoc("external-write", `{"kind":"host","name":"inventory.corp.example","fields":["host"]}`, "")), `"method":"GET"`, `"method":"POST"`, 1)
	r, err = loadExternal(t, []byte(write))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := r.ByKey("inventory.lookup@2"); c.Airlock.PerTurnCap != ExternalWriteCap || c.Automatic() {
		t.Fatalf("write: cap %d, automatic %v", c.Airlock.PerTurnCap, c.Automatic())
	}
	// A built-in entry (no http or mcp block) still declares them all.
	builtIn := []byte(`{"schema/v":"capability-registry.v1","revision":"b","entries":[
 {"capability/id":"x.read","version":1,"owner":"t",
  "airlock":{"tool/name":"x_read","description":"Read.","side-effect":"none","network":"local"}}]}`)
	_, err = Load([]Source{{Name: "b", Data: builtIn}, emptyPolicy}, nil)
	if err == nil || !strings.Contains(err.Error(), "surfaces") || !strings.Contains(err.Error(), "per-turn/cap") {
		t.Fatalf("a built-in entry without its fields must be refused, naming them: %v", err)
	}
}

// A read of a named internal service runs without a human; the declaration is refused where
// the worker could not hold the call to internal addresses, and a write to an internal
// service still asks.
func TestInternalReadIsAutomatic(t *testing.T) {
	r, err := loadExternal(t, externalDoc("none", internalDest, ""))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.ByKey("inventory.lookup@2")
	if !c.InternalRead() || !c.Automatic() || !r.Authorize(c, "alice").Automatic {
		t.Fatalf("internal read: InternalRead %v, Automatic %v, authorized automatic %v", c.InternalRead(), c.Automatic(), r.Authorize(c, "alice").Automatic)
	}
	// Without "internal" the same read leaves the organization: it asks.
	r, err = loadExternal(t, externalDoc("none", strings.Replace(internalDest, `,"internal":true`, "", 1), ""))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := r.ByKey("inventory.lookup@2"); c.Automatic() || r.Authorize(c, "alice").Automatic {
		t.Fatal("an external read ran without a human")
	}
	// A write to an internal service is no read.
	write := strings.Replace(string(externalDoc("external-write", internalDest, "")), `"method":"GET"`, `"method":"POST"`, 1)
	r, err = loadExternal(t, []byte(write))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := r.ByKey("inventory.lookup@2"); c.Automatic() {
		t.Fatal("a write to an internal service ran without a human")
	}
	// "internal" on anything but a named host reached by an http block is refused at load.
	for name, doc := range map[string][]byte{
		"any host": []byte(strings.Replace(string(externalDoc("none", internalDest, "")), `"name":"inventory.corp.example"`, `"name":"*"`, 1)),
		"system":   []byte(strings.Replace(string(externalDoc("none", internalDest, "")), `"kind":"host"`, `"kind":"system"`, 1)),
	} {
		_, err := loadExternal(t, doc)
		var le *LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "destination internal") {
			t.Errorf("%s: want a destination-internal refusal, got %v", name, err)
		}
	}
	noHTTP := []byte(`{"schema/v":"capability-registry.v1","revision":"n","entries":[
 {"capability/id":"x.read","version":1,"owner":"t","surfaces":["host-local"],"wire/name":"app/x.read","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"x_read","description":"Read.","side-effect":"none","network":"external","per-turn/cap":1,"timeout":"1s","model-visible":true,
   "destination":{"kind":"host","name":"inventory.corp.example","internal":true}}}]}`)
	if _, err := Load([]Source{{Name: "n", Data: noHTTP}, emptyPolicy}, nil); err == nil || !strings.Contains(err.Error(), "needs an http block") {
		t.Errorf("internal without an http block: %v", err)
	}
	var d Destination
	if err := json.Unmarshal([]byte(internalDest), &d); err != nil || !d.Internal {
		t.Fatalf("decode: %+v %v", d, err)
	}
}

// Only a GET is a read: an internal entry declared side-effect none with any other method is
// refused at load (it would otherwise run without a human and be retried), and is never an
// internal read (found by an attack helper: DELETE ran automatically).
func TestInternalReadIsAGet(t *testing.T) {
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		doc := strings.Replace(string(externalDoc("none", internalDest, "")), `"method":"GET"`, fmt.Sprintf(`"method":%q`, m), 1)
		if m != "DELETE" {
			doc = strings.Replace(doc, `"accept/status":[200],`, `"accept/status":[200],"query":["host"],`, 1)
			doc = strings.Replace(doc, `"path":"/hosts/{host}",`, ``, 1)
		}
		_, err := loadExternal(t, []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "a read is a GET") {
			t.Errorf("%s declared an internal read: %v", m, err)
		}
		es, derr := Entries(Source{Name: "x", Data: []byte(doc)})
		if derr != nil {
			t.Fatal(derr)
		}
		if es[0].InternalRead() || es[0].Automatic() {
			t.Errorf("%s: InternalRead %v, Automatic %v", m, es[0].InternalRead(), es[0].Automatic())
		}
	}
}

// jsonBlocks returns the ```json blocks of a Markdown file of the repository that contain
// want.
func jsonBlocks(t *testing.T, path, want string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, part := range strings.Split(string(b), "```json\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if ok && strings.Contains(block, want) {
			out = append(out, block)
		}
	}
	return out
}

// The layer README's "Your first tool behind Airlock" tells a new user to write loads as
// written, with its structural policy: short (none of the fields only built-in capabilities
// use), a write held for a human, its destination and secret header kept. So does the capability
// authors' short internal read, which runs without a human.
func TestDocumentedExternalEntriesLoad(t *testing.T) {
	readme := jsonBlocks(t, "../README.md", `"capability-registry.v1"`)
	if len(readme) != 1 {
		t.Fatalf("README has %d registry layers, want the first tool's one", len(readme))
	}
	for _, builtInOnly := range []string{`"surfaces"`, `"flags"`, `"wire/name"`, `"status"`, `"per-turn/cap"`, `"timeout"`, `"model-visible"`} {
		if strings.Contains(readme[0], builtInOnly) {
			t.Errorf("README's first layer declares %s, which an HTTP entry need not", builtInOnly)
		}
	}
	r, err := loadExternal(t, []byte(readme[0]))
	if err != nil {
		t.Fatalf("README's first layer must load: %v", err)
	}
	c, ok := r.ByToolName("create_ticket")
	if !ok || c.Automatic() || c.Airlock.PerTurnCap != ExternalWriteCap || c.Airlock.Destination.Name != "tickets.internal.example" ||
		len(c.Airlock.HTTP.Headers) != 1 || c.Airlock.HTTP.Headers[0].Secret != "tickets-token" {
		t.Fatalf("README's create_ticket: ok %v, %+v", ok, c)
	}
	short := jsonBlocks(t, "../docs/capability-authors.md", `"inventory.lookup"`)
	if len(short) != 1 {
		t.Fatalf("capability-authors.md has %d inventory.lookup examples, want 1", len(short))
	}
	doc := `{"schema/v":"capability-registry.v1","revision":"docs","entries":[` + short[0] + `]}`
	if r, err = loadExternal(t, []byte(doc)); err != nil {
		t.Fatalf("capability-authors.md's short entry must load: %v", err)
	}
	if c, ok := r.ByToolName("inventory_lookup"); !ok || !c.Automatic() {
		t.Fatalf("the documented internal read must run without a human: %v %+v", ok, c)
	}
}
