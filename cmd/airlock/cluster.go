package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workflows"
)

// Cluster topology of `airlock cluster up` besides Temporal's own ports (stack.ClusterPorts):
// two Airlock workers, each with its /metrics and /healthz, and the approver page. docker/
// compose.yaml publishes the same ports (a test keeps them in step).
const (
	clusterWorkers        = 2
	clusterWorkerHTTPBase = 19101 // worker n serves /metrics and /healthz on 19100+n
	clusterWebAddr        = "127.0.0.1:18780"
	// clusterStoreURL is the Airlock store of the cluster's workers and page when
	// AIRLOCK_DATABASE_URL is unset: the database scripts/ensure-cluster-postgres.sh creates.
	clusterStoreURL = "postgres://airlock:airlock@127.0.0.1:5432/airlock?sslmode=disable"
)

// ClusterAirlockEnv names the variables the cluster sets for every Airlock process (workers and
// the approver page); docker/compose.yaml configures its Airlock services with the same names.
var ClusterAirlockEnv = []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "AIRLOCK_HOME", "AIRLOCK_DATABASE_URL",
	"AIRLOCK_APPROVERS", "AIRLOCK_APPROVER_KEY_FILE", "AIRLOCK_TASK_QUEUE", "AIRLOCK_TEMPORAL_UI", "AIRLOCK_LOG_FORMAT"}

func clusterDir() string {
	if d := os.Getenv("AIRLOCK_CLUSTER_DIR"); d != "" {
		return d
	}
	return filepath.Join(cfg.Home, "cluster")
}

// clusterSQL reads the Temporal databases' connection from the environment: TEMPORAL_SQL_HOST,
// TEMPORAL_SQL_PORT, TEMPORAL_SQL_USER and the password from TEMPORAL_SQL_PASSWORD_FILE or
// TEMPORAL_SQL_PASSWORD (never a flag); defaults are those of scripts/ensure-cluster-postgres.sh.
func clusterSQL() (stack.SQLOptions, error) {
	o := stack.SQLOptions{Host: os.Getenv("TEMPORAL_SQL_HOST"), User: os.Getenv("TEMPORAL_SQL_USER"), Password: "temporal"}
	if p := os.Getenv("TEMPORAL_SQL_PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return o, fmt.Errorf("TEMPORAL_SQL_PORT=%q is not a port", p)
		}
		o.Port = n
	}
	pw, err := secretFromEnv("TEMPORAL_SQL_PASSWORD")
	if err != nil {
		return o, err
	}
	if pw != "" {
		o.Password = pw
	}
	return o, nil
}

// secretFromEnv reads a secret from the file NAME_FILE names, else from NAME; "" when neither
// is set. Trailing newlines of the file are dropped.
func secretFromEnv(name string) (string, error) {
	if f := os.Getenv(name + "_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", name, err)
		}
		for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
			b = b[:len(b)-1]
		}
		return string(b), nil
	}
	return os.Getenv(name), nil
}

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start, stop or check the local production topology (Temporal server on PostgreSQL, its UI, two workers, the approver page)",
		Long: `Run on this machine the topology of a production install: the Temporal server ` + stack.TemporalServerVersion + `
(built by make cluster-bin) with persistence and SQL visibility on PostgreSQL 15, its four
services (history, matching, frontend, worker) as separate processes with membership between
them, each with its own Prometheus metrics port; the Temporal Web UI; two Airlock workers; the
approver page. Schemas are set up and upgraded by Temporal's schema tool.

Ports (loopback; Temporal's standard ports plus 10000, so it runs beside the dev server of make
run): frontend 17233 (HTTP 17243), history 17234, matching 17235, worker 17239; membership
16933-16939; service metrics 18001-18004; UI 18080; Airlock workers' /metrics and /healthz
19101, 19102; approver page 18780. State, config and logs in $AIRLOCK_HOME/cluster
(AIRLOCK_CLUSTER_DIR).

PostgreSQL: scripts/ensure-cluster-postgres.sh prepares the local server (role temporal,
database airlock). Elsewhere set TEMPORAL_SQL_HOST, TEMPORAL_SQL_PORT, TEMPORAL_SQL_USER and
TEMPORAL_SQL_PASSWORD_FILE (or TEMPORAL_SQL_PASSWORD), and AIRLOCK_DATABASE_URL for the store.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "up",
		Short:   "Start the cluster, two workers and the approver page (detached)",
		Example: "  make cluster\n  airlock cluster up && airlock cluster status",
		RunE:    func(cmd *cobra.Command, _ []string) error { return clusterUp(cmd) },
	}, &cobra.Command{
		Use:   "init",
		Short: "Register the namespace (if missing) and Airlock's search attributes on the Temporal server TEMPORAL_ADDRESS names",
		Long: `Prepare an existing Temporal server (a production cluster, docker/compose.yaml's
airlock-init) for Airlock: create TEMPORAL_NAMESPACE if it is missing (retention 1 day) and
register the search attributes turns carry. It returns once the server accepts a visibility
query on each of them: a server with its search-attribute cache on (every production server)
refuses an attribute added at run time for up to a minute. Idempotent.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			o, err := config.TemporalOptions()
			if err != nil {
				return err
			}
			if err := stack.Prepare(ctx, o, workflows.SearchAttributes()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "namespace %s on %s has Airlock's search attributes\n", o.Namespace, o.HostPort)
			return nil
		},
	}, &cobra.Command{
		Use:   "down",
		Short: "Stop every process of the cluster (the databases are kept)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := stack.StopCluster(clusterDir()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "cluster stopped")
			return nil
		},
	}, &cobra.Command{
		Use:   "status",
		Short: "List the cluster's processes and whether the frontend answers",
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PROCESS\tPID\tSTATE\tLOG")
			down := 0
			for _, p := range stack.ClusterStatus(clusterDir()) {
				state := "running"
				if !p.Running {
					state, down = "stopped", down+1
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", p.Name, p.PID, state, p.Log)
			}
			w.Flush()
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(stack.DefaultClusterPorts().Frontend))
			if err := stack.Status(cmd.Context(), addr); err != nil {
				return fmt.Errorf("the frontend does not answer at %s: %w", addr, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "frontend answers at %s\n", addr)
			if down > 0 {
				return fmt.Errorf("%d process(es) stopped; `airlock cluster down && airlock cluster up` restarts them", down)
			}
			return nil
		},
	})
	return cmd
}

func clusterUp(cmd *cobra.Command) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
	defer cancel()
	sql, err := clusterSQL()
	if err != nil {
		return err
	}
	c, err := stack.StartCluster(ctx, stack.ClusterOptions{
		Dir: clusterDir(), SQL: sql, Namespace: envOr("TEMPORAL_NAMESPACE", stack.DefaultNamespace),
		SearchAttributes: workflows.SearchAttributes(), Log: cmd.ErrOrStderr(),
	})
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	home, err := filepath.Abs(cfg.Home)
	if err != nil {
		return err
	}
	// One approver key for every process, made before two workers race to create it.
	keyFile, _ := filepath.Abs(cfg.KeyFile())
	if os.Getenv("AIRLOCK_APPROVER_KEY") == "" {
		if _, err := token.LoadOrCreateKey(keyFile); err != nil {
			return err
		}
	}
	approversFile, _ := filepath.Abs(cfg.ApproversPath())
	env := []string{
		"TEMPORAL_ADDRESS=" + c.Address, "TEMPORAL_NAMESPACE=" + c.Namespace, "AIRLOCK_HOME=" + home,
		"AIRLOCK_DATABASE_URL=" + envOr("AIRLOCK_DATABASE_URL", clusterStoreURL),
		"AIRLOCK_APPROVERS=" + approversFile, "AIRLOCK_APPROVER_KEY_FILE=" + keyFile,
		"AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue, "AIRLOCK_TEMPORAL_UI=" + envOr("AIRLOCK_TEMPORAL_UI", c.UIAddress),
		"AIRLOCK_LOG_FORMAT=json",
	}
	for n := 1; n <= clusterWorkers; n++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(clusterWorkerHTTPBase+n-1))
		name := fmt.Sprintf("airlock-worker-%d", n)
		fmt.Fprintf(cmd.ErrOrStderr(), "starting %s (metrics http://%s/metrics)\n", name, addr)
		if err := c.StartProcess(ctx, name, []string{self, "worker"}, append(env, "AIRLOCK_METRICS_ADDR="+addr),
			stack.HTTPReady("http://"+addr+"/healthz")); err != nil {
			return err
		}
	}
	web := envOr("AIRLOCK_WEB_ADDR", clusterWebAddr)
	fmt.Fprintf(cmd.ErrOrStderr(), "starting the approver page at http://%s/\n", web)
	if err := c.StartProcess(ctx, "airlock-web", []string{self, "web", "--addr", web}, append(env, "AIRLOCK_METRICS_ADDR="),
		stack.HTTPReady("http://"+web+"/login")); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Temporal cluster at %s (namespace %s)\n", c.Address, c.Namespace)
	if c.UIAddress != "" {
		fmt.Fprintf(out, "Temporal UI      %s\n", c.UIAddress)
	}
	fmt.Fprintf(out, "approver page    http://%s/\n", web)
	fmt.Fprintf(out, "workers          %d on task queue %s (metrics :%d-:%d)\n", clusterWorkers, cfg.TaskQueue, clusterWorkerHTTPBase, clusterWorkerHTTPBase+clusterWorkers-1)
	fmt.Fprintf(out, "use it:          export TEMPORAL_ADDRESS=%s AIRLOCK_DATABASE_URL=%s\n", c.Address, redactedStore())
	return nil
}

func redactedStore() string {
	if v := os.Getenv("AIRLOCK_DATABASE_URL"); v != "" {
		return "…(as set)"
	}
	return clusterStoreURL
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func newHealthCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "health URL",
		Short:  "Exit 0 when URL answers HTTP 200 (container health checks: the image has no curl)",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return stack.HTTPReady(args[0])(cmd.Context())
		},
	}
}
