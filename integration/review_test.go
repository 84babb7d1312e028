package integration

// Review tests against the real dev server: each pins a defect found while trying to break
// Airlock's safety properties, and stays as a regression test.

import (
	"net/http"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/workflows"
)

// Every outcome is audited, in every run. A whole-workflow retry (or an operator reset) is a
// new run of the same workflow id that numbers its proposals from 1 again. Attempt 1 executes
// list_issues for one repository and fails on the next inference; attempt 2 executes
// list_issues for another repository at the same proposal number. Both executions ran and
// both must be in the audit log, each under its own run; replaying a run must still write
// nothing twice.
func TestReviewOutcomesOfARetriedRunAreAudited(t *testing.T) {
	t.Parallel()
	e := newDurEnv(t)
	first, second := `{"owner":"acme","repo":"one"}`, `{"owner":"acme","repo":"two"}`
	const rejected = `{"error":{"message":"Invalid request","type":"invalid_request_error","param":null,"code":null}}`
	model := newSeqModel(t, func(n int) (int, string) {
		switch n {
		case 0:
			return http.StatusOK, calls(call("call_1", "list_issues", first))
		case 1:
			return http.StatusBadRequest, rejected // attempt 1 fails after its call executed
		case 2:
			return http.StatusOK, calls(call("call_1", "list_issues", second))
		default:
			return http.StatusOK, answer("two repositories listed")
		}
	})
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("review-audit-retry", 1, workflows.TurnRequest{Message: "list issues"}, func(o *client.StartWorkflowOptions) {
		o.RetryPolicy = &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 2}
	})
	firstRun := run.GetRunID()
	res := result(t, run)
	if got := outcomeList(res); got != "list_issues:executed" || res.EndReason != "answered" {
		t.Fatalf("retried turn = %s (%s)", got, res.EndReason)
	}
	if got := e.rec.of("list_issues"); len(got) != 2 || got[0] != canon(t, first) || got[1] != canon(t, second) {
		t.Fatalf("list_issues invocations = %v", got)
	}
	digest := func(args string) string {
		d, err := canonical.Digest([]byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	rows := e.audit(run.GetID())
	var executed []string
	for _, r := range rows {
		if r.Outcome == string(activities.OutcomeExecuted) {
			executed = append(executed, r.RunID+" "+r.ArgsDigest)
		}
	}
	if len(executed) != 2 || executed[0] != firstRun+" "+digest(first) || executed[1] != run.GetRunID()+" "+digest(second) ||
		run.GetRunID() == firstRun {
		t.Fatalf("executed audit rows (run, digest) = %v: each run's execution must be audited once, under its run\n(first run %s, digests %s / %s)",
			executed, firstRun, digest(first), digest(second))
	}
	// The first run failed (its model rejected round 2): audited once, under that run.
	var failed []string
	for _, r := range rows {
		if r.Outcome == activities.AuditTurnFailed {
			failed = append(failed, r.RunID)
		}
	}
	if len(failed) != 1 || failed[0] != firstRun {
		t.Fatalf("turn_failed rows under runs %v, want one under the first run %s", failed, firstRun)
	}
	if len(rows) != 3 {
		t.Fatalf("audit rows = %d, want 3 (two executions and the failed run; no duplicates): %+v", len(rows), rows)
	}
}
