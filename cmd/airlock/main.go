// Command airlock runs and operates Airlock: the turn worker, the local stack, turns,
// confirmations, the audit log, the strict parser and replays of recorded model sessions.
// Run `airlock --help` for the commands and `airlock <command> --help` for each one.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "airlock:", err)
		stop()
		os.Exit(1)
	}
}

// cfg is filled from the environment, then overridden by persistent flags.
var cfg = config.FromEnv()

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "airlock",
		Short: "A durable, fail-closed turn processor between a language model and everything it may do",
		Long: `Airlock runs each conversation turn as a durable Temporal workflow:
inference → strict parsing of the model's tool calls → the executor (resolve against the
capability registry, validate arguments, check policy, confirm with a human, execute, record).

Quick start (from the repository): make run   — brings up Temporal and replays a real
recorded session in which a prompt injection asks the model to send money.

Configuration comes from the environment, overridden by flags:
  AIRLOCK_HOME                local state (default .airlock)
  AIRLOCK_DATABASE_URL        postgres://… (default: SQLite file under AIRLOCK_HOME)
  AIRLOCK_CORPUS              AgentDojo corpus folder (default ../shared/corpus/agentdojo)
  AIRLOCK_REGISTRY_LAYERS     extra registry layers, e.g. agentdojo-banking,agentdojo-workspace
  AIRLOCK_REGISTRY            replace the embedded base registry with this file (watched:
                              a worker reloads it when it changes, and on SIGHUP)
  AIRLOCK_POLICY              replace the embedded authorization policy (capability-
                              authorization-policy.v1) of the base registry (watched too)
  AIRLOCK_GUIDANCE            capability guidance (capability-guidance.v1) for catalog describe,
                              bound by digest to each contract (default embedded; watched)
  AIRLOCK_TASK_QUEUE          Temporal task queue (default airlock-turns)
  AIRLOCK_APPROVER_KEY_FILE   approver key sealing tokens (default $AIRLOCK_HOME/approver.key;
                              or AIRLOCK_APPROVER_KEY as 64 hex characters)
  AIRLOCK_APPROVERS           approvers file: who may decide (default $AIRLOCK_HOME/approvers.json;
                              see airlock approvers --help)
  AIRLOCK_CREDENTIAL          your approver credential for approve/deny (default
                              ~/.config/airlock/credential.json)
  AIRLOCK_FETCH_ALLOW         private addresses web.fetch may reach: CIDRs and IP:port pairs,
                              e.g. 10.0.0.0/8,127.0.0.1:8080 (default none; Airlock's own
                              services are never reachable)
  AIRLOCK_WEB_ADDR            approver page listen address (default 127.0.0.1:8780)
  AIRLOCK_LOG_LEVEL           SDK log level: debug, info, warn (default), error
  AIRLOCK_OPENAI_BASE_URL     serve a live OpenAI-compatible model (with AIRLOCK_OPENAI_API_KEY,
                              AIRLOCK_OPENAI_MODEL)
  AIRLOCK_PAYLOAD_KEYS_FILE   encrypt Temporal payloads (AES-256-GCM key ring, airlock codec-key)
  AIRLOCK_METRICS_ADDR        serve /metrics and /healthz (worker, web)
  AIRLOCK_LOG_FORMAT          json: structured JSON logs (default text)
  TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings: Temporal client`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&cfg.Home, "home", cfg.Home, "local state directory (AIRLOCK_HOME)")
	pf.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "store URL, postgres://… or sqlite:PATH (AIRLOCK_DATABASE_URL; default SQLite under --home)")
	pf.Lookup("database-url").DefValue = redact.URL(cfg.DatabaseURL) // --help shows the default: never its password
	pf.StringVar(&cfg.CorpusDir, "corpus", cfg.CorpusDir, "AgentDojo corpus folder with tools.json and runs/ (AIRLOCK_CORPUS)")
	root.AddCommand(newWorkerCmd(), newWebCmd(), newTurnCmd(), newPendingCmd(), newApproveCmd(), newDenyCmd(), newEditCmd(), newAuditCmd(),
		newParseCmd(), newReplayCmd(), newRegistryCmd(), newStackCmd(), newClusterCmd(), newHealthCmd(), newDoctorCmd(), newCodecServerCmd(), newCodecKeyCmd(), newDevCmd(), newEvalCmd(), newApproversCmd(), newClientsCmd(), newProposalsCmd(), newExportCmd(), newBenchCmd(), newMCPCmd(), newStreamCmd())
	return root
}
