package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/mcpserver"
	"github.com/airlock-dev/airlock/workflows"
)

// An agent on the official MCP TypeScript SDK client (npm, testdata/mcp-agent.cjs) against
// `airlock mcp serve` on a real worker: it sees only its principal's tools, its automatic call
// answers at once with untrusted content, its confirmed call waits (with progress
// notifications) until an approver approves and runs once, and its next one is denied and
// comes back as a tool error that says so.
func TestMCPServeTypeScriptClient(t *testing.T) {
	nm := npmModules(t)
	if _, err := os.Stat(filepath.Join(nm, "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Fatalf("the MCP TypeScript SDK is not installed in %s (scripts/ensure-mcp-servers.sh): %v", nm, err)
	}
	g, decideAs := startGateway(t)
	var hits atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello, typescript")
	}))
	t.Cleanup(page.Close)
	tok, err := itStarter.MintBearer("alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, ".bin", "node"), filepath.Join("testdata", "mcp-agent.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+nm, "AIRLOCK_MCP_URL="+g.url, "AIRLOCK_MCP_TOKEN="+tok, "FETCH_URL="+page.URL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type step struct {
		Step     string          `json:"step"`
		Tools    []string        `json:"tools"`
		Result   json.RawMessage `json:"result"`
		Progress []string        `json:"progress"`
	}
	// The agent's output is read on its own goroutine; the approver's side runs here.
	steps := map[string]step{}
	read := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var s step
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				read <- fmt.Errorf("agent output %q: %w", sc.Text(), err)
				return
			}
			steps[s.Step] = s
		}
		read <- sc.Err()
	}()
	// Approve the first confirmed call, deny the second, once each is pending.
	rawArgs, _ := json.Marshal(map[string]any{"url": page.URL})
	c := dial(t)
	for _, x := range []struct{ key, decision string }{{"ts-approve", workflows.DecisionApprove}, {"ts-deny", workflows.DecisionDeny}} {
		id := workflows.CallWorkflowID("it-client", "alice", clients.KeyDigest("key:"+x.key), "web_fetch", rawArgs)
		p := waitPending(t, c, id, map[string]bool{})
		eventually(t, 30*time.Second, "a progress notification for "+id, func() bool { return g.notifiedOf(id) > 0 })
		decideAs(p.ConfirmationID, x.decision)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the TypeScript agent failed: %v\n%s", err, stderr.String())
	}
	type result struct {
		IsError           bool                    `json:"isError"`
		Meta              map[string]any          `json:"_meta"`
		StructuredContent map[string]any          `json:"structuredContent"`
		Content           []struct{ Text string } `json:"content"`
	}
	parse := func(name string) result {
		var r result
		if err := json.Unmarshal(steps[name].Result, &r); err != nil {
			t.Fatalf("%s: %v (%s)", name, err, steps[name].Result)
		}
		return r
	}
	text := func(r result) string {
		var b strings.Builder
		for _, c := range r.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	if got := strings.Join(steps["tools"].Tools, ","); got != "system_health,web_fetch" {
		t.Fatalf("tools = %q", got)
	}
	if r := parse("automatic"); r.IsError || r.Meta[mcpserver.MetaTrust] != "untrusted" || r.StructuredContent == nil || !strings.Contains(text(r), `"trust":"untrusted"`) {
		t.Fatalf("automatic = %+v", r)
	}
	approved := parse("ts-approve")
	if approved.IsError || !strings.Contains(text(approved), "hello, typescript") || approved.Meta[mcpserver.MetaOutcome] != "executed" {
		t.Fatalf("approved = %+v", approved)
	}
	if p := steps["ts-approve"].Progress; len(p) == 0 || !strings.Contains(p[0], "approver") {
		t.Fatalf("progress while waiting = %q", p)
	}
	denied := parse("ts-deny")
	if !denied.IsError || !strings.Contains(text(denied), "denied") || denied.Meta[mcpserver.MetaOutcome] != "denied" {
		t.Fatalf("denied = %+v", denied)
	}
	if hits.Load() != 1 {
		t.Fatalf("page hits = %d, want 1 (the approved call only)", hits.Load())
	}
}
