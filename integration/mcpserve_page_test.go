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

	"github.com/chromedp/chromedp"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/mcpserver"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// The agent loop: an agent on the official MCP TypeScript SDK client (npm) behind
// `airlock mcp serve` calls an automatic tool, then a confirmed one that bob approves on the
// approver page (`airlock web`) in Chromium, then one bob denies there with a reason; the
// approved call runs once, the denied one never, and the agent reads the denial and its reason.
func TestMCPServeAgentApprovedOnThePage(t *testing.T) {
	nm := npmModules(t)
	browserPath(t)
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	cfg.PolicyFile = gatewayPolicy(t)
	cfg.ApproversFile = filepath.Join(cfg.Home, "approvers.json")
	for _, n := range []string{"alice", "bob"} {
		h, err := approvers.HashPassword(webPassword)
		if err != nil {
			t.Fatal(err)
		}
		if err := approvers.Add(cfg.ApproversFile, approvers.Approver{Name: n, PasswordBcrypt: h}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AIRLOCK_APPROVER_KEY", "")
	startWorker(t, c, cfg) // creates the approver key under cfg.Home, which the page opens tokens with
	web := (&webEnv{durEnv: &durEnv{t: t, home: cfg.Home, dbURL: cfg.DatabaseURL}, approvers: cfg.ApproversFile}).startWeb()

	reg, err := workers.LoadRegistry(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcpserver.New(mcpserver.Options{Registry: func() *registry.Registry { return reg }, Temporal: c, TaskQueue: cfg.TaskQueue,
		Clients: clients.NewSource(itClients).Current, Gateway: itGateway, Progress: 200 * time.Millisecond})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	var hits atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello, approved agent")
	}))
	t.Cleanup(page.Close)
	tok, err := itStarter.MintBearer("alice", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, ".bin", "node"), filepath.Join("testdata", "mcp-agent.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+nm, "AIRLOCK_MCP_URL="+hs.URL, "AIRLOCK_MCP_TOKEN="+tok, "FETCH_URL="+page.URL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []string, 1)
	go func() {
		var got []string
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		lines <- got
	}()

	b := newTab(t)
	b.signIn(web, "bob")
	rawArgs, _ := json.Marshal(map[string]any{"url": page.URL})
	const reason = "not this page today"
	for _, key := range []string{"ts-approve", "ts-deny"} {
		id := workflows.CallWorkflowID("it-client", "alice", clients.KeyDigest("key:"+key), "web_fetch", rawArgs)
		p := waitPending(t, c, id, map[string]bool{})
		b.waitCard(web, p.ConfirmationID)
		cc := card(p.ConfirmationID)
		if key == "ts-approve" {
			if hits.Load() != 0 {
				t.Fatal("the call ran before bob approved it")
			}
			b.do("approve", chromedp.Click(css(cc+` button.approve`)), chromedp.WaitVisible(css(`#answer`)))
		} else {
			b.do("deny with a reason", chromedp.SendKeys(css(cc+` form.deny input[name=reason]`), reason),
				chromedp.Click(css(cc+` button.deny`)), chromedp.WaitVisible(css(`#answer`)))
		}
	}
	got := <-lines
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the TypeScript agent failed: %v\n%s", err, stderr.String())
	}
	steps := map[string]struct {
		Result struct {
			IsError bool                    `json:"isError"`
			Meta    map[string]any          `json:"_meta"`
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}{}
	for _, l := range got {
		var s struct {
			Step string `json:"step"`
		}
		json.Unmarshal([]byte(l), &s)
		v := steps[s.Step]
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("agent output %q: %v", l, err)
		}
		steps[s.Step] = v
	}
	text := func(step string) string {
		var sb strings.Builder
		for _, c := range steps[step].Result.Content {
			sb.WriteString(c.Text)
		}
		return sb.String()
	}
	if r := steps["automatic"].Result; r.IsError || r.Meta[mcpserver.MetaOutcome] != "executed" {
		t.Fatalf("automatic = %+v", r)
	}
	if r := steps["ts-approve"].Result; r.IsError || !strings.Contains(text("ts-approve"), "hello, approved agent") {
		t.Fatalf("approved on the page = %+v", r)
	}
	if r := steps["ts-deny"].Result; !r.IsError || r.Meta[mcpserver.MetaOutcome] != "denied" || !strings.Contains(text("ts-deny"), reason) {
		t.Fatalf("denied on the page = %+v (%s)", r, text("ts-deny"))
	}
	if hits.Load() != 1 {
		t.Fatalf("page hits = %d, want 1", hits.Load())
	}
}
