package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/workers"
)

func newDeployCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "See and steer Worker Versioning: which build new turns start on, which builds run, which turns wait",
		Long: `A turn is pinned to the worker build it started on; new turns start on the deployment's
current build. Deploying a new build (docs/operators.md, "Deploying a new version"; scripts/deploy.sh):

  1. start workers of the new build beside the old ones (AIRLOCK_PROMOTE=never keeps it off
     until you promote it);
  2. airlock deploy promote NEW     new turns start on it (refused while no worker of it polls);
  3. airlock deploy wait-drained OLD   until no running turn is pinned to the old build;
  4. stop the old workers.
Rollback: airlock deploy promote OLD (while its workers still run), or airlock deploy rollback.

status lists every build with its workers, pinned turns and drainage, and exits 1 when new
turns or pinned turns wait for a build no worker runs.`,
	}
	cmd.AddCommand(newDeployStatusCmd(), newDeployPromoteCmd(), newDeployRollbackCmd(), newDeployWaitDrainedCmd())
	return cmd
}

// deployTarget is the deployment and namespace the process's configuration names, and a client.
func deployTarget(ctx context.Context) (client.Client, string, workers.Versioning, error) {
	v, err := workers.VersioningFromEnv(cfg.TaskQueue)
	if err != nil {
		return nil, "", v, err
	}
	if v.Off {
		return nil, "", v, errors.New("worker versioning is off (AIRLOCK_WORKER_VERSIONING=off): there are no builds to steer")
	}
	o, err := config.TemporalOptions()
	if err != nil {
		return nil, "", v, err
	}
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return nil, "", v, err
	}
	return c, o.Namespace, v, nil
}

// printDiagnosis writes the builds table and the problems.
func printDiagnosis(w io.Writer, d workers.VersioningDiagnosis) {
	fmt.Fprintf(w, "deployment %s, task queue %s\n", d.Deployment, d.TaskQueue)
	fmt.Fprintf(w, "%-28s %-9s %-8s %-7s %s\n", "BUILD", "ROUTING", "WORKERS", "PINNED", "DRAINAGE")
	for _, v := range d.Versions {
		routing := ""
		switch {
		case v.Current:
			routing = "current"
		case v.Ramping:
			routing = "ramping"
		}
		fmt.Fprintf(w, "%-28s %-9s %-8d %-7d %s\n", v.BuildID, routing, v.Pollers, v.Pinned, v.Drainage)
	}
	if d.Unversioned > 0 {
		fmt.Fprintf(w, "%d unversioned worker(s) poll the task queue too\n", d.Unversioned)
	}
	for _, p := range d.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n  run: %s\n", p.What, p.Fix)
	}
}

func newDeployStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Every build of the deployment: current or ramping, workers polling, turns pinned, drainage; exit 1 on a stranded build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, v, err := deployTarget(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			d, err := workers.DiagnoseVersioning(cmd.Context(), c, ns, v.Deployment, cfg.TaskQueue, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(d); err != nil {
					return err
				}
			} else {
				printDiagnosis(cmd.OutOrStdout(), d)
			}
			if len(d.Problems) > 0 {
				return fmt.Errorf("%d problem(s): turns wait for a build no worker runs", len(d.Problems))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (snake_case)")
	return cmd
}

// setCurrent makes build the deployment's current version, refusing a build no worker runs
// (new turns would wait) unless force.
func setCurrent(ctx context.Context, w io.Writer, c client.Client, ns string, v workers.Versioning, build string, force bool) error {
	d, err := workers.DiagnoseVersioning(ctx, c, ns, v.Deployment, cfg.TaskQueue, time.Now())
	if err != nil {
		return err
	}
	found := false
	for _, s := range d.Versions {
		if s.BuildID == build {
			found = true
			if s.Pollers == 0 && !force {
				return fmt.Errorf("no worker of build %s polls task queue %s: new turns would wait; start one first (AIRLOCK_BUILD_ID=%s airlock worker), or pass --force", build, cfg.TaskQueue, build)
			}
		}
	}
	if !found {
		return fmt.Errorf("deployment %s has no build %s (airlock deploy status lists them)", v.Deployment, build)
	}
	h := c.WorkerDeploymentClient().GetHandle(v.Deployment)
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return err
	}
	if _, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build, ConflictToken: desc.ConflictToken}); err != nil {
		return fmt.Errorf("make %s current: %w", build, err)
	}
	fmt.Fprintf(w, "new turns on %s now start on build %s (was %s)\n", cfg.TaskQueue, build, orUnversioned(d.Current))
	return nil
}

func orUnversioned(s string) string {
	if s == "" {
		return "unversioned workers"
	}
	return s
}

func newDeployPromoteCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "promote BUILD",
		Short: "Make BUILD the current version: new turns start on it (refused while no worker of it polls)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, v, err := deployTarget(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			return setCurrent(cmd.Context(), cmd.OutOrStdout(), c, ns, v, args[0], force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "promote even when no worker of the build polls")
	return cmd
}

func newDeployRollbackCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rollback",
		Short: "Make the newest other build that has workers current again (the build before a deploy, while its workers run)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, ns, v, err := deployTarget(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			desc, err := c.WorkerDeploymentClient().GetHandle(v.Deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
			if err != nil {
				return err
			}
			d, err := workers.DiagnoseVersioning(ctx, c, ns, v.Deployment, cfg.TaskQueue, time.Now())
			if err != nil {
				return err
			}
			polled := map[string]bool{}
			for _, s := range d.Versions {
				polled[s.BuildID] = s.Pollers > 0
			}
			var target string
			var newest time.Time
			for _, s := range desc.Info.VersionSummaries {
				if b := s.Version.BuildID; b != d.Current && polled[b] && s.CreateTime.After(newest) {
					target, newest = b, s.CreateTime
				}
			}
			if target == "" {
				return fmt.Errorf("no other build of deployment %s has a running worker to roll back to: start one (AIRLOCK_BUILD_ID=<build> airlock worker), then run this again", v.Deployment)
			}
			return setCurrent(ctx, cmd.OutOrStdout(), c, ns, v, target, false)
		},
	}
}

func newDeployWaitDrainedCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait-drained BUILD",
		Short: "Wait until no running turn is pinned to BUILD (then its workers may stop); progress every 10 s",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			c, ns, v, err := deployTarget(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			build := args[0]
			last := time.Time{}
			for {
				d, err := workers.DiagnoseVersioning(ctx, c, ns, v.Deployment, cfg.TaskQueue, time.Now())
				if err != nil {
					return err
				}
				pinned, current := 0, d.Current == build
				for _, s := range d.Versions {
					if s.BuildID == build {
						pinned = s.Pinned
					}
				}
				if current {
					return fmt.Errorf("build %s is still current: promote the new build first (airlock deploy promote NEW)", build)
				}
				if pinned == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "build %s is drained: no running turn is pinned to it; its workers may stop\n", build)
					return nil
				}
				if time.Since(last) >= 10*time.Second {
					fmt.Fprintf(cmd.ErrOrStderr(), "waiting: %d running turn(s) pinned to build %s (turns waiting for an approver end when decided or expired)\n", pinned, build)
					last = time.Now()
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("build %s still has %d pinned turn(s) after %s: keep its workers running (%s)", build, pinned, timeout, strings.TrimSpace(ctx.Err().Error()))
				case <-time.After(2 * time.Second):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	return cmd
}

// warnStranded prints the deploy diagnosis's problems after a turn starts: a new turn on a
// current build no worker runs would otherwise wait in silence. Best effort: a diagnosis that
// fails or takes over 3 s prints nothing.
func warnStranded(ctx context.Context, w io.Writer, c client.Client, namespace string) {
	v, err := workers.VersioningFromEnv(cfg.TaskQueue)
	if err != nil || v.Off {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	d, err := workers.DiagnoseVersioning(ctx, c, namespace, v.Deployment, cfg.TaskQueue, time.Now())
	if err != nil {
		return
	}
	for _, p := range d.Problems {
		fmt.Fprintf(w, "  WARNING: %s\n    run: %s\n", p.What, p.Fix)
	}
}
