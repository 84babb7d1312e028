package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/replay"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// TestMixedTurnHistory runs a turn that exercises every path of TurnWorkflow (automatic
// execute, approved and denied confirmations, a parse failure, a resolve rejection, a final
// answer) on the real dev server, once with each infer mode: regular (Infer a regular activity)
// and local (Infer a local activity, the whole turn a few workflow tasks). With
// AIRLOCK_WRITE_HISTORIES=1 (make histories) it writes the histories to workflows/testdata/,
// where workflows' replay test checks that the workflow code still replays them. A turn is
// Pinned to its build (Worker Versioning), so a change that breaks the replay needs a new build
// id and re-recorded histories, never a workflow.GetVersion branch.
func TestMixedTurnHistory(t *testing.T) {
	mixedTurn(t, "mixed-regular", workflows.InferRegular, "turn-mixed-regular.history.json")
	mixedTurn(t, "mixed-local", workflows.InferLocal, "turn-mixed-local.history.json")
}

func mixedTurn(t *testing.T, conversation, inferMode, historyFile string) {
	t.Helper()
	target := statusPage(t)
	model := newFakeModel(t,
		calls(call("c1", "system_health", `{}`), call("c2", "web_fetch", fmt.Sprintf(`{"url":"%s/ok"}`, target.URL))),
		calls(call("c3", "web_fetch", fmt.Sprintf(`{"url":"%s/no"}`, target.URL)), call("c4", "run_shell", `{"cmd":"id"}`), call("c5", "system_health", `{"x":`)),
	)
	c, cfg, st := liveModelStack(t, model)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: conversation, Principal: "ops", Message: "check the host and the status page", InferMode: inferMode})
	seen := map[string]bool{}
	decide(t, c, cfg, st, waitPending(t, c, run.GetID(), seen).ConfirmationID, workflows.DecisionApprove, "alice")
	decide(t, c, cfg, st, waitPending(t, c, run.GetID(), seen).ConfirmationID, workflows.DecisionDeny, "alice")
	res := result(t, run)
	want := "system_health:executed web_fetch:executed web_fetch:denied:denied_by_approver run_shell:rejected:unknown_capability system_health:parse_failed:invalid_json"
	if got := outcomeList(res); got != want || res.Prose != "all done" {
		t.Fatalf("outcomes = %s, prose %q", got, res.Prose)
	}
	writeHistory(t, c, run.GetID(), historyFile)
}

// TestReplayedSessionHistory records a replayed session (the path evaluations take): a recorded
// tool error served and replayed past, then a held
// delete_file denied, ending the replay as diverged. The history is written like
// TestMixedTurnHistory's.
func TestReplayedSessionHistory(t *testing.T) {
	cfg := testConfig(t, "agentdojo-workspace")
	c := dial(t)
	startWorker(t, c, cfg)
	st := openStore(t, cfg)
	req, err := replay.Request(corpusDir, "gpt-4o-2024-05-13/workspace/user_task_38/none/none")
	if err != nil {
		t.Fatal(err)
	}
	run := startTurn(t, c, cfg, req)
	decide(t, c, cfg, st, waitPending(t, c, run.GetID(), map[string]bool{}).ConfirmationID, workflows.DecisionDeny, "alice")
	res := result(t, run)
	want := "list_files:executed search_files:failed delete_file:denied:denied_by_approver"
	if got := outcomeList(res); got != want || res.EndReason != "diverged" {
		t.Fatalf("outcomes = %s, end %s", got, res.EndReason)
	}
	writeHistory(t, c, run.GetID(), "turn-session-recorded-error.history.json")
}

// TestDecisionProtocolHistory records the decision protocol's paths: a decision refused after
// consuming the token (an approver no approvers file knows: token reissued), an approval
// through the decide update, and a confirmation that expires. The history is written like TestMixedTurnHistory's.
func TestDecisionProtocolHistory(t *testing.T) {
	target := statusPage(t)
	model := newFakeModel(t,
		calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL))),
		calls(call("c2", "web_fetch", fmt.Sprintf(`{"url":"%s/b"}`, target.URL))),
	)
	c, cfg, st := liveModelStack(t, model)
	key, err := workers.ApproverKey(cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "decisions", Principal: "ops", Message: "fetch the status pages",
		ConfirmationTTL: 4 * time.Second})
	seen := map[string]bool{}
	p := waitPending(t, c, run.GetID(), seen)
	ctx := context.Background()
	row, err := st.GetConfirmation(ctx, p.ConfirmationID)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := approval.Sign(key, row, approval.Request{ConfirmationID: p.ConfirmationID, Decision: workflows.DecisionApprove, Approver: "nobody", Signer: signer(t, "nobody")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SignalWorkflow(ctx, run.GetID(), "", workflows.SignalConfirmation, bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the refused decision reissued the token", func() bool {
		r, err := st.GetConfirmation(ctx, p.ConfirmationID)
		return err == nil && r.Generation == 1
	})
	if err := approval.Decide(ctx, c, st, key, approval.Request{ConfirmationID: p.ConfirmationID, Decision: workflows.DecisionApprove, Approver: "alice", Signer: signer(t, "alice")}); err != nil {
		t.Fatal(err)
	}
	res := result(t, run) // the second fetch waits out its 4 s
	want := "web_fetch:executed web_fetch:expired:confirmation_expired"
	if got := outcomeList(res); got != want {
		t.Fatalf("outcomes = %s", got)
	}
	writeHistory(t, c, run.GetID(), "turn-decisions.history.json")
}

// TestBatchEditHistory records two
// confirmed calls of one model message pending together, the second edited by the approver
// (denied edited_by_approver, the edited call run as an approver-originated proposal) and the
// first approved after it, by update. The history is written like TestMixedTurnHistory's.
func TestBatchEditHistory(t *testing.T) {
	target := statusPage(t)
	model := newFakeModel(t,
		calls(call("c1", "web_fetch", fmt.Sprintf(`{"url":"%s/a"}`, target.URL)), call("c2", "web_fetch", fmt.Sprintf(`{"url":"%s/b"}`, target.URL))),
	)
	c, cfg, st := liveModelStack(t, model)
	run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "batch-edit", Principal: "ops", Message: "fetch the status pages"})
	var ps []workflows.PendingConfirmation
	eventually(t, 60*time.Second, "both confirmations pending", func() bool {
		ps = pending(t, c, run.GetID())
		return len(ps) == 2
	})
	if err := decideAs(t, c, cfg, st, ps[1].ConfirmationID, workflows.DecisionEdit, "alice", fmt.Sprintf(`{"url":"%s/c"}`, target.URL)); err != nil {
		t.Fatal(err)
	}
	if err := decideAs(t, c, cfg, st, ps[0].ConfirmationID, workflows.DecisionApprove, "alice", ""); err != nil {
		t.Fatal(err)
	}
	res := result(t, run)
	want := "web_fetch:executed web_fetch:denied:edited_by_approver web_fetch:executed"
	if got := outcomeList(res); got != want {
		t.Fatalf("outcomes = %s", got)
	}
	writeHistory(t, c, run.GetID(), "turn-batch-edit.history.json")
}

// statusPage serves a small HTML status page for web_fetch, closed with the test.
func statusPage(t *testing.T) *httptest.Server {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<title>status</title><p>all systems nominal</p>")
	}))
	t.Cleanup(target.Close)
	return target
}

// writeHistory writes the workflow's history to workflows/testdata/name when
// AIRLOCK_WRITE_HISTORIES=1 (make histories).
func writeHistory(t *testing.T, c client.Client, workflowID, name string) {
	t.Helper()
	if os.Getenv("AIRLOCK_WRITE_HISTORIES") != "1" {
		return
	}
	var h historypb.History
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repoRoot, "workflows", "testdata", name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d events)", path, len(h.Events))
}

// The reference turn of issue 12 (4 rounds: three proposing one automatic read-only call each,
// then an answer) stays within its history budget: at most 24 events with local rounds (the
// issue's target), at most 36 with regular rounds (4 regular activities alone are 24 events, and
// the workflow's start and end 5 more: 29 is the floor of any loop that infers through regular
// activities). Every event counts: markers, version markers, search-attribute upserts.
func TestReferenceTurnHistoryBudget(t *testing.T) {
	for _, tc := range []struct {
		mode string
		max  int
	}{{workflows.InferLocal, 24}, {workflows.InferRegular, 36}} {
		model := newFakeModel(t,
			calls(call("c1", "system_health", `{}`)), calls(call("c2", "system_health", `{}`)),
			calls(call("c3", "system_health", `{}`)), answer("host healthy"))
		c, cfg, _ := liveModelStack(t, model)
		run := startTurn(t, c, cfg, workflows.TurnRequest{Conversation: "reference-" + tc.mode, Principal: "ops",
			Message: "check the host three times", InferMode: tc.mode})
		res := result(t, run)
		if got := outcomeList(res); got != "system_health:executed system_health:executed system_health:executed" || res.Prose != "host healthy" {
			t.Fatalf("%s: outcomes = %s, prose %q", tc.mode, got, res.Prose)
		}
		n := 0
		it := c.GetWorkflowHistory(context.Background(), run.GetID(), "", false, 0)
		for it.HasNext() {
			if _, err := it.Next(); err != nil {
				t.Fatal(err)
			}
			n++
		}
		t.Logf("%s rounds: %d history events", tc.mode, n)
		if n > tc.max {
			t.Errorf("%s rounds: %d history events, budget %d", tc.mode, n, tc.max)
		}
	}
}
