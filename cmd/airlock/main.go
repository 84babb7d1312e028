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

// cfg is filled from the configuration file and the environment (loadConfig), then overridden
// by persistent flags.
var cfg = loadConfig()

// configErr is why the configuration file could not be applied: every command but --help
// reports it (PersistentPreRunE) instead of running on settings the operator did not mean.
var configErr error

// loadConfig applies the configuration file (--config, AIRLOCK_CONFIG, or ./airlock.yaml)
// to the environment before anything reads it, then reads the Config from the environment.
// Flag defaults are computed after it, so they show the file's values too.
func loadConfig() config.Config {
	path, _ := config.FilePath(os.Args[1:])
	if _, err := config.ApplyFile(path); err != nil {
		configErr = err
	}
	return config.FromEnv()
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "airlock",
		Short: "A durable, fail-closed turn processor between a language model and everything it may do",
		Long: `Airlock runs each conversation turn as a durable Temporal workflow:
inference → strict parsing of the model's tool calls → the executor (resolve against the
capability registry, validate arguments, check policy, confirm with a human, execute, record).

Quick start (from the repository): make run   — brings up Temporal and replays a real
recorded session in which a prompt injection asks the model to send money.

Configuration comes from airlock.yaml in the working directory (or the file --config or
AIRLOCK_CONFIG names: keys and meanings in docs/configuration.md, "airlock config show" prints
what is in effect and where it came from), overridden by the environment, overridden by flags:
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
  AIRLOCK_APPROVER_KEY_FILE   approver key sealing tokens (default $AIRLOCK_HOME/keys/approver.key;
                              or AIRLOCK_APPROVER_KEY as 64 hex characters)
  AIRLOCK_APPROVERS           approvers file: who may decide (default $AIRLOCK_HOME/approvers.json;
                              see airlock approvers --help)
  AIRLOCK_CREDENTIAL          your approver credential for approve/deny (default
                              ~/.config/airlock/credential.json)
  AIRLOCK_FETCH_ALLOW         private addresses web.fetch and HTTP capabilities may reach: CIDRs and IP:port pairs,
                              e.g. 10.0.0.0/8,127.0.0.1:8080 (default none; Airlock's own
                              services are never reachable)
  AIRLOCK_WEB_ADDR            approver page listen address (default 127.0.0.1:8780)
  AIRLOCK_LOG_LEVEL           SDK log level: debug, info, warn (default), error
  AIRLOCK_PROVIDER            the live model's provider: openai, openai-responses (the Responses
                              API), anthropic, azure, gemini, groq, openrouter, xai, ollama (/v1),
                              ollama-native (/api/chat), vllm
                              (doctor shows what a worker serves; docs/providers.md)
  AIRLOCK_OPENAI_BASE_URL     an OpenAI-compatible endpoint (default: the provider's), with
                              AIRLOCK_OPENAI_MODEL; the key: AIRLOCK_OPENAI_API_KEY (OpenAI, local
                              servers), else AIRLOCK_<PROVIDER>_API_KEY or the provider's own
                              (GEMINI_API_KEY, GROQ_API_KEY, ...): never another provider's
  AIRLOCK_AZURE_OPENAI_ENDPOINT, _DEPLOYMENT, _API_VERSION, _API_KEY   Azure OpenAI (AIRLOCK_PROVIDER=azure)
  AIRLOCK_ANTHROPIC_API_KEY   serve Anthropic (or _API_KEY_FILE; _BASE_URL, _MODEL, _MAX_TOKENS)
  AIRLOCK_STREAM              0: the Infer activity does not stream (default on); the client
                              stream endpoint: AIRLOCK_STREAM_ADDR, AIRLOCK_STREAM_TOKEN(_FILE)
  AIRLOCK_API_ADDR, AIRLOCK_API_KEYS  the application API (airlock api serve; default
                              127.0.0.1:8092, $AIRLOCK_HOME/api-keys.json); AIRLOCK_CODEC_ADDR
  AIRLOCK_CLIENTS             clients file: who may start turns for which principals (default
                              $AIRLOCK_HOME/clients.json; see airlock clients --help)
  AIRLOCK_CLIENT_CREDENTIAL   the client credential turn start and replay attest turns with
  AIRLOCK_WEB_HOSTS           host names the approver page answers (default loopback, --addr)
  AIRLOCK_PASSKEY_RP_ID       passkey relying party id: the page's host name (default first
                              non-IP AIRLOCK_WEB_HOSTS name, else localhost; web and worker)
  AIRLOCK_PASSKEY_ORIGINS     the page's origins passkey assertions may come from (default
                              https://<RP id>; for localhost only AIRLOCK_WEB_ADDR's port;
                              http://localhost:* is local development only)
  AIRLOCK_MCP_SERVERS         MCP servers bridged as capabilities (see airlock mcp --help)
  AIRLOCK_SECRETS_DIR         folder of the header values HTTP capabilities send (or AIRLOCK_SECRET_<NAME>)
  AIRLOCK_NOTIFY_FILE         approver notices: webhook, Slack, e-mail channels and routes
  AIRLOCK_DEPLOYMENT, AIRLOCK_BUILD_ID, AIRLOCK_PROMOTE   Worker Versioning (airlock worker --help)
  AIRLOCK_DEMO_DECISION       approve or deny: how airlock dev (make run) decides without a terminal
  AIRLOCK_PAYLOAD_KEYS_FILE   encrypt Temporal payloads (AES-256-GCM key ring, airlock codec-key)
  AIRLOCK_METRICS_ADDR        serve /metrics and /healthz (worker, web)
  AIRLOCK_LOG_FORMAT          json: structured JSON logs (default text)
  AIRLOCK_TEMPORAL_UI_PORT, AIRLOCK_TEMPORAL_HTTP_PORT, AIRLOCK_TEMPORAL_METRICS_PORT
                              the local dev server's other ports (airlock stack --help)
  TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings: Temporal client`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return configErr }
	pf := root.PersistentFlags()
	pf.String("config", "", "configuration file (AIRLOCK_CONFIG; default ./airlock.yaml when present): environment variables and flags override it")
	pf.StringVar(&cfg.Home, "home", cfg.Home, "local state directory (AIRLOCK_HOME)")
	pf.StringVar(&cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "store URL, postgres://… or sqlite:PATH (AIRLOCK_DATABASE_URL; default SQLite under --home)")
	pf.Lookup("database-url").DefValue = redact.URL(cfg.DatabaseURL) // --help shows the default: never its password
	pf.StringVar(&cfg.CorpusDir, "corpus", cfg.CorpusDir, "AgentDojo corpus folder with tools.json and runs/ (AIRLOCK_CORPUS)")
	addStackPortFlags(pf)
	root.AddCommand(newWorkerCmd(), newWebCmd(), newTurnCmd(), newPendingCmd(), newApproveCmd(), newDenyCmd(), newEditCmd(), newAuditCmd(),
		newParseCmd(), newReplayCmd(), newRegistryCmd(), newStackCmd(), newClusterCmd(), newHealthCmd(), newDoctorCmd(), newCodecServerCmd(), newCodecKeyCmd(), newDevCmd(), newEvalCmd(), newApproversCmd(), newClientsCmd(), newProposalsCmd(), newExportCmd(), newBenchCmd(), newMCPCmd(), newStreamCmd(), newConfigCmd(), newDeployCmd(), newAPICmd(), newPolicyCmd())
	return root
}
