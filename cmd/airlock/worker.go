package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/telemetry"
	"github.com/airlock-dev/airlock/workers"
)

func newWorkerCmd() *cobra.Command {
	var layers []string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the turn worker (workflows and activities on task queue airlock-turns)",
		Long: `Run the turn worker until interrupted. It loads the capability registry first and refuses to
start, with a diagnostic, if the registry is missing, malformed or inconsistent (an entry
without an implementation, an implementation without an entry).

Worker Versioning: the worker runs as version <deployment>:<build id> of a Temporal worker
deployment. A turn is pinned to the build it started on; agent proposals move to the current
build. AIRLOCK_DEPLOYMENT names the deployment (default: the task queue), AIRLOCK_BUILD_ID the
build (default: git-<commit> for a clean checkout's build, else bin-<digest of the executable>).
AIRLOCK_PROMOTE says when the build becomes current, the one new turns start on: auto (default:
when the server first saw it after the current build, so an old build restarting never takes
new turns back), always, or never (the operator runs temporal worker deployment
set-current-version). AIRLOCK_WORKER_VERSIONING=off runs unversioned, for servers before
v1.29. README "Deploying a new version" describes the procedure.`,
		Example: `  airlock worker
  airlock worker --layers agentdojo-banking,agentdojo-workspace
  AIRLOCK_DATABASE_URL=postgres://airlock:airlock@127.0.0.1/airlock airlock worker`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("layers") {
				cfg.Layers = layers
			}
			return runWorker(cmd.Context(), cmd, nil)
		},
	}
	cmd.Flags().StringSliceVar(&layers, "layers", cfg.Layers, "registry layers to load on top of the base registry (AIRLOCK_REGISTRY_LAYERS)")
	return cmd
}

// runWorker runs a worker until ctx ends. ready, if set, is closed once the worker polls.
// With AIRLOCK_METRICS_ADDR it serves /metrics (the SDK's and Airlock's) and /healthz there.
func runWorker(ctx context.Context, cmd *cobra.Command, ready chan<- struct{}) error {
	var c client.Client // set before the worker starts; the probe runs only from activities
	probe := func(ctx context.Context) error {
		if c == nil {
			return errors.New("not connected to Temporal yet")
		}
		_, err := c.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}
	version, err := workers.VersioningFromEnv(cfg.TaskQueue)
	if err != nil {
		return err
	}
	deps, err := workers.Build(ctx, cfg, probe)
	if err != nil {
		return err
	}
	defer deps.Close()
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
	w := workers.NewVersioned(c, deps.Activities, cfg.TaskQueue, version)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
		if err := workers.WatchRegistry(wctx, deps, cfg.Home, log); err != nil {
			log.Error("registry watcher stopped", "error", err)
		}
	}()
	defer func() { stopWatch(); <-watched }()
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
		workers.RunSweeper(wctx, c, deps.Activities, workers.SweepInterval, log)
	}()
	defer func() { stopWatch(); <-swept }()
	fmt.Fprintf(cmd.ErrOrStderr(), "worker polling task queue %s as %s (promote %s; registry %s: %d capabilities; store %s; reloads on change of %v and on SIGHUP)\n",
		cfg.TaskQueue, version, version.Promote, deps.Registry.Revision(), len(deps.Registry.Capabilities()), deps.Store.Driver(), deps.Watched)
	if ready != nil {
		close(ready)
	}
	if addr := os.Getenv("AIRLOCK_METRICS_ADDR"); addr != "" {
		// /healthz: this worker's Temporal connection and store answer.
		h := telemetry.Handler(metrics.Handler(),
			telemetry.Check{Name: "temporal", Probe: probe},
			telemetry.Check{Name: "store", Probe: deps.Store.Ping})
		fmt.Fprintf(cmd.ErrOrStderr(), "worker: /metrics and /healthz on http://%s\n", addr)
		return telemetry.Serve(ctx, addr, h, nil)
	}
	<-ctx.Done()
	return nil
}
