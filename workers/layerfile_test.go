package workers

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/registry"
)

const fileLayer = `{"schema/v":"capability-registry.v1","revision":"tickets.1","entries":[
 {"capability/id":"tickets.get","version":1,"owner":"platform team","surfaces":["host-local"],"wire/name":"app/tickets.get","status":"active",
  "flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
  "airlock":{"tool/name":"get_ticket","description":"Read one ticket.","side-effect":"none","network":"external","per-turn/cap":5,"timeout":"5s","model-visible":true,
   "destination":{"kind":"host","name":"tickets.internal.example","fields":["id"]},
   "http":{"method":"GET","url":"https://tickets.internal.example/api","path":"/tickets/{id}",
    "arguments":{"type":"object","additionalProperties":false,"required":["id"],"properties":{"id":{"type":"integer"}}}}}}]}`

// A layer named by its file loads with its policy beside it under every gate, its HTTP entries
// bound from their declarations; both files are watched; a broken edit is refused by reload
// with its diagnostic and the served revision stays.
func TestLayerFilesLoadAndReload(t *testing.T) {
	dir := t.TempDir()
	layer := filepath.Join(dir, "tickets.v1.json")
	if err := os.WriteFile(layer, []byte(fileLayer), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{Home: dir, Layers: []string{layer}}
	if _, err := LoadRegistry(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "tickets.v1.policy.json") {
		t.Fatalf("a layer file without its policy must refuse to load naming the policy file: %v", err)
	}
	pol := registry.StructuralPolicy("tickets policy", "tickets.1", nil, registry.Source{Name: layer, Data: []byte(fileLayer)})
	if err := os.WriteFile(filepath.Join(dir, "tickets.v1.policy.json"), pol.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := reg.ByToolName("get_ticket")
	if !ok || c.Impl.Invoke == nil || c.Automatic() {
		t.Fatalf("get_ticket must be bound and (external) confirmed: %+v", c)
	}
	if w := WatchedFiles(cfg); !slices.Contains(w, layer) || !slices.Contains(w, filepath.Join(dir, "tickets.v1.policy.json")) {
		t.Fatalf("watched %v", w)
	}
	live := registry.NewLive(reg)
	broken := strings.Replace(fileLayer, `"name":"tickets.internal.example"`, `"name":"elsewhere.example"`, 1)
	if err := os.WriteFile(layer, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = live.Reload(func() (*registry.Registry, error) { return LoadRegistry(cfg, nil, nil) })
	var le *registry.LoadError
	if !errors.Is(err, registry.ErrReloadRefused) || !errors.As(err, &le) || le.Rules()[0] != registry.RuleHTTP {
		t.Fatalf("a broken layer edit must be refused with its rule: %v", err)
	}
	if live.Current() != reg {
		t.Fatal("the served revision changed")
	}
	// Explicit LAYER=POLICY.
	other := filepath.Join(dir, "p.json")
	if err := os.Rename(filepath.Join(dir, "tickets.v1.policy.json"), other); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(layer, []byte(fileLayer), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRegistry(config.Config{Home: dir, Layers: []string{layer + "=" + other}}, nil, nil); err != nil {
		t.Fatalf("LAYER=POLICY: %v", err)
	}
}
