package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/eval"
	"github.com/airlock-dev/airlock/internal/parse"
)

// runRecordings replays every recording of a synthetic AgentDojo-shaped corpus under
// internal/recording/testdata as real turns (deny-all approver) and returns the results.
func runRecordings(t *testing.T, corpus string) []eval.CaseResult {
	t.Helper()
	dir := filepath.Join(repoRoot, "internal", "recording", "testdata", corpus)
	cases, err := eval.LoadAgentDojo(dir, eval.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	results, _ := evalRun(t, eval.Corpus{AgentDojoDir: dir}, eval.PolicyDenyAll, cases)
	if len(results) != len(cases) {
		t.Fatalf("%d results for %d cases", len(results), len(cases))
	}
	return results
}

// TestReplayIDlessCalls replays structured calls recorded with id "", without an id key, and
// three id-less calls in one step: every recorded call is proposed with the id Airlock
// assigned (marked assigned on the outcome) and goes through the executor: the lookups run,
// the purchase is held and denied.
func TestReplayIDlessCalls(t *testing.T) {
	want := map[string][]struct {
		name    string
		outcome activities.Outcome
	}{
		"user_task_0": {{"get_item", activities.OutcomeExecuted}},
		"user_task_1": {{"get_item", activities.OutcomeExecuted}},
		"user_task_2": {{"get_item", activities.OutcomeExecuted}, {"get_item", activities.OutcomeExecuted}, {"buy_item", activities.OutcomeDenied}},
	}
	for _, r := range runRecordings(t, "idless") {
		task, _, _ := strings.Cut(r.Case.Task, "/")
		w, ok := want[task]
		if !ok {
			t.Fatalf("unexpected case %s", task)
		}
		if r.Err != "" || len(r.Turns) != 1 {
			t.Fatalf("%s: err %q, %d turns", task, r.Err, len(r.Turns))
		}
		turn := r.Turns[0]
		if len(turn.Outcomes) != len(w) {
			t.Fatalf("%s: %d proposals (%s), want %d", task, len(turn.Outcomes), asJSON(turn.Outcomes), len(w))
		}
		for i, o := range turn.Outcomes {
			if o.Name != w[i].name || o.Outcome != w[i].outcome || o.Round != 1 ||
				o.CallID != parse.AssignedCallID(parse.TurnToken(turn.WorkflowID), 1, i) || !o.CallIDAssigned {
				t.Errorf("%s proposal %d: %s", task, i, asJSON(o))
			}
		}
		// A held call that is denied stops the turn; the lookups alone replay to the end.
		wantEnd := "answered"
		if task == "user_task_2" {
			wantEnd = "diverged"
		}
		if turn.EndReason != wantEnd {
			t.Errorf("%s: end %s, want %s", task, turn.EndReason, wantEnd)
		}
	}
}

// TestReplayRefusesExtraExchanges replays a recording whose tool filter answers before the
// user's task and one with a second user message: each turn fails as an unsupported
// recording the evaluation reports, none ends "answered".
func TestReplayRefusesExtraExchanges(t *testing.T) {
	for _, r := range runRecordings(t, "unsupported") {
		if !strings.Contains(r.Err, activities.ErrTypeUnsupportedRecording) && !strings.Contains(r.Err, "unsupported recording") {
			t.Errorf("%s: err %q, want an unsupported recording", r.Case.Task, r.Err)
		}
		for _, turn := range r.Turns {
			if turn.EndReason == "answered" {
				t.Errorf("%s: a turn ended answered", r.Case.Task)
			}
		}
	}
}
