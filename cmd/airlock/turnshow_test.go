package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/workflows"
)

// A running turn that waits for a human is reported as awaiting-confirmation, not "running"
// (issue 20 item 6); the pending query wins over the search attribute, which lags.
func TestRunningStatus(t *testing.T) {
	one := []workflows.PendingConfirmation{{ConfirmationID: "c1"}}
	for _, tc := range []struct {
		name    string
		attr    string
		pending []workflows.PendingConfirmation
		queried bool
		want    string
	}{
		{"query says waiting", workflows.StatusRunning, one, true, "awaiting-confirmation (1 waiting)"},
		{"query says nothing waits, attribute lags", workflows.StatusAwaitingConfirmation, nil, true, "running"},
		{"no worker, attribute", workflows.StatusAwaitingConfirmation, nil, false, "awaiting-confirmation (no worker answered the pending query)"},
		{"no worker, hostile attribute shown inert", "running\u202e\x1b[2J", nil, false, "running<U+202E><U+001B>[2J [flags: bidi_control, control] (no worker answered the pending query)"},
		{"no worker, no attribute", "", nil, false, "running"},
	} {
		if got := runningStatus(tc.attr, tc.pending, tc.queried); got != tc.want {
			t.Errorf("%s: runningStatus = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// make run and airlock stack up honour TEMPORAL_ADDRESS (issue 20 item 6): a loopback address
// is where a dev server is started (or reused), any other one is only used.
func TestStackTarget(t *testing.T) {
	for _, tc := range []struct {
		env    string
		port   int
		remote bool
		bad    bool
	}{
		{"", 7233, false, false},
		{"127.0.0.1:7300", 7300, false, false},
		{"localhost:7301", 7301, false, false},
		{"[::1]:7302", 7302, false, false},
		{"temporal.example.com:7233", 7233, true, false},
		{"10.0.0.5:7233", 7233, true, false},
		{"127.0.0.1", 0, false, true},
		{"127.0.0.1:0", 0, false, true},
		{"127.0.0.1:http", 0, false, true},
	} {
		t.Setenv("TEMPORAL_ADDRESS", tc.env)
		got, err := stackTarget()
		if tc.bad {
			if err == nil {
				t.Errorf("TEMPORAL_ADDRESS=%q: no error, want one", tc.env)
			}
			continue
		}
		if err != nil || got.port != tc.port || got.remote != tc.remote {
			t.Errorf("TEMPORAL_ADDRESS=%q: %+v, %v; want port %d remote %v", tc.env, got, err, tc.port, tc.remote)
		}
	}
}

// The local stack's ports other than gRPC (issue 38 item 3): a flag, else its environment
// variable, else gRPC + 1000 (UI), + 10 (HTTP), + 11 (metrics), a free port (0) when out of
// range; a value that is not a port is an error; --temporal-port sets the gRPC port.
func TestStackPortsAreConfigured(t *testing.T) {
	t.Setenv("AIRLOCK_TEMPORAL_UI_PORT", "")
	t.Setenv("AIRLOCK_TEMPORAL_HTTP_PORT", "")
	t.Setenv("AIRLOCK_TEMPORAL_METRICS_PORT", "")
	check := func(port, ui, http, metrics int) {
		t.Helper()
		u, h, m, err := stackPortsFor(port)
		if err != nil || u != ui || h != http || m != metrics {
			t.Errorf("ports of gRPC %d: %d %d %d (%v), want %d %d %d", port, u, h, m, err, ui, http, metrics)
		}
	}
	check(7233, 8233, 7243, 7244)
	check(7300, 8300, 7310, 7311)
	check(65530, 0, 0, 0)
	t.Setenv("AIRLOCK_TEMPORAL_HTTP_PORT", "17243")
	t.Setenv("AIRLOCK_TEMPORAL_METRICS_PORT", "17244")
	check(7233, 8233, 17243, 17244)
	stackPorts.ui, stackPorts.metrics = -1, 27244 // flags win over the environment
	defer func() { stackPorts.ui, stackPorts.metrics, stackPorts.grpc = 0, 0, 0 }()
	check(7233, -1, 17243, 27244)
	t.Setenv("AIRLOCK_TEMPORAL_HTTP_PORT", "http")
	if _, _, _, err := stackPortsFor(7233); err == nil {
		t.Error("AIRLOCK_TEMPORAL_HTTP_PORT=http accepted")
	}
	t.Setenv("AIRLOCK_TEMPORAL_HTTP_PORT", "")
	stackPorts.metrics = 70000
	if _, _, _, err := stackPortsFor(7233); err == nil {
		t.Error("--temporal-metrics-port 70000 accepted")
	}
	stackPorts.metrics = 0
	t.Setenv("TEMPORAL_ADDRESS", "")
	stackPorts.grpc = 17233
	if got, err := stackTarget(); err != nil || got.port != 17233 || got.address != "127.0.0.1:17233" {
		t.Errorf("--temporal-port 17233: %+v %v", got, err)
	}
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:7233")
	if _, err := stackTarget(); err == nil {
		t.Error("--temporal-port 17233 with TEMPORAL_ADDRESS 127.0.0.1:7233 accepted")
	}
}

// airlock pending shows where each value came from, a value only in untrusted data marked,
// and hostile label text inert (issue 24 item 2).
func TestPendingShowsProvenance(t *testing.T) {
	rep, err := provenance.Compute(json.RawMessage(`{"recipient":"US133000000121212121212","amount":98.7}`), []provenance.Entry{
		{Kind: provenance.SourceUser, Text: "pay 98.70 please"},
		{Kind: provenance.SourceResult, Capability: "files.read", SourceURL: "bill\u202e.txt", Text: "to US133000000121212121212"},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(rep)
	var out strings.Builder
	printPendingLimit(&out, workflows.PendingConfirmation{ConfirmationID: "cf-1", Arguments: json.RawMessage(`{"recipient":"US133000000121212121212","amount":98.7}`), Provenance: raw}, 0)
	got := out.String()
	for _, want := range []string{"came from:   /amount: from your message", "/recipient: ⚠ from files.read result #1 (bill<U+202E>.txt): only in untrusted data"} {
		if !strings.Contains(got, want) {
			t.Errorf("pending output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\u202e") {
		t.Errorf("pending output holds a raw bidi control:\n%s", got)
	}
}
