package integration

// Issue 11, items 1 and 2, through a whole turn: a call is a candidate only when its message
// ended normally, and one shared call id fails every call of its message. The tool is
// list_issues, a local read-only capability that runs with no human: if either rule failed,
// it would run.

import (
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/workflows"
)

// TestDuplicateCallIDFailsEveryCallOfTheMessage: a unique-id read-only call beside two calls
// sharing an id fails duplicate_call_id too and never runs; the next request's context holds no
// tool call and no tool result for any of them (so it stays valid for the provider), and one
// Airlock note per call.
func TestDuplicateCallIDFailsEveryCallOfTheMessage(t *testing.T) {
	t.Parallel()
	e := newDurEnv(t)
	model := newFakeModel(t, calls(
		call("call_unique", "list_issues", `{"owner":"o","repo":"r"}`),
		call("dup", "archive_record", `{"record":"r-1"}`),
		call("dup", "delete_record", `{"record":"r-1"}`)))
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("dup-all", 1, workflows.TurnRequest{Message: "list the issues"})
	res := result(t, run)

	if len(res.Outcomes) != 3 {
		t.Fatalf("outcomes = %s", outcomeList(res))
	}
	for i, o := range res.Outcomes {
		if o.Outcome != activities.OutcomeParseFailed || o.Reason != "duplicate_call_id" || o.Stage != activities.StageParse || o.ConfirmationID != "" {
			t.Fatalf("call %d = %+v, want parse_failed:duplicate_call_id", i, o)
		}
	}
	if n := e.rec.total(); n != 0 {
		t.Fatalf("capabilities ran %d times (list_issues %v)", n, e.rec.of("list_issues"))
	}
	if res.EndReason != "answered" {
		t.Fatalf("end reason %q, want answered", res.EndReason)
	}
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d", len(reqs))
	}
	notes := 0
	for _, m := range wireMessages(t, reqs[1]) {
		if m.Role == "tool" || len(m.ToolCalls) > 0 {
			t.Fatalf("no call of the message may be echoed or answered as a tool call: %+v", m)
		}
		if m.Role == "system" && strings.Contains(m.text(), `"reason":"duplicate_call_id"`) {
			notes++
		}
	}
	if notes != 3 {
		t.Fatalf("got %d duplicate_call_id notes, want one per call", notes)
	}
}

// TestParseAbnormalFinishRunsNoCall: a read-only call in a message that ended with
// content_filter, then one in a message with no finish reason at all, each fails
// abnormal_finish and never runs; each is echoed once and answered by exactly one tool result
// carrying the reason, so the context stays valid.
func TestParseAbnormalFinishRunsNoCall(t *testing.T) {
	t.Parallel()
	e := newDurEnv(t)
	filtered := strings.Replace(calls(call("call_cf", "list_issues", `{"owner":"o","repo":"r"}`)), `"finish_reason":"tool_calls"`, `"finish_reason":"content_filter"`, 1)
	noReason := strings.Replace(calls(call("call_none", "list_issues", `{"owner":"o","repo":"r"}`)), `,"finish_reason":"tool_calls"`, ``, 1)
	if filtered == noReason || strings.Contains(noReason, "finish_reason") {
		t.Fatal("fixture not rewritten")
	}
	model := newFakeModel(t, filtered, noReason)
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("abnormal", 1, workflows.TurnRequest{Message: "list the issues"})
	res := result(t, run)

	if len(res.Outcomes) != 2 {
		t.Fatalf("outcomes = %s", outcomeList(res))
	}
	for i, id := range []string{"call_cf", "call_none"} {
		o := res.Outcomes[i]
		if o.Outcome != activities.OutcomeParseFailed || o.Reason != "abnormal_finish" || o.Stage != activities.StageParse || o.CallID != id {
			t.Fatalf("call %d = %+v, want parse_failed:abnormal_finish for %s", i, o, id)
		}
	}
	if n := e.rec.total(); n != 0 {
		t.Fatalf("list_issues ran %d times", n)
	}
	for _, r := range e.audit(run.GetID()) {
		if r.Outcome == string(activities.OutcomeParseFailed) && r.Reason != "abnormal_finish" {
			t.Fatalf("audit row %+v", r)
		}
	}
	reqs := model.requests()
	if len(reqs) != 3 {
		t.Fatalf("model requests = %d", len(reqs))
	}
	msgs := wireMessages(t, reqs[2])
	echoed, answered := map[string]int{}, map[string]int{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			echoed[c.ID]++
		}
		if m.Role == "tool" {
			answered[m.ToolCallID]++
		}
	}
	results := toolResults(t, msgs)
	for _, id := range []string{"call_cf", "call_none"} {
		if echoed[id] != 1 || answered[id] != 1 || results[id].Reason != "abnormal_finish" {
			t.Fatalf("%s: echoed %d, answered %d, result %+v; want once each with abnormal_finish", id, echoed[id], answered[id], results[id])
		}
	}
}
