package airlockworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/internal/capabilities"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
)

// Run builds a turn worker with impls bound beside the built-in capabilities and runs it until
// ctx ends, exactly as `airlock worker` does (the same code, workers.Serve): the registry is
// loaded and every gate applied first (an entry without an implementation, an implementation
// without an entry, a missing destination or secret stop it with a *registry.LoadError or an
// error naming what to set); it reloads live when a registry, policy or layer file changes and
// on SIGHUP, serves /metrics and /healthz on MetricsAddr, traces through Temporal's
// OpenTelemetry interceptor and exports traces over OTLP when OTEL_EXPORTER_OTLP_* is set.
// It returns nil when ctx ends.
func Run(ctx context.Context, opts Options, impls ...registry.Implementation) error {
	status := opts.Status
	if status == nil {
		status = os.Stderr
	}
	return workers.Serve(ctx, opts.config(), workers.ServeOptions{
		Implementations: impls, MetricsAddr: opts.MetricsAddr, Status: status, Log: opts.Logger, Service: opts.Service,
		Ready: func(i workers.ServeInfo) {
			if opts.Ready != nil {
				opts.Ready(Info{TaskQueue: i.TaskQueue, Revision: i.Revision, Capabilities: i.Capabilities, Store: i.Store, MetricsAddr: i.MetricsAddr})
			}
		},
	})
}

// Check loads the registry exactly as Run would before serving (documents, layers, policies,
// destinations, HTTP declarations and their secrets, impls bound) without a store or Temporal,
// and returns it. Failures are a *registry.LoadError listing every diagnostic (errors.Is
// registry.ErrInvalid) or an error naming what to configure.
func Check(opts Options, impls ...registry.Implementation) (*registry.Registry, error) {
	return workers.LoadRegistryWith(opts.config(), nil, nil, nil, impls)
}

// Main is a worker binary's whole main function: "run" (or no argument) runs the worker with
// OptionsFromEnv until SIGINT or SIGTERM; "check" loads the registry (Check) and prints every
// diagnostic; "help" says so. It exits the process: 0 on success, 1 on failure, 2 on a usage
// error.
func Main(impls ...registry.Implementation) {
	os.Exit(main(os.Args[1:], os.Stdout, os.Stderr, impls))
}

func main(args []string, stdout, stderr io.Writer, impls []registry.Implementation) int {
	cmd := "run"
	if len(args) > 0 {
		cmd = args[0]
	}
	if len(args) > 1 {
		fmt.Fprintf(stderr, "%s takes no arguments (configure it with AIRLOCK_* variables)\n", cmd)
		return 2
	}
	opts := OptionsFromEnv()
	switch cmd {
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		opts.Status = stderr
		if err := Run(ctx, opts, impls...); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		return 0
	case "check":
		start := time.Now()
		reg, err := Check(opts, impls...)
		if err != nil {
			var le *registry.LoadError
			if errors.As(err, &le) {
				for _, d := range le.Diagnostics {
					fmt.Fprintln(stderr, d.String())
				}
				fmt.Fprintf(stderr, "check: %d problems\n", len(le.Diagnostics))
				return 1
			}
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		fmt.Fprintf(stdout, "ok: registry %s, %d capabilities, loaded and bound in %s\n", reg.Revision(), len(reg.Capabilities()), time.Since(start).Round(time.Microsecond))
		for _, c := range reg.Capabilities() {
			d := c.DestinationOf()
			fmt.Fprintf(stdout, "  %s (tool %s): side effect %s, network %s, destination %s %s %v\n", c.Key(), c.Airlock.ToolName, c.Airlock.SideEffect, c.Airlock.Network, d.Kind, d.Name, d.Fields)
		}
		return 0
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: WORKER [run|check]\n  run    run the turn worker until interrupted (default)\n  check  load the registry as the worker would and print every diagnostic\nconfigured by the AIRLOCK_* variables of `airlock worker` and TEMPORAL_* (see docs/operators.md)")
		return 0
	}
	fmt.Fprintf(stderr, "unknown command %q (run, check, help)\n", cmd)
	return 2
}

// IdempotencyKey is the proposal's idempotency key for a capability's own request to its
// system: "airlock-" and 32 hex digits, the same on every attempt for one proposal (turn
// workflow id and proposal sequence of inv) and different for every other. HTTP capabilities
// declared in the registry send the same value in their idempotency/header.
func IdempotencyKey(inv registry.Invocation) string {
	return capabilities.IdempotencyKey(inv.WorkflowID, inv.Seq)
}
