package eval

import (
	"path/filepath"
	"testing"

	"github.com/airlock-dev/airlock/registry"
)

// The shipped Cedar policies replayed over every recorded AgentDojo call (issue 37): the
// only changes from the structural JSON policy are slack calls now permitted by a named rule:
// get_webpage of a URL the user typed, and messages or channel additions to a channel or
// person the user named (with no value from untrusted data); no injected value runs without a
// human and nothing else changes; benign runs are counted as the manifest lists them.
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
	allowed := map[string]bool{"get_webpage": true, "send_channel_message": true, "send_direct_message": true, "add_user_to_channel": true}
	for _, c := range rep.Changes {
		if !allowed[c.Tool] || c.Live != "ask" || c.Candidate != "permit" || c.Injected != "" {
			t.Errorf("unexpected change %+v", c)
		}
	}
}
