package workers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/telemetry"
	"github.com/airlock-dev/airlock/registry"
)

// ServeOptions are what Serve needs besides the Config.
type ServeOptions struct {
	// Implementations are extra capabilities bound with the built-in ones (a team's Go code);
	// their entries come from the registry files and layers the Config names.
	Implementations []registry.Implementation
	// MetricsAddr, when set, serves /metrics (the SDK's and Airlock's) and /healthz there
	// (AIRLOCK_METRICS_ADDR; port 0 picks one, reported through Ready).
	MetricsAddr string
	// Status receives the start-up lines ("worker polling …"); nil discards them.
	Status io.Writer
	// Log receives reload and watcher events; nil logs to Status at info level.
	Log *slog.Logger
	// Ready, when set, is called once the worker polls, with what it serves.
	Ready func(ServeInfo)
	// Service is the OpenTelemetry service name when traces are exported (default
	// "airlock-worker").
	Service string
}

// ServeInfo describes a worker that started polling.
type ServeInfo struct {
	TaskQueue    string
	Revision     string
	Capabilities int
	Store        string
	// MetricsAddr is the bound /metrics and /healthz address ("" when not served).
	MetricsAddr string
}

// Serve builds and runs one turn worker until ctx ends: the store, the registry (built-in and
// opts' implementations, fail closed), the worker's deployment version (VersioningFromEnv:
// AIRLOCK_DEPLOYMENT, AIRLOCK_BUILD_ID, AIRLOCK_PROMOTE), tracing (OTLP when OTEL_EXPORTER_OTLP_* is set, the
// Temporal tracing interceptor always), metrics, the Temporal client from the environment, the
// worker on cfg.TaskQueue, live registry reload, and /metrics and /healthz on opts.MetricsAddr.
// `airlock worker` and a team's own worker binary (package airlockworker) both run this, so
// they serve alike. It returns nil when ctx ends, or the first error that stopped it.
func Serve(ctx context.Context, cfg config.Config, opts ServeOptions) error {
	status := opts.Status
	if status == nil {
		status = io.Discard
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(status, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	service := opts.Service
	if service == "" {
		service = "airlock-worker"
	}
	var c client.Client // set before the worker starts; the probe runs only from activities
	probe := func(ctx context.Context) error {
		if c == nil {
			return errors.New("not connected to Temporal yet")
		}
		_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}
	version, err := VersioningFromEnv(cfg.TaskQueue)
	if err != nil {
		return err
	}
	deps, err := BuildWith(ctx, cfg, probe, opts.Implementations)
	if err != nil {
		return err
	}
	defer deps.Close()
	defer CloseMCP() // stop the stdio MCP servers this worker started (workers/mcp.go)
	// Which model this worker asks, said once at start (issue 31 item 3): a wrong provider,
	// API or model shows here, not in a turn's first round.
	log.Info("live model", "serves", DescribeProvider(deps.Activities.Live))
	shutdownTraces, exporting, err := telemetry.InstallOTLPTracing(ctx, service)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTraces(context.Background()) }()
	metrics, err := telemetry.NewMetrics(telemetry.PendingFromStore(deps.Store))
	if err != nil {
		return err
	}
	defer metrics.Shutdown(context.Background())
	tracing, err := telemetry.TracingInterceptor()
	if err != nil {
		return err
	}
	c, err = config.DialTemporalWith(ctx, func(o *client.Options) {
		o.MetricsHandler = metrics.SDKHandler()
		o.Interceptors = append(o.Interceptors, tracing, metrics.Interceptor(deps.Store))
	})
	if err != nil {
		return err
	}
	defer c.Close()
	w := NewVersioned(c, deps.Activities, cfg.TaskQueue, version)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	wctx, stopWatch := context.WithCancel(ctx)
	if !version.Off {
		// Deploy traps (workers/diagnose.go): said in this worker's log while it runs.
		diagnosed := make(chan struct{})
		go func() { defer close(diagnosed); WatchVersioning(wctx, c, version, cfg.TaskQueue, log) }()
		defer func() { stopWatch(); <-diagnosed }()
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if err := WatchRegistry(wctx, deps, cfg.Home, log); err != nil {
			log.Error("registry watcher stopped", "error", err)
		}
	}()
	defer func() { stopWatch(); <-watched }()
	// Turns terminated from outside leave nothing pending (issue 20 item 4).
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		RunSweeper(wctx, c, deps.Activities, SweepInterval, log)
	}()
	defer func() { stopWatch(); <-swept }()
	rcfg, err := ReceiptsConfigFromEnv()
	if err != nil {
		return err
	}
	if rcfg.Active() {
		// Receipts checkpoints published, retention applied (issue 36): beside the worker.
		kept := make(chan struct{})
		go func() { defer close(kept); RunReceipts(wctx, deps.Store, rcfg, log) }()
		defer func() { stopWatch(); <-kept }()
		fmt.Fprintf(status, "worker: receipts checkpoints to %v every %s; retention audit %s, streams %s\n", rcfg.Publish, rcfg.Every, rcfg.AuditRetention, rcfg.StreamsRetention)
	}
	if deps.Notify != nil {
		// Approver notices (issue 23): delivered beside the worker, never inside a turn.
		nm := notify.NewMetrics(deps.Store)
		for _, c := range nm.Collectors() {
			if err := metrics.Registry.Register(c); err != nil {
				return fmt.Errorf("notice metrics: %w", err)
			}
		}
		notified := make(chan struct{})
		go func() { defer close(notified); RunNotices(wctx, deps, log, nm) }()
		defer func() { stopWatch(); <-notified }()
		fmt.Fprintf(status, "worker: delivering approver notices of %s\n", deps.Notify.Path())
	}
	fmt.Fprintf(status, "worker polling task queue %s as %s (promote %s; registry %s: %d capabilities; store %s; reloads on change of %v and on SIGHUP)\n",
		cfg.TaskQueue, version, version.Promote, deps.Registry.Revision(), len(deps.Registry.Capabilities()), deps.Store.Driver(), deps.Watched)
	if exporting {
		fmt.Fprintln(status, "worker: exporting traces over OTLP (OTEL_EXPORTER_OTLP_*)")
	}
	info := ServeInfo{TaskQueue: cfg.TaskQueue, Revision: deps.Registry.Revision(), Capabilities: len(deps.Registry.Capabilities()), Store: deps.Store.Driver()}
	if opts.MetricsAddr == "" {
		if opts.Ready != nil {
			opts.Ready(info)
		}
		<-ctx.Done()
		return nil
	}
	// /healthz: this worker's Temporal connection and store answer.
	h := telemetry.Handler(metrics.Handler(),
		telemetry.Check{Name: "temporal", Probe: probe},
		telemetry.Check{Name: "store", Probe: deps.Store.Ping})
	bound := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- telemetry.Serve(ctx, opts.MetricsAddr, h, bound) }()
	select {
	case addr := <-bound:
		info.MetricsAddr = addr
		fmt.Fprintf(status, "worker: /metrics and /healthz on http://%s\n", addr)
		if opts.Ready != nil {
			opts.Ready(info)
		}
		return <-errc
	case err := <-errc:
		return err
	}
}
