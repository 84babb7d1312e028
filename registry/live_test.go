package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// eventually polls cond until it holds or 10 s pass (no fixed sleeps).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A watched registry file that changes is validated in full and swapped in: the next catalog
// and resolve use it with no second edit. A broken file is refused with its diagnostic and the
// old revision keeps serving; fixing it loads again.
func TestWatcherSwapsValidRevisionsAndKeepsTheOldOnABrokenFile(t *testing.T) {
	dir := t.TempDir()
	regFile, polFile := filepath.Join(dir, "registry.json"), filepath.Join(dir, "policy.json")
	if err := os.WriteFile(regFile, Embedded, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(polFile, EmbeddedPolicy, 0o644); err != nil {
		t.Fatal(err)
	}
	load := func() (*Registry, error) {
		r, err := FileSource(regFile)
		if err != nil {
			return nil, err
		}
		p, err := FileSource(polFile)
		if err != nil {
			return nil, err
		}
		return Load([]Source{r, p}, baseImpls())
	}
	first, err := load()
	if err != nil {
		t.Fatal(err)
	}
	live := NewLive(first)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan event, 16)
	w := &Watcher{Live: live, Load: load, Files: []string{regFile, polFile}, Interval: 10 * time.Millisecond,
		OnReload: func(_ string, changed bool, err error) { events <- event{changed, err} }}
	w.Prime()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	// 1. web.fetch becomes reserved: gone from the catalog, refused at resolve.
	reserved := strings.Replace(string(Embedded), `"status": "active",
      "flags": {
        "dispatchable": true,
        "advertisable": false,
        "passport/eligible": false,
        "signing-domain": false,
        "host-route": true,
        "federated-discovery": false
      },
      "airlock": {
        "tool/name": "web_fetch"`, `"status": "reserved",
      "flags": {
        "dispatchable": true,
        "advertisable": false,
        "passport/eligible": false,
        "signing-domain": false,
        "host-route": true,
        "federated-discovery": false
      },
      "airlock": {
        "tool/name": "web_fetch"`, 1)
	if reserved == string(Embedded) {
		t.Fatal("edit did not apply")
	}
	start := time.Now()
	if err := os.WriteFile(regFile, []byte(reserved), 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events); ev.err != nil || !ev.changed {
		t.Fatalf("reload: %+v", ev)
	}
	t.Logf("change seen and swapped in %s (poll interval 10ms)", time.Since(start))
	r := live.Current()
	if len(r.Catalog(nil, time.Now())) != 3 { // web_fetch left; the catalog capabilities and system_health stay
		t.Fatalf("catalog after the reload: %+v", r.Catalog(nil, time.Now()))
	}
	c, _ := r.ByToolName("web_fetch")
	if el := r.Eligible(c, UseResolve, time.Now()); el.Code != RefusalReserved {
		t.Fatalf("resolve after the reload: %+v", el)
	}
	served := r.Revision()

	// 2. A broken policy (it names a capability the registry does not register) is refused;
	// the old revision serves.
	broken := strings.Replace(string(EmbeddedPolicy), `"capability/id": "web.fetch"`, `"capability/id": "web.fetchx"`, 1)
	if err := os.WriteFile(polFile, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := next(t, events)
	var le *LoadError
	if !errors.Is(ev.err, ErrReloadRefused) || !errors.As(ev.err, &le) || le.Rules()[0] != RulePolicyCapabilityRef {
		t.Fatalf("broken reload: %+v", ev)
	}
	if live.Current().Revision() != served || !strings.Contains(live.Status().LastError, "[policy-capability-ref]") {
		t.Fatalf("the old revision must keep serving and the status say why: %+v", live.Status())
	}

	// 3. A file that is not JSON at all: refused the same way.
	if err := os.WriteFile(regFile, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events); !errors.Is(ev.err, ErrReloadRefused) || live.Current().Revision() != served {
		t.Fatalf("unparseable reload: %+v", ev)
	}

	// 4. Fixing both files loads again and clears the error.
	if err := os.WriteFile(regFile, Embedded, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(polFile, EmbeddedPolicy, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fixed revision", func() bool { return live.Current().Revision() == first.Revision() })
	if st := live.Status(); st.LastError != "" || st.Reloads < 2 {
		t.Fatalf("status after the fix: %+v", st)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

type event struct {
	changed bool
	err     error
}

// next waits up to 10 s for the watcher's next reload event.
func next(t *testing.T, events <-chan event) event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a reload")
		return event{}
	}
}

// Loading and binding the embedded registry and policy is cheap enough to do on every reload.
func BenchmarkLoadBase(b *testing.B) {
	for b.Loop() {
		if _, err := Load([]Source{Base(), BasePolicy()}, baseImpls()); err != nil {
			b.Fatal(err)
		}
	}
}
