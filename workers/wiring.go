package workers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/capabilities"
	"github.com/airlock-dev/airlock/internal/catalog"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/mcp"
	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/recording"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/stream"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/registry"
)

// Deps are the dependencies of a worker, built once at start.
type Deps struct {
	Activities *activities.Activities
	Store      *store.Store
	// Registry is the registry loaded at start; Served is the live one (reloads swap it).
	Registry *registry.Registry
	Served   *registry.Live
	// Reload builds the whole registry again from its files and the embedded documents, with
	// the same implementations' configuration: what a reload validates and swaps in.
	Reload func() (*registry.Registry, error)
	// Watched are the files a reload reads (the registry and policy files; none when both are
	// embedded).
	Watched []string
	// Notify is the notify file in force (AIRLOCK_NOTIFY_FILE; nil: no notices, issue 23).
	Notify *notify.Source
}

// Close releases the store.
func (d *Deps) Close() error {
	if d == nil || d.Store == nil {
		return nil
	}
	return d.Store.Close()
}

// ErrCorpusMissing reports a registry layer or replay session that needs the AgentDojo corpus
// when none is configured.
var ErrCorpusMissing = errors.New("workers: AgentDojo corpus not found (set AIRLOCK_CORPUS to the folder holding tools.json and runs/)")

// Build opens the store, loads the registry (fail closed), binds every implementation and
// configures the inference providers. temporalProbe feeds system.health (nil: "not
// configured").
func Build(ctx context.Context, cfg config.Config, temporalProbe capabilities.Probe) (*Deps, error) {
	return BuildWith(ctx, cfg, temporalProbe, nil)
}

// BuildWith is Build with extra implementations bound (a team's own capabilities, whose
// entries the registry files or layers in cfg declare); reloads bind them again.
func BuildWith(ctx context.Context, cfg config.Config, temporalProbe capabilities.Probe, extra []registry.Implementation) (*Deps, error) {
	if _, err := WorkflowCacheSize(); err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	key, err := approverKey(cfg)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.StoreURL())
	if err != nil {
		return nil, err
	}
	// The receipts log (issue 36): every audit row's records are signed with the log key in
	// the Airlock home as they are appended (created beside the approver key on first start).
	rkey, err := receipts.LoadOrCreateKey(cfg.Home, receipts.Origin())
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("workers: receipts log key: %w", err)
	}
	st.UseReceiptKey(rkey)
	notices, err := NotifyFromEnv()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("workers: %w", err)
	}
	var outbox *notify.Outbox
	if notices != nil {
		outbox = wireNotify(notices, st, slog.Default())
	}
	// MCP tools that leave their pin are audited, and operators notified (workers/mcp.go).
	AuditMCPChanges(st, outbox)
	load := func() (*registry.Registry, error) { return LoadRegistryWith(cfg, temporalProbe, st.Ping, nil, extra) }
	reg, err := load()
	if err != nil {
		st.Close()
		return nil, err
	}
	served := registry.NewLive(reg)
	acts := &activities.Activities{Registry: reg, Served: served, Store: st, ApproverKey: key, Approvers: approvers.NewSource(cfg.ApproversPath()).Current,
		Clients: clients.NewSource(cfg.ClientsPath()).Current,
		Memory:  MemoryFromEnv()}
	if cfg.CorpusDir != "" {
		acts.Replay = inference.NewReplay(agentdojo.Recorded(agentdojo.SessionLoader(cfg.CorpusDir)))
	}
	live, err := LiveProvider()
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("workers: live model: %w", err)
	}
	acts.Live = live
	// The approver page's relying party (issue 21, item 3): every worker verifies passkey
	// decisions against the same RP id and origins the page registers passkeys under.
	if acts.Passkeys, err = passkey.FromEnv(); err != nil {
		st.Close()
		return nil, fmt.Errorf("workers: %w", err)
	}
	if os.Getenv("AIRLOCK_STREAM") != "0" {
		// Client-stream events (issue 22): Infer consumes the provider's stream and every
		// step writes its AG-UI event to the store, outside Temporal history.
		acts.Events = stream.Writer{Store: st}
	}
	if outbox != nil {
		acts.Notices = outbox
	}
	return &Deps{Activities: acts, Store: st, Registry: reg, Served: served, Reload: load, Watched: WatchedFiles(cfg), Notify: notices}, nil
}

// LiveProvider is the live model the environment configures (nil when none is). AIRLOCK_PROVIDER
// names the service (inference.Services: openai, openai-responses, anthropic, azure, gemini,
// groq, openrouter, xai, ollama, ollama-native, vllm), each configured as inference.ServiceConfigFromEnv
// says. Without it: Anthropic Messages when an AIRLOCK_ANTHROPIC_ setting is set
// (AIRLOCK_ANTHROPIC_API_KEY or AIRLOCK_ANTHROPIC_API_KEY_FILE, AIRLOCK_ANTHROPIC_BASE_URL,
// AIRLOCK_ANTHROPIC_MODEL), an OpenAI-compatible endpoint when AIRLOCK_OPENAI_BASE_URL is
// set; both set is an error that says to choose.
func LiveProvider() (inference.Provider, error) {
	ac, anthropic, err := inference.AnthropicConfigFromEnv()
	if err != nil {
		return nil, err
	}
	openai := os.Getenv("AIRLOCK_OPENAI_BASE_URL") != ""
	choice := os.Getenv("AIRLOCK_PROVIDER")
	switch {
	case choice == "" && anthropic && openai:
		return nil, errors.New("both AIRLOCK_OPENAI_BASE_URL and AIRLOCK_ANTHROPIC_* are set: choose one with AIRLOCK_PROVIDER=openai or AIRLOCK_PROVIDER=anthropic")
	case choice == "" && anthropic:
		choice = "anthropic"
	case choice == "" && openai:
		return inference.NewOpenAI(inference.OpenAIConfigFromEnv())
	case choice == "":
		return nil, nil
	}
	svc, ok := inference.ServiceNamed(choice)
	if !ok {
		return nil, fmt.Errorf("AIRLOCK_PROVIDER %q: want one of %s", choice, inference.ServiceNames())
	}
	switch svc.API {
	case "messages":
		return inference.NewAnthropic(ac)
	case "responses":
		cfg, err := inference.ServiceConfigFromEnv(svc)
		if err != nil {
			return nil, err
		}
		return inference.NewOpenAIResponses(cfg)
	case "/api/chat":
		cfg, err := inference.ServiceConfigFromEnv(svc)
		if err != nil {
			return nil, err
		}
		return inference.NewOllama(cfg)
	}
	cfg, err := inference.ServiceConfigFromEnv(svc)
	if err != nil {
		return nil, err
	}
	return inference.NewOpenAI(cfg)
}

// DescribeProvider is the line a worker prints at start and doctor shows: which provider, API
// and model p serves, at which endpoint (secrets masked), or why none is served.
func DescribeProvider(p inference.Provider) string {
	if p == nil {
		return "no live model (replay of recorded sessions only; set AIRLOCK_PROVIDER, AIRLOCK_OPENAI_BASE_URL or AIRLOCK_ANTHROPIC_API_KEY)"
	}
	if d, ok := p.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return fmt.Sprintf("%T", p)
}

// MemoryFromEnv is the memory root agent memory proposals bind to: AIRLOCK_MEMORY_ROOT (an
// absolute path to a real directory holding memory.md). Unset: memory proposals are never
// offered.
func MemoryFromEnv() proposals.Memory {
	return proposals.Memory{Root: os.Getenv("AIRLOCK_MEMORY_ROOT")}
}

// WatchedFiles are the registry, policy and guidance files cfg names (AIRLOCK_REGISTRY,
// AIRLOCK_POLICY, AIRLOCK_GUIDANCE), every layer file with its policy
// (AIRLOCK_REGISTRY_LAYERS) and the MCP servers file (AIRLOCK_MCP_SERVERS): what a worker polls
// for live reload. Embedded documents never change under a running worker.
func WatchedFiles(cfg config.Config) []string {
	var out []string
	for _, f := range []string{cfg.RegistryFile, cfg.PolicyFile, cfg.CedarFile, cfg.CedarShadowFile, cfg.GuidanceFile, os.Getenv(mcp.EnvServers)} {
		if f != "" {
			out = append(out, f)
		}
	}
	for _, l := range cfg.Layers {
		if registry.IsLayerFile(l) {
			lp, pp := registry.LayerFilePaths(l)
			out = append(out, lp, pp)
		}
	}
	return out
}

// ready is the readiness of capabilities that run in the worker itself (no provider to lose).
func ready(context.Context) error { return nil }

// LoadGuidance reads the capability guidance: the embedded document, or cfg.GuidanceFile.
// Guidance is optional and lower-trust: a file that cannot be read or parsed contributes
// nothing (logged on log), and no worker ever refuses to serve because of it.
func LoadGuidance(cfg config.Config, log *slog.Logger) *catalog.GuidanceSet {
	src := registry.Source{Name: "embedded capability guidance", Data: registry.EmbeddedGuidance}
	if cfg.GuidanceFile != "" {
		f, err := registry.FileSource(cfg.GuidanceFile)
		if err != nil {
			log.Warn("capability guidance not loaded; capabilities describe without guidance", "error", err)
			return nil
		}
		src = f
	}
	gs, errs := catalog.ParseGuidance(src)
	for _, err := range errs {
		log.Warn("capability guidance not loaded; capabilities describe without guidance", "error", err)
	}
	return gs
}

// CursorKey is the key catalog list cursors are authenticated with, derived from the approver
// key every worker shares (AIRLOCK_APPROVER_KEY or the key file), so a cursor one worker issued
// is accepted by another. Without one (a tool that serves no turn, before any worker created
// the key file) it is a random key: its cursors are valid in this process only.
func CursorKey(cfg config.Config) []byte {
	var k token.Key
	var err error
	if hex := os.Getenv("AIRLOCK_APPROVER_KEY"); hex != "" {
		k, err = token.ParseKey(hex)
	} else {
		k, err = token.LoadKey(cfg.KeyFile())
	}
	if err != nil {
		if _, rerr := rand.Read(k[:]); rerr != nil {
			return nil
		}
	}
	return catalog.DeriveCursorKey(k[:])
}

func approverKey(cfg config.Config) (token.Key, error) {
	if hex := os.Getenv("AIRLOCK_APPROVER_KEY"); hex != "" {
		return token.ParseKey(hex)
	}
	return token.LoadOrCreateKey(cfg.KeyFile())
}

// ApproverKey is the key approver surfaces use to open sealed tokens: AIRLOCK_APPROVER_KEY, or
// the key file a worker created. Unlike a worker, a surface never creates one: a new key could
// open no token, so a missing file is an error naming its path (token.ErrNoKey).
func ApproverKey(cfg config.Config) (token.Key, error) {
	if hex := os.Getenv("AIRLOCK_APPROVER_KEY"); hex != "" {
		return token.ParseKey(hex)
	}
	return token.LoadKey(cfg.KeyFile())
}

// LoadRegistry loads the base registry (embedded, or cfg.RegistryFile) and its policy sidecar
// (embedded, or cfg.PolicyFile) plus cfg.Layers with their embedded policies, and binds the Go
// and schema-defined implementations, web.fetch with FetchConfig(cfg). Any problem is a
// *registry.LoadError or an error naming what to configure: the worker must not serve.
func LoadRegistry(cfg config.Config, temporalProbe, storeProbe capabilities.Probe) (*registry.Registry, error) {
	return LoadRegistryWith(cfg, temporalProbe, storeProbe, nil, nil)
}

// LoadRegistryWith is LoadRegistry with extra registry and policy documents loaded after the
// layers, and the implementations that serve their entries: for a host that binds capabilities
// of its own (airlock bench's bench layer) under every rule the registry applies to the rest.
func LoadRegistryWith(cfg config.Config, temporalProbe, storeProbe capabilities.Probe, extra []registry.Source, extraImpls []registry.Implementation) (*registry.Registry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	fetch, err := FetchConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	base := registry.Base()
	if cfg.RegistryFile != "" {
		src, err := registry.FileSource(cfg.RegistryFile)
		if err != nil {
			return nil, err
		}
		base = src
	}
	policy := registry.BasePolicy()
	if cfg.PolicyFile != "" {
		src, err := registry.FileSource(cfg.PolicyFile)
		if err != nil {
			return nil, err
		}
		policy = src
	}
	sources := []registry.Source{base, policy}
	health := capabilities.SystemHealth(capabilities.HealthConfig{Temporal: temporalProbe, Store: storeProbe})
	health.Ready = ready
	cat := &catalog.Catalog{Key: CursorKey(cfg), Guidance: LoadGuidance(cfg, slog.Default())}
	list, describe := capabilities.CatalogList(cat), capabilities.CatalogDescribe(cat)
	list.Ready, describe.Ready = ready, ready
	fetcher := capabilities.NewFetcher(fetch)
	impls := []registry.Implementation{health, list, describe, capabilities.WebFetch(fetcher)}
	var tools map[string][]recording.Tool
	for _, name := range cfg.Layers {
		src, pol, err := registry.LayerSources(name)
		if err != nil {
			return nil, err
		}
		sources = append(sources, src, pol)
		if registry.IsLayerFile(name) {
			continue // its HTTP entries are bound below with every other source's
		}
		entries, err := registry.Entries(src)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(name, "agentdojo-") {
			if cfg.CorpusDir == "" {
				return nil, fmt.Errorf("registry layer %s: %w", name, ErrCorpusMissing)
			}
			if tools == nil {
				all, err := agentdojo.LoadTools(filepath.Join(cfg.CorpusDir, "tools.json"))
				if err != nil {
					return nil, fmt.Errorf("registry layer %s: %w", name, err)
				}
				tools = make(map[string][]recording.Tool, len(all))
				for suite, ts := range all {
					if tools[suite], err = agentdojo.RecordingTools(ts); err != nil {
						return nil, fmt.Errorf("registry layer %s: suite %s: %w", name, suite, err)
					}
				}
			}
			ims, err := capabilities.AgentDojoReplay(entries, tools, agentdojo.Recorded(agentdojo.SessionLoader(cfg.CorpusDir)))
			if err != nil {
				return nil, err
			}
			impls = append(impls, ims...)
		}
	}
	sources = append(sources, extra...)
	impls = append(impls, extraImpls...)
	// HTTP capabilities are served from their declarations, in any document. A document that
	// does not decode binds nothing here; Load reports why.
	secrets := capabilities.SecretsFrom(cfg.SecretsPath())
	for _, src := range sources {
		entries, err := registry.Entries(src)
		if err != nil {
			continue
		}
		ims, err := capabilities.HTTPCapabilities(entries, fetcher, secrets)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name, err)
		}
		impls = append(impls, ims...)
	}
	mcpImpls, err := mcpImplementations(sources) // MCP tool entries of any layer (workers/mcp.go)
	if err != nil {
		return nil, err
	}
	impls = append(impls, mcpImpls...)
	if cfg.CedarFile != "" {
		src, err := registry.FileSource(cfg.CedarFile)
		if err != nil {
			return nil, err
		}
		if !registry.IsCedarSource(src) {
			return nil, fmt.Errorf("AIRLOCK_CEDAR_POLICY %s: a Cedar policy file's name ends in %s", cfg.CedarFile, registry.CedarSuffix)
		}
		sources = append(sources, src)
	}
	if cfg.CedarShadowFile != "" {
		src, err := registry.FileSource(cfg.CedarShadowFile)
		if err != nil {
			return nil, err
		}
		if !registry.IsShadowSource(src) {
			return nil, fmt.Errorf("AIRLOCK_CEDAR_SHADOW %s: a shadow Cedar policy file's name ends in %s", cfg.CedarShadowFile, registry.ShadowSuffix)
		}
		sources = append(sources, src)
	}
	reg, err := registry.Load(sources, impls)
	if err != nil {
		return nil, err
	}
	if err := CheckCedarGroups(reg, cfg.ApproversPath()); err != nil {
		return nil, err
	}
	return reg, nil
}

// ErrUnknownGroup reports a Cedar policy naming a group no approver in the approvers file
// belongs to: refused at load (issue 37), like a capability or argument the registry does not
// know.
var ErrUnknownGroup = errors.New("workers: the Cedar policy names a group the approvers file does not know")

// CheckCedarGroups refuses reg's Cedar policy when it names a group (a Group entity or an ask
// rule's @groups) that no approver in the approvers file at path belongs to. A registry without
// a Cedar policy passes.
func CheckCedarGroups(reg *registry.Registry, path string) error {
	set := reg.Cedar()
	if set == nil || len(set.Groups()) == 0 {
		return nil
	}
	known := map[string]bool{}
	if as, err := approvers.NewSource(path).Current(); err == nil && as != nil {
		for _, n := range as.Names() {
			for _, g := range as.GroupsOf(n) {
				known[g] = true
			}
		}
	}
	var unknown []string
	for _, g := range set.Groups() {
		if !known[g] {
			unknown = append(unknown, g)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: %s names %s, not a group of any approver in %s", ErrUnknownGroup, set.Source(), strings.Join(unknown, ", "), path)
	}
	return nil
}
