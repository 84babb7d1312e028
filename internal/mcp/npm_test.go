package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/registry"
)

// NPMDir is where scripts/ensure-mcp-servers.sh installs the MCP servers others wrote
// (AIRLOCK_MCP_NPM, default bin/npm of the repository). Without them the tests that use them
// skip, unless AIRLOCK_REQUIRE_MCP is set (make test and .ci/run set it): then they fail.
func npmDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("AIRLOCK_MCP_NPM")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "bin", "npm")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "node")); err != nil {
		if os.Getenv("AIRLOCK_REQUIRE_MCP") != "" {
			t.Fatalf("AIRLOCK_REQUIRE_MCP is set but the npm MCP servers are not installed in %s: run scripts/ensure-mcp-servers.sh", dir)
		}
		t.Skipf("npm MCP servers not installed in %s (run scripts/ensure-mcp-servers.sh; AIRLOCK_REQUIRE_MCP=1 makes this a failure)", dir)
	}
	return dir
}

// npmServer is the stdio configuration of an installed npm server: Node 22 from the `node`
// package runs the package's entry point.
func npmServer(t testing.TB, name, pkg string, args ...string) ServerConfig {
	dir := npmDir(t)
	nm := filepath.Join(dir, "node_modules")
	return ServerConfig{Name: name, Command: filepath.Join(nm, ".bin", "node"), ConnectTimeout: "30s",
		Args: append([]string{filepath.Join(nm, "@modelcontextprotocol", pkg, "dist", "index.js")}, args...)}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// sample builds arguments for a tool from its argument schema: every required property gets a
// value of its type (the first enum value when it has one), overridden by the members of
// fixed the schema declares.
func sample(schema json.RawMessage, fixed map[string]any) (string, error) {
	var s struct {
		Properties map[string]struct {
			Type any   `json:"type"`
			Enum []any `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return "", err
	}
	args := map[string]any{}
	for _, r := range s.Required {
		p := s.Properties[r]
		switch {
		case len(p.Enum) > 0:
			args[r] = p.Enum[0]
		case p.Type == "string":
			args[r] = "airlock"
		case p.Type == "number", p.Type == "integer":
			args[r] = 1
		case p.Type == "boolean":
			args[r] = false
		case p.Type == "array":
			args[r] = []any{}
		default:
			args[r] = map[string]any{}
		}
	}
	for k, v := range fixed {
		if _, ok := s.Properties[k]; ok {
			args[k] = v
		}
	}
	b, err := json.Marshal(args)
	return string(b), err
}

// @modelcontextprotocol/server-everything, over stdio and streamable HTTP: its whole tool
// list is imported and pinned, the layer loads, and every tool is called through the bridge
// with arguments that pass stage 2. A stdio server's environment holds none of the worker's.
func TestEverythingServerWholeToolListImportedPinnedAndCalled(t *testing.T) {
	t.Setenv("AIRLOCK_APPROVER_KEY", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			c := npmServer(t, "everything", "server-everything", "stdio")
			if transport == "http" {
				port := freePort(t)
				srv := c
				srv.Args = []string{c.Args[0], "streamableHttp"}
				srv.Env = map[string]string{"PORT": fmt.Sprint(port)}
				stop := startProcess(t, srv)
				defer stop()
				c = ServerConfig{Name: "everything", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ConnectTimeout: "30s"}
				waitHTTP(t, c)
			}
			reg, _, imp := bound(t, c, ImportOptions{})
			for _, n := range imp.Notes {
				if n.Skipped {
					t.Errorf("tool skipped at import: %s: %s", n.Tool, n.Text)
				}
			}
			if len(imp.Entries) < 10 {
				t.Fatalf("imported only %d tools", len(imp.Entries))
			}
			fixed := map[string]map[string]any{
				"echo":                           {"message": "hello from airlock"},
				"get-sum":                        {"a": 2, "b": 3},
				"trigger-long-running-operation": {"duration": 1, "steps": 1},
				"gzip-file-as-resource":          {"name": "a.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"},
			}
			want := map[string]string{"echo": "hello from airlock", "get-sum": "5"}
			var called []string
			for _, e := range imp.Entries {
				capa := capability(t, reg, e.Airlock.ToolName)
				if err := capa.Unavailable(); err != nil {
					t.Errorf("%s unavailable right after import: %v", e.Airlock.MCP.Tool, err)
					continue
				}
				args, err := sample(capa.Schema, fixed[e.Airlock.MCP.Tool])
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				out, err := invoke(t, ctx, capa, args)
				cancel()
				tool := e.Airlock.MCP.Tool
				switch {
				case err != nil:
					t.Errorf("%s %s: %v", tool, args, err)
				default:
					called = append(called, tool)
					if w, ok := want[tool]; ok && !strings.Contains(string(out.Data), w) {
						t.Errorf("%s: result %s does not hold %q", tool, out.Data, w)
					}
					if tool == "get-env" && (strings.Contains(string(out.Data), "AIRLOCK_APPROVER_KEY") || strings.Contains(string(out.Data), "00112233445566778899")) {
						t.Errorf("the stdio server saw the worker's environment: %s", out.Data)
					}
					if !strings.HasPrefix(out.SourceURL, "mcp://everything/tools/") {
						t.Errorf("%s: provenance %q", tool, out.SourceURL)
					}
				}
			}
			sort.Strings(called)
			t.Logf("%d of %d tools called: %s", len(called), len(imp.Entries), strings.Join(called, " "))
			if len(called) != len(imp.Entries) {
				t.Fatalf("only %d of %d tools answered", len(called), len(imp.Entries))
			}
		})
	}
}

// @modelcontextprotocol/server-filesystem over a temporary root: reads are suggested
// automatic (local, read-only), writes and moves confirmed; a write lands once.
func TestFilesystemServerImportClasses(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, _, imp := bound(t, npmServer(t, "files", "server-filesystem", root), ImportOptions{})
	for _, e := range imp.Entries {
		read := strings.HasPrefix(e.Airlock.MCP.Tool, "read_") || strings.HasPrefix(e.Airlock.MCP.Tool, "list_") ||
			e.Airlock.MCP.Tool == "directory_tree" || e.Airlock.MCP.Tool == "search_files" || e.Airlock.MCP.Tool == "get_file_info"
		c := capability(t, reg, e.Airlock.ToolName)
		if c.Automatic() != read {
			t.Errorf("%s: automatic %v, want %v", e.Airlock.MCP.Tool, c.Automatic(), read)
		}
		if d := c.Airlock.Destination; d == nil || d.Kind != registry.DestinationServer || d.Name != "files" {
			t.Errorf("%s: destination %+v", e.Airlock.MCP.Tool, d)
		}
	}
	out, err := invoke(t, context.Background(), capability(t, reg, "read_text_file"), fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "a.txt")))
	if err != nil || !strings.Contains(string(out.Data), "alpha") {
		t.Fatalf("read: %v %s", err, out.Data)
	}
	if _, err := invoke(t, context.Background(), capability(t, reg, "write_file"), fmt.Sprintf(`{"path":%q,"content":"beta"}`, filepath.Join(root, "b.txt"))); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "b.txt")); string(b) != "beta" {
		t.Fatalf("b.txt = %q", b)
	}
	// Outside the root: the server itself refuses (a tool error, data for the model).
	out, err = invoke(t, context.Background(), capability(t, reg, "read_text_file"), `{"path":"/etc/passwd"}`)
	if err != nil || out.Error == "" || strings.Contains(string(out.Data), "root:") {
		t.Fatalf("read outside the root: %v %q %s", err, out.Error, out.Data)
	}
}

// startProcess runs a server's command as a plain process (an HTTP server Airlock does not
// start itself) until stop.
func startProcess(t *testing.T, c ServerConfig) (stop func()) {
	t.Helper()
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range c.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
}

// waitHTTP waits until the HTTP server answers MCP.
func waitHTTP(t *testing.T, c ServerConfig) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _, err := ListTools(ctx, c)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v", c.URL, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Issue 38 item 1 against a server others wrote: @modelcontextprotocol/server-everything over
// streamable HTTP (the TypeScript SDK's transport: it enforces sessions and answers an unknown
// one with HTTP 404 and a JSON-RPC "Session not found") is stopped and started again on its
// port. With verify/max-age off and on, the next call is served on a new session, never
// refused mcp_server_down nor reported outcome_unknown.
func TestEverythingServerRestartReopensTheSession(t *testing.T) {
	for _, maxAge := range []string{"", "1h"} {
		t.Run("max-age="+maxAge, func(t *testing.T) {
			c := npmServer(t, "everything", "server-everything", "streamableHttp")
			port := freePort(t)
			c.Env = map[string]string{"PORT": fmt.Sprint(port)}
			stop := startProcess(t, c)
			defer func() { stop() }()
			hc := ServerConfig{Name: "everything", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ConnectTimeout: "30s",
				Refresh: "1h", VerifyMaxAge: maxAge}
			waitHTTP(t, hc)
			reg, b, _ := bound(t, hc, ImportOptions{})
			sum := capability(t, reg, "get-sum")
			call := func(what string, a, bb int) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				out, err := invoke(t, ctx, sum, fmt.Sprintf(`{"a":%d,"b":%d}`, a, bb))
				if err != nil || out.Error != "" || !strings.Contains(string(out.Data), fmt.Sprint(a+bb)) {
					t.Fatalf("%s: %v %q %s", what, err, out.Error, out.Data)
				}
			}
			call("before the restart", 2, 3)
			for i := 1; i <= 2; i++ {
				stop()
				stop = startProcess(t, c)
				waitHTTP(t, hc) // a separate client: the bridge's session stays the old one
				call(fmt.Sprintf("after restart %d", i), i, 10)
			}
			if st := b.Status(context.Background(), false); len(st) != 1 || !st[0].Connected || statusProblem(st[0], "get-sum") != "" {
				t.Fatalf("status after the restarts: %+v", st)
			}
		})
	}
}
