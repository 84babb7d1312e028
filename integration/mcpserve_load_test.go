package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/internal/mcpserver"
)

// rssKB is the resident set size of process pid in KiB (Linux /proc).
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// mcpLoadClients is how many clients wait for an approver at once.
const mcpLoadClients = 100

// 100 MCP clients, each with a call waiting for an approver, on one `airlock mcp serve`
// process (the real binary): every call is pending in the store (one confirmation row each)
// and gets progress while it waits; the server's memory grows by less than 40 MiB for all of
// them; when their confirmations expire, every client gets a tool error saying so and nothing
// ran.
func TestMCPServeManyWaitingClients(t *testing.T) {
	c := dial(t)
	cfg := testConfig(t)
	cfg.FetchAllow = []string{"127.0.0.0/8"}
	cfg.PolicyFile = gatewayPolicy(t)
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	var hits atomic.Int32
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(page.Close)

	const ttl = 20 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, airlockBin, "mcp", "serve", "--addr", "127.0.0.1:0", "--confirmation-ttl", ttl.String())
	cmd.Env = append(os.Environ(), "AIRLOCK_HOME="+cfg.Home, "AIRLOCK_TASK_QUEUE="+cfg.TaskQueue, "AIRLOCK_POLICY="+cfg.PolicyFile,
		"AIRLOCK_CLIENTS="+itClients, "AIRLOCK_MCP_SERVERS=", "AIRLOCK_FETCH_ALLOW=127.0.0.0/8",
		"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "airlock MCP server on "); ok {
				urls <- strings.Fields(rest)[0]
			}
		}
	}()
	var endpoint string
	select {
	case endpoint = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatalf("airlock mcp serve did not print its URL:\n%s", stderr.String())
	}
	g := &mcpGateway{url: endpoint}
	pid := cmd.Process.Pid

	sessions := make([]*mcp.ClientSession, mcpLoadClients)
	progressed := make([]atomic.Int32, mcpLoadClients)
	for i := range sessions {
		tok, err := itStarter.MintBearer("alice", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cl := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("agent-%d", i), Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progressed[i].Add(1) }})
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		cs, err := cl.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: g.url, HTTPClient: &http.Client{Transport: bearerTransport{tok}}}, nil)
		ccancel()
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[i] = cs
	}
	before := rssKB(t, pid)

	results := make([]*mcp.CallToolResult, mcpLoadClients)
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &mcp.CallToolParams{Name: "web_fetch", Arguments: map[string]any{"url": fmt.Sprintf("%s/%d", page.URL, i)},
				Meta: mcp.Meta{mcpserver.MetaIdempotencyKey: fmt.Sprintf("load-%d", i)}}
			p.SetProgressToken(fmt.Sprintf("load-%d", i))
			cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer ccancel()
			r, err := cs.CallTool(cctx, p)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			results[i] = r
		}()
	}
	eventually(t, 2*time.Minute, fmt.Sprintf("%d confirmations pending in the store", mcpLoadClients), func() bool {
		ids, err := st.PendingIDs(context.Background(), time.Now())
		return err == nil && len(ids) == mcpLoadClients
	})
	eventually(t, time.Minute, "progress for every waiting call", func() bool {
		for i := range progressed {
			if progressed[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	during := rssKB(t, pid)
	t.Logf("airlock mcp serve RSS: %d KiB with %d idle sessions, %d KiB with %d calls waiting (%+d KiB)", before, mcpLoadClients, during, mcpLoadClients, during-before)
	if during-before > 40*1024 {
		t.Errorf("%d waiting calls grew the server by %d KiB, want under 40 MiB", mcpLoadClients, during-before)
	}
	wg.Wait()
	for i, r := range results {
		if r == nil || !r.IsError || r.Meta[mcpserver.MetaOutcome] != "expired" || !strings.Contains(textOf(r), "in time") {
			t.Fatalf("client %d after expiry: %+v", i, r)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("%d expired calls ran", hits.Load())
	}
}
