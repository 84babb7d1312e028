package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/term"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/presentation"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

func newTurnCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "turn", Short: "Start and inspect conversation turns"}
	cmd.AddCommand(newTurnStartCmd(), newTurnShowCmd())
	return cmd
}

func newTurnStartCmd() *cobra.Command {
	var req workflows.TurnRequest
	var wait bool
	cmd := &cobra.Command{
		Use:   "start --conversation C \"message\"",
		Short: "Start a turn: one user message and everything the assistant does until it answers",
		Long: `Start a turn as workflow turn/<conversation>/<seq> on task queue airlock-turns and print its id
and Temporal UI link. A worker must be running (airlock worker, or make run). With --wait, block
until the turn ends, showing each confirmation it waits for and how to approve or deny it.`,
		Example: `  airlock turn start --conversation ops-1 "Is the host healthy?"
  airlock turn start --conversation ops-1 --wait "Fetch https://example.org and summarize it"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Conversation == "" {
				return errors.New("--conversation is required")
			}
			req.Message = args[0]
			if err := req.Validate(); err != nil {
				return fmt.Errorf("--infer-mode (or AIRLOCK_INFER_MODE): %w", err)
			}
			var decide decider
			if wait && isTerminal(os.Stdin) {
				decide = askTerminal(os.Stdin, cmd.OutOrStdout())
			}
			return startAndMaybeWait(cmd, req, wait, decide)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Conversation, "conversation", "", "conversation id (required); turns of one conversation share context")
	f.StringVar(&req.Principal, "principal", os.Getenv("USER"), "who the turn acts for")
	f.StringVar(&req.SystemPrompt, "system", "", "system prompt for the conversation's first turn")
	f.StringVar(&req.Model, "model", "", "model name for a live provider")
	f.StringVar(&req.InferMode, "infer-mode", os.Getenv("AIRLOCK_INFER_MODE"), "how inference rounds run: regular (durable answer, for slow or costly models; the default) or local (no server round trip per round; a crash re-asks the model) (AIRLOCK_INFER_MODE)")
	f.IntVar(&req.MaxRounds, "max-rounds", workflows.DefaultMaxRounds, "maximum inference rounds")
	f.IntVar(&req.MaxCalls, "max-calls", workflows.DefaultMaxCalls, "per-turn capability call budget")
	f.DurationVar(&req.ConfirmationTTL, "confirmation-ttl", workflows.DefaultConfirmationTTL, "how long a confirmation stays valid")
	f.StringSliceVar(&req.Scope, "scope", nil, "limit the catalog to these capability ids")
	f.BoolVar(&wait, "wait", false, "wait for the turn to end, showing pending confirmations")
	return cmd
}

// startTurn allocates the turn's sequence number and starts the workflow. Workflow ids are
// never reused: if Temporal already knows turn/<conversation>/<seq> (for example the store was
// reset while Temporal kept its history), the next sequence number is taken, so a new turn can
// never pick up an old turn's ledger, audit rows or result.
func startTurn(ctx context.Context, c client.Client, st *store.Store, req workflows.TurnRequest) (string, error) {
	if req.Principal == "" {
		return "", errors.New("a turn needs the principal it acts for: --principal (default $USER)")
	}
	for attempt := 0; attempt < 100; attempt++ {
		seq, err := st.NextTurnSeq(ctx, req.Conversation)
		if err != nil {
			return "", err
		}
		id := workflows.TurnWorkflowID(req.Conversation, seq)
		if err := signTurn(&req, seq); err != nil {
			return "", err
		}
		opts := workflows.StartOptions(id, cfg.TaskQueue, req)
		opts.WorkflowIDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
		opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
		opts.WorkflowExecutionErrorWhenAlreadyStarted = true
		// With a worker on this client (airlock dev), the first workflow task comes back in the
		// start response; otherwise the server dispatches it as usual.
		opts.EnableEagerStart = true
		opts.StaticSummary = display.Summary(fmt.Sprintf("turn %d of %s", seq, req.Conversation), workflows.SummaryLimit)
		_, err = c.ExecuteWorkflow(ctx, opts, workers.TurnWorkflowName, req)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("start turn %s: %w", id, err)
		}
		return id, nil
	}
	return "", fmt.Errorf("start a turn of %s: 100 consecutive turn ids already exist in Temporal", req.Conversation)
}

// decider answers a pending confirmation interactively; nil means print instructions only.
// stillPending reports whether the confirmation is still waiting (it may be decided from
// another shell meanwhile); ok is false when no decision was taken here.
type decider func(ctx context.Context, p workflows.PendingConfirmation, stillPending func() bool) (approve bool, reason string, ok bool)

func startAndMaybeWait(cmd *cobra.Command, req workflows.TurnRequest, wait bool, decide decider) error {
	_, err := startAndWatch(cmd.Context(), cmd.OutOrStdout(), req, wait, decide)
	return err
}

// startAndWatch starts the turn, prints its id and UI link and, with wait, watches it to the
// end and prints the result. It returns the turn's workflow id.
func startAndWatch(ctx context.Context, out io.Writer, req workflows.TurnRequest, wait bool, decide decider) (string, error) {
	st, err := openExistingStore(ctx)
	if err != nil {
		return "", err
	}
	defer st.Close()
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	id, err := startTurn(ctx, c, st, req)
	if err != nil {
		return "", err
	}
	opts, _ := config.TemporalOptions()
	fmt.Fprintf(out, "started turn %s\n  Temporal UI: %s\n", id, cfg.WorkflowURL(opts.Namespace, id))
	warnStranded(ctx, out, c, opts.Namespace)
	if !wait {
		fmt.Fprintf(out, "  follow it with: airlock turn show %s\n", id)
		return id, nil
	}
	res, err := watchTurn(ctx, out, c, st, id, decide)
	if err != nil {
		return id, err
	}
	printResult(out, res)
	return id, nil
}

// watchTurn polls the turn's pending query until the workflow ends, announcing each pending
// confirmation once, and returns the TurnResult.
func watchTurn(ctx context.Context, out io.Writer, c client.Client, st *store.Store, id string, decide decider) (workflows.TurnResult, error) {
	run := c.GetWorkflow(ctx, id, "")
	done := make(chan error, 1)
	var res workflows.TurnResult
	go func() { done <- run.Get(ctx, &res) }()
	seen := map[string]bool{}
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return res, fmt.Errorf("turn %s failed: %s", id, rootCause(err))
			}
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
		for _, p := range queryPending(ctx, c, id) {
			if seen[p.ConfirmationID] {
				continue
			}
			seen[p.ConfirmationID] = true
			printPending(out, p)
			if decide == nil {
				continue
			}
			stillPending := func() bool {
				for _, q := range queryPending(ctx, c, id) {
					if q.ConfirmationID == p.ConfirmationID {
						return true
					}
				}
				return false
			}
			approve, reason, ok := decide(ctx, p, stillPending)
			if !ok {
				continue
			}
			decision := workflows.DecisionDeny
			if approve {
				decision = workflows.DecisionApprove
			}
			cred, approver, err := loadCredential("")
			if err != nil {
				fmt.Fprintln(out, "  could not decide here:", err)
				continue
			}
			if err := sendDecision(ctx, out, c, st, p.ConfirmationID, decision, approver, cred, reason, repeatGrant{}); err != nil {
				fmt.Fprintln(out, "  could not send the decision:", err)
			}
		}
	}
}

// self is how to invoke this binary in printed commands: "airlock" when it runs from PATH,
// else its path relative to the working directory (for example bin/airlock).
func self() string {
	name := os.Args[0]
	if !strings.Contains(name, "/") {
		return name
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return name
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return abs
}

// queryPending returns the turn's pending confirmations, or none if it cannot be queried
// (not started yet, or already closed).
func queryPending(ctx context.Context, c client.Client, id string) []workflows.PendingConfirmation {
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryPending)
	if err != nil {
		return nil
	}
	var pending []workflows.PendingConfirmation
	if err := v.Get(&pending); err != nil {
		return nil
	}
	return pending
}

func printPending(out io.Writer, p workflows.PendingConfirmation) { printPendingLimit(out, p, 0) }

// printPendingLimit prints a pending confirmation known from the turn's pending query (no
// store at hand): its presentation built from what the query carries.
func printPendingLimit(out io.Writer, p workflows.PendingConfirmation, limit int) {
	in := approval.PendingInput(p)
	in.Limit = cliLimit(limit)
	printPresentation(out, presentation.Build(in), limit)
}

// cliLimit is the presentation limit of a CLI limit (0: display.DefaultLimit; <0: never cut).
func cliLimit(limit int) int {
	if limit < 0 {
		return math.MaxInt32
	}
	return limit
}

// printPresentation prints a confirmation for an approver, in the labelled lines every text
// surface shares (presentation.Confirmation.Lines), then how to decide it while it waits.
func printPresentation(out io.Writer, c presentation.Confirmation, limit int) {
	fmt.Fprintf(out, "\n⏸  confirmation needed  %s\n", c.ID)
	last, cut := "", false
	for _, l := range c.Lines(0) {
		label := fmt.Sprintf("   %-13s", l.Label+":")
		if l.Label == last {
			label = strings.Repeat(" ", 16)
		}
		last = l.Label
		fmt.Fprintf(out, "%s%s\n", label, l.Text)
	}
	for _, a := range c.Arguments {
		cut = cut || a.Value.Truncated()
	}
	if cut && limit >= 0 {
		fmt.Fprintf(out, "                (values cut; %s pending --full shows them whole)\n", self())
	}
	if c.Decided() {
		return
	}
	// Decisions are made with an approver credential; name the one this process decides with
	// when it is not the default (airlock dev's demo approver).
	cred := ""
	if cfg.Credential != "" {
		cred = "AIRLOCK_CREDENTIAL=" + cfg.Credential + " "
	}
	fmt.Fprintf(out, "   approve:     %s%s approve %s\n", cred, self(), c.ID)
	fmt.Fprintf(out, "   deny:        %s%s deny %s --reason \"…\"\n", cred, self(), c.ID)
}

func printResult(out io.Writer, res workflows.TurnResult) {
	// A turn's id holds its conversation id, which a client app chose: hostile as any text.
	fmt.Fprintf(out, "\nturn %s %s (%s) after %d round(s)\n", display.Visible(res.WorkflowID), display.Visible(res.Status), display.Visible(string(res.EndReason)), res.Rounds)
	for _, o := range res.Outcomes {
		line := fmt.Sprintf("  #%d %-28s %-16s", o.Seq, display.Line(o.Name), display.Visible(string(o.Outcome)))
		if o.Stage != "" && o.Outcome != "executed" {
			line += " at " + display.Visible(string(o.Stage))
		}
		if o.Reason != "" {
			line += ": " + display.Line(o.Reason)
		}
		if o.Approver != "" {
			line += " (by " + display.Line(o.Approver) + ")"
		}
		if o.Outcome == "denied" && o.Detail != "" {
			line += ": " + display.Line(o.Detail)
		}
		fmt.Fprintln(out, strings.TrimRight(line, " "))
		if o.Reason == "unknown_capability" && strings.HasPrefix(res.WorkflowID, "turn/replay-") {
			fmt.Fprintln(out, "      (is the worker running with this suite's registry layer? AIRLOCK_REGISTRY_LAYERS=agentdojo-<suite>)")
		}
	}
	if res.EndReason == "diverged" {
		fmt.Fprintln(out, "  diverged: a call did not run as the recording shows (rejected, denied, expired, or its outcome\n  unknown after a crash), so the replay stopped there: the recording's later steps assume it ran.")
	}
	for _, c := range res.Citations {
		fmt.Fprintf(out, "  cited: %s (%s)\n", display.Line(c.FinalURL), display.Line(c.Title))
	}
	if res.Prose != "" {
		fmt.Fprintf(out, "assistant: %s\n", display.Text(res.Prose))
		if flags := display.TextFlags(res.Prose); len(flags) > 0 {
			fmt.Fprintf(out, "  (the answer above was altered to be shown: %s)\n", display.FlagList(flags))
		}
	}
}

// printEffective prints the turn's effective output when a correction judgment on its output
// exists (the latest one; issue 10 item 5: the effective output changes only once that
// record exists): the replacement, hostile-safe, with the judgment, its actor and the
// decision it projects. Nothing is printed without a judgment.
func printEffective(ctx context.Context, out io.Writer, st *store.Store, workflowID string) error {
	j, err := st.LatestJudgment(ctx, proposals.OutputID(workflowID))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "effective output (corrected): %s\n", display.Text(j.Replacement))
	fmt.Fprintf(out, "  (judgment %s: %s by %s, from decision %s; the answer above is as delivered)\n",
		display.Line(j.ID), display.Line(j.Kind), display.Line(j.Actor), display.Line(j.FeedbackSource))
	if flags := display.TextFlags(j.Replacement); len(flags) > 0 {
		fmt.Fprintf(out, "  (the correction above was altered to be shown: %s)\n", display.FlagList(flags))
	}
	return nil
}

func newTurnShowCmd() *cobra.Command {
	var asJSON, transcript bool
	cmd := &cobra.Command{
		Use:     "show TURN-ID",
		Short:   "Show a turn: its result (and effective output once a correction judgment exists) when finished, else its status and pending confirmations",
		Example: "  airlock turn show turn/ops-1/1\n  airlock turn show turn/ops-1/1 --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, id, out := cmd.Context(), args[0], cmd.OutOrStdout()
			if transcript {
				return showTranscript(ctx, out, id)
			}
			st, err := openExistingStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if raw, err := st.GetTurnResult(ctx, id); err == nil {
				if asJSON {
					_, err := fmt.Fprintln(out, string(display.JSON(raw)))
					return err
				}
				var res workflows.TurnResult
				if err := json.Unmarshal(raw, &res); err != nil {
					return fmt.Errorf("stored result of %s: %w", id, err)
				}
				printResult(out, res)
				return printEffective(ctx, out, st, id)
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			c, err := config.DialTemporal(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			desc, err := c.DescribeWorkflow(ctx, id, "")
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				return fmt.Errorf("no turn %s (turn ids look like turn/<conversation>/<n>: see airlock audit, or the ids airlock dev and turn start print)", display.Visible(id))
			} else if err != nil {
				return err
			}
			status := desc.RawResponse.GetWorkflowExecutionInfo().GetStatus()
			if status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				fmt.Fprintf(out, "turn %s: %s\n", id, strings.ToLower(strings.TrimPrefix(status.String(), "WORKFLOW_EXECUTION_STATUS_")))
				return nil
			}
			var pending []workflows.PendingConfirmation
			queried := false
			if v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryPending); err == nil && v.Get(&pending) == nil {
				queried = true
			}
			attr, _ := desc.TypedSearchAttributes.GetKeyword(workflows.AttrStatus)
			fmt.Fprintf(out, "turn %s: %s\n", id, runningStatus(attr, pending, queried))
			for _, p := range pending {
				printPending(out, p)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the stored TurnResult as JSON")
	cmd.Flags().BoolVar(&transcript, "transcript", false, "print the context the turn built (its transcript query): every message, results as the model saw them")
	return cmd
}

// showTranscript prints the turn's transcript query: the messages of its context, each
// cut to one screen line per 200 characters.
func showTranscript(ctx context.Context, out io.Writer, id string) error {
	c, err := config.DialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryTranscript)
	if err != nil {
		return fmt.Errorf("query the transcript of %s (a worker must be running to answer): %w", id, err)
	}
	var msgs []inference.Message
	if err := v.Get(&msgs); err != nil {
		return err
	}
	for _, m := range msgs {
		fmt.Fprintf(out, "%-9s %s\n", m.Role, display.Show(display.OneLine(m.Content), 200).Line())
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(out, "%-9s → %s %s (%s)\n", "", display.Line(tc.Name), display.Line(tc.Arguments), display.Line(tc.ID))
		}
	}
	return nil
}

// askTerminal prompts on the terminal for a decision. Lines are read by one goroutine for the
// life of the command, so a prompt can give up when the confirmation is decided elsewhere.
func askTerminal(in io.Reader, out io.Writer) decider {
	lines := make(chan string)
	go func() {
		r := bufio.NewReader(in)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(line)
		}
	}()
	read := func(ctx context.Context, stillPending func() bool) (string, bool) {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case l, ok := <-lines:
				return l, ok
			case <-tick.C:
				if !stillPending() {
					fmt.Fprintln(out, "\n   decided elsewhere")
					return "", false
				}
			case <-ctx.Done():
				return "", false
			}
		}
	}
	return func(ctx context.Context, p workflows.PendingConfirmation, stillPending func() bool) (bool, string, bool) {
		for {
			fmt.Fprintf(out, "   decide now? [a]pprove / [d]eny / [s]kip (decide elsewhere): ")
			line, ok := read(ctx, stillPending)
			if !ok {
				return false, "", false
			}
			switch strings.ToLower(line) {
			case "a", "approve":
				return true, "", true
			case "d", "deny":
				fmt.Fprintf(out, "   reason: ")
				reason, ok := read(ctx, stillPending)
				if !ok {
					return false, "", false
				}
				if reason == "" {
					reason = "denied at the terminal"
				}
				return false, reason, true
			case "s", "skip", "":
				return false, "", false
			}
		}
	}
}

// isTerminal reports whether f is an interactive terminal (not /dev/null or a pipe).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// rootCause is the innermost application error's message of a failed turn (the Temporal
// wrappers around it repeat it: workflow, activity, application), or err's own text.
func rootCause(err error) string {
	var app *temporal.ApplicationError
	msg := err.Error()
	for e := err; errors.As(e, &app); e = app.Unwrap() {
		msg = app.Message()
		if app.Unwrap() == nil {
			break
		}
	}
	return msg
}

// runningStatus is the status `turn show` prints for a running turn: the turn's own account
// (its pending query, when a worker answered it) wins over its AirlockStatus search attribute,
// which visibility updates a moment later; "running" only when neither says more. A status
// attribute is written by the workflow, so it is shown through display.Line.
func runningStatus(attr string, pending []workflows.PendingConfirmation, queried bool) string {
	switch {
	case queried && len(pending) > 0:
		return fmt.Sprintf("%s (%d waiting)", workflows.StatusAwaitingConfirmation, len(pending))
	case queried:
		return workflows.StatusRunning
	case attr != "":
		return display.Line(attr) + " (no worker answered the pending query)"
	default:
		return workflows.StatusRunning
	}
}
