package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/replay"
	"github.com/airlock-dev/airlock/workflows"
)

// replayRequest builds the TurnRequest for a recorded trace with the configured corpus.
func replayRequest(trace string) (workflows.TurnRequest, error) {
	return replay.Request(cfg.CorpusDir, trace)
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
