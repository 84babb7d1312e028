package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/airlock-dev/airlock/internal/bench"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/workflows"
)

func newBenchCmd() *cobra.Command {
	var classes, variants []string
	var n, c, c1n int
	var address, namespace, temporalCLI string
	var serverArgs bool
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure Airlock on the reference workload the peer benchmarks run (LangGraph.js, bare Temporal): turns/s, latency, history events",
		Long: `Runs Airlock's reference workload (docs/bench/README.md) and prints one JSON line per row on stdout, with
the keys of the peer benchmarks in ../shared/bench, and a table on stderr.

Workload: a turn is 4 inference rounds; rounds 1-3 each propose one automatic read-only call
lookup({"key":"k<round>"}), round 4 answers "done: v1,v2,v3"; the model and the tool answer at
once. Every check is on (strict parse, resolve, validate, policy, budgets, audit, context
persistence) and every turn's result is checked (3 executed lookups, answered).
  --variant approval: the round-2 call is lookup_confirmed, which needs a human confirmation;
  one approver goroutine, woken by the store's notifications (PostgreSQL LISTEN/NOTIFY, as the
  approver page's live inbox), reads the pending confirmations' ids and approves each new one
  at once with a real credential (signed, attested decide update, as airlock approve does).
  --class recorded: the script is a recorded session served by the replay provider (local
  inference activities). --class network: a local HTTP server speaking the OpenAI
  chat-completions API, served through the OpenAI provider as a live model; run with regular
  and with local inference activities (rows network-regular, network-local).

Each row runs on a fresh PostgreSQL schema (dropped after) with its own in-process worker and
task queue: -n turns with -c in flight (turns_per_s, p50_ms, p95_ms: nearest rank, from the
start call to the result, the decision included), then --c1-n turns one at a time (c1_p50_ms).
history_events_per_turn is the mean over up to 20 evenly spaced turns of the -n run.

Temporal: by default a throwaway dev server for each row (every row starts from an empty
server, as the peers' runs start from empty tables), on a free port in a temporary directory,
started with exactly the flags airlock stack uses (--server-args prints them, for the peers);
--address runs every row on a running server instead (each row's worker is a worker deployment of its
own, and a server takes 100 a namespace unless matching.maxDeployments is raised). PostgreSQL: --database-url / AIRLOCK_DATABASE_URL (postgres://),
else AIRLOCK_TEST_DATABASE_URL (scripts/ensure-postgres.sh prints one).`,
		Example: "  airlock bench\n  airlock bench --class network --variant approval -n 400 -c 32\n  airlock bench --address 127.0.0.1:7233 -n 50\n  airlock bench --server-args",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, out, errOut := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			if serverArgs {
				_, err := fmt.Fprintln(out, strings.Join(stack.ServerSettings(), " "))
				return err
			}
			specs, err := bench.Specs(classes, variants)
			if err != nil {
				return err
			}
			dbURL := cfg.DatabaseURL
			if !strings.HasPrefix(dbURL, "postgres") {
				dbURL = os.Getenv("AIRLOCK_TEST_DATABASE_URL")
			}
			if !strings.HasPrefix(dbURL, "postgres") {
				return fmt.Errorf("airlock bench needs PostgreSQL: pass --database-url postgres://… (or AIRLOCK_DATABASE_URL / AIRLOCK_TEST_DATABASE_URL; scripts/ensure-postgres.sh prints a test URL)")
			}
			logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelError})))
			o := tclient.Options{HostPort: address, Namespace: namespace, Logger: logger}
			if address != "" {
				if err := stack.Prepare(ctx, o, workflows.SearchAttributes()); err != nil {
					return err
				}
			}
			// connect dials the server a row runs on: the one at --address, or a throwaway dev
			// server of the row's own, so that every row starts from the same empty server
			// (as the peers' runs start from empty tables) and no row pays for the history,
			// visibility rows and timers the rows before it left.
			connect := func() (tclient.Client, func(), error) {
				o := o
				stopServer := func() {}
				if address == "" {
					dir, err := os.MkdirTemp("", "airlock-bench-temporal-")
					if err != nil {
						return nil, nil, err
					}
					srv, err := stack.EnsureTemporal(ctx, stack.TemporalOptions{CLIPath: temporalCLI, Dir: filepath.Join(dir, "temporal"),
						UIPort: stack.Headless, Namespace: namespace, SearchAttributes: workflows.SearchAttributes(), Log: errOut})
					if err != nil {
						os.RemoveAll(dir)
						return nil, nil, err
					}
					fmt.Fprintf(errOut, "Temporal dev server at %s (pid %d), flags: %s\n", srv.Address, srv.PID, strings.Join(stack.ServerSettings(), " "))
					o.HostPort = srv.Address
					stopServer = func() { srv.Stop(ctx); os.RemoveAll(dir) }
				}
				config.TuneForLoopback(&o)
				tc, err := tclient.DialContext(ctx, o)
				if err != nil {
					stopServer()
					return nil, nil, fmt.Errorf("connect to Temporal at %s: %w", o.HostPort, err)
				}
				return tc, func() { tc.Close(); stopServer() }, nil
			}
			if cpuProfile != "" {
				// The profile covers the rows (worker, client and approver: this process), and
				// the dev servers' starts, which are other processes.
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			fmt.Fprintf(errOut, "load average before: %s\n", loadAvg())
			var rows []bench.Row
			for _, s := range specs {
				tc, disconnect, err := connect()
				if err != nil {
					return err
				}
				fmt.Fprintf(errOut, "› %s %s: %d turns, %d in flight, then %d at 1 in flight\n", s.Variant, s.Name(), n, c, max(c1n, 0))
				row, err := bench.Run(ctx, bench.Config{Temporal: tc, DatabaseURL: dbURL, Turns: n, Concurrency: c, C1Turns: c1Turns(c1n), Progress: errOut}, s)
				disconnect()
				if err != nil {
					return err
				}
				b, err := json.Marshal(row)
				if err != nil {
					return err
				}
				fmt.Fprintln(out, string(b))
				rows = append(rows, row)
			}
			fmt.Fprintf(errOut, "load average after: %s\n", loadAvg())
			printBenchTable(errOut, rows)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&classes, "class", []string{bench.ClassRecorded, bench.ClassNetwork}, "model classes: recorded, network (network gives rows network-regular and network-local; either alone by its row name)")
	f.StringSliceVar(&variants, "variant", []string{bench.VariantPlain, bench.VariantApproval}, "variants: plain, approval (round 2's call is confirmed by an approver)")
	f.IntVarP(&n, "turns", "n", 200, "turns of the throughput run")
	f.IntVarP(&c, "concurrency", "c", 16, "turns in flight in the throughput run")
	f.IntVar(&c1n, "c1-n", 50, "turns of the latency run at 1 in flight (0 or less: skip it)")
	f.StringVar(&address, "address", "", "use the Temporal server at host:port instead of starting a throwaway dev server")
	f.StringVar(&namespace, "namespace", stack.DefaultNamespace, "Temporal namespace")
	f.StringVar(&temporalCLI, "temporal-cli", "", "Temporal CLI that starts the dev server (default <repo>/bin/temporal)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile of this process (worker, client and approver) over the rows to this file (go tool pprof reads it)")
	f.BoolVar(&serverArgs, "server-args", false, "print the dev server's start-dev flags (the ones airlock stack uses) and exit")
	cmd.AddCommand(newBenchReportCmd())
	return cmd
}

// startCPUProfile starts a runtime/pprof CPU profile into path; the returned func stops it and
// closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func newBenchReportCmd() *cobra.Command {
	var title, note string
	cmd := &cobra.Command{
		Use:   "report RAW.jsonl [RAW.jsonl ...]",
		Short: "Write the markdown comparison of one run's JSON lines (airlock bench's and the peers'): ratios to LangGraph.js and the performance targets (docs/bench/README.md)",
		Long: `Reads the JSON lines of one comparison run (scripts/bench-compare.sh collects them: LangGraph.js,
bare Temporal and airlock bench; the peers' 1-in-flight runs are lines with concurrency 1) and
prints a markdown report on stdout: per variant, each system's turns/s and its ratio to
LangGraph.js, p50/p95, the 1-in-flight p50 and its ratio, history events per turn, and the
performance targets (docs/bench/README.md) with pass marks.

A run of several rounds has a "# round K" line before each round's lines: every number is then
the median over the rounds, and every ratio the median of the ratios taken within each round
(both systems measured on the same machine state), with their range in brackets.

Several files are read as one run: their rounds one after the other, so the medians and
ranges are taken over every round of every run (two runs of make bench-compare, pooled).`,
		Example: "  airlock bench report docs/bench/2026-11-30.jsonl --note \"load 0.5\" > docs/bench/2026-11-30.md\n" +
			"  airlock bench report docs/bench/2026-12-04-stop30-run1.jsonl docs/bench/2026-12-04-stop30-run2.jsonl --title \"stop 30, both runs\"",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runs := make([]bench.RunLines, 0, len(args))
			for _, path := range args {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				runs = append(runs, bench.RunLines{Name: path, R: f})
			}
			return bench.ReportRuns(cmd.OutOrStdout(), title, note, runs...)
		},
	}
	cmd.Flags().StringVar(&title, "title", "Airlock beside LangGraph.js and bare Temporal", "report title")
	cmd.Flags().StringVar(&note, "note", "", "text under the title (machine, load average, commit)")
	return cmd
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func printBenchTable(w io.Writer, rows []bench.Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tclass\tinfer\tturns\tC\tturns/s\tp50 ms\tp95 ms\tevents/turn\tC=1 p50 ms\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f\t%.0f\t%.0f\t%.1f\t%.0f\t\n", r.Variant, r.Class, r.InferMode, r.Turns, r.Concurrency,
			r.TurnsPerS, r.P50Ms, r.P95Ms, r.HistoryEventsPerTurn, r.C1P50Ms)
	}
	tw.Flush()
}

// c1Turns maps the --c1-n flag onto bench.Config.C1Turns, where 0 means the default: the
// flag's 0 (or less) skips the latency run, as its help says.
func c1Turns(flag int) int {
	if flag <= 0 {
		return -1
	}
	return flag
}
