package workflows_test

// Attacks on a waiting turn (issue 20, item 4): decisions that could not be judged, copies of
// decisions re-sent from history, malformed and oversized decisions, a turn cancelled from
// outside.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// storeAway makes ConsumeConfirmation fail (as when the store does not answer through every
// retry) while away is set, and run the real activity otherwise.
func storeAway(f *fixture) *atomic.Bool {
	var away atomic.Bool
	f.env.OnActivity(f.acts.ConsumeConfirmation, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.ConsumeInput) (activities.ConsumeOutput, error) {
			if away.Load() {
				return activities.ConsumeOutput{}, errors.New("store: connection refused")
			}
			return f.acts.ConsumeConfirmation(ctx, in)
		})
	return &away
}

// A decision the worker could not judge while the store was away is judged by the turn itself
// once the store answers; a copy of its bytes re-sent meanwhile (as anyone who can read the
// history could) is refused for its spent nonce and runs nothing.
func TestDeferredDecisionIsJudgedByTheTurnAndACopyIsRefused(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("done"))
	away := storeAway(f)
	var d workflows.Decision
	f.at(time.Minute, func() {
		d = f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "alice", "")
		away.Store(true)
		f.signal(d)
	})
	f.at(2*time.Minute, func() {
		if f.sends.Load() != 0 || len(f.pending()) != 1 {
			t.Errorf("while the store is away: sends %d, pending %d (want 0, 1)", f.sends.Load(), len(f.pending()))
		}
		f.signal(d) // the attacker's copy, while the store is still away
	})
	f.at(2*time.Minute+time.Second, func() { away.Store(false) })
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 4 * time.Minute})
	wantOutcomes(t, res, "executed")
	if f.sends.Load() != 1 || res.Outcomes[0].Approver != "alice" {
		t.Fatalf("sends %d, outcome %+v: the deferred approval runs once, as alice's", f.sends.Load(), res.Outcomes[0])
	}
	if got := strings.Join(f.refusals(), " "); got != activities.NonceReplayed {
		t.Fatalf("refusals = %s, want the copy's nonce_replayed only", got)
	}
	row, err := f.store.GetConfirmation(context.Background(), res.Outcomes[0].ConfirmationID)
	if err != nil || row.Decision != store.DecisionApproved || row.Approver != "alice" {
		t.Fatalf("confirmation row = %+v, %v", row, err)
	}
}

// A decision that could not be judged before its confirmation expired is refused at expiry and
// audited; the call does not run, and a copy sent after the store is back runs nothing either.
func TestDeferredDecisionIsRefusedAtExpiry(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("done"))
	away := storeAway(f)
	var d workflows.Decision
	f.at(time.Minute, func() {
		d = f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "alice", "")
		away.Store(true)
		f.signal(d)
	})
	f.at(2*time.Minute+30*time.Second, func() { away.Store(false); f.signal(d) })
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 2 * time.Minute})
	wantOutcomes(t, res, "expired:confirmation_expired")
	if f.sends.Load() != 0 {
		t.Fatal("a decision never judged must not run")
	}
	var consumeFailed *store.AuditEvent
	for _, r := range f.audit() {
		if r.Outcome == activities.AuditConfirmationRefused && r.Reason == workflows.RefusalConsumeFailed {
			consumeFailed = &r
		}
	}
	if consumeFailed == nil || consumeFailed.Approver != "alice" || !strings.Contains(consumeFailed.Detail, "expired") {
		t.Fatalf("audit of the unjudged decision = %+v, want a consume_failed refusal naming the expiry, approver alice", consumeFailed)
	}
}

// The decide update's validator refuses oversized decisions before they reach history; the same decisions sent as signals are refused and audited without touching the
// token; a proposal refused that way is still decided by a real approval.
func TestMalformedDecisionsAreRefusedBeforeTheToken(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("done"))
	var rejected []string
	f.at(time.Minute, func() {
		id := f.pending()[0].ConfirmationID
		good := f.decision(id, workflows.DecisionApprove, "alice", "")
		bad := []workflows.Decision{good, good, good, good, good, good}
		bad[0].Reason = strings.Repeat("x", workflows.MaxDecisionReasonBytes+1)
		bad[1].Approver = strings.Repeat("a", workflows.MaxDecisionFieldBytes+1)
		bad[2].MAC = strings.Repeat("0", workflows.MaxDecisionFieldBytes+1)
		bad[3].ConfirmationID = strings.Repeat("c", workflows.MaxDecisionIDBytes+1)
		bad[4].Attestation.Signature = strings.Repeat("s", 2<<10)
		bad[5].Passkey = json.RawMessage(`"` + strings.Repeat("p", workflows.MaxPasskeyAssertionBytes) + `"`) // a passkey assertion over its bound
		for i := range bad {
			bad[i].Nonce = fmt.Sprintf("n-update-%d", i) // f.update's update id: each its own
		}
		for _, b := range bad {
			f.update(b, func(_ workflows.DecisionResult, err error) {
				var appErr *temporal.ApplicationError
				if errors.As(err, &appErr) && appErr.Type() == workflows.ErrTypeBadDecision {
					rejected = append(rejected, appErr.Type())
				} else {
					t.Errorf("update of a malformed decision: %v, want a %s rejection", err, workflows.ErrTypeBadDecision)
				}
			})
		}
		bad[0].Nonce, bad[1].Nonce = "n-signal-0", "n-signal-1"
		f.signal(bad[0])
		f.signal(bad[1])
	})
	f.at(time.Minute+time.Second, func() {
		row, err := f.store.GetConfirmation(context.Background(), f.pending()[0].ConfirmationID)
		if err != nil || row.Generation != 0 {
			t.Errorf("after malformed decisions the token is at generation %d (%v), want 0: untouched", row.Generation, err)
		}
		f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "alice", ""))
	})
	res := f.run(workflows.TurnRequest{})
	wantOutcomes(t, res, "executed")
	if len(rejected) != 6 {
		t.Fatalf("validator rejections = %d, want 6", len(rejected))
	}
	if got := strings.Join(f.refusals(), " "); got != workflows.RefusalMalformed+" "+workflows.RefusalMalformed {
		t.Fatalf("refusals = %s, want the two malformed signals", got)
	}
	for _, r := range f.audit() {
		if len(r.Approver) > workflows.MaxDecisionFieldBytes+len("…") {
			t.Fatalf("an audit row carries a %d-byte approver", len(r.Approver))
		}
	}
}

// A turn cancelled while it waits leaves nothing pending: its confirmation is closed in the
// store, its result (ended cancelled) is saved, and it reports the cancellation.
func TestCancelledTurnLeavesNothingPending(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("done"))
	var id string
	f.at(time.Minute, func() {
		id = f.pending()[0].ConfirmationID
		f.env.CancelWorkflow()
	})
	req := workflows.TurnRequest{Conversation: "c1", Message: "hello"}
	f.sign(&req) // an attested turn (issue 21): an unattested one never reaches the model
	f.env.ExecuteWorkflow(workflows.TurnWorkflow, req)
	if !f.env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := f.env.GetWorkflowError(); !temporal.IsCanceledError(err) {
		t.Fatalf("workflow error = %v, want cancelled", err)
	}
	if f.sends.Load() != 0 {
		t.Fatal("a cancelled turn must not run its call")
	}
	row, err := f.store.GetConfirmation(context.Background(), id)
	if err != nil || row.Decision != store.DecisionExpired {
		t.Fatalf("confirmation after cancel = %+v, %v: want closed (expired)", row, err)
	}
	pend, err := f.store.ListPendingConfirmations(context.Background(), time.Time{})
	if err != nil || len(pend) != 0 {
		t.Fatalf("pending after cancel = %v, %v", pend, err)
	}
	saved, err := f.store.GetTurnResult(context.Background(), workflows.TurnWorkflowID("c1", 1)) // sign starts it as turn 1 of c1
	if err != nil || !strings.Contains(string(saved), `"end_reason":"cancelled"`) || !strings.Contains(string(saved), `"status":"failed"`) {
		t.Fatalf("saved result = %s, %v", saved, err)
	}
}

// Confirmation signals whose payload is not a decision object (a number, a string, an array,
// an object with members no decision has) are refused and audited, never dropped with only a
// log line; the token is untouched and a real approval still decides.
func TestUndecodableSignalsAreAudited(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("done"))
	f.at(time.Minute, func() {
		for _, payload := range []any{42, "approve", []string{"x"}, map[string]any{"decision": "approve", "by_the_way": "root"}} {
			f.env.SignalWorkflow(workflows.SignalConfirmation, payload)
		}
	})
	f.at(time.Minute+time.Second, func() {
		row, err := f.store.GetConfirmation(context.Background(), f.pending()[0].ConfirmationID)
		if err != nil || row.Generation != 0 {
			t.Errorf("after undecodable signals the token is at generation %d (%v), want 0", row.Generation, err)
		}
		f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "alice", ""))
	})
	res := f.run(workflows.TurnRequest{})
	wantOutcomes(t, res, "executed")
	if got := f.refusals(); len(got) != 4 || got[0] != workflows.RefusalMalformed || got[3] != workflows.RefusalMalformed {
		t.Fatalf("refusals = %v, want four malformed_decision rows", got)
	}
	found := false
	for _, r := range f.audit() {
		if r.Reason == workflows.RefusalMalformed && strings.Contains(r.Detail, "by_the_way") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit row names the unknown member: %+v", f.audit())
	}
}
