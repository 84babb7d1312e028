package eval

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/capabilities"
	"github.com/airlock-dev/airlock/internal/recording"
	"github.com/airlock-dev/airlock/internal/taubench"
	"github.com/airlock-dev/airlock/registry"
)

// Corpus says where recordings are: the AgentDojo folder (tools.json, tasks.json, runs/) and
// the tau-bench folder (<model>-<domain>[.sample].json trajectory files and
// <domain>_tools.json). Either may be empty when its benchmark is not evaluated.
type Corpus struct {
	AgentDojoDir string
	TauBenchDir  string
	// UserProvided replays under the provenance policy (issue 24): reads without side effect
	// that are not automatic as such run without a human when every argument value is the
	// user's own (registry.GenerateUserProvidedPolicy); false is the structural policy.
	UserProvided bool
	// Cedar, when set, gives each AgentDojo suite's Cedar policy (issue 37), loaded with the
	// suite's registry: it decides stage 3 beside the JSON policy.
	Cedar SuitePolicy
}

// Loader returns the session loader the replay provider and the replay capabilities share:
// "tau-bench/…" sessions come from the tau-bench folder, all others are AgentDojo trace paths.
// Share one loader per run: the tau-bench loader parses each trajectory file once.
func (c Corpus) Loader() capabilities.TraceLoader {
	ad := agentdojo.SessionLoader(c.AgentDojoDir)
	tb := taubench.SessionLoader(c.TauBenchDir)
	return agentdojo.Recorded(func(session string) (*agentdojo.Trace, error) {
		if taubench.IsSession(session) {
			if c.TauBenchDir == "" {
				return nil, fmt.Errorf("eval: session %s: no tau-bench folder configured", session)
			}
			return tb(session)
		}
		if c.AgentDojoDir == "" {
			return nil, fmt.Errorf("eval: session %s: no AgentDojo folder configured", session)
		}
		return ad(session)
	})
}

// Registry loads the registry one suite's turns run under: a layer generated from the suite's
// tools file with the registry's own side-effect class (agentdojo.Classify,
// taubench.Consequential), bound to replay capabilities that read recordings with load (nil:
// a new Loader). It fails closed like any registry.
func (c Corpus) Registry(bench, suite string, load capabilities.TraceLoader) (*registry.Registry, error) {
	if load == nil {
		load = c.Loader()
	}
	var (
		src    registry.Source
		tools  []agentdojo.Tool
		scheme string
		err    error
	)
	switch bench {
	case BenchAgentDojo:
		all, lerr := agentdojo.LoadTools(filepath.Join(c.AgentDojoDir, "tools.json"))
		if lerr != nil {
			return nil, lerr
		}
		if tools = all[suite]; tools == nil {
			return nil, fmt.Errorf("eval: suite %q is not in %s", suite, filepath.Join(c.AgentDojoDir, "tools.json"))
		}
		scheme = "agentdojo"
		src, err = agentdojo.Layer(suite, tools)
	case BenchTauBench:
		if tools, err = taubench.LoadTools(filepath.Join(c.TauBenchDir, suite+"_tools.json")); err != nil {
			return nil, err
		}
		scheme = "tau-bench"
		specs := make([]registry.ToolSpec, 0, len(tools))
		for _, t := range tools {
			se, net := registry.SideEffectNone, registry.NetworkLocal
			var dest *registry.Destination
			if taubench.Consequential(suite, t.Name) {
				se, net = registry.SideEffectExternalWrite, registry.NetworkExternal
				dest = &registry.Destination{Kind: registry.DestinationSystem, Name: "tau-bench " + suite + " environment (replayed)",
					Fields: registry.ArgumentFields(t.Parameters)}
			}
			specs = append(specs, registry.ToolSpec{Name: t.Name, Description: t.Description, SideEffect: se, Network: net,
				SchemaRef: scheme + ":" + suite + "/" + t.Name, Destination: dest})
		}
		src, err = registry.GenerateLayer("tau-bench-"+suite, "tau-bench-"+suite+".generated", "tau-bench replay (evaluation)",
			"taubench."+strings.ReplaceAll(suite, "_", "-"), specs)
	default:
		return nil, fmt.Errorf("eval: unknown benchmark %q", bench)
	}
	if err != nil {
		return nil, err
	}
	entries, err := registry.Entries(src)
	if err != nil {
		return nil, err
	}
	rtools, err := agentdojo.RecordingTools(tools)
	if err != nil {
		return nil, err
	}
	impls, err := capabilities.RecordedReplay(scheme, entries, map[string][]recording.Tool{suite: rtools}, load)
	if err != nil {
		return nil, err
	}
	policy := registry.GeneratePolicy(src, src.Name+".policy")
	if c.UserProvided {
		policy = registry.GenerateUserProvidedPolicy(src, src.Name+".policy-user-provided")
	}
	sources := []registry.Source{src, policy}
	if c.Cedar != nil && bench == BenchAgentDojo {
		text, err := c.Cedar(suite)
		if err != nil {
			return nil, err
		}
		sources = append(sources, registry.Source{Name: "agentdojo-" + suite + ".cedar", Data: text})
	}
	return registry.Load(sources, impls)
}

// LoadTauBench reads every trajectory file in dir (<model>-<domain>.json or .sample.json,
// excluding *_tools.json) that f selects, one Case per trajectory with one CaseTurn per user
// message that the agent answered (the simulated user's closing "###STOP###" turns have no
// recorded reply and are skipped). tau-bench has no injections: Attack is AttackNone. Errors: a malformed file,
// ErrNoCases when nothing matches.
func LoadTauBench(dir string, f Filter) ([]*Case, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("eval: tau-bench folder: %w", err)
	}
	var files []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".json") || strings.HasSuffix(n, "_tools.json") {
			continue
		}
		files = append(files, filepath.Join(dir, n))
	}
	sort.Strings(files)
	var cases []*Case
	have := map[string]map[string]bool{"models": {}, "suites": {}}
	for _, p := range files {
		trajs, err := taubench.LoadFile(p)
		if err != nil {
			return nil, err
		}
		for _, tr := range trajs {
			have["models"][tr.Model], have["suites"][tr.Domain] = true, true
			if !f.match(tr.Domain, tr.Model, AttackNone) {
				continue
			}
			c := &Case{
				Benchmark: BenchTauBench, Model: tr.Model, Suite: tr.Domain, Attack: AttackNone, Path: filepath.Base(p),
				Task:           fmt.Sprintf("task_%d/trial_%d", tr.TaskID, tr.Trial),
				Utility:        tr.Reward > 0,
				recordedErrors: map[string]string{},
				consequential: func(domain string) func(string) bool {
					return func(tool string) bool { return taubench.Consequential(domain, tool) }
				}(tr.Domain),
			}
			for _, t := range tr.Turns {
				if len(t.Trace.Steps()) == 0 {
					// The simulated user's closing "###STOP###": no agent reply was recorded.
					continue
				}
				ct := CaseTurn{Session: taubench.SessionName(filepath.Base(p), tr.TaskID, tr.Trial, t.Index), Message: t.UserMessage}
				c.recorded = append(c.recorded, recordedCallsOf(len(c.Turns)+1, t.Trace)...)
				c.answer = lastAnswer(t.Trace)
				if len(c.Turns) == 0 {
					ct.SystemPrompt = t.Trace.SystemPrompt()
				}
				c.Turns = append(c.Turns, ct)
				for k, v := range recordedErrors(ct.Session, t.Trace) {
					c.recordedErrors[k] = v
				}
			}
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%w in %s (domain %q, model %q)%s", ErrNoCases, dir, f.Suite, f.Model, available(have))
	}
	return cases, nil
}
