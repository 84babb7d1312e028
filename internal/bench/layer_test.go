package bench

import (
	"testing"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/workers"
)

func TestBenchLayerLoadsWithTheBaseRegistry(t *testing.T) {
	reg, err := workers.LoadRegistryWith(config.Config{Home: t.TempDir()}, nil, nil, Sources(), Implementations())
	if err != nil {
		t.Fatal(err)
	}
	if reg == nil {
		t.Fatal("no registry")
	}
}
