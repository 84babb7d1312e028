package integration

// The parts of the chaos harness (chaos_test.go) that live outside the worker: a private
// PostgreSQL instance the harness may restart, the effect server that makes confirmed effects
// observable outside the worker, and the one function that sends an approver's decision.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
)

// ---------------------------------------------------------------------------------------------
// Sending a decision

// sendDecision is how the harness approves or denies a pending confirmation, as every approver
// surface does (internal/approval): it signs the decision with the confirmation's current
// token (opened with the approver key; the token itself is never sent) and signals the turn,
// which stays durable while no worker runs.
func sendDecision(ctx context.Context, c client.Client, st *store.Store, key token.Key, confirmationID, decision, approver string) error {
	cred, err := credentialFor(approver)
	if err != nil {
		return err
	}
	_, err = approval.Send(ctx, c, st, key, approval.Request{ConfirmationID: confirmationID, Decision: decision,
		Approver: approver, Reason: "chaos harness", Signer: cred})
	if err != nil {
		return fmt.Errorf("send %s on %s: %w", decision, confirmationID, err)
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// A private PostgreSQL 15

// privatePostgres is a PostgreSQL cluster of the harness's own (initdb into a temp dir, its own
// port): the machine's shared cluster serves other tests concurrently and must never be
// restarted. PostgreSQL refuses to run as root, so the directory belongs to the postgres user
// and every pg_ctl runs through `runuser -u postgres` when the harness is root.
type privatePostgres struct {
	bin, dir, logFile string
	port              int
	asUser            []string // command prefix that runs as the postgres user, or nil
	URL               string
}

const pgBinDir = "/usr/lib/postgresql/15/bin"

// startPrivatePostgres initializes and starts a cluster under dir. It fails when PostgreSQL 15
// is not installed; the harness then cannot restart PostgreSQL and says so.
func startPrivatePostgres(ctx context.Context, dir string) (*privatePostgres, error) {
	if _, err := os.Stat(filepath.Join(pgBinDir, "initdb")); err != nil {
		return nil, fmt.Errorf("PostgreSQL 15 binaries: %w", err)
	}
	port, err := stack.FreePort()
	if err != nil {
		return nil, err
	}
	p := &privatePostgres{bin: pgBinDir, dir: filepath.Join(dir, "data"), logFile: filepath.Join(dir, "postgres.log"), port: port}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{dir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
		// The temp dir's parents must be traversable by postgres.
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := p.run(ctx, "initdb", "-D", p.dir, "-U", "airlock", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = ''\nfsync = on\nmax_connections = 200\n", port)
	if out, err := p.shell(ctx, "cat >> "+filepath.Join(p.dir, "postgresql.conf")+" <<'EOF'"+conf+"EOF"); err != nil {
		return nil, fmt.Errorf("configure: %w\n%s", err, out)
	}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	p.URL = fmt.Sprintf("postgres://airlock@127.0.0.1:%d/postgres?sslmode=disable", port)
	return p, nil
}

func (p *privatePostgres) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, p.asUser...), filepath.Join(p.bin, prog)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

func (p *privatePostgres) shell(ctx context.Context, script string) ([]byte, error) {
	argv := append(append([]string{}, p.asUser...), "sh", "-c", script)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

// start starts the server and waits (pg_ctl -w) until it accepts connections.
func (p *privatePostgres) start(ctx context.Context) error {
	if out, err := p.run(ctx, "pg_ctl", "-D", p.dir, "-l", p.logFile, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	return nil
}

// stop stops the server with fast shutdown (open sessions are disconnected, as in a restart
// by an operator or a crash-free failover).
func (p *privatePostgres) stop(ctx context.Context) error {
	if out, err := p.run(ctx, "pg_ctl", "-D", p.dir, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// restart stops and starts the server on the same data directory and port.
func (p *privatePostgres) restart(ctx context.Context) error {
	if err := p.stop(ctx); err != nil {
		return err
	}
	return p.start(ctx)
}

// ---------------------------------------------------------------------------------------------
// The effect server

// effectLine is one line of the effect log: one run of a confirmed effect.
type effectLine struct {
	WorkflowID string `json:"workflow_id"`
	Seq        int    `json:"seq"`
	Attempt    int32  `json:"attempt"`
	Entry      string `json:"entry"`
}

// effectServer is the world a confirmed capability changes: every POST /effect appends one
// JSON line (workflow id, proposal seq, activity attempt, entry) to a log file and fsyncs it
// before answering, so an effect that ran is on disk even if the worker dies before it hears
// the answer. onEffect runs after the fsync and before the answer (the "inside a confirmed
// effect" kill point).
type effectServer struct {
	*httptest.Server
	mu       sync.Mutex
	f        *os.File
	path     string
	onEffect func(effectLine)
}

func newEffectServer(path string) (*effectServer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	e := &effectServer{f: f, path: path}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	return e, nil
}

func (e *effectServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/effect" {
		http.NotFound(w, r)
		return
	}
	var l effectLine
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&l); err != nil {
		http.Error(w, "bad effect: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := e.record(l); err != nil {
		http.Error(w, "effect log: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"written":%q}`, l.Entry)
}

// record appends l to the effect log, fsyncs it, then runs onEffect.
func (e *effectServer) record(l effectLine) error {
	b, _ := json.Marshal(l)
	e.mu.Lock()
	_, err := e.f.Write(append(b, '\n'))
	if err == nil {
		err = e.f.Sync()
	}
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if e.onEffect != nil {
		e.onEffect(l)
	}
	return nil
}

// lines reads the effect log back from disk.
func (e *effectServer) lines() ([]effectLine, error) {
	f, err := os.Open(e.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []effectLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l effectLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("effect log line %q: %w", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

func (e *effectServer) close() {
	e.Server.Close()
	e.f.Close()
}

// pollUntil calls cond every 100 ms until it holds or ctx ends.
func pollUntil(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// The MCP server

// chaosMCPTool is the one tool of the harness's MCP server: it appends an entry to the external
// ledger (the effect log), the same effect chaos_write has, reached through the MCP bridge.
const chaosMCPTool = "ledger_append"

// chaosMCP is an MCP server on the official Go SDK over streamable HTTP, in the harness's
// process on a port of its own that a restart keeps: a restart loses every session (a new
// server), cuts every connection, and, as the server offers no standalone GET stream (it
// answers GET 405, as the specification allows), nothing tells the bridge its session went
// until its next request (issue 38 item 1).
type chaosMCP struct {
	mu      sync.Mutex
	addr    string
	ts      *httptest.Server
	effects *effectServer
	wfOf    func(entry string) string
	calls   atomic.Int32
	// gone counts requests answered 404 (a session the server does not know: after a restart).
	gone atomic.Int32
}

func newChaosMCP(effects *effectServer, wfOf func(string) string) (*chaosMCP, error) {
	m := &chaosMCP{effects: effects, wfOf: wfOf}
	if err := m.start("127.0.0.1:0"); err != nil {
		return nil, err
	}
	m.addr = m.ts.Listener.Addr().String()
	return m, nil
}

// URL is the server's MCP endpoint.
func (m *chaosMCP) URL() string { return "http://" + m.addr + "/mcp" }

func (m *chaosMCP) start(addr string) error {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "chaos-ledger", Version: "1"}, nil)
	srv.AddTool(&mcpsdk.Tool{Name: chaosMCPTool, Description: "Append an entry to the external ledger.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"entry":{"type":"string","minLength":1}},"required":["entry"]}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var a struct{ Entry string }
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil || a.Entry == "" {
				return nil, fmt.Errorf("bad arguments: %s", req.Params.Arguments)
			}
			m.calls.Add(1)
			if err := m.effects.record(effectLine{WorkflowID: m.wfOf(a.Entry), Entry: a.Entry}); err != nil {
				return nil, err
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "written " + a.Entry}}}, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
			return
		}
		sw := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == http.StatusNotFound {
			m.gone.Add(1)
		}
	}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ts.Listener = l
	ts.Start()
	m.mu.Lock()
	m.ts = ts
	m.mu.Unlock()
	return nil
}

// restart stops the server (sessions lost, connections cut) and starts a new one on its port.
func (m *chaosMCP) restart() error {
	m.mu.Lock()
	ts := m.ts
	m.mu.Unlock()
	ts.CloseClientConnections()
	ts.Close()
	return m.start(m.addr)
}

func (m *chaosMCP) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ts.Close()
}

// statusRecorder remembers the status an HTTP handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
