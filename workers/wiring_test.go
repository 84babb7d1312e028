package workers

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/internal/config"
)

var corpus = filepath.Join("..", "..", "shared", "corpus", "agentdojo")

func TestLoadRegistryBindsLayersFromTheCorpus(t *testing.T) {
	reg, err := LoadRegistry(config.Config{CorpusDir: corpus, Layers: []string{"agentdojo-banking"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	send, ok := reg.ByToolName("send_money")
	if !ok || send.Automatic() || !send.Airlock.DistinctApprover {
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
