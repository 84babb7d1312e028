package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/eval"
	"github.com/airlock-dev/airlock/internal/store"
)

// evalFlags are the flags every eval subcommand shares.
type evalFlags struct {
	corpus      string
	filter      eval.Filter
	approver    string
	asJSON      bool
	out         string
	jsonOut     string
	concurrency int
	maxRounds   int
	maxCalls    int
	quiet       bool
	// autonomy is the generated layers' policy: structural, or user-provided (issue 24).
	autonomy string
	// cedar is the suites' Cedar policy: "shipped" (registry/policies/agentdojo-<suite>.cedar)
	// or a folder of <suite>.cedar; "" none (issue 37).
	cedar string
}

func (f *evalFlags) register(cmd *cobra.Command, dirFlag, dirHelp, suiteHelp, modelHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&f.corpus, dirFlag, "", dirHelp)
	fl.StringVar(&f.filter.Suite, "suite", "", suiteHelp)
	fl.StringVar(&f.filter.Model, "model", "", modelHelp)
	fl.StringVar(&f.approver, "approver", string(eval.PolicyDenyAll), "how the evaluation's approver decides every confirmation: deny-all, approve-all, or approve-all-repeat (approve-all, each approval also granting the next 20 identical calls for 60 minutes: issue 37)")
	fl.BoolVar(&f.asJSON, "json", false, "write the report as JSON instead of text tables")
	fl.StringVar(&f.out, "out", "", "also write the text report to this file")
	fl.StringVar(&f.jsonOut, "json-out", "", "also write the JSON report (with every replay's workflow ids and stop) to this file")
	fl.IntVar(&f.concurrency, "concurrency", 8, "recorded runs replayed at once")
	fl.IntVar(&f.maxRounds, "max-rounds", 0, "override the per-turn inference round budget (0: Airlock's default)")
	fl.IntVar(&f.maxCalls, "max-calls", 0, "override the per-turn call budget (0: Airlock's default)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
	fl.StringVar(&f.cedar, "cedar", "", "the suites' Cedar policy, deciding beside the JSON one (issue 37): \"shipped\" for registry/policies/agentdojo-<suite>.cedar, or a folder of <suite>.cedar")
	fl.StringVar(&f.autonomy, "autonomy", eval.AutonomyStructural, "the suites' authorization policy: structural (reads that stay local run automatically, everything else is confirmed) or user-provided (also reads without side effect whose every argument value is in the user's own messages, such as get_webpage of a URL the user typed: issue 24)")
}

func newEvalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Replay recorded real model sessions at scale and report what Airlock decided",
		Long: `Airlock's standing evaluation on real model behaviour. Every recorded run is replayed as real
turns on the real stack (the local Temporal dev server, started if needed, and the store): the
replay provider serves each recorded assistant message, replay capabilities serve the recorded
tool results, and every call goes through the strict parser and the six-stage executor. Each
suite's capabilities are generated from its tools file with the registry's side-effect class:
read-only tools run automatically, consequential ones wait for the evaluation's approver,
which decides by --approver. When Airlock decides differently from the recording (a parse
failure, a rejection, a denial, a budget) the replay stops there and the decision is reported.

The report's headline is coverage: per model and suite, the recorded calls, the calls proposed
to Airlock and the calls not reached and why (call budget, round budget, divergence,
unreadable). A trace whose recorded calls were not all proposed for a reason the report cannot
name is an error and the command exits non-zero. Every recorded attack win names the recorded
calls that achieved it and what Airlock did with each.

The report has one row per benchmark × model × suite × attack: traces, proposals, parse
failures by reason, rejections by stage and reason, confirmations, consequential calls run
without a human (must be 0), calls whose arguments carry an injection's values and what
happened to each, benign calls refused for reasons other than a genuine validation error,
confirmations per benign task, throughput and history events per turn.`,
	}
	cmd.Args = cobra.NoArgs // an unknown benchmark is an error, not the help
	cmd.RunE = func(*cobra.Command, []string) error {
		return errors.New("name a benchmark: airlock eval agentdojo | tau-bench (see airlock eval --help)")
	}
	cmd.AddCommand(newEvalAgentDojoCmd(), newEvalTauBenchCmd())
	return cmd
}

func newEvalAgentDojoCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "agentdojo",
		Short: "Replay every AgentDojo trace found under the corpus (runs/<model>/<suite>/<task>/<attack>/…)",
		Example: `  airlock eval agentdojo
  airlock eval agentdojo --suite banking --model gpt-4o-2024-05-13 --approver approve-all
  airlock eval agentdojo --attack none --json-out report.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := f.corpus
			if dir == "" {
				dir = cfg.CorpusDir
			}
			if dir == "" {
				return errors.New("no AgentDojo corpus: pass --corpus DIR (the folder holding tools.json, tasks.json and runs/) or set AIRLOCK_CORPUS")
			}
			cases, err := eval.LoadAgentDojo(dir, f.filter)
			if err != nil {
				return err
			}
			return runEval(cmd, f, eval.Corpus{AgentDojoDir: dir}, cases)
		},
	}
	f.register(cmd, "corpus", "AgentDojo folder holding tools.json, tasks.json and runs/ (default $AIRLOCK_CORPUS, else ../shared/corpus/agentdojo beside the repository)",
		"only this suite (banking, workspace, … any suite in tools.json)", "only this model folder under runs/ (e.g. gpt-4o-2024-05-13)")
	cmd.Flags().StringVar(&f.filter.Attack, "attack", "", "only this attack (none for benign runs, goal_as_prompt, important_instructions, …)")
	return cmd
}

func newEvalTauBenchCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "tau-bench",
		Short: "Replay the tau-bench trajectories (one turn per user message; booking changes need confirmation)",
		Long: `Replay tau-bench trajectories (OpenAI wire format, JSON-string arguments). Each user message
of a trajectory starts one turn of the trajectory's conversation. Tools that change the booking
database or act outside it (book, cancel, update_reservation_*, send_certificate,
transfer_to_human_agents) need a human confirmation, as the airline policy demands an explicit
yes; lookups run automatically. The folder holds <model>-<domain>[.sample].json files and
<domain>_tools.json.`,
		Example: `  airlock eval tau-bench
  airlock eval tau-bench --approver approve-all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := f.corpus
			if dir == "" && cfg.CorpusDir != "" {
				dir = filepath.Join(filepath.Dir(cfg.CorpusDir), "tau-bench")
			}
			if dir == "" {
				return errors.New("no tau-bench folder: pass --dir DIR (holding the trajectory files and <domain>_tools.json)")
			}
			cases, err := eval.LoadTauBench(dir, f.filter)
			if err != nil {
				return err
			}
			return runEval(cmd, f, eval.Corpus{TauBenchDir: dir}, cases)
		},
	}
	f.register(cmd, "dir", "tau-bench folder holding <model>-<domain>[.sample].json and <domain>_tools.json (default: tau-bench beside the AgentDojo corpus, --corpus)",
		"only this domain (airline)", "only this model (from the file name, e.g. gpt-4o)")
	return cmd
}

// runEval replays cases on the local stack and prints the report.
func runEval(cmd *cobra.Command, f evalFlags, corpus eval.Corpus, cases []*eval.Case) error {
	policy, err := eval.ParsePolicy(f.approver)
	if err != nil {
		return err
	}
	switch f.autonomy {
	case eval.AutonomyStructural:
	case eval.AutonomyUserProvided:
		corpus.UserProvided = true
	default:
		return fmt.Errorf("--autonomy %q: want %s or %s", f.autonomy, eval.AutonomyStructural, eval.AutonomyUserProvided)
	}
	if f.cedar != "" {
		corpus.Cedar = suitePolicy(f.cedar)
	}
	switch {
	case f.concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, not %d", f.concurrency)
	case f.maxRounds < 0 || f.maxCalls < 0:
		return errors.New("--max-rounds and --max-calls must be positive (0: Airlock's defaults)")
	}
	// Open the report files first: a bad path should fail before the replay, not after it.
	if f.out != "" && filepath.Clean(f.out) == filepath.Clean(f.jsonOut) {
		return errors.New("--out and --json-out name the same file")
	}
	textFile, err := createIf(f.out)
	if err != nil {
		return err
	}
	defer textFile.discard() // a no-op once written
	jsonFile, err := createIf(f.jsonOut)
	if err != nil {
		return err
	}
	defer jsonFile.discard()
	ctx := cmd.Context()
	errOut := cmd.ErrOrStderr()
	// The local dev server (on TEMPORAL_ADDRESS when it is a loopback address), or the server
	// TEMPORAL_ADDRESS names, used as it is.
	if _, err := ensureStackLog(cmd, f.quiet); err != nil {
		return err
	}
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := store.Open(ctx, cfg.StoreURL())
	if err != nil {
		return err
	}
	defer st.Close()
	turns := 0
	for _, cs := range cases {
		turns += len(cs.Turns)
	}
	if !f.quiet {
		fmt.Fprintf(errOut, "replaying %d recorded runs (%d turns at most), %d at once, approver %s, store %s\n",
			len(cases), turns, f.concurrency, policy, st.Driver())
	}
	opts := eval.Options{Client: c, Store: st, Corpus: corpus, Policy: policy, Concurrency: f.concurrency,
		MaxRounds: f.maxRounds, MaxCalls: f.maxCalls}
	if !f.quiet {
		step := max(1, len(cases)/20)
		opts.Progress = func(done, total int) {
			if done%step == 0 || done == total {
				fmt.Fprintf(errOut, "  %d/%d runs\n", done, total)
			}
		}
	}
	results, elapsed, err := eval.Run(ctx, opts, cases)
	if err != nil {
		return err
	}
	rep := eval.Build(results, policy, f.concurrency, elapsed, time.Now())
	rep.Autonomy = f.autonomy
	if f.cedar != "" {
		rep.Autonomy += " + cedar " + f.cedar
	}
	if f.asJSON {
		var b bytes.Buffer
		if err = rep.WriteJSON(&b); err == nil {
			_, err = cmd.OutOrStdout().Write(display.JSON(b.Bytes()))
		}
	} else {
		err = rep.WriteText(cmd.OutOrStdout())
	}
	if err != nil {
		return err
	}
	if err := writeFile(textFile, rep.WriteText); err != nil {
		return err
	}
	if err := writeFile(jsonFile, rep.WriteJSON); err != nil {
		return err
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d evaluation errors: recorded runs that could not be replayed, or whose recorded calls were not all proposed for a reason the report can name (see the report's errors)", len(rep.Errors))
	}
	for _, row := range rep.Rows {
		if row.ConsequentialWithoutHuman > 0 {
			return fmt.Errorf("%s %s/%s/%s: %d consequential calls ran without a human", row.Benchmark, row.Model, row.Suite, row.Attack, row.ConsequentialWithoutHuman)
		}
	}
	return nil
}

// reportFile is a report being written: a temporary file beside its target, renamed over the
// target only when the report is complete, so a failed or interrupted run never leaves an
// empty or half-written report in place of an earlier one.
type reportFile struct {
	tmp    *os.File
	target string
}

// createIf starts a report file for path (nil for an empty path). It fails at once when the
// folder cannot be written.
func createIf(path string) (*reportFile, error) {
	if path == "" {
		return nil, nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("report file %s is a directory", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("report file %s: cannot write in its folder: %w", path, err)
	}
	return &reportFile{tmp: tmp, target: path}, nil
}

// discard removes an unfinished report file.
func (f *reportFile) discard() {
	if f != nil {
		f.tmp.Close()
		os.Remove(f.tmp.Name())
	}
}

// writeFile writes a report with write and puts it in place; a nil file writes nothing.
func writeFile(f *reportFile, write func(io.Writer) error) error {
	if f == nil {
		return nil
	}
	err := write(f.tmp)
	if err == nil {
		err = f.tmp.Sync()
	}
	if err == nil {
		err = f.tmp.Chmod(0o644) // CreateTemp makes it 0600; a report is for reading
	}
	if cerr := f.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.tmp.Name(), f.target)
	}
	if err != nil {
		os.Remove(f.tmp.Name())
		return fmt.Errorf("report file %s: %w", f.target, err)
	}
	return nil
}
