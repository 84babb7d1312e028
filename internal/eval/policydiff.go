package eval

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/cedarpolicy"
	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/registry"
)

// PolicyChange is one recorded call a candidate policy decides differently from the live one
// (`airlock policy diff`, issue 37).
type PolicyChange struct {
	Suite string `json:"suite"`
	Model string `json:"model"`
	// Path is the recording (or, from the audit, the workflow id); Turn/Round/Index locate
	// the call in it.
	Path      string          `json:"path"`
	Turn      int             `json:"turn,omitempty"`
	Round     int             `json:"round,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Benign    bool            `json:"benign"`
	// Injected is the attacker value the call carries ("" for none).
	Injected  string `json:"injected,omitempty"`
	Live      string `json:"live"`
	Candidate string `json:"candidate"`
	// Why is the candidate's determining policies and reason.
	Why string `json:"why,omitempty"`
}

// SuiteDiff sums one suite's recorded calls under the live and the candidate policy, as if
// every recorded call were proposed (a static replay: no turn stops at a denial).
type SuiteDiff struct {
	Suite string `json:"suite"`
	// Calls are the recorded calls of registered tools; BenignTraces the benign runs.
	Calls        int `json:"calls"`
	BenignTraces int `json:"benign_traces"`
	// LiveAsks and CandidateAsks count benign calls each policy holds for a human; Forbids
	// the benign calls each refuses.
	LiveAsks         int `json:"live_asks"`
	CandidateAsks    int `json:"candidate_asks"`
	LiveForbids      int `json:"live_forbids"`
	CandidateForbids int `json:"candidate_forbids"`
	// ConsequentialPermitted counts calls of consequential tools the candidate permits (runs
	// without a human by a rule); InjectedPermitted those of them carrying an injected value
	// (a local read carrying one runs under every policy and sends it nowhere).
	ConsequentialPermitted int `json:"consequential_permitted"`
	InjectedPermitted      int `json:"injected_permitted"`
	Changed                int `json:"changed"`
}

// PolicyDiffReport is the result of PolicyDiff.
type PolicyDiffReport struct {
	Suites  []SuiteDiff    `json:"suites"`
	Changes []PolicyChange `json:"changes"`
}

// SuitePolicy gives a suite's Cedar policy text (nil: none, the JSON policy decides).
type SuitePolicy func(suite string) ([]byte, error)

// PolicyDiff replays every recorded call of the AgentDojo cases through the live policy
// (the corpus's JSON policy, plus live's Cedar text when it gives one) and the candidate,
// with each call's provenance computed from the recording's context before the call (the
// user's messages, the system prompt, tool results as untrusted data, assistant prose), and
// lists every call they decide differently. Errors: a suite whose registry or policy does not
// load, a trace that does not read.
func PolicyDiff(corpus Corpus, cases []*Case, live, candidate SuitePolicy) (PolicyDiffReport, error) {
	var rep PolicyDiffReport
	type suiteRegs struct{ live, cand *registry.Registry }
	regs := map[string]suiteRegs{}
	sums := map[string]*SuiteDiff{}
	load := func(suite string, p SuitePolicy) (*registry.Registry, error) {
		base, err := corpus.Registry(BenchAgentDojo, suite, nil)
		if err != nil || p == nil {
			return base, err
		}
		text, err := p(suite)
		if err != nil || text == nil {
			return base, err
		}
		set, err := cedarpolicy.Compile(suite+".cedar", text, mustActions(base))
		if err != nil {
			return nil, fmt.Errorf("eval: suite %s: %w", suite, err)
		}
		return registry.WithCedar(base, set), nil
	}
	for _, c := range cases {
		if c.Benchmark != BenchAgentDojo {
			continue
		}
		r, ok := regs[c.Suite]
		if !ok {
			var err error
			if r.live, err = load(c.Suite, live); err != nil {
				return rep, err
			}
			if r.cand, err = load(c.Suite, candidate); err != nil {
				return rep, err
			}
			regs[c.Suite] = r
			sums[c.Suite] = &SuiteDiff{Suite: c.Suite}
		}
		sum := sums[c.Suite]
		if c.Benign() {
			sum.BenignTraces++
		}
		tr, err := agentdojo.LoadTrace(filepath.Join(corpus.AgentDojoDir, c.Path))
		if err != nil {
			return rep, err
		}
		var entries []provenance.Entry
		calls := 0
		for _, m := range tr.Messages {
			switch m.Role {
			case agentdojo.RoleUser:
				entries = append(entries, provenance.Entry{Kind: provenance.SourceUser, Text: m.Content})
			case agentdojo.RoleSystem:
				entries = append(entries, provenance.Entry{Kind: provenance.SourceSystem, Text: m.Content})
			case agentdojo.RoleTool:
				entries = append(entries, provenance.Entry{Kind: provenance.SourceResult, Text: m.Content, Capability: "recorded tool", CallID: m.ToolCallID})
			case agentdojo.RoleAssistant:
				for _, call := range m.ToolCalls {
					capb, ok := r.live.ByToolName(call.Function)
					if !ok {
						continue
					}
					ccap, _ := r.cand.ByToolName(call.Function)
					sum.Calls++
					report, err := provenance.Compute(call.Args, entries)
					if err != nil {
						report = provenance.Report{Rules: provenance.Rules, Error: err.Error()}
					}
					lv, _ := decideStatic(r.live, capb, call.Args, report, calls)
					cv, why := decideStatic(r.cand, ccap, call.Args, report, calls)
					calls++
					injected := CarriedValue(string(call.Args), c.AttackerValues)
					if c.Benign() {
						sum.LiveAsks += b2i(lv == cedarpolicy.OutcomeAsk)
						sum.CandidateAsks += b2i(cv == cedarpolicy.OutcomeAsk)
						sum.LiveForbids += b2i(lv == cedarpolicy.OutcomeForbid)
						sum.CandidateForbids += b2i(cv == cedarpolicy.OutcomeForbid)
					}
					if cv == cedarpolicy.OutcomePermit && c.isConsequential(call.Function) {
						sum.ConsequentialPermitted++
					}
					if cv == cedarpolicy.OutcomePermit && injected != "" && c.isConsequential(call.Function) {
						sum.InjectedPermitted++
					}
					if lv != cv {
						sum.Changed++
						rep.Changes = append(rep.Changes, PolicyChange{Suite: c.Suite, Model: c.Model, Path: c.Path, Tool: call.Function,
							Arguments: call.Args, Benign: c.Benign(), Injected: injected, Live: string(lv), Candidate: string(cv), Why: why})
					}
				}
				if m.Content != "" {
					entries = append(entries, provenance.Entry{Kind: provenance.SourceAssistant, Text: m.Content})
				}
			}
		}
	}
	for _, s := range sums {
		rep.Suites = append(rep.Suites, *s)
	}
	sort.Slice(rep.Suites, func(i, j int) bool { return rep.Suites[i].Suite < rep.Suites[j].Suite })
	return rep, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mustActions(reg *registry.Registry) []cedarpolicy.Action {
	as, _ := registry.CedarActions(reg.Capabilities())
	return as
}

// decideStatic is stage 3 on recorded facts: the JSON policy's gate, then the Cedar policy
// when the registry has one, else the JSON autonomy (automatic, automatic-when-user-provided
// on the report, confirm). why names the Cedar policies and reason.
func decideStatic(reg *registry.Registry, c *registry.Capability, args json.RawMessage, rep provenance.Report, calls int) (cedarpolicy.Outcome, string) {
	if c == nil {
		return cedarpolicy.OutcomeForbid, "not registered"
	}
	auth := reg.Authorize(c, Principal)
	if auth.Code != "" {
		return cedarpolicy.OutcomeForbid, auth.Code
	}
	if set := reg.Cedar(); set != nil {
		d := set.Decide(activities.CedarRequest(c, Principal, nil, args, rep, time.Time{}, calls))
		return d.Outcome, fmt.Sprintf("%v %s", d.Policies, d.Reason)
	}
	fields := c.DestinationOf().Fields
	switch {
	case auth.Automatic:
		return cedarpolicy.OutcomePermit, "automatic"
	case auth.IfUserProvided && rep.UserProvided(fields):
		return cedarpolicy.OutcomePermit, "automatic-when-user-provided"
	}
	return cedarpolicy.OutcomeAsk, "confirm"
}
