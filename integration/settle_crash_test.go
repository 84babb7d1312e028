package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlock-dev/airlock/internal/proposals"
	"github.com/airlock-dev/airlock/workflows"
)

// Item 3 under a killed worker, on the real dev server and PostgreSQL: while the turn's
// settlement transaction is blocked inside its first proposal insert (the test holds a SHARE
// lock on agent_proposals in the test's schema), the `airlock worker` process is SIGKILLed.
// Nothing of the settlement is committed (no proposal row, no turn result, no captured audit
// row), not even after the lock is released and its orphaned transaction ends. A new worker process settles the turn exactly once: one proposal row, one completion
// naming it, one captured audit row, one proposal workflow, and no further inference request.
func TestSettlementAtomicUnderKilledWorker(t *testing.T) {
	model := newFakeModel(t,
		answer("The capital of Australia is Sydney."),
		calls(call("c1", "submit_correction", correctionArgs("latest", secretReplacement))),
	)
	c := dial(t)
	cfg := testConfig(t)
	env := []string{
		"TEMPORAL_ADDRESS=" + devServer.Address, "TEMPORAL_NAMESPACE=" + devServer.Namespace,
		"AIRLOCK_HOME=" + cfg.Home, "AIRLOCK_DATABASE_URL=" + cfg.DatabaseURL, "AIRLOCK_TASK_QUEUE=" + cfg.TaskQueue,
		"AIRLOCK_OPENAI_BASE_URL=" + model.URL + "/v1", "AIRLOCK_OPENAI_API_KEY=test", "AIRLOCK_OPENAI_MODEL=fake",
		"AIRLOCK_FETCH_ALLOW=127.0.0.0/8", "AIRLOCK_REGISTRY_LAYERS=", "AIRLOCK_APPROVERS=" + cfg.ApproversFile,
	}
	w1 := startWorkerProcess(t, env)
	st := openStore(t, cfg)
	ctx := context.Background()
	conv := "settle-" + cfg.TaskQueue
	if r := result(t, startTurnSeq(t, c, cfg, conv, 1, "What is the capital of Australia?")); r.EndReason != "answered" {
		t.Fatalf("turn 1: %+v", r)
	}
	wf2 := workflows.TurnWorkflowID(conv, 2)

	db, err := sqlx.Open("postgres", cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	// SHARE blocks inserts (ROW EXCLUSIVE) and lets reads through: Settle blocks mid-transaction.
	if _, err := lock.Exec(`LOCK TABLE agent_proposals IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	run := startTurnSeq(t, c, cfg, conv, 2, "That was wrong, correct your last reply.")
	eventually(t, time.Minute, "the settlement blocked on agent_proposals", func() bool {
		var n int
		return db.Get(&n, `SELECT count(*) FROM pg_locks WHERE relation = 'agent_proposals'::regclass AND NOT granted`) == nil && n > 0
	})
	w1.kill(t)

	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.Get(&n, q, args...); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM agent_proposals WHERE workflow_id = $1`, wf2); n != 0 {
		t.Fatalf("%d proposal rows committed by the killed worker", n)
	}
	if n := count(`SELECT count(*) FROM turn_results WHERE workflow_id = $1`, wf2); n != 0 {
		t.Fatal("a completion was committed by the killed worker")
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE workflow_id = $1 AND outcome = 'captured'`, wf2); n != 0 {
		t.Fatalf("%d captured audit rows committed by the killed worker", n)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Unblocked, the dead worker's transaction can only end rolled back (no client is left to
	// commit it): once its backend is gone, still nothing is committed.
	eventually(t, time.Minute, "the killed worker's transaction ended", func() bool {
		var n int
		return db.Get(&n, `SELECT count(*) FROM pg_locks WHERE relation = 'agent_proposals'::regclass`) == nil && n == 0
	})
	if count(`SELECT count(*) FROM agent_proposals`)+count(`SELECT count(*) FROM turn_results WHERE workflow_id = $1`, wf2) != 0 {
		t.Fatal("the killed worker's settlement committed after the lock was released")
	}

	startWorkerProcess(t, env)
	r2 := result(t, run)
	if r2.EndReason != "proposed" || outcomeList(r2) != "submit_correction:captured:self-correction" {
		t.Fatalf("turn 2: %s %s\nkilled worker log:\n%s", r2.EndReason, outcomeList(r2), w1.out.String())
	}
	if got := len(model.requests()); got != 2 {
		t.Fatalf("%d model requests, want 2 (the settlement is not re-inferred)", got)
	}
	rows, err := st.ListProposals(ctx, wf2)
	if err != nil || len(rows) != 1 || rows[0].ID != proposals.ProposalID(wf2, proposals.KindCorrection) {
		t.Fatalf("proposal rows: %+v %v", rows, err)
	}
	if n := count(`SELECT count(*) FROM agent_proposals`); n != 1 {
		t.Fatalf("%d proposal rows in all, want 1", n)
	}
	if n := count(`SELECT count(*) FROM audit_events WHERE workflow_id = $1 AND outcome = 'captured'`, wf2); n != 1 {
		t.Fatalf("%d captured audit rows, want 1", n)
	}
	stored, err := st.GetTurnResult(ctx, wf2)
	if err != nil || !strings.Contains(string(stored), rows[0].ID) || !strings.Contains(string(stored), `"completed"`) {
		t.Fatalf("stored completion: %s %v", stored, err)
	}
	// The verified chain holds: the stored completion names the proposal it settled with.
	if _, err := proposals.VerifyProposal(ctx, st, rows[0]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the proposal workflow pending", func() bool {
		v, err := c.QueryWorkflow(ctx, workflows.ProposalWorkflowID(rows[0].ID), "", workflows.QueryProposal)
		var s workflows.ProposalStatus
		return err == nil && v.Get(&s) == nil && s.State == "pending"
	})
}
