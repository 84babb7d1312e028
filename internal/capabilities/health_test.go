package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

func TestCheckHealthHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("host figures come from /proc")
	}
	r := CheckHealth(context.Background(), HealthConfig{})
	if len(r.Errors) != 0 {
		t.Fatalf("Errors = %v", r.Errors)
	}
	if r.UptimeSeconds <= 0 {
		t.Errorf("UptimeSeconds = %v", r.UptimeSeconds)
	}
	if r.Load1m < 0 || r.Load5m < 0 || r.Load15m < 0 {
		t.Errorf("load = %v %v %v", r.Load1m, r.Load5m, r.Load15m)
	}
	if r.MemoryTotalBytes < 1<<20 || r.MemoryAvailableBytes > r.MemoryTotalBytes {
		t.Errorf("memory total %d available %d", r.MemoryTotalBytes, r.MemoryAvailableBytes)
	}
	if r.DiskPath != "/" || r.DiskTotalBytes == 0 || r.DiskFreeBytes > r.DiskTotalBytes ||
		r.DiskAvailableBytes > r.DiskFreeBytes {
		t.Errorf("disk %s total %d free %d available %d", r.DiskPath, r.DiskTotalBytes, r.DiskFreeBytes, r.DiskAvailableBytes)
	}
	if r.CheckedAt.IsZero() {
		t.Error("CheckedAt is zero")
	}
}

func TestCheckHealthDiskPathError(t *testing.T) {
	r := CheckHealth(context.Background(), HealthConfig{DiskPath: "/does/not/exist"})
	if r.DiskTotalBytes != 0 || len(r.Errors) == 0 || !strings.Contains(strings.Join(r.Errors, ";"), "statfs /does/not/exist") {
		t.Errorf("disk total %d, errors %v", r.DiskTotalBytes, r.Errors)
	}
}

func TestCheckHealthProbes(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tests := []struct {
		name      string
		probe     Probe
		wantOK    bool
		wantError string
	}{
		{"nil", nil, false, "not configured"},
		{"ok", func(context.Context) error { return nil }, true, ""},
		{"error", func(context.Context) error { return errors.New("dial tcp: connection refused") }, false, "dial tcp: connection refused"},
		{"honours deadline", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, false, "timed out after 50ms"},
		{"ignores deadline", func(context.Context) error { <-release; return nil }, false, "timed out after 50ms"},
		{"panics", func(context.Context) error { panic("boom") }, false, "probe panicked: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := CheckHealth(context.Background(), HealthConfig{Temporal: tt.probe, Store: tt.probe, ProbeTimeout: 50 * time.Millisecond})
			for name, p := range map[string]ProbeResult{"temporal": r.Temporal, "store": r.Store} {
				if p.OK != tt.wantOK || p.Error != tt.wantError || p.LatencyMS < 0 {
					t.Errorf("%s = %+v, want ok %v error %q", name, p, tt.wantOK, tt.wantError)
				}
			}
		})
	}
}

func TestSystemHealthImplementation(t *testing.T) {
	impl := SystemHealth(HealthConfig{
		Temporal: func(context.Context) error { return nil },
		Store:    func(context.Context) error { return errors.New("store down") },
	})
	if impl.ID != "system.health" || impl.Version != 1 {
		t.Fatalf("binding = %s@%d", impl.ID, impl.Version)
	}
	if _, ok := impl.Args.(HealthArgs); !ok {
		t.Fatalf("Args = %T, want HealthArgs", impl.Args)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	out, err := impl.Invoke(context.Background(), registry.Invocation{Arguments: json.RawMessage(`{}`), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out.Data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"checked_at", "uptime_seconds", "load_1m", "load_5m", "load_15m",
		"memory_total_bytes", "memory_available_bytes", "disk_path", "disk_total_bytes",
		"disk_free_bytes", "disk_available_bytes", "temporal", "store"} {
		if _, ok := got[k]; !ok {
			t.Errorf("Data lacks %q: %s", k, out.Data)
		}
	}
	if string(got["checked_at"]) != `"2025-03-01T12:00:00Z"` {
		t.Errorf("checked_at = %s", got["checked_at"])
	}
	var temporal, store map[string]any
	_ = json.Unmarshal(got["temporal"], &temporal)
	_ = json.Unmarshal(got["store"], &store)
	if temporal["ok"] != true || temporal["error"] != "" || store["ok"] != false || store["error"] != "store down" {
		t.Errorf("temporal = %v, store = %v", temporal, store)
	}
	if out.Error != "" || out.Citation != nil || out.SourceURL != "" {
		t.Errorf("output = %+v", out)
	}
}

func TestParseProcFiles(t *testing.T) {
	up, err := parseUptime("350735.47 234388.90\n")
	if err != nil || up != 350735.47 {
		t.Errorf("parseUptime = %v, %v", up, err)
	}
	if _, err := parseUptime(""); err == nil {
		t.Error("parseUptime accepted empty input")
	}
	l1, l5, l15, err := parseLoadavg("0.75 0.50 0.25 1/234 5678\n")
	if err != nil || l1 != 0.75 || l5 != 0.5 || l15 != 0.25 {
		t.Errorf("parseLoadavg = %v %v %v, %v", l1, l5, l15, err)
	}
	if _, _, _, err := parseLoadavg("0.75 x 0.25"); err == nil {
		t.Error("parseLoadavg accepted a bad number")
	}
	meminfo := "MemTotal:       16318412 kB\nMemFree:         1234567 kB\nMemAvailable:    8000000 kB\nBuffers: 1 kB\n"
	total, avail, err := parseMeminfo(meminfo)
	if err != nil || total != 16318412*1024 || avail != 8000000*1024 {
		t.Errorf("parseMeminfo = %d %d, %v", total, avail, err)
	}
	if _, _, err := parseMeminfo("MemTotal: 1 kB\n"); err == nil {
		t.Error("parseMeminfo accepted input without MemAvailable")
	}
}
