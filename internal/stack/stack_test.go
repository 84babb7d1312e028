package stack

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

const testNamespace = "airlock-stack-test"

// requireCLI skips integration tests when bin/temporal has not been built.
func requireCLI(t *testing.T) {
	t.Helper()
	if _, err := cliPath(""); err != nil {
		t.Skipf("integration test needs the Temporal CLI: %v", err)
	}
}

// eventually polls cond every 50 ms until it returns nil or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s: %v", what, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// listAttrs returns the custom search attributes of namespace on the server at addr.
func listAttrs(ctx context.Context, t *testing.T, addr, namespace string) map[string]enumspb.IndexedValueType {
	t.Helper()
	c, err := dial(ctx, addr, namespace)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		t.Fatalf("list search attributes: %v", err)
	}
	return resp.GetCustomAttributes()
}

// startWithAttribute starts a workflow (no worker runs it) carrying update in namespace on the
// server at addr, fails the test if the server refuses the attribute, and terminates it.
func startWithAttribute(ctx context.Context, t *testing.T, addr, namespace string, update temporal.SearchAttributeUpdate) {
	t.Helper()
	c, err := dial(ctx, addr, namespace)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "probe-" + strconv.FormatInt(time.Now().UnixNano(), 36), TaskQueue: "no-worker",
		TypedSearchAttributes: temporal.NewSearchAttributes(update)}, "Probe")
	if err != nil {
		t.Fatalf("a workflow with a search attribute EnsureTemporal just registered in %s was refused: %v", namespace, err)
	}
	_ = c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "probe")
}

func processGone(pid int) error {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return errors.New("process " + strconv.Itoa(pid) + " still exists")
}

func TestEnsureTemporalChildAndReuse(t *testing.T) {
	requireCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	dir := t.TempDir()
	port := freePort(t)
	var progress strings.Builder
	opts := TemporalOptions{
		Dir:       dir,
		Port:      port,
		UIPort:    0,
		Namespace: testNamespace,
		SearchAttributes: map[string]string{
			"AirlockStatus":  "Keyword",
			"AirlockPending": "int", // type names match case-insensitively
		},
		Log: &progress,
	}
	began := time.Now()
	srv, err := EnsureTemporal(ctx, opts)
	if err != nil {
		t.Fatalf("EnsureTemporal: %v", err)
	}
	t.Logf("cold start: %s", time.Since(began))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	if want := "127.0.0.1:" + strconv.Itoa(port); srv.Address != want {
		t.Errorf("Address = %q, want %q", srv.Address, want)
	}
	if srv.PID == 0 || srv.Namespace != testNamespace || !strings.HasPrefix(srv.UIAddress, "http://127.0.0.1:") {
		t.Errorf("started server = %+v", srv)
	}
	if !strings.Contains(progress.String(), "starting Temporal dev server") || !strings.Contains(progress.String(), "Temporal ready") {
		t.Errorf("progress log = %q", progress.String())
	}
	if err := Status(ctx, srv.Address); err != nil {
		t.Fatalf("Status: %v", err)
	}
	attrs := listAttrs(ctx, t, srv.Address, testNamespace)
	if attrs["AirlockStatus"] != enumspb.INDEXED_VALUE_TYPE_KEYWORD || attrs["AirlockPending"] != enumspb.INDEXED_VALUE_TYPE_INT {
		t.Errorf("search attributes = %v", attrs)
	}
	eventually(t, 10*time.Second, "web UI answers", func() error {
		resp, err := http.Get(srv.UIAddress)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})

	// A second EnsureTemporal on the same port reuses the server and ensures a new attribute
	// through the operator service.
	opts.SearchAttributes["AirlockRound"] = "Int"
	progress.Reset()
	reused, err := EnsureTemporal(ctx, opts)
	if err != nil {
		t.Fatalf("EnsureTemporal (reuse): %v", err)
	}
	if reused.PID != 0 || reused.proc != nil || reused.Address != srv.Address {
		t.Errorf("reused = %+v, want no process of its own at %s", reused, srv.Address)
	}
	if !strings.Contains(progress.String(), "reusing Temporal") {
		t.Errorf("progress log = %q", progress.String())
	}
	if got := listAttrs(ctx, t, srv.Address, testNamespace)["AirlockRound"]; got != enumspb.INDEXED_VALUE_TYPE_INT {
		t.Errorf("AirlockRound on reused server = %v", got)
	}
	// The server keeps its search-attribute cache on (ServerSettings): an attribute added at
	// run time is usable the moment EnsureTemporal returns, not a cache refresh later.
	startWithAttribute(ctx, t, srv.Address, testNamespace, temporal.NewSearchAttributeKeyInt64("AirlockRound").ValueSet(3))
	if err := reused.Stop(ctx); err != nil {
		t.Errorf("Stop of reused server: %v", err)
	}
	if err := Status(ctx, srv.Address); err != nil {
		t.Fatalf("Stop of a reused server stopped it: %v", err)
	}

	// A conflicting type is an error, not a silent mismatch.
	opts.SearchAttributes = map[string]string{"AirlockStatus": "Int"}
	if _, err := EnsureTemporal(ctx, opts); !errors.Is(err, ErrSearchAttribute) {
		t.Errorf("conflicting type: err = %v, want ErrSearchAttribute", err)
	}

	// A namespace missing on a reused server is created.
	opts.SearchAttributes = map[string]string{"AirlockStatus": "Keyword"}
	opts.Namespace = testNamespace + "-second"
	if _, err := EnsureTemporal(ctx, opts); err != nil {
		t.Fatalf("EnsureTemporal (new namespace on reused server): %v", err)
	}
	if got := listAttrs(ctx, t, srv.Address, opts.Namespace)["AirlockStatus"]; got != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
		t.Errorf("AirlockStatus in %s = %v", opts.Namespace, got)
	}
	startWithAttribute(ctx, t, srv.Address, opts.Namespace, temporal.NewSearchAttributeKeyKeyword("AirlockStatus").ValueSet("running"))

	began = time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stop: %s", time.Since(began))
	eventually(t, 5*time.Second, "server stops answering", func() error {
		if Status(ctx, srv.Address) == nil {
			return errors.New("still answers")
		}
		return nil
	})
	eventually(t, 5*time.Second, "server process exits", func() error { return processGone(srv.PID) })
	if err := srv.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestEnsureTemporalDetached(t *testing.T) {
	requireCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := TemporalOptions{
		Dir:              dir,
		Port:             freePort(t),
		UIPort:           Headless,
		Namespace:        testNamespace,
		SearchAttributes: map[string]string{"AirlockStatus": "Keyword"},
		Detached:         true,
	}
	srv, err := EnsureTemporal(ctx, opts)
	if err != nil {
		t.Fatalf("EnsureTemporal: %v", err)
	}
	t.Cleanup(func() { _ = StopDetached(dir) })
	if srv.UIAddress != "" || !srv.Detached {
		t.Errorf("server = %+v, want detached and headless", srv)
	}
	b, err := os.ReadFile(filepath.Join(dir, "temporal.pid"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(srv.PID) {
		t.Fatalf("pid file = %q, %v; want %d", b, err, srv.PID)
	}
	if pgid, err := syscall.Getpgid(srv.PID); err != nil || pgid != srv.PID {
		t.Errorf("detached server pgid = %d, %v; want its own session %d", pgid, err, srv.PID)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Errorf("Stop of detached server: %v", err)
	}
	if err := Status(ctx, srv.Address); err != nil {
		t.Fatalf("Stop stopped a detached server: %v", err)
	}

	// A second server may not share the state directory while the first is alive.
	other := opts
	other.Port = freePort(t)
	if _, err := EnsureTemporal(ctx, other); !errors.Is(err, ErrDirBusy) {
		t.Errorf("second server in the same dir: err = %v, want ErrDirBusy", err)
	}

	if err := StopDetached(dir); err != nil {
		t.Fatalf("StopDetached: %v", err)
	}
	if Status(ctx, srv.Address) == nil {
		t.Error("server still answers after StopDetached")
	}
	eventually(t, 5*time.Second, "server process exits", func() error { return processGone(srv.PID) })
	if _, err := os.Stat(filepath.Join(dir, "temporal.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after StopDetached: %v", err)
	}
	if err := StopDetached(dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second StopDetached: err = %v, want ErrNotRunning", err)
	}

	// Restart on the persisted database: start-dev ignores --search-attribute there, so the new
	// attribute must arrive through the operator service.
	opts.SearchAttributes["AirlockPending"] = "Int"
	srv, err = EnsureTemporal(ctx, opts)
	if err != nil {
		t.Fatalf("EnsureTemporal (restart): %v", err)
	}
	attrs := listAttrs(ctx, t, srv.Address, testNamespace)
	if attrs["AirlockStatus"] != enumspb.INDEXED_VALUE_TYPE_KEYWORD || attrs["AirlockPending"] != enumspb.INDEXED_VALUE_TYPE_INT {
		t.Errorf("search attributes after restart = %v", attrs)
	}
	if err := StopDetached(dir); err != nil {
		t.Fatalf("StopDetached (restart): %v", err)
	}
}

func TestEnsureTemporalStartFailureShowsLog(t *testing.T) {
	requireCLI(t)
	// Something that is not Temporal holds the port: the probe fails, the server cannot bind.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	_, err = EnsureTemporal(ctx, TemporalOptions{
		Dir: dir, Port: l.Addr().(*net.TCPAddr).Port, UIPort: Headless, Namespace: testNamespace,
	})
	if !errors.Is(err, ErrStart) {
		t.Fatalf("err = %v, want ErrStart", err)
	}
	if !strings.Contains(err.Error(), "tail of "+filepath.Join(dir, "temporal.log")) {
		t.Errorf("error lacks the log tail: %v", err)
	}
	t.Logf("start failure: %v", err)
}

func TestEnsureTemporalMissingCLI(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "bin", "temporal")
	_, err := EnsureTemporal(context.Background(), TemporalOptions{CLIPath: missing, Dir: t.TempDir()})
	if !errors.Is(err, ErrCLIMissing) {
		t.Fatalf("err = %v, want ErrCLIMissing", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "make temporal") || !strings.Contains(msg, missing) {
		t.Errorf("error %q should name %s and tell to run `make temporal`", msg, missing)
	}
}

func TestStopDetachedNothingRunning(t *testing.T) {
	dir := t.TempDir()
	if err := StopDetached(dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("no pid file: err = %v, want ErrNotRunning", err)
	}
	if runtime.GOOS != "linux" {
		return // only Linux can tell a Temporal server from another process by its command line
	}
	// A pid file naming a process that is not a Temporal server is stale: removed, not signalled.
	pidFile := filepath.Join(dir, "temporal.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := StopDetached(dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("stale pid file: err = %v, want ErrNotRunning", err)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale pid file not removed: %v", err)
	}
}

func TestStatusNoServer(t *testing.T) {
	if err := Status(context.Background(), "127.0.0.1:"+strconv.Itoa(freePort(t))); err == nil {
		t.Error("Status on a free port = nil, want an error")
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || modulePath(b) != ModulePath {
		t.Fatalf("RepoRoot() = %s: go.mod module %q, %v", root, modulePath(b), err)
	}
	wd, _ := os.Getwd()
	if !strings.HasPrefix(wd, root) {
		t.Errorf("working dir %s is not under %s", wd, root)
	}
}

func TestModulePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"module github.com/airlock-dev/airlock\n\ngo 1.26.0\n", ModulePath},
		{"// comment\nmodule \"github.com/airlock-dev/airlock\" // quoted\n", ModulePath},
		{"modulex foo\n", ""},
		{"go 1.26\n", ""},
	} {
		if got := modulePath([]byte(tc.in)); got != tc.want {
			t.Errorf("modulePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseSearchAttributes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]string
		want string // canonical "Name=Type,..." or "error"
	}{
		{"empty", nil, ""},
		{"sorted and canonical", map[string]string{"B": "keywordlist", "A": "Datetime"}, "A=Datetime,B=KeywordList"},
		{"all types", map[string]string{"K": "Keyword", "I": "Int", "T": "Text", "B": "Bool", "D": "Double"}, "B=Bool,D=Double,I=Int,K=Keyword,T=Text"},
		{"unknown type", map[string]string{"A": "String"}, "error"},
		{"bad name", map[string]string{"a-b": "Int"}, "error"},
		{"leading digit", map[string]string{"1a": "Int"}, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSearchAttributes(tc.in)
			if tc.want == "error" {
				if !errors.Is(err, ErrSearchAttribute) {
					t.Errorf("err = %v, want ErrSearchAttribute", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, sa := range got {
				parts = append(parts, sa.name+"="+sa.typeName)
			}
			if s := strings.Join(parts, ","); s != tc.want {
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
}

// A server that EnsureTemporal did not start under its own Dir is used as it is and never
// changed (issue 20 item 6): what it lacks is an ErrForeignServer error naming it, and the
// server is left without it.
func TestEnsureTemporalNeverChangesAForeignServer(t *testing.T) {
	requireCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	port := freePort(t)
	owner := TemporalOptions{Dir: t.TempDir(), Port: port, UIPort: Headless, Namespace: testNamespace,
		SearchAttributes: map[string]string{"AirlockStatus": "Keyword"}}
	srv, err := EnsureTemporal(ctx, owner)
	if err != nil {
		t.Fatalf("EnsureTemporal: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	var progress strings.Builder
	other := owner
	other.Dir = t.TempDir() // another airlock home: the server is not its own
	other.Log = &progress
	reused, err := EnsureTemporal(ctx, other)
	if err != nil {
		t.Fatalf("EnsureTemporal on a foreign server holding everything: %v", err)
	}
	if reused.PID != 0 || !strings.Contains(progress.String(), "checked, not changed") {
		t.Errorf("reused = %+v, progress %q", reused, progress.String())
	}

	other.SearchAttributes = map[string]string{"AirlockStatus": "Keyword", "AirlockExtra": "Int"}
	_, err = EnsureTemporal(ctx, other)
	if !errors.Is(err, ErrForeignServer) || !strings.Contains(err.Error(), "AirlockExtra (Int)") || !strings.Contains(err.Error(), "airlock cluster init") {
		t.Fatalf("missing attribute on a foreign server: err = %v, want ErrForeignServer naming AirlockExtra and the fix", err)
	}
	if _, added := listAttrs(ctx, t, srv.Address, testNamespace)["AirlockExtra"]; added {
		t.Error("EnsureTemporal added a search attribute to a server it did not start")
	}

	other.SearchAttributes = nil
	other.Namespace = testNamespace + "-foreign"
	if _, err := EnsureTemporal(ctx, other); !errors.Is(err, ErrForeignServer) || !strings.Contains(err.Error(), other.Namespace) {
		t.Fatalf("missing namespace on a foreign server: err = %v, want ErrForeignServer naming it", err)
	}
	if err := probe(ctx, srv.Address, other.Namespace); err == nil {
		t.Error("EnsureTemporal registered a namespace on a server it did not start")
	}

	// Its own Dir still may prepare it: the owner adds what it needs.
	owner.SearchAttributes = map[string]string{"AirlockStatus": "Keyword", "AirlockExtra": "Int"}
	if _, err := EnsureTemporal(ctx, owner); err != nil {
		t.Fatalf("EnsureTemporal from the owning Dir: %v", err)
	}
	if got := listAttrs(ctx, t, srv.Address, testNamespace)["AirlockExtra"]; got != enumspb.INDEXED_VALUE_TYPE_INT {
		t.Errorf("owner's reuse did not add AirlockExtra: %v", got)
	}
}

// Every port the dev server opens on its own account is the one configured (issue 38 item 3):
// gRPC, Web UI, HTTP API and /metrics, never one start-dev picks at random.
func TestEnsureTemporalKeepsConfiguredPorts(t *testing.T) {
	requireCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// A dev server that exits while starting (seen under a whole make test's load; the
	// integration harness meets it too) is started again on fresh ports, at most three times,
	// each failure printed whole.
	var opts TemporalOptions
	var srv *Temporal
	var err error
	for try := 1; ; try++ {
		opts = TemporalOptions{Dir: t.TempDir(), Port: freePort(t), UIPort: freePort(t), HTTPPort: freePort(t), MetricsPort: freePort(t),
			Namespace: testNamespace}
		srv, err = EnsureTemporal(ctx, opts)
		if err == nil || try == 3 || !strings.Contains(err.Error(), "server exited") {
			break
		}
		t.Logf("EnsureTemporal, try %d: %v", try, err)
	}
	if err != nil {
		t.Fatalf("EnsureTemporal: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	at := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	if srv.HTTPAddress != at(opts.HTTPPort) || srv.MetricsAddress != at(opts.MetricsPort) || srv.UIAddress != "http://"+at(opts.UIPort) {
		t.Fatalf("started %+v, want the configured ports %+v", srv, opts)
	}
	for what, url := range map[string]string{
		"metrics":  "http://" + srv.MetricsAddress + "/metrics",
		"HTTP API": "http://" + srv.HTTPAddress + "/api/v1/namespaces/" + testNamespace,
		"Web UI":   srv.UIAddress,
	} {
		eventually(t, 10*time.Second, what+" answers on its configured port", func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return errors.New(resp.Status)
			}
			return nil
		})
	}
	// Two listeners on one port are refused before anything starts.
	clash := opts
	clash.Dir, clash.Port, clash.MetricsPort = t.TempDir(), freePort(t), opts.HTTPPort
	clash.HTTPPort = opts.HTTPPort
	if _, err := EnsureTemporal(ctx, clash); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("HTTP and metrics on one port: %v", err)
	}
}

// A crashed server's log tail keeps the panic's message, which Go prints before the stacks
// the tail would otherwise hold alone.
func TestLogTailKeepsThePanicMessage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "temporal.log")
	log := "starting\npanic: listen tcp 127.0.0.1:7233: bind: address already in use\n\ngoroutine 1 [running]:\n" +
		strings.Repeat("frame\n\t/src/x.go:1 +0x1\n", logTailLines)
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := logTail(path)
	if !strings.HasPrefix(got, "panic: listen tcp 127.0.0.1:7233: bind: address already in use\n…\n") || strings.Count(got, "\n") != logTailLines+1 {
		t.Fatalf("tail:\n%s", got)
	}
}
