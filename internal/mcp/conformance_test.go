package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

// conformanceClient is the client the MCP conformance suite drives (this test binary run with
// MCPTEST_CONFORMANCE_CLIENT=1 and the scenario server's URL): Airlock's bridge as a worker uses
// it. It imports the server's tools (pinning them), binds them to a Bridge, loads them as a
// registry and calls each tool through stage 2 and the bridge. Exit status 0 when every step
// worked.
func conformanceClient(url string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "airlock conformance client: "+format+"\n", a...)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	c := ServerConfig{Name: "conformance", URL: url, ConnectTimeout: "20s"}
	tools, _, err := ListTools(ctx, c)
	if err != nil {
		return fail("list tools: %v", err)
	}
	if len(tools) == 0 {
		fmt.Println("initialized; the server lists no tools")
		return 0
	}
	imp, err := Import(c, tools, ImportOptions{})
	if err != nil {
		return fail("import: %v", err)
	}
	b := New(nil)
	defer b.Close()
	b.Configure(&Servers{SchemaV: ServersSchemaVersion, Servers: []ServerConfig{c}})
	impls, err := b.Implementations(imp.Entries)
	if err != nil {
		return fail("bind: %v", err)
	}
	reg, err := registry.Load([]registry.Source{{Name: "layer", Data: imp.Layer}, {Name: "policy", Data: imp.Policy}}, impls)
	if err != nil {
		return fail("load: %v", err)
	}
	b.WaitSettled(ctx)
	for _, e := range imp.Entries {
		capa, _ := reg.ByToolName(e.Airlock.ToolName)
		args, err := sample(capa.Schema, map[string]any{"a": 2, "b": 3})
		if err != nil {
			return fail("%s: %v", e.Airlock.MCP.Tool, err)
		}
		if _, err := capa.ValidateArguments(json.RawMessage(args)); err != nil {
			return fail("%s: stage 2: %v", e.Airlock.MCP.Tool, err)
		}
		out, err := capa.Impl.Invoke(ctx, registry.Invocation{Arguments: json.RawMessage(args)})
		if err != nil || out.Error != "" {
			return fail("%s: call: %v %s", e.Airlock.MCP.Tool, err, out.Error)
		}
		fmt.Printf("%s: %s\n", e.Airlock.MCP.Tool, out.Data)
	}
	return 0
}

// The client scenarios of @modelcontextprotocol/conformance 0.1.16 that apply to the bridge
// (it speaks streamable HTTP, lists and calls tools, and answers no server-initiated
// elicitation and does no OAuth): initialize, tools_call and sse-retry (SEP-1699: the tool's
// answer arrives on a reconnected SSE stream after the server's retry delay). Run with Node 22
// from the npm package node (scripts/ensure-mcp-servers.sh).
func TestConformanceClientScenarios(t *testing.T) {
	nm := filepath.Join(npmDir(t), "node_modules")
	suite := filepath.Join(nm, "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		t.Fatalf("conformance suite not installed: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, scenario := range []string{"initialize", "tools_call", "sse-retry"} {
		t.Run(scenario, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(filepath.Join(nm, ".bin", "node"), suite, "client", "--scenario", scenario,
				"--command", "env MCPTEST_CONFORMANCE_CLIENT=1 "+exe, "--timeout", "40000", "-o", out)
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("scenario %s failed: %v\n%s", scenario, err, b)
			}
			checks, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
			if len(checks) != 1 {
				t.Fatalf("no checks.json written: %s", b)
			}
			raw, _ := os.ReadFile(checks[0])
			var cs []struct{ ID, Status string }
			if err := json.Unmarshal(raw, &cs); err != nil {
				t.Fatal(err)
			}
			passed := 0
			for _, c := range cs {
				switch c.Status {
				case "SUCCESS":
					passed++
				case "FAILURE", "WARNING":
					t.Errorf("check %s: %s", c.ID, c.Status)
				}
			}
			if passed == 0 {
				t.Fatalf("no check passed:\n%s", b)
			}
			t.Logf("%s: %d checks passed (%s)", scenario, passed, strings.TrimSpace(lastLine(string(b))))
		})
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
