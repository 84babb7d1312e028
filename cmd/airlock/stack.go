package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/workflows"
)

func temporalOptions(cmd *cobra.Command) stack.TemporalOptions {
	o := stack.DefaultTemporalOptions()
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
	o := temporalOptions(cmd)
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
make temporal), SQLite in WAL mode under --home, gRPC on 127.0.0.1:7233, Web UI on :8233, with
Airlock's search attributes registered. It runs detached and outlives the command.`,
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
			addr := fmt.Sprintf("127.0.0.1:%d", stack.DefaultPort)
			if err := stack.Status(cmd.Context(), addr); err != nil {
				return fmt.Errorf("no Temporal server answers at %s: %w", addr, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Temporal at %s answers\n", addr)
			return nil
		},
	})
	return cmd
}
