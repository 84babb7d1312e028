package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

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
v1.29. docs/operators.md, "Deploying a new version", describes the procedure.`,
		Example: `  airlock worker
  airlock worker --layers agentdojo-banking,agentdojo-workspace
  airlock worker --layers /etc/airlock/tickets.v1.json
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 airlock worker
  AIRLOCK_DATABASE_URL=postgres://airlock:airlock@127.0.0.1/airlock airlock worker`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("layers") {
				cfg.Layers = layers
			}
			return runWorker(cmd.Context(), cmd, nil)
		},
	}
	cmd.Flags().StringSliceVar(&layers, "layers", cfg.Layers, "registry layers to load on top of the base registry (AIRLOCK_REGISTRY_LAYERS): embedded names, or layer files LAYER.json (policy beside it as LAYER.policy.json) or LAYER.json=POLICY.json")
	return cmd
}

// runWorker runs a worker until ctx ends (workers.Serve). ready, if set, is closed once the
// worker polls. With AIRLOCK_METRICS_ADDR it serves /metrics (the SDK's and Airlock's) and
// /healthz there; with OTEL_EXPORTER_OTLP_* set it exports traces over OTLP.
func runWorker(ctx context.Context, cmd *cobra.Command, ready chan<- struct{}) error {
	return workers.Serve(ctx, cfg, workers.ServeOptions{
		MetricsAddr: os.Getenv("AIRLOCK_METRICS_ADDR"),
		Status:      cmd.ErrOrStderr(),
		Ready: func(workers.ServeInfo) {
			if ready != nil {
				close(ready)
			}
		},
	})
}
