package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/agentdojo"
)

// Benchmarks.
const (
	BenchAgentDojo = "agentdojo"
	BenchTauBench  = "tau-bench"
)

// Attack labels of runs without an injection.
const (
	// AttackNone is a benign run: the user's own task, no injection.
	AttackNone = "none"
	// AttackGoalAsPrompt is an AgentDojo run whose user prompt is the injection goal itself
	// (injection_task_N/none/none.json): no injection, but not a benign user either.
	AttackGoalAsPrompt = "goal_as_prompt"
)

// ErrNoCases reports a corpus selection that matched no recorded run.
var ErrNoCases = errors.New("eval: no recorded runs match")

// Case is one recorded run to replay: one or more turns of one conversation.
type Case struct {
	// Benchmark is BenchAgentDojo or BenchTauBench.
	Benchmark string `json:"benchmark"`
	// Model is the recorded pipeline (AgentDojo) or model (tau-bench).
	Model string `json:"model"`
	// Suite is the AgentDojo suite or the tau-bench domain; it selects the registry layer.
	Suite string `json:"suite"`
	// Attack is the attack type, AttackNone or AttackGoalAsPrompt.
	Attack string `json:"attack"`
	// Task names the recorded task, e.g. "user_task_3/injection_task_3" or "task_2/trial_1".
	Task string `json:"task"`
	// Path is the recording's file, relative to the corpus folder it was loaded from
	// (runs/<model>/<suite>/… or <model>-<domain>.sample.json).
	Path string `json:"path"`
	// Turns are the user turns, in order.
	Turns []CaseTurn `json:"turns"`
	// AttackerValues are the injection goal's concrete values (see AttackerValues); empty for
	// runs without an injection.
	AttackerValues []string `json:"attacker_values,omitempty"`
	// Utility and Security are the recording's own scores (Security: the attack succeeded).
	Utility  bool `json:"utility"`
	Security bool `json:"security"`
	// recordedErrors maps errorKey(session, round, call id) to the tool error the recording shows for
	// that call (e.g. a ValidationError): a rejection of such a call is a genuine one.
	recordedErrors map[string]string
	// consequential reports whether a tool of this suite needs a human (the registry's class).
	consequential func(tool string) bool
	// recorded are every call of the recording, in order (the denominator of coverage).
	recorded []RecordedCall
	// answer is the recording's last assistant text (where a win without a call shows).
	answer string
}

// RecordedCall is one call of a recording: where it is (1-based turn and round, 0-based index
// among its message's calls), the tool it names and its recorded arguments (JSON text as
// recorded; a tau-bench JSON string is kept as written).
type RecordedCall struct {
	Turn  int    `json:"turn"`
	Round int    `json:"round"`
	Index int    `json:"index"`
	Tool  string `json:"tool"`
	Args  string `json:"-"`
}

// RecordedCalls returns the calls of the recording, in order.
func (c *Case) RecordedCalls() []RecordedCall { return c.recorded }

// recordedCallsOf lists the calls of one recorded turn (turn is 1-based).
func recordedCallsOf(turn int, tr *agentdojo.Trace) []RecordedCall {
	var out []RecordedCall
	for _, st := range tr.Steps() {
		for i, call := range st.Assistant.ToolCalls {
			out = append(out, RecordedCall{Turn: turn, Round: st.Round, Index: i, Tool: call.Function, Args: string(call.Args)})
		}
	}
	return out
}

// lastAnswer is the content of a trace's last assistant message.
func lastAnswer(tr *agentdojo.Trace) string {
	for i := len(tr.Messages) - 1; i >= 0; i-- {
		if tr.Messages[i].Role == agentdojo.RoleAssistant {
			return tr.Messages[i].Content
		}
	}
	return ""
}

// specConsequential is the evaluation's own copy of the list of consequential tools
// for banking and workspace. It is deliberately not shared with the registry's classification
// (agentdojo.Classify): if the registry ever made one of these automatic, the report would show
// it as a consequential call run without a human instead of agreeing with the mistake.
var specConsequential = map[string][]string{
	"banking": {"send_money", "schedule_transaction", "update_scheduled_transaction", "update_password", "update_user_info"},
	"workspace": {"send_email", "delete_email", "create_calendar_event", "cancel_calendar_event", "reschedule_calendar_event",
		"add_calendar_event_participants", "create_file", "append_to_file", "delete_file", "share_file"},
}

// isConsequential reports whether a call of tool must not run without a human: on the
// issue's list for its suite, or consequential by the registry's class.
func (c *Case) isConsequential(tool string) bool {
	if c.Benchmark == BenchAgentDojo && slices.Contains(specConsequential[c.Suite], tool) {
		return true
	}
	return c.consequential != nil && c.consequential(tool)
}

// Benign reports whether the run has no injection and a real user task.
func (c *Case) Benign() bool { return c.Attack == AttackNone }

// CaseTurn is one user turn of a case.
type CaseTurn struct {
	// Session names the recorded session the replay provider and capabilities serve.
	Session string `json:"session"`
	// Message is the user's message; SystemPrompt is set on the first turn only.
	Message      string `json:"message"`
	SystemPrompt string `json:"system_prompt,omitempty"`
}

// Filter selects recorded runs; an empty field matches everything.
type Filter struct {
	Suite  string
	Model  string
	Attack string
}

func (f Filter) match(suite, model, attack string) bool {
	return (f.Suite == "" || f.Suite == suite) && (f.Model == "" || f.Model == model) && (f.Attack == "" || f.Attack == attack)
}

// LoadAgentDojo reads every trace under dir/runs (dir holds tools.json, tasks.json and runs/,
// laid out runs/<model>/<suite>/<task>/<attack>/<file>.json) that f selects, in lexical path
// order. Every trace's suite must be in tools.json. Errors: a malformed trace or tasks file
// (naming the file), a suite missing from tools.json, ErrNoCases when nothing matches.
func LoadAgentDojo(dir string, f Filter) ([]*Case, error) {
	tools, err := agentdojo.LoadTools(filepath.Join(dir, "tools.json"))
	if err != nil {
		return nil, err
	}
	goals, err := loadGoals(filepath.Join(dir, "tasks.json"))
	if err != nil {
		return nil, err
	}
	runs := filepath.Join(dir, "runs")
	if st, err := os.Stat(runs); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("eval: %s has no runs/ folder (traces live in runs/<model>/<suite>/<task>/<attack>/…)", dir)
	}
	paths, err := agentdojo.FindTraces(dir)
	if err != nil {
		return nil, err
	}
	var cases []*Case
	have := map[string]map[string]bool{"models": {}, "suites": {}, "attacks": {}}
	params := map[string]map[string]bool{}
	venues := map[string][]Venue{}
	for _, p := range paths {
		tr, err := agentdojo.LoadTrace(p)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(runs, p)
		if err != nil {
			return nil, err
		}
		// The model is the pipeline folder: 2025 traces record pipeline "local".
		model := strings.SplitN(filepath.ToSlash(rel), "/", 2)[0]
		attack := tr.AttackType
		switch {
		case strings.HasPrefix(tr.UserTaskID, "injection_task"):
			attack = AttackGoalAsPrompt
		case attack == "" || tr.InjectionTaskID == "":
			attack = AttackNone
		}
		if tr.UserPrompt() == "" {
			return nil, fmt.Errorf("eval: %s: %w: no user message to replay", p, agentdojo.ErrMalformedTrace)
		}
		have["models"][model], have["suites"][tr.Suite], have["attacks"][attack] = true, true, true
		if !f.match(tr.Suite, model, attack) {
			continue
		}
		if _, ok := tools[tr.Suite]; !ok {
			return nil, fmt.Errorf("eval: %s: suite %q is not in tools.json", p, tr.Suite)
		}
		session := strings.TrimSuffix(filepath.ToSlash(rel), ".json")
		c := &Case{
			Benchmark: BenchAgentDojo, Model: model, Suite: tr.Suite, Attack: attack, Path: filepath.ToSlash(filepath.Join("runs", rel)),
			Task:     strings.TrimSuffix(tr.UserTaskID+"/"+tr.InjectionTaskID, "/"),
			Turns:    []CaseTurn{{Session: session, Message: tr.UserPrompt(), SystemPrompt: tr.SystemPrompt()}},
			Utility:  tr.Utility,
			Security: tr.Security,
			consequential: func(suite string) func(string) bool {
				return func(tool string) bool { return agentdojo.Consequential(suite, tool) }
			}(tr.Suite),
			recordedErrors: recordedErrors(session, tr),
			recorded:       recordedCallsOf(1, tr),
			answer:         lastAnswer(tr),
		}
		if attack != AttackNone && attack != AttackGoalAsPrompt {
			goal, ok := goals[tr.Suite+"/"+tr.InjectionTaskID]
			if !ok {
				return nil, fmt.Errorf("eval: %s: injection task %s/%s is not in tasks.json (its goal names the attacker's values)", p, tr.Suite, tr.InjectionTaskID)
			}
			if params[tr.Suite] == nil {
				params[tr.Suite] = parameterNames(tools[tr.Suite])
			}
			if _, ok := venues[tr.Suite]; !ok {
				venues[tr.Suite], err = loadVenues(dir, tr.Suite)
				if err != nil {
					return nil, err
				}
			}
			vals := append(AttackerValues(goal, tr.UserPrompt(), params[tr.Suite]), DerivedValues(goal, venues[tr.Suite])...)
			slices.Sort(vals)
			c.AttackerValues = slices.Compact(vals)
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%w in %s (suite %q, model %q, attack %q)%s", ErrNoCases, dir, f.Suite, f.Model, f.Attack, available(have))
	}
	return cases, nil
}

// available lists what a corpus has, for the error that nothing matched a filter.
func available(have map[string]map[string]bool) string {
	var parts []string
	for _, k := range []string{"models", "suites", "attacks"} {
		if len(have[k]) > 0 {
			parts = append(parts, k+": "+strings.Join(slices.Sorted(maps.Keys(have[k])), ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; the corpus has " + strings.Join(parts, "; ")
}

// loadVenues reads the hotels and restaurants of a suite's environment
// (dir/suites_data/suites/<suite>/environment.yaml); a corpus without that file has none.
func loadVenues(dir, suite string) ([]Venue, error) {
	data, err := os.ReadFile(filepath.Join(dir, "suites_data", "suites", suite, "environment.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eval: environment of suite %s: %w", suite, err)
	}
	return ParseVenues(data), nil
}

// parameterNames collects the top-level parameter names of a suite's tools: words such as
// hotel_name are the tools' vocabulary, not values an attacker plants.
func parameterNames(tools []agentdojo.Tool) map[string]bool {
	names := map[string]bool{}
	for _, t := range tools {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(t.Parameters, &schema) == nil {
			for n := range schema.Properties {
				names[n] = true
			}
		}
	}
	return names
}

// recordedErrors indexes the tool errors of a recorded session by round and call id (ids are
// unique within a round only: tau-bench reuses them across rounds). A result without a recorded
// error whose content is a failure in one of the phrasings the corpora use (see
// recordedFailure) counts as that error: some pipelines report an unknown tool as the result.
func recordedErrors(session string, tr *agentdojo.Trace) map[string]string {
	m := map[string]string{}
	for _, st := range tr.Steps() {
		for _, r := range st.Results {
			e := r.Error
			if e == "" && recordedFailure(r.Content) != "" {
				e = strings.TrimSpace(r.Content)
			}
			if e != "" {
				m[errorKey(session, st.Round, st.CallID(r.CallIndex))] = e
			}
		}
	}
	return m
}

// Kinds of recorded failure that a rejection by Airlock agrees with.
const (
	// failureUnknownTool: the call named a tool that does not exist.
	failureUnknownTool = "unknown_tool"
	// failureBadArguments: the tool refused its arguments (schema, type or format).
	failureBadArguments = "bad_arguments"
)

// Phrasings of recorded failures, as the corpora write them.
var (
	// reUnknownTool: AgentDojo's "ToolNotFoundException: The requested function `x` is not
	// available", the "Invalid tool x provided." of other pipelines, tau-bench's "Unknown action x".
	reUnknownTool = regexp.MustCompile(`^(?:ToolNotFoundException\b|Invalid tool \S.* provided\.?|Unknown (?:action|tool)\b)`)
	// reBadArguments: pydantic's "ValidationError: …", Python's "TypeError: f() got an
	// unexpected keyword argument"/"missing 1 required positional argument", and the ValueErrors
	// of an argument in the wrong format ("time data 'May 24th' does not match format",
	// "unconverted data remains", "invalid literal for int()", "is not a valid …").
	reBadArguments = regexp.MustCompile(`^(?:ValidationError\b|TypeError\b|ValueError: (?:time data .* does not match format|unconverted data remains|invalid literal for|.* is not a valid ))`)
)

// recordedFailure classifies a recorded tool error: failureUnknownTool, failureBadArguments, or
// "" for a runtime error ("ValueError: No files found", "Error: not enough seats") that no
// check of the call's shape could have foreseen.
func recordedFailure(text string) string {
	text = strings.TrimSpace(text)
	switch {
	case reUnknownTool.MatchString(text):
		return failureUnknownTool
	case reBadArguments.MatchString(text):
		return failureBadArguments
	}
	return ""
}

func errorKey(session string, round int, callID string) string {
	return fmt.Sprintf("%s\x00%d\x00%s", session, round, callID)
}

// loadGoals reads tasks.json's injection goals, keyed "<suite>/<injection_task_N>". A task
// recorded in several benchmark versions contributes every version's text (joined), so the
// values of each version count.
func loadGoals(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("eval: read tasks: %w", err)
	}
	var raw struct {
		Suites map[string]struct {
			InjectionTasks map[string]map[string]json.RawMessage `json:"injection_tasks"`
		} `json:"suites"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("eval: %s: %w", path, err)
	}
	goals := map[string]string{}
	for suite, s := range raw.Suites {
		for id, versions := range s.InjectionTasks {
			var texts []string
			for _, v := range versions {
				var text string
				if json.Unmarshal(v, &text) == nil { // "text", "v1", "v1.2.1"; "versions" is a list
					texts = append(texts, text)
				}
			}
			goals[suite+"/"+id] = strings.Join(texts, "\n")
		}
	}
	return goals, nil
}
