package airlockworker

import (
	"io"
	"log/slog"
	"os"

	"github.com/airlock-dev/airlock/internal/config"
)

// Options configure a worker. OptionsFromEnv fills them the way `airlock worker` reads its
// environment; every field may then be changed in code. Temporal's own settings always come
// from the SDK's environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS,
// profiles), and the payload codec from AIRLOCK_PAYLOAD_KEYS_FILE, as for every Airlock process.
type Options struct {
	// Home is the local state folder (AIRLOCK_HOME, default ".airlock"): the SQLite store when
	// DatabaseURL is empty, the approver key, worker serve reports.
	Home string
	// DatabaseURL is the store (AIRLOCK_DATABASE_URL): postgres://… in production; empty means
	// the SQLite file under Home. Every worker, page and client of one deployment shares it.
	DatabaseURL string
	// TaskQueue is the turn task queue (AIRLOCK_TASK_QUEUE, default "airlock-turns").
	TaskQueue string
	// RegistryFile and PolicyFile replace the embedded base registry and its policy
	// (AIRLOCK_REGISTRY, AIRLOCK_POLICY); empty: embedded.
	RegistryFile, PolicyFile string
	// GuidanceFile replaces the embedded capability guidance (AIRLOCK_GUIDANCE).
	GuidanceFile string
	// CedarFile is the Cedar policy deciding how granted calls run (AIRLOCK_CEDAR_POLICY:
	// permit runs, forbid refuses, no decision asks); CedarShadowFile a candidate evaluated
	// beside it, its verdicts audited only (AIRLOCK_CEDAR_SHADOW). Both watched; "" = none.
	CedarFile, CedarShadowFile string
	// Layers are registry layers loaded on top of the base (AIRLOCK_REGISTRY_LAYERS, comma
	// list): embedded layer names, or layer files: "tickets.v1.json" with its policy sidecar
	// beside it as "tickets.v1.policy.json", or "LAYER.json=POLICY.json". Layer files are
	// watched: an edit is validated in full and swapped in, a broken one refused.
	Layers []string
	// SecretsDir is where HTTP capabilities' named secrets are read from when the environment
	// has no AIRLOCK_SECRET_<NAME> (AIRLOCK_SECRETS_DIR, default <Home>/secrets).
	SecretsDir string
	// FetchAllow is the private-address allow-list of web.fetch and HTTP capabilities
	// (AIRLOCK_FETCH_ALLOW: CIDRs and IP:port pairs). Airlock's own services stay unreachable.
	FetchAllow []string
	// ApproversFile lists the approvers (AIRLOCK_APPROVERS, default <Home>/approvers.json).
	ApproversFile string
	// ApproverKeyFile holds the key tokens are sealed with for approvers
	// (AIRLOCK_APPROVER_KEY_FILE, default <Home>/approver.key; AIRLOCK_APPROVER_KEY wins).
	ApproverKeyFile string
	// Credential is the CLI approver credential (AIRLOCK_CREDENTIAL); a worker does not use it.
	Credential string
	// ClientsFile lists the client credentials that may start turns and the principals each may
	// speak for (AIRLOCK_CLIENTS, default <Home>/clients.json): the worker verifies every turn's
	// requester attestation against it and ends an unattested turn before the model is asked
	// (issue 21).
	ClientsFile string
	// ClientCredential is the client credential a process attests the turns it starts with
	// (AIRLOCK_CLIENT_CREDENTIAL); a worker does not use it.
	ClientCredential string
	// WebAddr is the approver page's address (AIRLOCK_WEB_ADDR): never reachable by web.fetch or
	// HTTP capabilities.
	WebAddr string
	// TemporalUI is the Temporal Web UI base URL (AIRLOCK_TEMPORAL_UI), also never reachable.
	TemporalUI string
	// CorpusDir is the AgentDojo corpus for the agentdojo-* layers (AIRLOCK_CORPUS).
	CorpusDir string
	// MetricsAddr, when set, serves /metrics and /healthz there (AIRLOCK_METRICS_ADDR).
	MetricsAddr string
	// Service is the OpenTelemetry service name of exported traces when OTEL_EXPORTER_OTLP_*
	// is set (OTEL_SERVICE_NAME wins; default "airlock-worker").
	Service string
	// Status receives the start-up lines; nil: standard error.
	Status io.Writer
	// Logger receives registry reload events; nil: text on Status.
	Logger *slog.Logger
	// Ready, when set, is called once the worker polls.
	Ready func(Info)

	// retiredFetchAllowPrivate: the removed AIRLOCK_FETCH_ALLOW_PRIVATE is set; Run refuses.
	retiredFetchAllowPrivate bool
}

// Info describes a worker that started polling.
type Info struct {
	TaskQueue string
	// Revision is the registry revision served; Capabilities how many entries it holds.
	Revision     string
	Capabilities int
	// Store is the store driver ("postgres" or "sqlite").
	Store string
	// MetricsAddr is the bound /metrics and /healthz address ("" when not served).
	MetricsAddr string
}

// OptionsFromEnv returns the Options `airlock worker` would run with on this machine: the
// AIRLOCK_* variables named on each field, with the same defaults (they come from the one
// place both read, so they cannot drift).
func OptionsFromEnv() Options {
	o := fromConfig(config.FromEnv())
	o.MetricsAddr = os.Getenv("AIRLOCK_METRICS_ADDR")
	return o
}

func fromConfig(c config.Config) Options {
	return Options{Home: c.Home, DatabaseURL: c.DatabaseURL, TaskQueue: c.TaskQueue, RegistryFile: c.RegistryFile,
		PolicyFile: c.PolicyFile, GuidanceFile: c.GuidanceFile, Layers: c.Layers, SecretsDir: c.SecretsDir,
		FetchAllow: c.FetchAllow, ApproversFile: c.ApproversFile, ApproverKeyFile: c.ApproverKeyFile, Credential: c.Credential,
		ClientsFile: c.ClientsFile, ClientCredential: c.ClientCredential, CedarFile: c.CedarFile, CedarShadowFile: c.CedarShadowFile,
		WebAddr: c.WebAddr, TemporalUI: c.TemporalUI, CorpusDir: c.CorpusDir, retiredFetchAllowPrivate: c.RetiredFetchAllowPrivate}
}

// config is the internal Config for o; zero fields get OptionsFromEnv's defaults where the
// worker cannot run safely without one (Home, TaskQueue, and the approver page's and Temporal
// UI's addresses, which HTTP capabilities and web.fetch must never reach).
func (o Options) config() config.Config {
	c := config.Config{Home: o.Home, DatabaseURL: o.DatabaseURL, TaskQueue: o.TaskQueue, RegistryFile: o.RegistryFile,
		PolicyFile: o.PolicyFile, GuidanceFile: o.GuidanceFile, Layers: o.Layers, SecretsDir: o.SecretsDir,
		FetchAllow: o.FetchAllow, ApproversFile: o.ApproversFile, ApproverKeyFile: o.ApproverKeyFile, Credential: o.Credential,
		ClientsFile: o.ClientsFile, ClientCredential: o.ClientCredential, CedarFile: o.CedarFile, CedarShadowFile: o.CedarShadowFile,
		WebAddr: o.WebAddr, TemporalUI: o.TemporalUI, CorpusDir: o.CorpusDir, RetiredFetchAllowPrivate: o.retiredFetchAllowPrivate}
	if c.Home == "" {
		c.Home = ".airlock"
	}
	def := config.FromEnv()
	if c.TaskQueue == "" {
		c.TaskQueue = "airlock-turns"
	}
	if c.WebAddr == "" {
		c.WebAddr = def.WebAddr
	}
	if c.TemporalUI == "" {
		c.TemporalUI = def.TemporalUI
	}
	return c
}
