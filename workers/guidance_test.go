package workers

import (
	"io"
	"log/slog"
	"testing"

	"github.com/airlock-dev/airlock/internal/catalog"
	"github.com/airlock-dev/airlock/internal/config"
)

// The checked-in guidance binds to the checked-in contracts: an edit of an entry or its
// argument schema without new guidance digests would silently drop the guidance, so it fails
// here (print the new digest with catalog.ContractDigest). web.fetch has none on purpose.
func TestEmbeddedGuidanceBindsToItsContracts(t *testing.T) {
	cfg := config.Config{Home: t.TempDir()}
	reg, err := LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gs := LoadGuidance(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	want := map[string]string{"capability.catalog.list@1": catalog.GuidancePresent, "capability.catalog.describe@1": catalog.GuidancePresent,
		"system.health@1": catalog.GuidancePresent, "web.fetch@1": catalog.GuidanceAbsent}
	for key, state := range want {
		c, ok := reg.ByKey(key)
		if !ok {
			t.Fatalf("no %s", key)
		}
		if got, _, _ := gs.Bind(c); got != state {
			d, _ := catalog.ContractDigest(c)
			t.Errorf("%s: guidance %s, want %s (contract/digest now %s)", key, got, state, d)
		}
	}
}
