//go:build unix

package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Defaults of the local stack, as used by `make run`.
const (
	DefaultPort   = 7233 // frontend gRPC port
	DefaultUIPort = 8233 // Web UI port
	// DefaultHTTPPort is the frontend's HTTP API port (Temporal's own convention, gRPC + 10).
	DefaultHTTPPort = 7243
	// DefaultMetricsPort is the dev server's Prometheus /metrics port (gRPC + 11).
	DefaultMetricsPort = 7244
	DefaultDir         = ".airlock" // state directory, relative to the working directory
	DefaultNamespace   = "default"
	// Headless, as TemporalOptions.UIPort, starts the server without its Web UI.
	Headless = -1
)

const (
	startTimeout  = 60 * time.Second // overall EnsureTemporal bound when ctx has no deadline
	probeTimeout  = 2 * time.Second  // one health probe
	pollInterval  = 100 * time.Millisecond
	stopGrace     = 10 * time.Second // SIGTERM → SIGKILL
	killWait      = 5 * time.Second  // SIGKILL → give up
	logTailBytes  = 4096
	logTailLines  = 25
	pidFileName   = "temporal.pid"
	ownerFileName = "temporal.owner" // "<pid> <address>" of every server this package started in Dir
	logFileName   = "temporal.log"
	dbFileName    = "temporal.db"
	nsRetentionTo = 24 * time.Hour // retention of a namespace created on a reused server
)

var (
	// ErrCLIMissing means the Temporal CLI is not where TemporalOptions.CLIPath (or its default
	// <repo>/bin/temporal) points.
	ErrCLIMissing = errors.New("stack: temporal CLI missing; run `make temporal` to build bin/temporal")
	// ErrNotRunning is returned by StopDetached when no detached server is recorded in the
	// state directory, or the recorded one is gone.
	ErrNotRunning = errors.New("stack: no detached temporal server running")
	// ErrStart wraps every failure of a server this process launched to come up: it exited,
	// or did not answer before the deadline. The error text ends with the tail of its log.
	ErrStart = errors.New("stack: temporal dev server did not start")
	// ErrForeignServer means a Temporal server that this package did not start (no live record
	// of it in the state directory) answers at the requested address but lacks the namespace or
	// search attributes Airlock needs. EnsureTemporal never changes such a server (issue 20
	// item 6): register them with `airlock cluster init` against it, or use another address.
	ErrForeignServer = errors.New("stack: a Temporal server this command did not start answers there")
	// ErrDirBusy means a detached server recorded in the state directory is alive but does not
	// answer on the requested port; two servers must not share one SQLite file. Stop it with
	// StopDetached (or `airlock down`) or use another directory.
	ErrDirBusy = errors.New("stack: state directory in use by another temporal server")
)

// TemporalOptions configure EnsureTemporal. The zero value starts a child server on free ports
// with state in DefaultDir; DefaultTemporalOptions gives the well-known ports of `make run`.
type TemporalOptions struct {
	// CLIPath is the Temporal CLI binary. Default: <repo>/bin/temporal, where <repo> is
	// RepoRoot(). A missing binary fails with ErrCLIMissing.
	CLIPath string
	// Dir holds the server's state: temporal.db (SQLite, WAL), temporal.log (its stdout and
	// stderr, truncated at each start) and, when Detached, temporal.pid. Default DefaultDir.
	Dir string
	// Port is the frontend gRPC port on 127.0.0.1; 0 picks a free port (and never reuses a
	// running server).
	Port int
	// UIPort is the Web UI port; 0 picks a free port; Headless (-1) disables the UI.
	UIPort int
	// HTTPPort is the frontend's HTTP API port (start-dev --http-port) and MetricsPort its
	// Prometheus /metrics port (--metrics-port), both on 127.0.0.1; 0 picks a free port
	// (start-dev itself would pick one at random). The dev server's internal services
	// (history, matching, worker) listen on ports the Temporal CLI picks on 127.0.0.1; it has
	// no flag for them.
	HTTPPort, MetricsPort int
	// Namespace is the namespace to use, created if missing. Default DefaultNamespace.
	Namespace string
	// SearchAttributes maps attribute names (identifiers) to types: Keyword, Int, Text, Bool,
	// Double, Datetime or KeywordList (case-insensitive). They are passed to the server at start
	// and always ensured afterwards through the operator service, because start-dev ignores them
	// on an existing database. An attribute present with another type is an ErrSearchAttribute
	// error.
	SearchAttributes map[string]string
	// Detached starts the server in its own session so that it outlives this process; its pid
	// is written to Dir/temporal.pid and StopDetached stops it. Otherwise the server is a child
	// stopped by Temporal.Stop (and, on Linux, sent SIGTERM if this process dies first).
	Detached bool
	// Log receives progress lines for humans; nil discards them.
	Log io.Writer
	// ExtraArgs are more start-dev flags, passed after ServerSettings (a server that is reused
	// keeps its own). The integration tests raise the server's limit of 100 Worker Deployments
	// a namespace with them: each test's worker is a deployment of its own.
	ExtraArgs []string
}

// DefaultTemporalOptions returns the options of the zero-setup local stack: ports
// DefaultPort and DefaultUIPort, state in DefaultDir, namespace DefaultNamespace.
func DefaultTemporalOptions() TemporalOptions {
	return TemporalOptions{Port: DefaultPort, UIPort: DefaultUIPort, HTTPPort: DefaultHTTPPort, MetricsPort: DefaultMetricsPort,
		Dir: DefaultDir, Namespace: DefaultNamespace}
}

// Temporal is a Temporal server that answers, either started by EnsureTemporal or reused.
type Temporal struct {
	// Address is the frontend gRPC address, "127.0.0.1:<port>".
	Address string
	// UIAddress is the Web UI URL ("http://127.0.0.1:8233"), or "" when headless. For a reused
	// server it is derived from TemporalOptions.UIPort and not checked.
	UIAddress string
	// HTTPAddress and MetricsAddress are the frontend's HTTP API and /metrics addresses
	// ("127.0.0.1:7243") of a server EnsureTemporal started; "" for a reused one.
	HTTPAddress, MetricsAddress string
	// Namespace is the namespace that exists on the server.
	Namespace string
	// PID is the process id of the server EnsureTemporal started, 0 when it reused one.
	PID int
	// Detached reports that the started server outlives this process (Stop leaves it running).
	Detached bool

	proc     *process // nil when reused
	stopOnce sync.Once
	stopErr  error
}

// process is a started server and the channel closed when it has exited and been reaped.
type process struct {
	cmd   *exec.Cmd
	group bool // signal the process group -pid instead of pid
	done  chan struct{}
	err   error // Wait result, valid after done is closed
}

// EnsureTemporal returns a Temporal server answering on 127.0.0.1:o.Port, with o.Namespace and
// o.SearchAttributes in place. It reuses a server that already answers there; otherwise it
// starts `temporal server start-dev` and polls until the server answers and the namespace
// exists. ctx bounds the whole operation; without a deadline it is 60 s. Errors: ErrCLIMissing,
// ErrDirBusy, ErrSearchAttribute, ErrStart (with the tail of Dir/temporal.log), or the
// context's error.
func EnsureTemporal(ctx context.Context, o TemporalOptions) (*Temporal, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	attrs, err := parseSearchAttributes(o.SearchAttributes)
	if err != nil {
		return nil, err
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, fmt.Errorf("stack: state dir: %w", err)
	}
	if o.Port < 0 || o.Port > 65535 || o.UIPort < Headless || o.UIPort > 65535 ||
		o.HTTPPort < 0 || o.HTTPPort > 65535 || o.MetricsPort < 0 || o.MetricsPort > 65535 {
		return nil, fmt.Errorf("stack: invalid ports %d (gRPC) / %d (UI) / %d (HTTP) / %d (metrics)", o.Port, o.UIPort, o.HTTPPort, o.MetricsPort)
	}
	if err := distinctPorts(o); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}

	if o.Port != 0 {
		addr := hostPort(o.Port)
		if Status(ctx, addr) == nil {
			t := &Temporal{Address: addr, UIAddress: uiURL(o.UIPort), Namespace: o.Namespace}
			if !startedHere(o.Dir, addr) {
				// Not ours: use it as it is, or say what it lacks; never register anything on it.
				logf("reusing Temporal at %s (namespace %s; not started by airlock under %s, so it is checked, not changed)", addr, o.Namespace, o.Dir)
				if err := t.check(ctx, attrs); err != nil {
					return nil, err
				}
				return t, nil
			}
			logf("reusing Temporal at %s (namespace %s)", addr, o.Namespace)
			if err := t.prepare(ctx, attrs, true); err != nil {
				return nil, err
			}
			return t, nil
		}
	}
	return start(ctx, o, attrs, logf)
}

// distinctPorts refuses options that give two of the server's listeners one port.
func distinctPorts(o TemporalOptions) error {
	seen := map[int]string{}
	for _, p := range []struct {
		name string
		port int
	}{{"gRPC", o.Port}, {"Web UI", o.UIPort}, {"HTTP", o.HTTPPort}, {"metrics", o.MetricsPort}} {
		if p.port <= 0 {
			continue
		}
		if other, ok := seen[p.port]; ok {
			return fmt.Errorf("stack: the %s and %s ports are both %d", other, p.name, p.port)
		}
		seen[p.port] = p.name
	}
	return nil
}

// startedHere reports whether dir records a live server that this package started at addr
// (dir/temporal.owner, written at start): only such a server may be changed on reuse.
func startedHere(dir, addr string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFileName))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[1] != addr {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	return err == nil && pid > 0 && looksLikeServer(pid)
}

// check verifies, read-only, that a server this package did not start has t.Namespace and
// every attribute of attrs; what is missing is an ErrForeignServer error that names it and the
// fix. A type conflict stays an ErrSearchAttribute error.
func (t *Temporal) check(ctx context.Context, attrs []searchAttr) error {
	c, err := dial(ctx, t.Address, t.Namespace)
	if err != nil {
		return fmt.Errorf("stack: connect to %s: %w", t.Address, err)
	}
	defer c.Close()
	fix := "register them with `TEMPORAL_ADDRESS=" + t.Address + " airlock cluster init`, or set TEMPORAL_ADDRESS to another address (on 127.0.0.1 a free port starts a dev server of airlock's own)"
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.Namespace})
	var notFound *serviceerror.NamespaceNotFound
	if errors.As(err, &notFound) {
		return fmt.Errorf("%w at %s: it has no namespace %s; %s", ErrForeignServer, t.Address, t.Namespace, fix)
	} else if err != nil {
		return fmt.Errorf("stack: describe namespace %s at %s: %w", t.Namespace, t.Address, err)
	}
	if len(attrs) == 0 {
		return nil
	}
	missing, err := missingSearchAttributes(ctx, c, t.Namespace, attrs)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, sa := range missing {
			names[i] = sa.name + " (" + sa.typeName + ")"
		}
		return fmt.Errorf("%w at %s: namespace %s lacks search attributes %s; %s", ErrForeignServer, t.Address, t.Namespace, strings.Join(names, ", "), fix)
	}
	return nil
}

// ServerSettings are the start-dev flags, beyond address, port and database file, with which
// EnsureTemporal starts every dev server (make run, tests, airlock bench). Peer benchmarks run
// their own dev server with exactly these flags (airlock bench --server-args prints them), so
// all systems are measured on the same server settings.
func ServerSettings() []string {
	return []string{
		"--sqlite-pragma", "journal_mode=wal",
		// WAL with synchronous=NORMAL, SQLite's recommended pairing: a commit no longer waits
		// for an fsync of the log (the log is synced at each checkpoint). A killed server
		// loses nothing (the log is in the OS's cache); a power loss or OS crash may roll
		// back the last commits, which a development server can afford (a production cluster
		// runs on PostgreSQL: airlock cluster). Measured: about 10 % more approval turns/s,
		// 1.5-3 ms less server CPU a turn (docs/bench/README.md, stop 28).
		"--sqlite-pragma", "synchronous=normal",
		"--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000",
		// Eager activity dispatch: an activity scheduled by a workflow task completion is
		// handed back to the same worker in the response, saving a matching round trip.
		"--dynamic-config-value", "system.enableActivityEagerExecution=true",
		// Eager workflow start: a client in the same process as a worker gets the first
		// workflow task in the start response (make run, tests, benchmarks).
		"--dynamic-config-value", "system.enableEagerWorkflowStart=true",
		// The search-attribute cache on, as on a production server: the Temporal CLI turns it
		// off so that attributes added at run time show at once, and then every start, upsert
		// and visibility write re-reads the cluster metadata from SQLite (about 7 % of the dev
		// server's CPU on an approval turn, docs/bench/README.md). Airlock's attributes are
		// registered before the server serves (--search-attribute at start-dev); one added
		// later is waited for until it is usable (awaitSearchAttributes).
		"--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false",
		"--log-level", "warn",
	}
}

// start launches a server per o and waits until it is ready.
func start(ctx context.Context, o TemporalOptions, attrs []searchAttr, logf func(string, ...any)) (*Temporal, error) {
	cli, err := cliPath(o.CLIPath)
	if err != nil {
		return nil, err
	}
	pidFile := filepath.Join(o.Dir, pidFileName)
	if pid, err := readPID(pidFile); err == nil {
		if looksLikeServer(pid) {
			return nil, fmt.Errorf("%w: pid %d from %s does not answer on port %d", ErrDirBusy, pid, pidFile, o.Port)
		}
		_ = os.Remove(pidFile) // stale
	}
	if o.Port == 0 {
		if o.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	for _, p := range []*int{&o.UIPort, &o.HTTPPort, &o.MetricsPort} {
		if *p == 0 {
			if *p, err = FreePort(); err != nil {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("stack: state dir: %w", err)
	}
	logPath := filepath.Join(o.Dir, logFileName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("stack: server log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor

	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(o.Port),
		"--http-port", strconv.Itoa(o.HTTPPort),
		"--metrics-port", strconv.Itoa(o.MetricsPort),
		"--db-filename", filepath.Join(o.Dir, dbFileName),
	}
	args = append(args, ServerSettings()...)
	args = append(args, o.ExtraArgs...)
	if o.UIPort == Headless {
		args = append(args, "--headless")
	} else {
		args = append(args, "--ui-port", strconv.Itoa(o.UIPort))
	}
	if o.Namespace != DefaultNamespace { // "default" is always created
		args = append(args, "--namespace", o.Namespace)
	}
	for _, sa := range attrs {
		args = append(args, "--search-attribute", sa.name+"="+sa.typeName)
	}
	cmd := exec.Command(cli, args...)
	cmd.Dir = o.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p := &process{cmd: cmd, done: make(chan struct{})}
	if o.Detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		p.group = true
	} else {
		cmd.SysProcAttr = childAttr()
		p.group = childOwnGroup
	}

	addr := hostPort(o.Port)
	logf("starting Temporal dev server at %s (state in %s; usually ready in about a second)…", addr, o.Dir)
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stack: start %s: %w", cli, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t := &Temporal{
		Address: addr, UIAddress: uiURL(o.UIPort), Namespace: o.Namespace,
		HTTPAddress: hostPort(o.HTTPPort), MetricsAddress: hostPort(o.MetricsPort),
		PID: cmd.Process.Pid, Detached: o.Detached, proc: p,
	}
	fail := func(cause error) (*Temporal, error) {
		p.kill()
		if o.Detached {
			_ = os.Remove(pidFile)
		}
		return nil, fmt.Errorf("%w at %s: %w\n--- tail of %s ---\n%s", ErrStart, addr, cause, logPath, logTail(logPath))
	}
	if o.Detached {
		if err := writePID(pidFile, t.PID); err != nil {
			return fail(err)
		}
	}
	if err := os.WriteFile(filepath.Join(o.Dir, ownerFileName), []byte(strconv.Itoa(t.PID)+" "+addr+"\n"), 0o644); err != nil {
		return fail(fmt.Errorf("stack: owner file: %w", err))
	}
	if err := waitReady(ctx, p, addr, o.Namespace); err != nil {
		return fail(err)
	}
	if err := t.prepare(ctx, attrs, false); err != nil {
		return fail(err)
	}
	ui := ""
	if t.UIAddress != "" {
		ui = ", Web UI " + t.UIAddress
	}
	logf("Temporal ready at %s in %.1f s (namespace %s%s)", addr, time.Since(began).Seconds(), o.Namespace, ui)
	return t, nil
}

// waitReady polls addr until the server is healthy and namespace exists, p exits, or ctx ends.
func waitReady(ctx context.Context, p *process, addr, namespace string) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("server exited: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready (last probe: %v): %w", last, ctx.Err())
		case <-tick.C:
		}
		if last = probe(ctx, addr, namespace); last == nil {
			return nil
		}
	}
}

// probe checks that addr answers the gRPC health check and knows namespace.
func probe(ctx context.Context, addr, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c, err := dial(ctx, addr, namespace)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	return err
}

// prepare makes sure t.Namespace exists (only needed on a reused server) and holds attrs,
// retrying while the server's caches catch up, until ctx ends.
func (t *Temporal) prepare(ctx context.Context, attrs []searchAttr, ensureNamespace bool) error {
	c, err := dial(ctx, t.Address, t.Namespace)
	if err != nil {
		return fmt.Errorf("stack: connect to %s: %w", t.Address, err)
	}
	defer c.Close()
	if ensureNamespace {
		if err := registerNamespace(ctx, c, t.Namespace); err != nil {
			return err
		}
	}
	return retryTransient(ctx, func() error { return ensureSearchAttributes(ctx, c, t.Namespace, attrs) })
}

// Prepare connects with o (a production server: TLS, API key and all) and makes sure
// o.Namespace exists (created with a 1-day retention if missing) and holds attrs (names to
// types, as TemporalOptions.SearchAttributes), retrying while the server's caches catch up.
func Prepare(ctx context.Context, o client.Options, attrs map[string]string) error {
	sas, err := parseSearchAttributes(attrs)
	if err != nil {
		return err
	}
	if o.Logger == nil {
		o.Logger = sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return fmt.Errorf("stack: connect to %s: %w", o.HostPort, err)
	}
	defer c.Close()
	if err := retryTransient(ctx, func() error { return registerNamespace(ctx, c, o.Namespace) }); err != nil {
		return err
	}
	return retryTransient(ctx, func() error { return ensureSearchAttributes(ctx, c, o.Namespace, sas) })
}

// registerNamespace creates namespace unless it exists.
func registerNamespace(ctx context.Context, c client.Client, namespace string) error {
	ws := c.WorkflowService()
	_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var notFound *serviceerror.NamespaceNotFound
	if err == nil || !errors.As(err, &notFound) {
		if err != nil {
			return fmt.Errorf("stack: describe namespace %s: %w", namespace, err)
		}
		return nil
	}
	_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(nsRetentionTo),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("stack: register namespace %s: %w", namespace, err)
	}
	return nil
}

// retryTransient runs f until it succeeds, fails with a non-transient error, or ctx ends.
// Transient: unavailable server, or a namespace not yet in the server's namespace cache.
func retryTransient(ctx context.Context, f func() error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := f()
		var unavailable *serviceerror.Unavailable
		var nsNotFound *serviceerror.NamespaceNotFound
		var notFound *serviceerror.NotFound
		if err == nil || !(errors.As(err, &unavailable) || errors.As(err, &nsNotFound) || errors.As(err, &notFound)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop stops the server if this process started it as a child: SIGTERM, then SIGKILL after
// 10 s or when ctx ends, and waits for it to exit. It is a no-op for a reused or detached
// server (use StopDetached) and safe to call more than once.
func (t *Temporal) Stop(ctx context.Context) error {
	if t == nil || t.proc == nil || t.Detached {
		return nil
	}
	t.stopOnce.Do(func() { t.stopErr = t.proc.stop(ctx) })
	return t.stopErr
}

// stop sends SIGTERM, escalates to SIGKILL after stopGrace or when ctx ends, and waits.
func (p *process) stop(ctx context.Context) error {
	if err := p.signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stack: stop temporal pid %d: %w", p.cmd.Process.Pid, err)
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-p.done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	p.kill()
	select {
	case <-p.done:
		return nil
	default:
		return fmt.Errorf("stack: stop temporal pid %d: still running after SIGKILL", p.cmd.Process.Pid)
	}
}

// kill sends SIGKILL and waits up to killWait for the process to be reaped.
func (p *process) kill() {
	_ = p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(killWait):
	}
}

// signal sends sig to the process (group); a process already gone is not an error.
func (p *process) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	if p.group {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// StopDetached stops the detached server recorded in dir/temporal.pid ("" means DefaultDir):
// SIGTERM to its process group, SIGKILL after 10 s, then removes the pid file. It returns
// ErrNotRunning (and removes a stale pid file) when there is no such live server.
func StopDetached(dir string) error {
	if dir == "" {
		dir = DefaultDir
	}
	pidFile := filepath.Join(dir, pidFileName)
	pid, err := readPID(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNotRunning
	}
	if err != nil {
		return err
	}
	if !looksLikeServer(pid) {
		_ = os.Remove(pidFile)
		return fmt.Errorf("%w (removed stale %s for pid %d)", ErrNotRunning, pidFile, pid)
	}
	gone := func(limit time.Duration) bool {
		deadline := time.Now().Add(limit)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for time.Now().Before(deadline) {
			if syscall.Kill(-pid, 0) != nil { // ESRCH: no process left in the group
				return true
			}
			<-tick.C
		}
		return false
	}
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stack: stop detached temporal pid %d: %w", pid, err)
	}
	if !gone(stopGrace) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		if !gone(killWait) {
			return fmt.Errorf("stack: stop detached temporal pid %d: still running after SIGKILL", pid)
		}
	}
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stack: remove pid file: %w", err)
	}
	_ = os.Remove(filepath.Join(dir, ownerFileName))
	return nil
}

// Status returns nil if a Temporal server at address ("host:port") answers the gRPC health
// check within 2 s (or ctx, if shorter), and the connection or health error otherwise.
func Status(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c, err := dial(ctx, address, DefaultNamespace)
	if err != nil {
		return fmt.Errorf("stack: temporal at %s: %w", address, err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("stack: temporal at %s: health: %w", address, err)
	}
	return nil
}

// dial connects a quiet client (the SDK logger would print every failed probe).
func dial(ctx context.Context, address, namespace string) (client.Client, error) {
	return client.DialContext(ctx, client.Options{
		HostPort:  address,
		Namespace: namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
}

// cliPath resolves and checks the CLI binary.
func cliPath(path string) (string, error) {
	if path == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrCLIMissing, err)
		}
		path = filepath.Join(root, "bin", "temporal")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCLIMissing, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s is not an executable file", ErrCLIMissing, path)
	}
	return path, nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("stack: malformed pid file %s: %q", path, b)
	}
	return pid, nil
}

// writePID writes the pid file atomically.
func writePID(path string, pid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("stack: write pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("stack: write pid file: %w", err)
	}
	return nil
}

// logTail returns the last lines of the log at path, for error messages.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	// Read far enough back to find a panic's message above its stacks (see below).
	const window = 256 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(-window, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		// A Go panic prints its message first and then its goroutines' stacks: the tail alone
		// would hold only frames, so the message is kept in front of them.
		var msg string
		for _, l := range lines[:len(lines)-logTailLines] {
			if strings.HasPrefix(l, "panic: ") {
				msg = l
			}
		}
		lines = lines[len(lines)-logTailLines:]
		if msg != "" {
			tail := strings.Join(lines, "\n")
			if len(tail) > logTailBytes {
				tail = tail[len(tail)-logTailBytes:]
			}
			return msg + "\n…\n" + tail
		}
	}
	tail := strings.Join(lines, "\n")
	if len(tail) > logTailBytes {
		tail = tail[len(tail)-logTailBytes:]
	}
	return tail
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func uiURL(port int) string {
	if port <= 0 {
		return ""
	}
	return "http://" + hostPort(port)
}
