package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

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

// stackTarget reads TEMPORAL_ADDRESS. Errors: an address that is not host:port.
func stackTarget() (localTarget, error) {
	addr := os.Getenv("TEMPORAL_ADDRESS")
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

// uiPortFor is the Web UI port of a dev server on port: Temporal CLI's own rule (gRPC port +
// 1000, so 7233 → 8233), or a free port when that is out of range.
func uiPortFor(port int) int {
	if port+1000 <= 65535 {
		return port + 1000
	}
	return 0
}

func temporalOptions(cmd *cobra.Command, target localTarget) stack.TemporalOptions {
	o := stack.DefaultTemporalOptions()
	o.Port, o.UIPort = target.port, uiPortFor(target.port)
	if ns := os.Getenv("TEMPORAL_NAMESPACE"); ns != "" {
		o.Namespace = ns
	}
	o.Dir = cfg.Home
	o.Detached = true
	o.SearchAttributes = workflows.SearchAttributes()
	o.Log = cmd.ErrOrStderr()
	return o
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
	o := temporalOptions(cmd, target)
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
make temporal), SQLite in WAL mode under --home, gRPC on 127.0.0.1:7233 and Web UI on :8233, or
on the loopback port TEMPORAL_ADDRESS names (Web UI on that port + 1000), with Airlock's search
attributes registered. It runs detached and outlives the command.

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
