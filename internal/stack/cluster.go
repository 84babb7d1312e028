//go:build unix

package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// TemporalServerVersion is the Temporal server release the local cluster runs: `make cluster`
// builds its server and schema tool at this version with go install.
const TemporalServerVersion = "v1.29.1"

// Defaults of the local cluster.
const (
	// DefaultClusterDir holds the cluster's configuration, pid files and logs.
	DefaultClusterDir = ".airlock/cluster"
	// Binaries under <repo>/bin built by `make cluster-bin`.
	ServerBinary   = "temporal-server"
	SQLToolBinary  = "temporal-sql-tool"
	UIServerBinary = "temporal-ui-server"
	// numHistoryShards is fixed for the life of a database: never change it for an existing one.
	numHistoryShards = 4
)

// The four Temporal services, in the order the cluster starts them. Each is its own process;
// starting them one after another avoids the race on cluster metadata of services started at
// the same moment on an empty database.
var ClusterServices = []string{"history", "matching", "frontend", "worker"}

// ErrClusterBinary means a binary of the cluster is missing from the bin directory.
var ErrClusterBinary = errors.New("stack: cluster binary missing; run `make cluster-bin` to build the Temporal server " + TemporalServerVersion + ", its schema tool and UI into bin/")

// ClusterPorts are the loopback ports of the cluster's processes. Every process has its own
// metrics port (Prometheus, /metrics).
type ClusterPorts struct {
	// gRPC ports of the services; Frontend is the one clients dial.
	Frontend, History, Matching, Worker int
	// FrontendHTTP is the frontend's HTTP API.
	FrontendHTTP int
	// Membership ports (ringpop) of the services.
	FrontendMembership, HistoryMembership, MatchingMembership, WorkerMembership int
	// Prometheus metrics ports of the services.
	FrontendMetrics, HistoryMetrics, MatchingMetrics, WorkerMetrics int
	// UI is the Temporal Web UI port.
	UI int
}

// DefaultClusterPorts are the well-known ports of `make cluster`, the same as docker/compose.yaml
// publishes: Temporal's standard ports plus 10000 (frontend 17233, history 17234, matching
// 17235, worker 17239, frontend HTTP 17243, membership 16933–16939), service metrics on
// 18001–18004, the UI on 18080, so the cluster runs beside the dev server of `make run`
// (7233, 8233).
func DefaultClusterPorts() ClusterPorts {
	return ClusterPorts{
		Frontend: 17233, History: 17234, Matching: 17235, Worker: 17239, FrontendHTTP: 17243,
		FrontendMembership: 16933, HistoryMembership: 16934, MatchingMembership: 16935, WorkerMembership: 16939,
		FrontendMetrics: 18001, HistoryMetrics: 18002, MatchingMetrics: 18003, WorkerMetrics: 18004,
		UI: 18080,
	}
}

// FreeClusterPorts picks a free loopback port for every process (tests). Membership ports are
// taken below 32768: the server stores them in a smallint column (cluster_membership.rpc_port),
// and a port of the kernel's ephemeral range stops the service ("out of range for type
// smallint").
func FreeClusterPorts() (ClusterPorts, error) {
	var p ClusterPorts
	for _, f := range []*int{&p.Frontend, &p.History, &p.Matching, &p.Worker, &p.FrontendHTTP,
		&p.FrontendMetrics, &p.HistoryMetrics, &p.MatchingMetrics, &p.WorkerMetrics, &p.UI} {
		v, err := FreePort()
		if err != nil {
			return p, err
		}
		*f = v
	}
	for _, f := range []*int{&p.FrontendMembership, &p.HistoryMembership, &p.MatchingMembership, &p.WorkerMembership} {
		v, err := freePortBelow32768()
		if err != nil {
			return p, err
		}
		*f = v
	}
	return p, nil
}

// freePortBelow32768 returns a port in [20000, 32767] that was free on 127.0.0.1 when asked.
func freePortBelow32768() (int, error) {
	start := 20000 + int(time.Now().UnixNano()%12000)
	for i := range 12768 {
		port := 20000 + (start-20000+i*7919)%12768
		l, err := net.Listen("tcp", hostPort(port))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("stack: no free port in 20000-32767")
}

// service returns the gRPC, membership and metrics ports of a Temporal service.
func (p ClusterPorts) service(name string) (grpc, membership, metrics int) {
	switch name {
	case "frontend":
		return p.Frontend, p.FrontendMembership, p.FrontendMetrics
	case "history":
		return p.History, p.HistoryMembership, p.HistoryMetrics
	case "matching":
		return p.Matching, p.MatchingMembership, p.MatchingMetrics
	default:
		return p.Worker, p.WorkerMembership, p.WorkerMetrics
	}
}

// SQLOptions locate the PostgreSQL server and the two databases the cluster uses. The
// password is passed to the server and the schema tool through their environment only
// (SQL_PASSWORD), never on a command line or in a file.
type SQLOptions struct {
	Host     string // default 127.0.0.1
	Port     int    // default 5432
	User     string // a role allowed to create databases; default "temporal"
	Password string
	// Database and VisibilityDatabase default to "temporal" and "temporal_visibility".
	Database, VisibilityDatabase string
}

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Dir holds config/, logs/ and the pid files. Default DefaultClusterDir.
	Dir string
	// BinDir holds ServerBinary, SQLToolBinary and UIServerBinary. Default <repo>/bin.
	BinDir string
	// SchemaDir holds postgresql/v12/{temporal,visibility}/versioned. Default: the server
	// module's schema/ folder in the Go module cache (`go env GOMODCACHE`).
	SchemaDir string
	SQL       SQLOptions
	Ports     ClusterPorts
	// Namespace is created if missing (retention 1 day). Default DefaultNamespace.
	Namespace string
	// SearchAttributes are registered in Namespace (see TemporalOptions.SearchAttributes).
	SearchAttributes map[string]string
	// NoUI skips the Temporal Web UI.
	NoUI bool
	// Log receives progress lines for humans; nil discards them.
	Log io.Writer
}

// Cluster is a running local cluster. Its processes are detached: they outlive this process
// until StopCluster (or Cluster.Stop).
type Cluster struct {
	// Address is the frontend's gRPC address, UIAddress the Web UI URL ("" without UI).
	Address, UIAddress string
	Namespace          string
	Dir                string
	Ports              ClusterPorts

	o    ClusterOptions
	env  []string
	logf func(string, ...any)
}

// StartCluster creates the two databases if missing, sets up and upgrades their schemas with
// the schema tool, writes one configuration per service under Dir/config, starts history,
// matching, frontend and worker one after another (each waiting for the previous one to
// listen), then the UI, and waits until the frontend answers; finally it creates Namespace and
// registers SearchAttributes. A cluster already running in Dir is an ErrDaemonRunning error.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	attrs, err := parseSearchAttributes(o.SearchAttributes)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Address: hostPort(o.Ports.Frontend), Namespace: o.Namespace, Dir: o.Dir, Ports: o.Ports, o: o,
		env: []string{"SQL_PASSWORD=" + o.SQL.Password},
		logf: func(format string, args ...any) {
			if o.Log != nil {
				fmt.Fprintf(o.Log, format+"\n", args...)
			}
		},
	}
	if !o.NoUI {
		c.UIAddress = uiURL(o.Ports.UI)
	}
	for _, name := range append(append([]string{}, ClusterServices...), "ui") {
		if pid, ok := daemonPID(o.Dir, name); ok {
			return nil, fmt.Errorf("%w: %s (pid %d) in %s; stop it with `airlock cluster down`", ErrDaemonRunning, name, pid, o.Dir)
		}
	}
	if Status(ctx, c.Address) == nil {
		return nil, fmt.Errorf("stack: a Temporal server already answers at %s: a cluster started elsewhere? (`airlock cluster down` stops the one in %s)", c.Address, o.Dir)
	}
	began := time.Now()
	if err := c.setupSchemas(ctx); err != nil {
		return nil, err
	}
	if err := c.writeConfig(); err != nil {
		return nil, err
	}
	for _, svc := range ClusterServices {
		if err := c.StartService(ctx, svc); err != nil {
			_ = StopCluster(o.Dir)
			return nil, err
		}
	}
	if !o.NoUI {
		if err := c.startUI(ctx); err != nil {
			_ = StopCluster(o.Dir)
			return nil, err
		}
	}
	if err := pollNil(ctx, func() error {
		for _, svc := range ClusterServices {
			if _, ok := daemonPID(o.Dir, svc); !ok {
				return fmt.Errorf("Temporal %s exited:\n%s", svc, logTail(LogPath(o.Dir, svc)))
			}
		}
		return Status(ctx, c.Address)
	}); err != nil {
		_ = StopCluster(o.Dir)
		return nil, fmt.Errorf("stack: cluster frontend at %s: %w\n--- tail of %s ---\n%s", c.Address, err, LogPath(o.Dir, "frontend"), logTail(LogPath(o.Dir, "frontend")))
	}
	t := &Temporal{Address: c.Address, Namespace: o.Namespace}
	if err := retryTransient(ctx, func() error { return t.prepare(ctx, attrs, true) }); err != nil {
		_ = StopCluster(o.Dir)
		return nil, err
	}
	c.logf("Temporal cluster ready at %s in %.1f s (namespace %s; history, matching, frontend, worker as separate processes; logs in %s)",
		c.Address, time.Since(began).Seconds(), o.Namespace, filepath.Join(o.Dir, "logs"))
	return c, nil
}

func (o *ClusterOptions) defaults() error {
	if o.Dir == "" {
		o.Dir = DefaultClusterDir
	}
	var err error
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return fmt.Errorf("stack: cluster dir: %w", err)
	}
	if o.BinDir == "" {
		root, err := RepoRoot()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrClusterBinary, err)
		}
		o.BinDir = filepath.Join(root, "bin")
	}
	need := []string{ServerBinary, SQLToolBinary}
	if !o.NoUI {
		need = append(need, UIServerBinary)
	}
	for _, b := range need {
		if _, err := cliPath(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("%w: %s", ErrClusterBinary, filepath.Join(o.BinDir, b))
		}
	}
	if o.SchemaDir == "" {
		o.SchemaDir = ModuleSchemaDir()
	}
	if o.SQL.Host == "" {
		o.SQL.Host = "127.0.0.1"
	}
	if o.SQL.Port == 0 {
		o.SQL.Port = 5432
	}
	if o.SQL.User == "" {
		o.SQL.User = "temporal"
	}
	if o.SQL.Database == "" {
		o.SQL.Database = "temporal"
	}
	if o.SQL.VisibilityDatabase == "" {
		o.SQL.VisibilityDatabase = "temporal_visibility"
	}
	if o.Ports == (ClusterPorts{}) {
		o.Ports = DefaultClusterPorts()
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	return os.MkdirAll(filepath.Join(o.Dir, "config"), 0o755)
}

// ModuleSchemaDir is the schema/ folder of the Temporal server module in the Go module cache,
// or "" when `go env GOMODCACHE` fails (the schema tool's embedded schemas are used then).
func ModuleSchemaDir() string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "go.temporal.io", "server@"+TemporalServerVersion, "schema")
	if _, err := os.Stat(filepath.Join(dir, "postgresql", "v12")); err != nil {
		return ""
	}
	return dir
}

// sqlTool runs the schema tool on database db with args.
func (c *Cluster) sqlTool(ctx context.Context, db string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.o.BinDir, SQLToolBinary), args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Env = append(cmd.Env, "SQL_PLUGIN=postgres12", "SQL_HOST="+c.o.SQL.Host, "SQL_PORT="+strconv.Itoa(c.o.SQL.Port),
		"SQL_USER="+c.o.SQL.User, "SQL_DATABASE="+db)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("stack: %s %s on %s: %w\n%s", SQLToolBinary, strings.Join(args, " "), db, err, tail(out))
	}
	return out, nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > logTailBytes {
		s = s[len(s)-logTailBytes:]
	}
	return s
}

// setupSchemas creates both databases when missing, then `setup-schema -v 0.0` and
// `update-schema` to the newest version of the module's versioned PostgreSQL 12 schemas
// (idempotent: an up-to-date database is left as it is).
func (c *Cluster) setupSchemas(ctx context.Context) error {
	for _, s := range []struct{ db, schema string }{
		{c.o.SQL.Database, "temporal"}, {c.o.SQL.VisibilityDatabase, "visibility"},
	} {
		if out, err := c.sqlTool(ctx, s.db, "create-database"); err != nil && !strings.Contains(string(out), "already exists") {
			return err
		}
		if out, err := c.sqlTool(ctx, s.db, "setup-schema", "-v", "0.0"); err != nil && !strings.Contains(string(out), "already exists") {
			return err
		}
		update := []string{"update-schema"}
		if c.o.SchemaDir != "" {
			update = append(update, "-d", filepath.Join(c.o.SchemaDir, "postgresql", "v12", s.schema, "versioned"))
		} else {
			update = append(update, "--schema-name", "postgresql/v12/"+s.schema)
		}
		if _, err := c.sqlTool(ctx, s.db, update...); err != nil {
			return err
		}
		c.logf("schema of %s (%s) is up to date", s.db, s.schema)
	}
	return nil
}

// DropDatabases drops the cluster's two databases (tests; the cluster must be stopped).
func DropDatabases(ctx context.Context, o ClusterOptions) error {
	if err := o.defaults(); err != nil {
		return err
	}
	c := &Cluster{o: o, env: []string{"SQL_PASSWORD=" + o.SQL.Password}}
	var errs []error
	for _, db := range []string{o.SQL.Database, o.SQL.VisibilityDatabase} {
		if _, err := c.sqlTool(ctx, db, "drop-database", "-f"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serviceConfig is the Temporal server configuration of one service process: the module's
// config/development-postgres12.yaml with this cluster's ports and databases, and the
// password read from the process environment (SQL_PASSWORD) by the server's template support.
var serviceConfig = template.Must(template.New("service").Parse(`# enable-template
log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: {{.Shards}}
  datastores:
    postgres-default:
      sql:
        pluginName: postgres12
        databaseName: {{.SQL.Database}}
        connectAddr: "{{.SQL.Host}}:{{.SQL.Port}}"
        connectProtocol: tcp
        user: {{.SQL.User}}
        password: "{{"{{"}} env "SQL_PASSWORD" {{"}}"}}"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    postgres-visibility:
      sql:
        pluginName: postgres12
        databaseName: {{.SQL.VisibilityDatabase}}
        connectAddr: "{{.SQL.Host}}:{{.SQL.Port}}"
        connectProtocol: tcp
        user: {{.SQL.User}}
        password: "{{"{{"}} env "SQL_PASSWORD" {{"}}"}}"
        maxConns: 4
        maxIdleConns: 4
        maxConnLifetime: 1h
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  metrics:
    prometheus:
      framework: tally
      timerType: histogram
      listenAddress: "127.0.0.1:{{.Metrics}}"
services:
  frontend:
    rpc:
      grpcPort: {{.Ports.Frontend}}
      membershipPort: {{.Ports.FrontendMembership}}
      bindOnLocalHost: true
      httpPort: {{.Ports.FrontendHTTP}}
  history:
    rpc:
      grpcPort: {{.Ports.History}}
      membershipPort: {{.Ports.HistoryMembership}}
      bindOnLocalHost: true
  matching:
    rpc:
      grpcPort: {{.Ports.Matching}}
      membershipPort: {{.Ports.MatchingMembership}}
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: {{.Ports.Worker}}
      membershipPort: {{.Ports.WorkerMembership}}
      bindOnLocalHost: true
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:{{.Ports.Frontend}}"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`))

// dynamicConfig raises the transfer poll rate and turns on eager activity dispatch and eager
// workflow start, as the local dev server does (DESIGN "Temporal shape"), and refreshes the
// search attribute cache on read so attributes registered at start are usable at once.
const dynamicConfig = `history.transferProcessorMaxPollRPS:
  - value: 1000
system.enableActivityEagerExecution:
  - value: true
system.enableEagerWorkflowStart:
  - value: true
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
frontend.enableUpdateWorkflowExecution:
  - value: true
`

// uiConfig is the Temporal UI server's configuration.
var uiConfig = template.Must(template.New("ui").Parse(`temporalGrpcAddress: "127.0.0.1:{{.Ports.Frontend}}"
host: 127.0.0.1
port: {{.Ports.UI}}
enableUi: true
defaultNamespace: {{.Namespace}}
refreshInterval: 1m
notifyOnNewVersion: false
cors:
  cookieInsecure: true
  allowOrigins:
    - "http://127.0.0.1:{{.Ports.UI}}"
`))

// writeConfig writes config/<service>.yaml for every service, the dynamic config and the UI's.
func (c *Cluster) writeConfig() error {
	cfgDir := filepath.Join(c.o.Dir, "config")
	dyn := filepath.Join(cfgDir, "dynamicconfig.yaml")
	if err := os.WriteFile(dyn, []byte(dynamicConfig), 0o644); err != nil {
		return fmt.Errorf("stack: cluster config: %w", err)
	}
	for _, svc := range ClusterServices {
		_, _, metrics := c.o.Ports.service(svc)
		var b strings.Builder
		if err := serviceConfig.Execute(&b, map[string]any{
			"Shards": numHistoryShards, "SQL": c.o.SQL, "Ports": c.o.Ports, "Metrics": metrics, "DynamicConfig": dyn,
		}); err != nil {
			return fmt.Errorf("stack: cluster config: %w", err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, svc+".yaml"), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("stack: cluster config: %w", err)
		}
	}
	uiDir := filepath.Join(c.o.Dir, "ui")
	if err := os.MkdirAll(uiDir, 0o755); err != nil {
		return fmt.Errorf("stack: ui config: %w", err)
	}
	var b strings.Builder
	if err := uiConfig.Execute(&b, map[string]any{"Ports": c.o.Ports, "Namespace": c.o.Namespace}); err != nil {
		return fmt.Errorf("stack: ui config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(uiDir, "cluster.yaml"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("stack: ui config: %w", err)
	}
	return nil
}

// StartService starts one Temporal service process (history, matching, frontend or worker)
// and waits until its gRPC (not the worker's: it serves none), membership and metrics ports
// listen. The cluster's configuration must exist
// (StartCluster wrote it); this is also how a test restarts a service it stopped.
func (c *Cluster) StartService(ctx context.Context, svc string) error {
	grpc, membership, metrics := c.o.Ports.service(svc)
	listen := []int{grpc, membership, metrics}
	if svc == "worker" {
		listen = []int{membership, metrics} // the worker service serves no gRPC
	}
	argv := []string{filepath.Join(c.o.BinDir, ServerBinary), "--root", c.o.Dir, "--config", "config", "--env", svc,
		"--allow-no-auth", "start", "--service", svc}
	c.logf("starting Temporal %s (gRPC 127.0.0.1:%d, metrics http://127.0.0.1:%d/metrics)", svc, grpc, metrics)
	_, done, err := startDaemon(c.o.Dir, svc, argv, c.env)
	if err != nil {
		return err
	}
	if err := waitListening(ctx, done, listen...); err != nil {
		return fmt.Errorf("stack: Temporal %s did not start: %w\n--- tail of %s ---\n%s", svc, err, LogPath(c.o.Dir, svc), logTail(LogPath(c.o.Dir, svc)))
	}
	return nil
}

// StopService stops one process of the cluster (SIGTERM, SIGKILL after 10 s).
func (c *Cluster) StopService(svc string) error { return stopDaemon(c.o.Dir, svc, stopGrace) }

// RestartService stops a Temporal service and starts it again.
func (c *Cluster) RestartService(ctx context.Context, svc string) error {
	if err := c.StopService(svc); err != nil {
		return err
	}
	return c.StartService(ctx, svc)
}

// startUI starts the Temporal Web UI server.
func (c *Cluster) startUI(ctx context.Context) error {
	argv := []string{filepath.Join(c.o.BinDir, UIServerBinary), "--root", filepath.Join(c.o.Dir, "ui"), "--config", ".", "--env", "cluster", "start"}
	c.logf("starting the Temporal UI at %s", c.UIAddress)
	_, done, err := startDaemon(c.o.Dir, "ui", argv, nil)
	if err != nil {
		return err
	}
	if err := waitListening(ctx, done, c.o.Ports.UI); err != nil {
		return fmt.Errorf("stack: Temporal UI did not start: %w\n--- tail of %s ---\n%s", err, LogPath(c.o.Dir, "ui"), logTail(LogPath(c.o.Dir, "ui")))
	}
	return nil
}

// StartProcess starts another process as part of the cluster (an Airlock worker, the
// approver page): detached, logged to LogPath(Dir, name), stopped by StopCluster. ready, if
// set, is polled until it returns nil, the process exits, or ctx ends.
func (c *Cluster) StartProcess(ctx context.Context, name string, argv, env []string, ready func(context.Context) error) error {
	_, done, err := startDaemon(c.o.Dir, name, argv, env)
	if err != nil {
		return err
	}
	if ready == nil {
		return nil
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("stack: %s exited: %v\n--- tail of %s ---\n%s", name, last, LogPath(c.o.Dir, name), logTail(LogPath(c.o.Dir, name)))
		case <-ctx.Done():
			return fmt.Errorf("stack: %s not ready: %v: %w", name, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// Kill sends SIGKILL to one process of the cluster and waits until it is gone.
func (c *Cluster) Kill(name string) error { return killDaemon(c.o.Dir, name) }

// Stop stops every process of the cluster (StopCluster on its directory).
func (c *Cluster) Stop() error { return StopCluster(c.o.Dir) }

// StopCluster stops every process recorded in dir ("" = DefaultClusterDir): Airlock's first,
// then the UI and the Temporal services in reverse start order. Nothing running is not an
// error.
func StopCluster(dir string) error {
	if dir == "" {
		dir = DefaultClusterDir
	}
	names := daemonNames(dir)
	order := map[string]int{"ui": 1, "worker": 2, "frontend": 3, "matching": 4, "history": 5}
	var errs []error
	for pass := 0; pass <= 5; pass++ {
		for _, n := range names {
			if order[n] == pass {
				errs = append(errs, stopDaemon(dir, n, stopGrace))
			}
		}
	}
	return errors.Join(errs...)
}

// ProcessStatus is one process of the cluster as ClusterStatus sees it.
type ProcessStatus struct {
	Name    string
	PID     int  // 0 when not running
	Running bool // a live process is recorded under Name
	Log     string
}

// ClusterStatus lists the processes recorded in dir ("" = DefaultClusterDir) and whether each
// runs.
func ClusterStatus(dir string) []ProcessStatus {
	if dir == "" {
		dir = DefaultClusterDir
	}
	var out []ProcessStatus
	seen := map[string]bool{}
	for _, n := range append(append([]string{}, ClusterServices...), daemonNames(dir)...) {
		if seen[n] {
			continue
		}
		seen[n] = true
		pid, ok := daemonPID(dir, n)
		out = append(out, ProcessStatus{Name: n, PID: pid, Running: ok, Log: LogPath(dir, n)})
	}
	return out
}

// waitListening waits until every port accepts TCP connections on 127.0.0.1, the process
// exits (done closes), or ctx ends.
func waitListening(ctx context.Context, done <-chan struct{}, ports ...int) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok := true
		for _, p := range ports {
			conn, err := net.DialTimeout("tcp", hostPort(p), probeTimeout)
			if err != nil {
				ok = false
				break
			}
			conn.Close()
		}
		if ok {
			return nil
		}
		select {
		case <-done:
			return errors.New("process exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// pollNil calls f every pollInterval until it returns nil or ctx ends (then the last error).
func pollNil(ctx context.Context, f func() error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-tick.C:
		}
	}
}

// HTTPReady returns a readiness check that GETs url and wants HTTP 200.
func HTTPReady(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
		}
		return nil
	}
}
