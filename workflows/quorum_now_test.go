package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/workflows"
)

// liveApprovers is an approvers file the test changes while the turn waits (the worker's
// approvers.Source re-reads the file on change, as this does).
type liveApprovers struct{ set atomic.Pointer[approvers.Set] }

func (l *liveApprovers) put(t *testing.T, members map[string][]string) {
	t.Helper()
	var file approvers.File
	for _, n := range []string{"alice", "bob", "carol"} {
		groups, ok := members[n]
		if !ok {
			continue
		}
		file.Approvers = append(file.Approvers, approvers.Approver{Name: n, PublicKey: testCredentials[n].Public(), Groups: groups})
	}
	b, _ := json.Marshal(file)
	set, err := approvers.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	l.set.Store(set)
}

func (l *liveApprovers) current() (*approvers.Set, error) { return l.set.Load(), nil }

// A quorum is judged when the call would execute (issue 33, item 3): bob approves (1 of 2),
// then leaves (removed from the approvers file, or from the payments group), then carol (in
// payments) approves: bob's approval no longer counts, so the call does not run; the audit
// says whose approval was dropped and why; alice's approval then completes the quorum with
// carol's and the call runs once, with only the approvals that still count named.
func TestQuorumJudgedAtExecuteDropsApprovalsOfLeavers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave map[string][]string
		why   string
	}{
		{"removed from the approvers file", map[string][]string{"alice": {"payments"}, "carol": {"payments"}}, "bob is no longer an approver"},
		{"left the group", map[string][]string{"alice": {"payments"}, "bob": {"ops"}, "carol": {"payments"}}, "bob is no longer in payments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
			groupedPolicy(t, f, []string{"payments"}, 2)
			live := &liveApprovers{}
			live.put(t, map[string][]string{"alice": {"payments"}, "bob": {"payments"}, "carol": {"payments"}})
			f.acts.Approvers = live.current
			var results []string
			decide := func(at time.Duration, approver string) {
				f.at(at, func() {
					p := f.pending()[0]
					f.update(f.decision(p.ConfirmationID, workflows.DecisionApprove, approver, ""), func(res workflows.DecisionResult, err error) {
						if err != nil {
							t.Errorf("%s: %v", approver, err)
						}
						results = append(results, approver+":"+res.Refusal)
					})
				})
			}
			decide(time.Minute, "bob")
			f.at(time.Minute+time.Second, func() { live.put(t, tc.leave) })
			decide(time.Minute+2*time.Second, "carol")
			decide(time.Minute+3*time.Second, "alice")
			res := f.run(workflows.TurnRequest{Principal: "requester"})
			if got := strings.Join(results, " "); got != "bob:quorum_pending carol:quorum_pending alice:" {
				t.Fatalf("decisions = %s (carol's approval must not complete a quorum with bob's)", got)
			}
			wantOutcomes(t, res, "executed")
			if f.sends.Load() != 1 || res.Outcomes[0].Approver != "alice" {
				t.Fatalf("sends %d, outcome %+v", f.sends.Load(), res.Outcomes[0])
			}
			var dropped bool
			for _, r := range f.audit() {
				if r.Outcome == activities.AuditApprovalCounted && r.Approver == "carol" {
					dropped = strings.Contains(r.Detail, "dropped") && strings.Contains(r.Detail, tc.why)
					if !dropped {
						t.Fatalf("carol's counted approval audits %q; want the dropped approval of bob and why (%q)", r.Detail, tc.why)
					}
				}
			}
			if !dropped {
				t.Fatal("no audit row for carol's approval")
			}
			row, err := f.store.GetConfirmation(context.Background(), res.Outcomes[0].ConfirmationID)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(row.ApproverProof, "bob") && !strings.Contains(row.ApproverProof, "dropped") {
				t.Fatalf("the recorded proof names bob as counting: %q", row.ApproverProof)
			}
		})
	}
}

// The quorum is judged again by Execute itself: an approval complete when given, whose
// approver leaves between the final decision and the execution, does not run the call.
func TestExecuteRefusesAQuorumThatNoLongerHolds(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	groupedPolicy(t, f, []string{"payments"}, 2)
	live := &liveApprovers{}
	live.put(t, map[string][]string{"alice": {"payments"}, "bob": {"payments"}})
	f.acts.Approvers = live.current
	f.at(time.Minute, func() {
		f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "bob", ""))
	})
	f.at(time.Minute+time.Second, func() {
		f.update(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "alice", ""), func(res workflows.DecisionResult, err error) {
			// The decision is final; bob leaves before the call is executed.
			live.put(t, map[string][]string{"alice": {"payments"}})
		})
	})
	res := f.run(workflows.TurnRequest{Principal: "requester"})
	if f.sends.Load() != 0 {
		t.Fatalf("the call ran with a quorum that no longer held: %+v", res.Outcomes)
	}
	if len(res.Outcomes) != 1 || res.Outcomes[0].Outcome != "rejected" || res.Outcomes[0].Reason != activities.ReasonNotApproved {
		t.Fatalf("outcomes = %v", outcomes(res))
	}
}
