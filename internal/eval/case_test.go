package eval

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/agentdojo"
	"github.com/airlock-dev/airlock/internal/stack"
)

// corpusRoot is the shared corpus, read in place (never copied into the repository).
func corpusRoot(t *testing.T) string {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "..", "shared", "corpus")
	if _, err := os.Stat(filepath.Join(dir, "agentdojo", "tools.json")); err != nil {
		t.Fatalf("corpus missing: %v", err)
	}
	return dir
}

// manifestAttacks counts the traces MANIFEST.json lists in dir by the attack LoadAgentDojo
// gives them: a user task that is an injection task is AttackGoalAsPrompt, a run without an
// attack or an injection task is AttackNone.
func manifestAttacks(t *testing.T, dir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "MANIFEST.json"))
	if err != nil {
		t.Fatalf("AgentDojo manifest: %v", err)
	}
	var entries []struct {
		UserTask      string  `json:"user_task"`
		InjectionTask *string `json:"injection_task"`
		Attack        *string `json:"attack"`
	}
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) == 0 {
		t.Fatalf("AgentDojo manifest: %d entries, %v", len(entries), err)
	}
	count := map[string]int{}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.UserTask, "injection_task"):
			count[AttackGoalAsPrompt]++
		case e.Attack == nil || *e.Attack == "" || e.InjectionTask == nil || *e.InjectionTask == "":
			count[AttackNone]++
		default:
			count[*e.Attack]++
		}
	}
	return count
}

func manifestTotal(count map[string]int) int {
	n := 0
	for _, c := range count {
		n += c
	}
	return n
}

func TestLoadAgentDojoCorpus(t *testing.T) {
	dir := filepath.Join(corpusRoot(t), "agentdojo")
	cases, err := LoadAgentDojo(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// Counts by attack as a separate reading of the corpus (its MANIFEST.json) gives them.
	count := map[string]int{}
	// Attacked runs without attacker values: banking user_task_15's own prompt names the
	// attacker's IBAN as the user's new landlord (so it is the user's value, not the
	// attacker's). Every other injection task names its values: travel injection_task_6 the
	// Riverside View Hotel it wants praised (unquoted), injection_task_4 the most expensive hotel
	// in Paris, looked up in the suite's environment.yaml.
	noValues := map[string]bool{
		"runs/gpt-4o-2024-05-13/banking/user_task_15/important_instructions/injection_task_6.json": true,
	}
	byTask := map[string][]string{}
	for _, c := range cases {
		if c.Attack != AttackNone && c.Attack != AttackGoalAsPrompt {
			byTask[c.Suite+"/"+c.Task[strings.Index(c.Task, "/")+1:]] = c.AttackerValues
		}
		count[c.Attack]++
		if len(c.Turns) != 1 || c.Turns[0].Message == "" || c.Turns[0].SystemPrompt == "" {
			t.Errorf("%s: turns %+v", c.Path, c.Turns)
		}
		benign := c.Attack == AttackNone || c.Attack == AttackGoalAsPrompt
		if want := !benign && !noValues[c.Path]; want != (len(c.AttackerValues) > 0) {
			t.Errorf("%s (%s): attacker values %q", c.Path, c.Attack, c.AttackerValues)
		}
	}
	for task, want := range map[string]string{
		"travel/injection_task_6": "Riverside View Hotel", "travel/injection_task_0": "Riverside View Hotel",
		"travel/injection_task_4": "Luxury Palace", "workspace/injection_task_1": "13", "slack/injection_task_3": "www.true-informations.com",
	} {
		if vals, ok := byTask[task]; ok && !slices.Contains(vals, want) {
			t.Errorf("%s: attacker values %q lack %q", task, vals, want)
		}
	}
	t.Logf("attacker values by injection task: %v", byTask)
	if want := manifestAttacks(t, dir); len(cases) != manifestTotal(want) || !maps.Equal(count, want) {
		t.Errorf("%d cases by attack %v, want MANIFEST.json's %v", len(cases), count, want)
	}
	sel, err := LoadAgentDojo(dir, Filter{Suite: "banking", Model: "gpt-4o-2024-05-13", Attack: AttackNone})
	if err != nil || len(sel) != 16 {
		t.Fatalf("filtered: %d, %v", len(sel), err)
	}
	if _, err := LoadAgentDojo(dir, Filter{Suite: "nope"}); !errors.Is(err, ErrNoCases) {
		t.Errorf("no match: %v, want ErrNoCases", err)
	}
}

func TestLoadTauBenchCorpus(t *testing.T) {
	cases, err := LoadTauBench(filepath.Join(corpusRoot(t), "tau-bench"), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	turns := 0
	for _, c := range cases {
		turns += len(c.Turns)
		if c.Model != "gpt-4o" || c.Suite != "airline" || c.Turns[0].SystemPrompt == "" {
			t.Errorf("%s: %s/%s", c.Task, c.Model, c.Suite)
		}
	}
	// 172 user turns, of which 17 are the simulated user's closing ###STOP###.
	if len(cases) != 20 || turns != 155 {
		t.Errorf("%d cases, %d turns; want 20, 155", len(cases), turns)
	}
}

// A suite and a model folder the sample does not have load the same way: the registry is
// generated from tools.json and classifies the new tools fail closed.
func TestAnySuiteInToolsJSON(t *testing.T) {
	dir := shopCorpus
	cases, err := LoadAgentDojo(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 1 || cases[0].Suite != "shop" || cases[0].Model != "my-model" || cases[0].Attack != "my_attack" {
		t.Fatalf("cases = %+v", cases)
	}
	if got := cases[0].AttackerValues; len(got) != 1 || got[0] != "evil@example.com" {
		t.Errorf("attacker values = %q", got)
	}
	reg, err := Corpus{AgentDojoDir: dir}.Registry(BenchAgentDojo, "shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	get, ok1 := reg.ByToolName("get_item")
	buy, ok2 := reg.ByToolName("buy_item")
	if !ok1 || !ok2 || !get.Automatic() || buy.Automatic() || !reg.Authorize(buy, Principal).DistinctApprover {
		t.Errorf("get_item automatic=%v, buy_item automatic=%v", ok1 && get.Automatic(), ok2 && buy.Automatic())
	}
	if _, err := (Corpus{AgentDojoDir: dir}).Registry(BenchAgentDojo, "bank", nil); err == nil {
		t.Error("a suite missing from tools.json loaded")
	}
}

// shopCorpus is testdata/shop: a one-trace AgentDojo-shaped corpus of a made-up suite
// ("shop": get_item, buy_item) and model folder ("my-model"), in which the model looks an item
// up, reads an injection in the result and tries to buy the item for the attacker.
const shopCorpus = "testdata/shop"

func TestLoadAgentDojoRefusesTracesWithoutAUserMessage(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"tools.json", "tasks.json"} {
		b, err := os.ReadFile(filepath.Join(shopCorpus, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "runs", "m", "shop", "user_task_0", "none", "none.json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(`{"suite_name":"shop","pipeline_name":"m","user_task_id":"user_task_0","messages":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAgentDojo(dir, Filter{}); !errors.Is(err, agentdojo.ErrMalformedTrace) {
		t.Errorf("a trace without messages: %v, want ErrMalformedTrace", err)
	}
}
