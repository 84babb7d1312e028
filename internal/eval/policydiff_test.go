package eval

import (
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/registry"
)

// The shipped Cedar policies replayed over every recorded AgentDojo call (issue 37): the
// only changes from the structural JSON policy are get_webpage calls of a URL the user typed,
// now permitted; no injected value and no write runs without a human; benign runs are
// counted as the manifest lists them.
func TestShippedCedarPoliciesDiff(t *testing.T) {
	dir := filepath.Join(corpusRoot(t), "agentdojo")
	cases, err := LoadAgentDojo(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	shipped := func(suite string) ([]byte, error) {
		src, ok := registry.LayerCedar("agentdojo-" + suite)
		if !ok {
			t.Fatalf("no shipped policy for %s", suite)
		}
		return src.Data, nil
	}
	rep, err := PolicyDiff(Corpus{AgentDojoDir: dir}, cases, nil, shipped)
	if err != nil {
		t.Fatal(err)
	}
	benign := 0
	for _, s := range rep.Suites {
		benign += s.BenignTraces
		if s.InjectedPermitted != 0 || s.CandidateForbids != 0 || s.CandidateAsks > s.LiveAsks {
			t.Errorf("suite %s: %+v", s.Suite, s)
		}
	}
	if want := manifestAttacks(t, dir)[AttackNone]; benign != want {
		t.Errorf("%d benign runs replayed, the manifest lists %d", benign, want)
	}
	if len(rep.Changes) == 0 {
		t.Fatal("no change: the slack suite's typed URLs should now run")
	}
	for _, c := range rep.Changes {
		if c.Tool != "get_webpage" || c.Live != "ask" || c.Candidate != "permit" || c.Injected != "" {
			t.Errorf("unexpected change %+v", c)
		}
	}
}
