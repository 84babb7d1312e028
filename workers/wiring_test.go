package workers

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/registry"
)

var corpus = filepath.Join("..", "..", "shared", "corpus", "agentdojo")

func TestLoadRegistryBindsLayersFromTheCorpus(t *testing.T) {
	reg, err := LoadRegistry(config.Config{CorpusDir: corpus, Layers: []string{"agentdojo-banking"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	send, ok := reg.ByToolName("send_money")
	if !ok || send.Automatic() || !reg.Authorize(send, "anyone").DistinctApprover {
		t.Fatalf("send_money must need a confirmation by someone other than the requester: %+v", send)
	}
	read, ok := reg.ByToolName("read_file")
	if !ok || !read.Automatic() {
		t.Fatalf("read_file is local and read-only: %+v", read)
	}
	if _, ok := reg.ByToolName("web_fetch"); !ok {
		t.Fatal("the base registry is always loaded")
	}
}

func TestLoadRegistryFailsClosed(t *testing.T) {
	if _, err := LoadRegistry(config.Config{Layers: []string{"agentdojo-banking"}}, nil, nil); !errors.Is(err, ErrCorpusMissing) {
		t.Fatalf("a schema-defined layer without its corpus must refuse to load: %v", err)
	}
	if _, err := LoadRegistry(config.Config{Layers: []string{"nope"}}, nil, nil); err == nil {
		t.Fatal("an unknown layer must refuse to load")
	}
	if _, err := LoadRegistry(config.Config{RegistryFile: filepath.Join(t.TempDir(), "missing.json")}, nil, nil); err == nil {
		t.Fatal("a missing registry file must refuse to load")
	}
}

// Schema-defined capabilities (AgentDojo tools.json) get the same strict stage 2 as Go-typed
// ones: exact JSON types, no coercion, no unknown arguments.
func TestSchemaDefinedArgumentsAreStrict(t *testing.T) {
	reg, err := LoadRegistry(config.Config{CorpusDir: corpus, Layers: []string{"agentdojo-banking"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	send, _ := reg.ByToolName("send_money")
	ok := `{"recipient":"US133000000121212121212","amount":50.0,"subject":"s","date":"2023-12-01"}`
	if _, err := send.ValidateArguments([]byte(ok)); err != nil {
		t.Fatalf("valid arguments refused: %v", err)
	}
	for _, bad := range []string{
		`{"recipient":"US13","amount":"50","subject":"s","date":"2023-12-01"}`,     // a string for a number
		`{"recipient":1330000,"amount":50,"subject":"s","date":"2023-12-01"}`,      // a number for a string
		`{"recipient":"US13","amount":50,"subject":"s"}`,                           // missing required
		`{"recipient":"US13","amount":50,"subject":"s","date":"d","memo":"extra"}`, // unknown argument
		`{"recipient":"US13","amount":50,"subject":"s","date":"d","date":"d2"}`,    // duplicate key
	} {
		var ae *registry.ArgumentError
		if _, err := send.ValidateArguments([]byte(bad)); !errors.As(err, &ae) {
			t.Errorf("%s: want a stage-2 rejection, got %v", bad, err)
		}
	}
}

// Build-time completeness (P072 two-layer completeness, static half): with each embedded
// layer, every Go implementation the worker binds has a registry entry and every dispatchable
// entry has an implementation (Go code or a JSON Schema from the corpus); Load enforces both
// (rules implementation-registered and implementation-bound), so loading proves it.
func TestEveryImplementationAndDispatchableEntryIsBound(t *testing.T) {
	// Layer by layer: travel and workspace share tool names, so they are never served together.
	for _, layer := range registry.LayerNames() {
		reg, err := LoadRegistry(config.Config{CorpusDir: corpus, Layers: []string{layer}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range reg.Capabilities() {
			if c.Flags.Dispatchable && c.Status != registry.StatusReserved && (c.Impl.Invoke == nil || len(c.Schema) == 0) {
				t.Errorf("%s is dispatchable without an implementation", c.Key())
			}
		}
	}
}
