package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// replayRequest turns a recorded AgentDojo trace (a file under the corpus runs/ folder, or
// its session name) into a TurnRequest: the recorded system and user messages, the session
// the replay provider and replay capabilities serve, and the suite's capabilities as scope.
func replayRequest(trace string) (workflows.TurnRequest, error) {
	var req workflows.TurnRequest
	if cfg.CorpusDir == "" {
		return req, errors.New("no AgentDojo corpus: set AIRLOCK_CORPUS or --corpus")
	}
	runs, err := filepath.Abs(filepath.Join(cfg.CorpusDir, "runs"))
	if err != nil {
		return req, err
	}
	session := strings.TrimSuffix(filepath.ToSlash(trace), ".json")
	if _, err := os.Stat(trace); err == nil {
		abs, _ := filepath.Abs(trace)
		rel, err := filepath.Rel(runs, abs)
		if err != nil || strings.HasPrefix(rel, "..") {
			return req, fmt.Errorf("trace %s is not under the corpus runs folder %s (set --corpus)", trace, runs)
		}
		session = strings.TrimSuffix(filepath.ToSlash(rel), ".json")
	}
	t, err := agentdojo.SessionLoader(cfg.CorpusDir)(session)
	if err != nil {
		return req, fmt.Errorf("load trace: %w", err)
	}
	layer, err := registry.Layer("agentdojo-" + t.Suite)
	if err != nil {
		return req, fmt.Errorf("suite %s: %w", t.Suite, err)
	}
	entries, err := registry.Entries(layer)
	if err != nil {
		return req, err
	}
	for _, e := range entries {
		req.Scope = append(req.Scope, e.ID)
	}
	name := strings.NewReplacer("/", "-", ".", "-").Replace(session)
	req.Conversation = "replay-" + name
	req.Principal = "replay"
	req.Session = session
	req.SystemPrompt = t.SystemPrompt()
	req.Message = t.UserPrompt()
	req.StopOnDivergence = true
	return req, nil
}

func newReplayCmd() *cobra.Command {
	var wait bool
	var ttl = workflows.DefaultConfirmationTTL
	cmd := &cobra.Command{
		Use:   "replay TRACE",
		Short: "Replay a recorded real model session (an AgentDojo trace) as one turn",
		Long: `Replay a recorded AgentDojo session as one real turn through Temporal: the replay provider
serves each recorded assistant message, replay capabilities serve the recorded tool results,
and every call goes through the strict parser and the executor exactly as a live call would.
Read-only tools run automatically; consequential ones (send_money, send_email, …) wait for a
human. When Airlock decides differently from the recording (rejects, denies, lets a
confirmation expire) the replay stops there. The worker must load the suite's registry layer
(AIRLOCK_REGISTRY_LAYERS=agentdojo-banking,agentdojo-workspace).`,
		Example: `  airlock replay gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0 --wait
  airlock replay ../shared/corpus/agentdojo/runs/claude-3-7-sonnet-20250219/banking/user_task_3/none/none.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := replayRequest(args[0])
			if err != nil {
				return err
			}
			req.ConfirmationTTL = ttl
			var decide decider
			if wait && isTerminal(os.Stdin) {
				decide = askTerminal(os.Stdin, cmd.OutOrStdout())
			}
			return startAndMaybeWait(cmd, req, wait, decide)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the turn to end (asks for decisions on a terminal)")
	cmd.Flags().DurationVar(&ttl, "confirmation-ttl", ttl, "how long a confirmation stays valid")
	return cmd
}
