package integration

import (
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npmModules is the node_modules folder scripts/ensure-mcp-servers.sh installs (mcpNPM: skipped
// when missing, unless AIRLOCK_REQUIRE_MCP is set).
func npmModules(t *testing.T) string { return filepath.Join(mcpNPM(t), "node_modules") }

// withBearer is a reverse proxy to target that adds the caller's bearer token to every
// request: what an MCP client configured with "Authorization: Bearer …" sends (the conformance
// suite has no setting for it).
func withBearer(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host // the server's DNS-rebinding check sees the client's own Host
		r.Out.Header.Set("Authorization", "Bearer "+token)
	}}
	hs := httptest.NewServer(rp)
	t.Cleanup(hs.Close)
	return hs.URL
}

// conformanceServerScenarios are the server scenarios of @modelcontextprotocol/conformance
// 0.1.16 that apply to `airlock mcp serve`; docs/app-developers.md names every other one and why it does not.
var conformanceServerScenarios = []string{"server-initialize", "logging-set-level", "ping", "tools-list",
	"resources-list", "prompts-list", "server-sse-multiple-streams", "dns-rebinding-protection"}

// The MCP conformance suite's server scenarios that apply, against `airlock mcp serve` on a
// real worker: each must pass every check.
func TestMCPServeConformance(t *testing.T) {
	nm := npmModules(t)
	suite := filepath.Join(nm, "@modelcontextprotocol", "conformance", "dist", "index.js")
	g, _ := startGateway(t)
	tok, err := itStarter.MintBearer("alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	target := withBearer(t, g.url, tok)
	scenarios := conformanceServerScenarios
	if s := os.Getenv("AIRLOCK_CONFORMANCE_SCENARIOS"); s != "" {
		scenarios = strings.Split(s, ",")
	}
	for _, scenario := range scenarios {
		t.Run(scenario, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(filepath.Join(nm, ".bin", "node"), suite, "server", "--url", target, "--scenario", scenario, "-o", out)
			b, err := cmd.CombinedOutput()
			checks, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
			if len(checks) != 1 {
				t.Fatalf("no checks.json written (%v):\n%s", err, b)
			}
			raw, _ := os.ReadFile(checks[0])
			var cs []struct{ ID, Status, ErrorMessage string }
			if err := json.Unmarshal(raw, &cs); err != nil {
				t.Fatal(err)
			}
			passed := 0
			for _, c := range cs {
				switch c.Status {
				case "SUCCESS":
					passed++
				case "FAILURE", "WARNING":
					t.Errorf("check %s: %s %s", c.ID, c.Status, c.ErrorMessage)
				}
			}
			if err != nil || passed == 0 {
				t.Fatalf("scenario %s: %v, %d checks passed:\n%s", scenario, err, passed, b)
			}
			t.Logf("%s: %d checks passed", scenario, passed)
		})
	}
}
