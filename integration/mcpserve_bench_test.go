package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/mcpserver"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

// reportLatency reports the p50 and p95 of ds in milliseconds.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(at(0.50), "p50_ms")
	b.ReportMetric(at(0.95), "p95_ms")
}

// BenchmarkMCPServeAutomaticCall measures an automatic call (system_health, local read-only)
// made by the Go SDK client through `airlock mcp serve` over streamable HTTP (a CallWorkflow on
// the dev server, its store PostgreSQL: verify the caller, admit, execute, record), against
// the same capability of the same worker invoked directly (stage 2 and the implementation,
// no executor). Run: go test -run '^$' -bench MCPServe ./integration/
func BenchmarkMCPServeAutomaticCall(b *testing.B) {
	c := dial(b)
	cfg := config.Config{Home: b.TempDir(), DatabaseURL: freshDB(b), CorpusDir: corpusDir, TaskQueue: taskQueue(b),
		ApproversFile: itApprovers, ClientsFile: itClients, ClientCredential: itStarterFile}
	deps, err := workers.Build(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	w := workers.New(c, deps.Activities, cfg.TaskQueue)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Stop(); deps.Close() })
	reg := deps.Activities.Served.Current()

	b.Run("direct", func(b *testing.B) {
		capa, ok := reg.ByToolName("system_health")
		if !ok {
			b.Fatal("no system_health")
		}
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if _, err := capa.ValidateArguments(json.RawMessage(`{}`)); err != nil {
				b.Fatal(err)
			}
			out, err := capa.Impl.Invoke(context.Background(), registry.Invocation{Arguments: json.RawMessage(`{}`)})
			if err != nil || out.Error != "" {
				b.Fatalf("direct call: %v %s", err, out.Error)
			}
			ds = append(ds, time.Since(start))
		}
		reportLatency(b, ds)
	})

	b.Run("gateway", func(b *testing.B) {
		srv := mcpserver.New(mcpserver.Options{Registry: func() *registry.Registry { return reg }, Temporal: c, TaskQueue: cfg.TaskQueue,
			Clients: clients.NewSource(itClients).Current, Gateway: itGateway})
		hs := httptest.NewServer(srv.Handler())
		defer hs.Close()
		tok, err := itStarter.MintBearer("alice", time.Now(), time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearerTransport{tok}}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "system_health", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				b.Fatalf("gateway call: %v %+v", err, res)
			}
			ds = append(ds, time.Since(start))
		}
		reportLatency(b, ds)
	})
}
