package integration

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// TestRepeatGrantOnARealTurn: repeat grants (issue 37, item 4) on the Temporal dev server and
// PostgreSQL. In one conversation of principal ops, the model asks for record_value (an
// external write) again and again:
//   - alice approves the first call with a grant of 2 (1 minute): the next two identical calls
//     run without a human, each audited repeat_grant_used with the uses left; the grant closes
//     exhausted; the third asks;
//   - she approves that one with a new grant of 5 for 1 minute; a call with other arguments
//     asks (no grant covers it);
//   - the worker's clock moves 2 minutes: in the next turn (the capability's per-turn cap is
//     5) the identical call asks again (the grant lapsed, audited expired); she approves it
//     with a grant of 5 for 10 minutes;
//   - the registry entry changes (a policy change): in a third turn the identical call asks
//     again (the grant is void, audited policy_changed) and is denied.
//
// No call runs twice; every grant's life is in the audit.
func TestRepeatGrantOnARealTurn(t *testing.T) {
	e := newDurEnv(t)
	var offset atomic.Int64
	changed, err := registry.Load(registry.WithStructuralPolicy(registry.Source{Name: "durability-test",
		Data: []byte(strings.Replace(durabilityRegistry, "Record a value in the external ledger.", "Record a value in the external ledger (reviewed).", 1))}), e.impls())
	if err != nil {
		t.Fatal(err)
	}
	live := registry.NewLive(e.reg)
	model := &turnScripts{}
	st, err := store.Open(context.Background(), e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acts := &activities.Activities{Served: live, Store: st, Live: model, ApproverKey: e.key, Approvers: testApprovers(), Clients: testClients(),
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}
	w := workers.New(e.c, acts, e.queue)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	rec := func(id, msg string) json.RawMessage {
		return json.RawMessage(calls(call(id, "record_value", `{"message":"`+msg+`"}`)))
	}
	model.cur.Store(inference.NewScripted(rec("c1", "m1"), rec("c2", "m1"), rec("c3", "m1"), rec("c4", "m1"), rec("c5", "m2"),
		json.RawMessage(answer("done"))))
	run, _ := e.startTurn("grant", 1, workflows.TurnRequest{Message: "record m1", Principal: "ops"})
	seen := map[string]bool{}
	decideGrant := func(p workflows.PendingConfirmation, decision string, n, minutes int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r := approval.Request{ConfirmationID: p.ConfirmationID, Decision: decision, Approver: "alice", Reason: "test decision",
			Signer: signer(t, "alice"), RepeatCount: n, RepeatMinutes: minutes}
		if err := approval.Decide(ctx, e.c, e.st, e.key, r); err != nil {
			t.Fatalf("decide %s: %v", p.ConfirmationID, err)
		}
	}
	waitNext := func(id string) workflows.PendingConfirmation {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			v, err := e.c.QueryWorkflow(context.Background(), id, "", workflows.QueryPending)
			var ps []workflows.PendingConfirmation
			if err == nil {
				err = v.Get(&ps)
			}
			for _, p := range ps {
				if !seen[p.ConfirmationID] {
					seen[p.ConfirmationID] = true
					return p
				}
			}
			if time.Now().After(deadline) {
				for _, r := range e.audit(id) {
					t.Logf("audit %d %s %s %s %s", r.Seq, r.Outcome, r.Stage, r.Reason, r.Detail)
				}
				t.Fatalf("no new pending confirmation: %d pending, %v", len(ps), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	sent := func() string { return strings.Join(e.rec.of("record_value"), " ") }

	p := waitNext(run.GetID())
	decideGrant(p, workflows.DecisionApprove, 2, 1)

	p = waitNext(run.GetID()) // the third identical call after the grant
	if n := len(e.rec.of("record_value")); n != 3 || !strings.Contains(string(p.Arguments), "m1") {
		t.Fatalf("before the 4th call was held: %d runs (%s), held %s; want the approved one and two under the grant", n, sent(), p.Arguments)
	}
	decideGrant(p, workflows.DecisionApprove, 5, 1)
	p = waitNext(run.GetID())
	if !strings.Contains(string(p.Arguments), "m2") {
		t.Fatalf("held %s; want the call with other arguments", p.Arguments)
	}
	decideGrant(p, workflows.DecisionApprove, 0, 0)
	res := result(t, run)
	var grants []string
	for _, po := range res.Outcomes {
		g := "-"
		if po.Grant != nil {
			g = po.Grant.Approver + "/" + string(rune('0'+po.Grant.Remaining))
		}
		grants = append(grants, string(po.Outcome)+":"+g)
	}
	if got := strings.Join(grants, " "); got != "executed:- executed:alice/1 executed:alice/0 executed:- executed:-" {
		t.Fatalf("turn 1 outcomes: %s", got)
	}
	if got := len(e.rec.of("record_value")); got != 5 {
		t.Fatalf("record_value ran %d times (%s), want 5: each call once", got, sent())
	}

	// The worker's clock moves 2 minutes: the 1-minute grant has lapsed, the next turn's
	// identical call asks; alice approves it with a grant of 5 for 10 minutes.
	offset.Store(int64(2 * time.Minute))
	model.cur.Store(inference.NewScripted(rec("d1", "m1"), json.RawMessage(answer("done"))))
	run2, _ := e.startTurn("grant", 2, workflows.TurnRequest{Message: "again", Principal: "ops"})
	p = waitNext(run2.GetID())
	decideGrant(p, workflows.DecisionApprove, 5, 10)
	if got := outcomeList(result(t, run2)); got != "record_value:executed" {
		t.Fatalf("turn 2: %s", got)
	}

	// A policy change voids the live grant: the next turn's identical call asks again.
	if _, err := live.Reload(func() (*registry.Registry, error) { return changed, nil }); err != nil {
		t.Fatal(err)
	}
	model.cur.Store(inference.NewScripted(rec("e1", "m1"), json.RawMessage(answer("done"))))
	run3, _ := e.startTurn("grant", 3, workflows.TurnRequest{Message: "and again", Principal: "ops"})
	p = waitNext(run3.GetID())
	decideGrant(p, workflows.DecisionDeny, 0, 0)
	if got := outcomeList(result(t, run3)); got != "record_value:denied:denied_by_approver" {
		t.Fatalf("turn 3: %s", got)
	}
	if got := len(e.rec.of("record_value")); got != 6 {
		t.Fatalf("record_value ran %d times, want 6 (each approved or granted call once)", got)
	}

	var rows []string
	for _, id := range []string{run.GetID(), run2.GetID(), run3.GetID()} {
		for _, r := range e.audit(id) {
			if strings.HasPrefix(r.Outcome, "repeat_grant_") {
				why := r.Reason
				if strings.HasPrefix(why, "rg-") {
					why = "rg"
				}
				rows = append(rows, r.Outcome+":"+why+":"+r.Approver)
			}
		}
	}
	want := "repeat_grant_issued:rg:alice repeat_grant_used:rg:alice repeat_grant_used:rg:alice repeat_grant_closed:exhausted:alice " +
		"repeat_grant_issued:rg:alice repeat_grant_closed:expired:alice repeat_grant_issued:rg:alice repeat_grant_closed:policy_changed:alice"
	if got := strings.Join(rows, " "); got != want {
		t.Fatalf("grant audit:\n got %s\nwant %s", got, want)
	}
	for _, r := range e.audit(run.GetID()) {
		if r.Outcome == activities.AuditGrantUsed && !strings.Contains(r.Detail, "alice") {
			t.Fatalf("a use does not name its approver: %s", r.Detail)
		}
	}
}
