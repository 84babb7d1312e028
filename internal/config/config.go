// Package config reads Airlock's settings: the configuration file (airlock.yaml, --config or
// AIRLOCK_CONFIG; file.go), then the environment, which overrides it, with defaults that make a
// fresh checkout work with no setup: state under .airlock/, an embedded SQLite store, the
// replay corpus beside the repository, a generated approver key. Flags override these values
// in cmd/airlock. Temporal connection settings come from the SDK's envconfig
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS, profiles).
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"

	"github.com/airlock-dev/airlock/internal/codec"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/stack"
)

// Config is everything a worker or CLI command needs besides Temporal's own settings.
type Config struct {
	// Home is the local state directory (AIRLOCK_HOME, default ".airlock").
	Home string
	// DatabaseURL selects the store (AIRLOCK_DATABASE_URL): "postgres://…" for PostgreSQL;
	// empty means the SQLite file <Home>/airlock.db. It may hold a password: show it only
	// through redact.URL (String does).
	DatabaseURL string
	// CorpusDir is the AgentDojo corpus root holding tools.json and runs/ (AIRLOCK_CORPUS;
	// default ../shared/corpus/agentdojo beside the repository, when present).
	CorpusDir string
	// RegistryFile replaces the embedded base registry (AIRLOCK_REGISTRY); empty = embedded.
	RegistryFile string
	// PolicyFile replaces the embedded authorization policy sidecar of the base registry
	// (AIRLOCK_POLICY, capability-authorization-policy.v1); empty = embedded.
	PolicyFile string
	// CedarFile is a Cedar policy file (AIRLOCK_CEDAR_POLICY, *.cedar; issue 37) deciding
	// stage 3 beside the JSON policy: permit runs, forbid refuses, no decision asks. Empty:
	// none. Reloaded live like the registry.
	CedarFile string
	// CedarShadowFile is a candidate Cedar policy (AIRLOCK_CEDAR_SHADOW, *.shadow.cedar) run
	// in shadow: evaluated beside the live policy on every call, its would-be decision recorded
	// in the audit (policy_shadow rows), never acted on.
	CedarShadowFile string
	// GuidanceFile replaces the embedded capability guidance (AIRLOCK_GUIDANCE,
	// capability-guidance.v1): optional, lower-trust descriptions catalog describe shows when
	// bound to the exact contract; empty = embedded.
	GuidanceFile string
	// Layers are registry layers loaded on top (AIRLOCK_REGISTRY_LAYERS, comma list): embedded
	// layer names ("agentdojo-banking") or layer files ("/etc/airlock/tickets.v1.json", policy
	// beside it as tickets.v1.policy.json, or "LAYER.json=POLICY.json"; registry.LayerSources).
	Layers []string
	// SecretsDir is the folder HTTP capabilities read named header secrets from when the
	// environment has no AIRLOCK_SECRET_<NAME> (AIRLOCK_SECRETS_DIR, default <Home>/secrets).
	SecretsDir string
	// ApproverKeyFile holds the hex AES-256 key that seals tokens for approvers
	// (AIRLOCK_APPROVER_KEY_FILE, default <Home>/approver.key, created when absent).
	ApproverKeyFile string
	// TemporalUI is the Web UI base URL used in links (AIRLOCK_TEMPORAL_UI, default
	// http://localhost:8233).
	TemporalUI string
	// TaskQueue is the Temporal task queue for turns (AIRLOCK_TASK_QUEUE, default
	// "airlock-turns"); separate queues isolate environments sharing one namespace.
	TaskQueue string
	// FetchAllow is web.fetch's private allow-list (AIRLOCK_FETCH_ALLOW, comma list of CIDRs
	// and IP:port pairs, parsed by capabilities.ParseAllowList): the only non-public addresses
	// it may reach. Empty: public addresses only. Airlock's own services stay unreachable
	// whatever it says.
	FetchAllow []string
	// RetiredFetchAllowPrivate is set when the removed AIRLOCK_FETCH_ALLOW_PRIVATE has a
	// value: a worker then refuses to start (ErrFetchAllowPrivateRemoved) rather than silently
	// ignore it.
	RetiredFetchAllowPrivate bool
	// ApproversFile lists the approvers, their bcrypt password hashes and public keys, and the
	// approver pages' surface keys (AIRLOCK_APPROVERS, default <Home>/approvers.json;
	// internal/approvers). Workers authenticate every decision against it.
	ApproversFile string
	// Credential is the CLI approver's credential file (AIRLOCK_CREDENTIAL; default
	// <user config dir>/airlock/credential.json), created by `airlock approvers add`.
	Credential string
	// ClientsFile lists the client credentials that may start turns and the principals each
	// may speak for (AIRLOCK_CLIENTS, default <Home>/clients.json; internal/clients). Workers
	// authenticate every turn request against it (issue 21).
	ClientsFile string
	// ClientCredential is the credential this machine's CLI starts turns with
	// (AIRLOCK_CLIENT_CREDENTIAL; default <user config dir>/airlock/client.json), created by
	// `airlock clients add`.
	ClientCredential string
	// WebAddr is the approver page's listen address, host:port (AIRLOCK_WEB_ADDR, default
	// 127.0.0.1:8780); web.fetch never connects to it.
	WebAddr string
}

// ErrFetchAllowPrivateRemoved: AIRLOCK_FETCH_ALLOW_PRIVATE is set, but it no longer exists.
var ErrFetchAllowPrivateRemoved = errors.New("config: AIRLOCK_FETCH_ALLOW_PRIVATE was removed (it opened every private address to web.fetch); " +
	"unset it and list the private addresses web.fetch may reach in AIRLOCK_FETCH_ALLOW, a comma list of CIDRs and IP:port pairs, e.g. 10.0.0.0/8,127.0.0.1:8080")

// FromEnv reads the Config from the environment.
func FromEnv() Config {
	c := Config{
		Home:             env("AIRLOCK_HOME", ".airlock"),
		DatabaseURL:      os.Getenv("AIRLOCK_DATABASE_URL"),
		CorpusDir:        os.Getenv("AIRLOCK_CORPUS"),
		RegistryFile:     os.Getenv("AIRLOCK_REGISTRY"),
		PolicyFile:       os.Getenv("AIRLOCK_POLICY"),
		CedarFile:        os.Getenv("AIRLOCK_CEDAR_POLICY"),
		CedarShadowFile:  os.Getenv("AIRLOCK_CEDAR_SHADOW"),
		GuidanceFile:     os.Getenv("AIRLOCK_GUIDANCE"),
		Layers:           SplitList(os.Getenv("AIRLOCK_REGISTRY_LAYERS")),
		SecretsDir:       os.Getenv("AIRLOCK_SECRETS_DIR"),
		ApproverKeyFile:  os.Getenv("AIRLOCK_APPROVER_KEY_FILE"),
		TemporalUI:       env("AIRLOCK_TEMPORAL_UI", defaultTemporalUI()),
		FetchAllow:       SplitList(os.Getenv("AIRLOCK_FETCH_ALLOW")),
		WebAddr:          env("AIRLOCK_WEB_ADDR", "127.0.0.1:8780"),
		ApproversFile:    os.Getenv("AIRLOCK_APPROVERS"),
		Credential:       os.Getenv("AIRLOCK_CREDENTIAL"),
		ClientsFile:      os.Getenv("AIRLOCK_CLIENTS"),
		ClientCredential: os.Getenv("AIRLOCK_CLIENT_CREDENTIAL"),
		TaskQueue:        env("AIRLOCK_TASK_QUEUE", "airlock-turns"),
	}
	if c.CorpusDir == "" {
		c.CorpusDir = DefaultCorpusDir()
	}
	c.RetiredFetchAllowPrivate = os.Getenv("AIRLOCK_FETCH_ALLOW_PRIVATE") != ""
	return c
}

// defaultTemporalUI is the local dev server's Web UI: on AIRLOCK_TEMPORAL_UI_PORT when set
// (the port airlock stack starts it on), else 8233, so links point at the UI in use.
func defaultTemporalUI() string {
	if p := os.Getenv("AIRLOCK_TEMPORAL_UI_PORT"); p != "" && p != "-1" {
		return "http://localhost:" + p
	}
	// A local dev server on another gRPC port has its UI 1000 above it (the Temporal CLI's rule).
	if host, port, err := net.SplitHostPort(os.Getenv("TEMPORAL_ADDRESS")); err == nil && (host == "localhost" || host == "127.0.0.1") {
		if n, err := strconv.Atoi(port); err == nil && n > 0 && n+1000 <= 65535 {
			return "http://localhost:" + strconv.Itoa(n+1000)
		}
	}
	return "http://localhost:8233"
}

// String describes the Config for logs and error messages with every secret masked (the
// database URL through redact.URL), so printing a Config with %v or %+v, or logging it, never
// shows a password.
func (c Config) String() string {
	return fmt.Sprintf("{Home:%s DatabaseURL:%s CorpusDir:%s RegistryFile:%s PolicyFile:%s GuidanceFile:%s Layers:%v ApproverKeyFile:%s ApproversFile:%s Credential:%s TemporalUI:%s TaskQueue:%s FetchAllow:%v WebAddr:%s}",
		c.Home, redact.URL(c.DatabaseURL), c.CorpusDir, c.RegistryFile, c.PolicyFile, c.GuidanceFile, c.Layers, c.ApproverKeyFile, c.ApproversPath(), c.CredentialPath(), redact.URL(c.TemporalUI), c.TaskQueue, c.FetchAllow, c.WebAddr)
}

// StoreURL is the store URL to open: DatabaseURL, or the SQLite file under Home.
func (c Config) StoreURL() string {
	if c.DatabaseURL != "" {
		return c.DatabaseURL
	}
	return "sqlite:" + filepath.Join(c.Home, "airlock.db")
}

// SecretsPath is the secrets folder: SecretsDir, else <Home>/secrets.
func (c Config) SecretsPath() string {
	if c.SecretsDir != "" {
		return c.SecretsDir
	}
	return filepath.Join(c.Home, "secrets")
}

// KeyFile is the approver key path: ApproverKeyFile (e.g. a file an operator mounts from a
// secret store), else <Home>/keys/approver.key, in a folder of keys apart from people's
// credentials (<Home>/credentials) and the approvers file (issue 33, item 4). A key an older
// version created at <Home>/approver.key is used there until it is moved (airlock doctor
// says so).
func (c Config) KeyFile() string {
	if c.ApproverKeyFile != "" {
		return c.ApproverKeyFile
	}
	path := c.KeysDir("approver.key")
	if _, err := os.Stat(path); err != nil {
		if legacy := c.LegacyKeyFile(); fileExists(legacy) {
			return legacy
		}
	}
	return path
}

// LegacyKeyFile is where the approver key lived before issue 33: <Home>/approver.key, in the
// same folder as the credentials folder and the approvers file.
func (c Config) LegacyKeyFile() string { return filepath.Join(c.Home, "approver.key") }

// KeysDir is the path of name in the keys folder, <Home>/keys (mode 0700): the approver key
// and the approver page's surface key, which decide for any approver, live there and never
// beside people's credentials (issue 33, item 4).
func (c Config) KeysDir(name string) string { return filepath.Join(c.Home, "keys", name) }

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ApproversPath is the approvers file path.
func (c Config) ApproversPath() string {
	if c.ApproversFile != "" {
		return c.ApproversFile
	}
	return filepath.Join(c.Home, "approvers.json")
}

// CredentialPath is the CLI approver credential path: Credential, else
// <user config dir>/airlock/credential.json.
func (c Config) CredentialPath() string {
	if c.Credential != "" {
		return c.Credential
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = filepath.Join(c.Home, "config")
	}
	return filepath.Join(dir, "airlock", "credential.json")
}

// ClientsPath is the clients file path: ClientsFile, else <Home>/clients.json.
func (c Config) ClientsPath() string {
	if c.ClientsFile != "" {
		return c.ClientsFile
	}
	return filepath.Join(c.Home, "clients.json")
}

// ClientCredentialPath is the CLI's client credential path: ClientCredential, else
// <user config dir>/airlock/client.json.
func (c Config) ClientCredentialPath() string {
	if c.ClientCredential != "" {
		return c.ClientCredential
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = filepath.Join(c.Home, "config")
	}
	return filepath.Join(dir, "airlock", "client.json")
}

// CredentialsDir is where `airlock approvers add` writes new credentials (<Home>/credentials,
// mode 0700) for the administrator to hand over.
func (c Config) CredentialsDir() string { return filepath.Join(c.Home, "credentials") }

// WorkflowURL links a workflow in the Temporal Web UI.
func (c Config) WorkflowURL(namespace, workflowID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s", strings.TrimRight(c.TemporalUI, "/"), namespace, escapePath(workflowID))
}

func escapePath(s string) string { return strings.ReplaceAll(s, "/", "%2F") }

// DefaultCorpusDir finds ../shared/corpus/agentdojo relative to the repository root (or the
// working directory); "" when absent.
func DefaultCorpusDir() string {
	starts := []string{"."}
	if root, err := stack.RepoRoot(); err == nil {
		starts = append([]string{root}, starts...)
	}
	for _, s := range starts {
		p := filepath.Join(s, "..", "shared", "corpus", "agentdojo")
		if st, err := os.Stat(filepath.Join(p, "tools.json")); err == nil && !st.IsDir() {
			abs, _ := filepath.Abs(p)
			return abs
		}
	}
	return ""
}

// SplitList splits a comma-separated list, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// TemporalOptions loads client options from the environment and Temporal config profiles
// (go.temporal.io/sdk/contrib/envconfig); the one place clients are configured.
func TemporalOptions() (client.Options, error) {
	o, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return o, redact.Error(fmt.Errorf("config: temporal client options: %w", err), os.Getenv("TEMPORAL_API_KEY"))
	}
	if o.HostPort == "" {
		o.HostPort = client.DefaultHostPort
	}
	if o.Namespace == "" {
		o.Namespace = client.DefaultNamespace
	}
	TuneForLoopback(&o)
	pc, err := codec.FromEnv()
	if err != nil {
		return o, err
	}
	if o.DataConverter == nil {
		// Every client and worker writes hidden characters as \u escapes and encrypts payloads
		// with the same key ring (AIRLOCK_PAYLOAD_KEYS_FILE; none: not encrypted).
		o.DataConverter = codec.DataConverter(pc)
	}
	if o.Logger == nil {
		o.Logger = tlog.NewStructuredLogger(NewLogger(os.Stderr))
	}
	return o, nil
}

// TuneForLoopback turns off gRPC gzip when the server is on this machine: compressing
// loopback traffic only burns CPU on both ends (measured ~15% more turns/s on the local stack).
func TuneForLoopback(o *client.Options) {
	host, _, err := net.SplitHostPort(o.HostPort)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		if o.ConnectionOptions.GrpcCompression == nil {
			o.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
		}
	}
}

// NewLogger is the process's structured logger on w: JSON lines when AIRLOCK_LOG_FORMAT=json
// (one object a line, for log collectors; the SDK adds WorkflowID, RunID, ActivityType and
// the like to every line a workflow or activity logs), text otherwise; level from
// AIRLOCK_LOG_LEVEL.
func NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevel()}
	if strings.EqualFold(os.Getenv("AIRLOCK_LOG_FORMAT"), "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logLevel reads AIRLOCK_LOG_LEVEL (debug, info, warn, error; default warn): the SDK's own
// debug lines drown the turn's progress otherwise.
func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(env("AIRLOCK_LOG_LEVEL", "warn"))); err != nil {
		return slog.LevelWarn
	}
	return l
}

// DialTemporal connects a Temporal client with TemporalOptions.
func DialTemporal(ctx context.Context) (client.Client, error) { return DialTemporalWith(ctx, nil) }

// DialTemporalWith is DialTemporal with adjust (if set) applied to the options first: a
// worker's metrics handler and interceptors.
func DialTemporalWith(ctx context.Context, adjust func(*client.Options)) (client.Client, error) {
	o, err := TemporalOptions()
	if err != nil {
		return nil, err
	}
	if adjust != nil {
		adjust(&o)
	}
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("connect to Temporal at %s (namespace %s): %w; start it with `make run` or `airlock stack up`",
			o.HostPort, o.Namespace, err), os.Getenv("TEMPORAL_API_KEY"))
	}
	return c, nil
}
