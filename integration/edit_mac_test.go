package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/workflows"
)

// An edit decision binds the digest of the approver's arguments in its MAC: the same decision
// with other arguments (swapped after signing, as anyone on the signal or update path could),
// or with none, is refused decision_mac_invalid (as an update and as a signal), runs nothing,
// and leaves the proposal decidable under a fresh token; a decision signed for one pending
// confirmation of a turn and re-aimed at the other is refused (stale_digest, or with the
// other's digest copied too, decision_mac_invalid). The honest edit
// then runs exactly the signed arguments.
func TestEditDecisionArgumentsAreBoundByItsMAC(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	model := newRoutedModel(t, map[string][]string{"edit-mac": {calls(call("m1", "record_value", `{"message":"orig"}`), call("m2", "record_value", `{"message":"second"}`))}})
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("edit-mac", 1, workflows.TurnRequest{Message: "edit-mac"})
	wf := run.GetID()
	seen := map[string]bool{}
	p1 := waitPending(t, e.c, wf, seen)
	p2 := waitPending(t, e.c, wf, seen)

	signEdit := func(p workflows.PendingConfirmation, args string) workflows.Decision {
		t.Helper()
		row, err := e.st.GetConfirmation(context.Background(), p.ConfirmationID)
		if err != nil {
			t.Fatal(err)
		}
		d, err := approval.Sign(e.key, row, approval.Request{ConfirmationID: p.ConfirmationID, Decision: workflows.DecisionEdit,
			Approver: "alice", Signer: signer(t, "alice"), Arguments: json.RawMessage(args)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	nothingRan := func() {
		if got := e.rec.of("record_value"); len(got) != 0 {
			t.Fatalf("record_value ran %v: a tampered edit executed", got)
		}
	}
	wantRefused := func(d workflows.Decision, when, code string) {
		t.Helper()
		res, err := e.update(wf, d)
		if err != nil || res.Accepted || res.Refusal != code || !res.Reissued {
			t.Fatalf("%s: update = %+v, %v; want refused %s and reissued", when, res, err, code)
		}
		nothingRan()
	}

	// Arguments swapped after signing.
	d := signEdit(p1, `{"message":"signed"}`)
	d.Arguments = json.RawMessage(`{"message":"swapped"}`)
	wantRefused(d, "edit with swapped arguments", activities.DecisionMACInvalid)
	// Arguments dropped after signing: the decision is still an edit, of nothing.
	d = signEdit(p1, `{"message":"signed"}`)
	d.Arguments = nil
	if res, err := e.update(wf, d); err == nil && res.Accepted {
		t.Fatalf("an edit without arguments was accepted: %+v", res)
	}
	nothingRan()
	// Re-aimed at the turn's other pending confirmation.
	d = signEdit(p1, `{"message":"signed"}`)
	d.ConfirmationID = p2.ConfirmationID
	// The second proposal's arguments differ, so the digest check (before the MAC) refuses it.
	wantRefused(d, "edit signed for the first confirmation, sent for the second", activities.StaleDigest)
	// Re-aimed with the second's digest too: now the MAC (bound to the first's id) refuses it.
	d = signEdit(p1, `{"message":"signed"}`)
	d.ConfirmationID, d.ArgsDigest = p2.ConfirmationID, p2.ArgsDigest
	wantRefused(d, "edit re-aimed with the second's digest", activities.DecisionMACInvalid)
	// Swapped, through the durable signal.
	before := len(e.refusals(wf))
	d = signEdit(p1, `{"message":"signed"}`)
	d.Arguments = json.RawMessage(`{"message":"swapped by signal"}`)
	e.signal(wf, d)
	if got := e.waitRefusals(wf, before+1, nothingRan); got[len(got)-1] != activities.DecisionMACInvalid {
		t.Fatalf("signalled swapped edit: refusals %v, want the last %s", got, activities.DecisionMACInvalid)
	}
	if ps := pending(t, e.c, wf); len(ps) != 2 {
		t.Fatalf("after the refusals %d confirmations pend, want both still decidable: %+v", len(ps), ps)
	}

	// The honest edit of the first and a denial of the second: exactly the signed arguments run.
	if res, err := e.update(wf, signEdit(p1, `{"message":"signed"}`)); err != nil || !res.Accepted {
		t.Fatalf("honest edit: %+v, %v", res, err)
	}
	if err := e.approveUpdate(p2.ConfirmationID, workflows.DecisionDeny, "alice"); err != nil {
		t.Fatalf("deny the second: %v", err)
	}
	eventually(t, 60*time.Second, "the edited call runs", func() bool { return len(e.rec.of("record_value")) > 0 })
	if got := e.rec.of("record_value"); len(got) != 1 || canon(t, got[0]) != canon(t, `{"message":"signed"}`) {
		t.Fatalf("record_value ran %v, want exactly the signed edit", got)
	}
}
