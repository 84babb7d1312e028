package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// grantDecision signs an approval of confirmation id by approver that also grants the next n
// identical calls for minutes minutes (issue 37, item 4).
func (f *fixture) grantDecision(id, approver string, n, minutes int) workflows.Decision {
	f.t.Helper()
	row, err := f.store.GetConfirmation(context.Background(), id)
	if err != nil {
		f.t.Fatalf("confirmation %s: %v", id, err)
	}
	d, err := approval.Sign(f.key, row, approval.Request{ConfirmationID: id, Decision: workflows.DecisionApprove, Approver: approver,
		Signer: credentialOf(f.t, approver), RepeatCount: n, RepeatMinutes: minutes}, time.Time{})
	if err != nil {
		f.t.Fatalf("sign a grant on %s: %v", id, err)
	}
	return d
}

// grantRows lists "outcome:reason" of the repeat-grant audit rows, in order.
func (f *fixture) grantRows() string {
	var out []string
	for _, r := range f.audit() {
		if strings.HasPrefix(r.Outcome, "repeat_grant_") {
			reason := r.Reason
			if strings.HasPrefix(reason, "rg-") {
				reason = "rg"
			}
			out = append(out, r.Outcome+":"+reason)
		}
	}
	return strings.Join(out, " ")
}

// granted lists, per outcome, "grant(remaining)" for a call run under a repeat grant and
// "-" for any other.
func granted(res workflows.TurnResult) string {
	var out []string
	for _, po := range res.Outcomes {
		if po.Grant != nil {
			out = append(out, "grant("+string(rune('0'+po.Grant.Remaining))+")")
		} else {
			out = append(out, "-")
		}
	}
	return strings.Join(out, " ")
}

// An approval with a repeat grant of 2 (issue 37, item 4): the next two identical calls run
// without a human, each recorded approved by the grant's approver and audited as run under
// the grant with the uses left; the third asks again; a call with other arguments asks.
func TestRepeatGrantRunsTheNextNIdenticalCallsThenAsks(t *testing.T) {
	a := call("c1", "test_send", `{"to":"acct-1","amount":5}`)
	f := newFixture(t, calls(a), calls(call("c2", "test_send", `{"amount":5,"to":"acct-1"}`)), calls(call("c3", "test_send", `{"to":"acct-1","amount":5}`)),
		calls(call("c4", "test_send", `{"to":"acct-1","amount":5}`)), calls(call("c5", "test_send", `{"to":"acct-2","amount":5}`)), answer("done"))
	var asked []string
	approve := func(at time.Duration, grant bool) {
		f.at(at, func() {
			p := f.pending()
			if len(p) != 1 {
				t.Errorf("at %s: pending = %d", at, len(p))
				return
			}
			asked = append(asked, string(p[0].Arguments))
			d := f.decision(p[0].ConfirmationID, workflows.DecisionApprove, "alice", "")
			if grant {
				d = f.grantDecision(p[0].ConfirmationID, "alice", 2, 10)
			}
			f.signal(d)
		})
	}
	approve(time.Minute, true)
	approve(2*time.Minute, false) // c4: the grant is used up
	approve(3*time.Minute, false) // c5: other arguments
	res := f.run(workflows.TurnRequest{})
	wantOutcomes(t, res, "executed", "executed", "executed", "executed", "executed")
	if got := granted(res); got != "- grant(1) grant(0) - -" {
		t.Fatalf("grants = %s", got)
	}
	if len(asked) != 3 || asked[2] != `{"to":"acct-2","amount":5}` || f.sends.Load() != 5 {
		t.Fatalf("asked %v, sends %d", asked, f.sends.Load())
	}
	for _, i := range []int{1, 2} {
		po := res.Outcomes[i]
		c, err := f.store.GetConfirmation(context.Background(), po.ConfirmationID)
		if err != nil || c.Decision != store.DecisionApproved || c.Approver != "alice" || !strings.HasPrefix(c.Reason, activities.GrantReasonPrefix) || po.Approver != "alice" {
			t.Fatalf("granted call #%d: confirmation %+v (%v), outcome %+v", po.Seq, c, err, po)
		}
	}
	if got := f.grantRows(); got != "repeat_grant_issued:rg repeat_grant_used:rg repeat_grant_used:rg repeat_grant_closed:exhausted" {
		t.Fatalf("grant audit = %s", got)
	}
}

// A grant expires after its minutes (on the worker's clock) and a registry or policy change
// voids it: either way the identical call asks a human again, and the audit says why the
// grant stopped counting.
func TestRepeatGrantLapsesOnExpiryAndPolicyChange(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		lapse     func(f *fixture, clock *atomic.Int64)
	}{
		{"expired", store.GrantExpired, func(f *fixture, clock *atomic.Int64) { clock.Add(int64(6 * time.Minute)) }},
		{"policy changed", store.GrantPolicyChanged, func(f *fixture, _ *atomic.Int64) {
			src := registry.Source{Name: "test", Data: []byte(strings.Replace(testRegistry, `"description":"Send money."`, `"description":"Send money (reviewed)."`, 1))}
			reg, err := registry.Load(registry.WithStructuralPolicy(src), testImpls(f))
			if err != nil {
				f.t.Fatal(err)
			}
			f.acts.Registry = reg
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := `{"to":"acct-1","amount":5}`
			f := newFixture(t, calls(call("c1", "test_send", args)), calls(call("c2", "test_echo", `{"text":"wait"}`)),
				calls(call("c3", "test_send", args)), answer("done"))
			var clock atomic.Int64
			clock.Store(time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC).UnixNano())
			f.acts.Now = func() time.Time { return time.Unix(0, clock.Load()) }
			f.at(time.Minute, func() {
				p := f.pending()
				f.signal(f.grantDecision(p[0].ConfirmationID, "alice", 3, 5))
			})
			var once sync.Once
			f.afterSend = func() { once.Do(func() { tc.lapse(f, &clock) }) } // after the granting call ran
			asked := 0
			f.at(2*time.Minute, func() {
				p := f.pending()
				asked += len(p)
				if len(p) == 1 {
					f.signal(f.decision(p[0].ConfirmationID, workflows.DecisionDeny, "alice", "not again"))
				}
			})
			res := f.run(workflows.TurnRequest{})
			wantOutcomes(t, res, "executed", "executed", "denied:denied_by_approver")
			if asked != 1 || f.sends.Load() != 1 {
				t.Fatalf("asked %d, sends %d", asked, f.sends.Load())
			}
			if got := f.grantRows(); got != "repeat_grant_issued:rg repeat_grant_closed:"+tc.why {
				t.Fatalf("grant audit = %s", got)
			}
		})
	}
}

// A call that needs two approvals takes no repeat grant: the approval that asks for one is
// refused (repeat_grant_refused), counts nothing, and the call keeps waiting.
func TestRepeatGrantIsRefusedForAQuorum(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	groupedPolicy(t, f, []string{"payments"}, 2)
	f.at(time.Minute, func() {
		p := f.pending()
		f.signal(f.grantDecision(p[0].ConfirmationID, "alice", 2, 10))
	})
	res := f.run(workflows.TurnRequest{ConfirmationTTL: 3 * time.Minute})
	wantOutcomes(t, res, "expired:confirmation_expired")
	if got := strings.Join(f.refusals(), " "); got != activities.RepeatGrantRefused || f.countedApprovals() != "" || f.grantRows() != "" {
		t.Fatalf("refusals %q, counted %q, grants %q", got, f.countedApprovals(), f.grantRows())
	}
}

// A repeat grant out of bounds, or on a denial, is malformed: no surface signs one, and a
// signal carrying one is refused before it reaches the store.
func TestRepeatGrantBounds(t *testing.T) {
	for _, d := range []workflows.Decision{
		{Decision: workflows.DecisionApprove, RepeatCount: activities.MaxRepeatCalls + 1, RepeatMinutes: 1},
		{Decision: workflows.DecisionApprove, RepeatCount: 1, RepeatMinutes: activities.MaxRepeatMinutes + 1},
		{Decision: workflows.DecisionApprove, RepeatCount: 1},
		{Decision: workflows.DecisionDeny, RepeatCount: 1, RepeatMinutes: 1},
	} {
		if err := workflows.CheckDecision(d); err == nil {
			b, _ := json.Marshal(d)
			t.Errorf("CheckDecision(%s) = nil", b)
		}
	}
	if err := workflows.CheckDecision(workflows.Decision{Decision: workflows.DecisionApprove, RepeatCount: 20, RepeatMinutes: 60}); err != nil {
		t.Fatal(err)
	}
}
