package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/airlock-dev/airlock/registry"
)

// The per-call cost of an MCP capability against a direct (Go) one, stage 2 included:
// validate the arguments against the argument schema, then invoke. The MCP variants call the
// test server's echo tool through the bridge: over stdio and streamable HTTP, with the pin
// checked against a fresh tools/list before every call (the default, verify/max-age 0) and
// against a list at most a minute old.
//
//	go test -run '^$' -bench . ./internal/mcp/

func benchCall(b *testing.B, c *registry.Capability) {
	args := json.RawMessage(`{"message":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.ValidateArguments(args); err != nil {
			b.Fatal(err)
		}
		out, err := c.Impl.Invoke(ctx, registry.Invocation{Arguments: args})
		if err != nil || out.Error != "" {
			b.Fatal(err, out.Error)
		}
	}
}

func BenchmarkDirectCall(b *testing.B) {
	schema := json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","maxLength":100}},"required":["message"],"additionalProperties":false}`)
	e := `{"schema/v":"capability-registry.v1","revision":"bench","entries":[{"capability/id":"bench.echo","version":1,"owner":"bench","surfaces":["host-local"],"wire/name":"app/bench.echo","status":"active",
"flags":{"dispatchable":true,"advertisable":false,"passport/eligible":false,"signing-domain":false,"host-route":true,"federated-discovery":false},
"airlock":{"tool/name":"echo","description":"Echo.","side-effect":"none","network":"local","per-turn/cap":5,"timeout":"10s","model-visible":true,"schema/ref":"bench:echo"}}]}`
	pol := `{"schema/v":"capability-authorization-policy.v1","revision":"bench","grants":[],"principals":[],"capabilities":[]}`
	reg, err := registry.Load([]registry.Source{{Name: "bench", Data: []byte(e)}, {Name: "policy", Data: []byte(pol)}}, []registry.Implementation{{
		ID: "bench.echo", Version: 1, Schema: schema,
		Invoke: func(_ context.Context, inv registry.Invocation) (registry.Output, error) {
			var a struct{ Message string }
			if err := json.Unmarshal(inv.Arguments, &a); err != nil {
				return registry.Output{}, err
			}
			d, _ := json.Marshal(map[string]string{"text": "echo: " + a.Message})
			return registry.Output{Data: d}, nil
		}}})
	if err != nil {
		b.Fatal(err)
	}
	c, _ := reg.ByToolName("echo")
	benchCall(b, c)
}

func benchMCP(b *testing.B, transport, maxAge string) {
	dir := b.TempDir()
	c := stdioConfig(b, "notes", "v1", dir)
	if transport == "http" {
		c = ServerConfig{Name: "notes", URL: httpServer(b, newTestServer("v1", dir)).URL}
	}
	c.VerifyMaxAge = maxAge
	reg, _, _ := bound(b, c, ImportOptions{})
	benchCall(b, capability(b, reg, "echo"))
}

func BenchmarkMCPCallStdioVerifyEveryCall(b *testing.B) { benchMCP(b, "stdio", "") }
func BenchmarkMCPCallStdioListMaxAge1m(b *testing.B)    { benchMCP(b, "stdio", "1m") }
func BenchmarkMCPCallHTTPVerifyEveryCall(b *testing.B)  { benchMCP(b, "http", "") }
func BenchmarkMCPCallHTTPListMaxAge1m(b *testing.B)     { benchMCP(b, "http", "1m") }
