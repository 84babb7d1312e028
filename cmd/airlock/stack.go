package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/workflows"
)

// localTarget is where the local stack lives: TEMPORAL_ADDRESS when it is set (issue 20 item
// 6: `make run` and `airlock stack up` honour it instead of always using 7233), else
// 127.0.0.1:7233. remote is set for an address that is not a loopback one: airlock starts dev
// servers only on loopback and uses any other server as it is.
type localTarget struct {
	address string
	port    int
	remote  bool
}

// stackPorts are the local dev server's ports as the flags set them (0: not set): gRPC
// (--temporal-port), Web UI, HTTP API and metrics. Each falls back on its environment variable
// (TEMPORAL_ADDRESS, AIRLOCK_TEMPORAL_UI_PORT, AIRLOCK_TEMPORAL_HTTP_PORT,
// AIRLOCK_TEMPORAL_METRICS_PORT), then on a default derived from the gRPC port (stackPortsFor).
var stackPorts struct{ grpc, ui, http, metrics int }

// addStackPortFlags defines the port flags of every command that may start the local stack.
func addStackPortFlags(pf *pflag.FlagSet) {
	pf.IntVar(&stackPorts.grpc, "temporal-port", 0, "local Temporal dev server's gRPC port on 127.0.0.1 (TEMPORAL_ADDRESS; default 7233)")
	pf.IntVar(&stackPorts.ui, "temporal-ui-port", 0, "its Web UI port, -1 for none (AIRLOCK_TEMPORAL_UI_PORT; default gRPC port + 1000: 8233)")
	pf.IntVar(&stackPorts.http, "temporal-http-port", 0, "its HTTP API port (AIRLOCK_TEMPORAL_HTTP_PORT; default gRPC port + 10: 7243)")
	pf.IntVar(&stackPorts.metrics, "temporal-metrics-port", 0, "its /metrics port (AIRLOCK_TEMPORAL_METRICS_PORT; default gRPC port + 11: 7244)")
}

// stackPortsFor returns the Web UI, HTTP and metrics ports of a dev server on gRPC port: the
// flag, else the environment variable, else the default (the Temporal CLI's rule for the UI,
// gRPC + 1000; gRPC + 10 and + 11 for HTTP and metrics; a free port when out of range).
func stackPortsFor(port int) (ui, http, metrics int, err error) {
	pick := func(flag int, env string, offset int, min int) (int, error) {
		if flag != 0 {
			if flag < min || flag > 65535 {
				return 0, fmt.Errorf("--%s %d is not a port", strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "AIRLOCK_"), "_", "-")), flag)
			}
			return flag, nil
		}
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < min || n > 65535 || n == 0 {
				return 0, fmt.Errorf("%s %q is not a port", env, v)
			}
			return n, nil
		}
		if port+offset <= 65535 {
			return port + offset, nil
		}
		return 0, nil
	}
	if ui, err = pick(stackPorts.ui, "AIRLOCK_TEMPORAL_UI_PORT", 1000, stack.Headless); err != nil {
		return
	}
	if http, err = pick(stackPorts.http, "AIRLOCK_TEMPORAL_HTTP_PORT", 10, 1); err != nil {
		return
	}
	metrics, err = pick(stackPorts.metrics, "AIRLOCK_TEMPORAL_METRICS_PORT", 11, 1)
	return
}

// stackTarget reads --temporal-port and TEMPORAL_ADDRESS. Errors: an address that is not
// host:port, a flag that names another port than TEMPORAL_ADDRESS.
func stackTarget() (localTarget, error) {
	addr := os.Getenv("TEMPORAL_ADDRESS")
	if p := stackPorts.grpc; p != 0 {
		if p < 1 || p > 65535 {
			return localTarget{}, fmt.Errorf("--temporal-port %d is not a port", p)
		}
		flagAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		if addr != "" && addr != flagAddr {
			return localTarget{}, fmt.Errorf("--temporal-port %d and TEMPORAL_ADDRESS %q disagree", p, addr)
		}
		os.Setenv("TEMPORAL_ADDRESS", flagAddr) // this process's Temporal client follows the flag
		return localTarget{address: flagAddr, port: p}, nil
	}
	if addr == "" {
		return localTarget{address: net.JoinHostPort("127.0.0.1", strconv.Itoa(stack.DefaultPort)), port: stack.DefaultPort}, nil
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return localTarget{}, fmt.Errorf("TEMPORAL_ADDRESS %q is not host:port: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return localTarget{}, fmt.Errorf("TEMPORAL_ADDRESS %q: port %q is not in 1..65535", addr, portText)
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		loopback = true
	}
	return localTarget{address: addr, port: port, remote: !loopback}, nil
}

func temporalOptions(cmd *cobra.Command, target localTarget) (stack.TemporalOptions, error) {
	o := stack.DefaultTemporalOptions()
	ui, http, metrics, err := stackPortsFor(target.port)
	if err != nil {
		return o, err
	}
	o.Port, o.UIPort, o.HTTPPort, o.MetricsPort = target.port, ui, http, metrics
	if ns := os.Getenv("TEMPORAL_NAMESPACE"); ns != "" {
		o.Namespace = ns
	}
	o.Dir = cfg.Home
	o.Detached = true
	o.SearchAttributes = workflows.SearchAttributes()
	o.Log = cmd.ErrOrStderr()
	return o, nil
}

// ensureStack starts (or reuses) the detached local Temporal dev server and points this
// process's Temporal client at it.
func ensureStack(cmd *cobra.Command) (*stack.Temporal, error) { return ensureStackLog(cmd, false) }

// ensureStackLog is ensureStack; quiet drops its progress lines (errors still return).
func ensureStackLog(cmd *cobra.Command, quiet bool) (*stack.Temporal, error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
	defer cancel()
	target, err := stackTarget()
	if err != nil {
		return nil, err
	}
	if target.remote {
		// Not a server airlock could start: use it as it is (never changed; doctor and
		// `airlock cluster init` check and prepare it).
		if err := stack.Status(ctx, target.address); err != nil {
			return nil, fmt.Errorf("TEMPORAL_ADDRESS names %s, which does not answer (airlock starts a dev server only on a loopback address): %w", target.address, err)
		}
		if !quiet {
			fmt.Fprintf(cmd.ErrOrStderr(), "using Temporal at %s (TEMPORAL_ADDRESS; not started by airlock, left as it is)\n", target.address)
		}
		return &stack.Temporal{Address: target.address, Namespace: envOr("TEMPORAL_NAMESPACE", stack.DefaultNamespace)}, nil
	}
	o, err := temporalOptions(cmd, target)
	if err != nil {
		return nil, err
	}
	if quiet {
		o.Log = io.Discard
	}
	t, err := stack.EnsureTemporal(ctx, o)
	if err != nil {
		return nil, err
	}
	if os.Getenv("TEMPORAL_ADDRESS") == "" {
		os.Setenv("TEMPORAL_ADDRESS", t.Address)
	}
	if t.UIAddress != "" && os.Getenv("AIRLOCK_TEMPORAL_UI") == "" {
		cfg.TemporalUI = t.UIAddress
	}
	return t, nil
}

func newStackCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stack",
		Short: "Start, stop or check the local Temporal dev server (state under --home)",
		Long: `Manage the zero-setup local Temporal: the Temporal CLI's dev server (bin/temporal, built by
make temporal), SQLite in WAL mode under --home, with Airlock's search attributes registered. It
runs detached and outlives the command. Its ports, all on 127.0.0.1, are configured: gRPC 7233
(--temporal-port or TEMPORAL_ADDRESS), Web UI gRPC + 1000 (--temporal-ui-port,
AIRLOCK_TEMPORAL_UI_PORT), HTTP API gRPC + 10 (--temporal-http-port, AIRLOCK_TEMPORAL_HTTP_PORT),
/metrics gRPC + 11 (--temporal-metrics-port, AIRLOCK_TEMPORAL_METRICS_PORT); make run (airlock
dev) starts it the same way.

A server already answering there that airlock did not start under this --home is used as it is,
never changed: if it lacks the namespace (TEMPORAL_NAMESPACE) or Airlock's search attributes,
the command says so and stops (airlock cluster init registers them). A TEMPORAL_ADDRESS that is
not a loopback address is never started, only used.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "up",
		Example: "  airlock stack up\n  airlock --home /tmp/airlock stack up",
		Short:   "Start the local Temporal dev server if it is not already answering",
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := ensureStack(cmd)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Temporal at %s, Web UI %s\n", t.Address, t.UIAddress)
			if t.HTTPAddress != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "HTTP API at %s, metrics at http://%s/metrics\n", t.HTTPAddress, t.MetricsAddress)
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "down",
		Short: "Stop the detached local Temporal dev server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := stack.StopDetached(cfg.Home)
			if errors.Is(err, stack.ErrNotRunning) {
				fmt.Fprintln(cmd.OutOrStdout(), "not running")
				return nil
			}
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "stopped")
			}
			return err
		},
	}, &cobra.Command{
		Use:   "status",
		Short: "Say whether the local Temporal dev server answers",
		RunE: func(cmd *cobra.Command, _ []string) error {
			target, err := stackTarget()
			if err != nil {
				return err
			}
			addr := target.address
			if err := stack.Status(cmd.Context(), addr); err != nil {
				return fmt.Errorf("no Temporal server answers at %s: %w", addr, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Temporal at %s answers\n", addr)
			return nil
		},
	})
	return cmd
}
