package workflows_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// groupedPolicy loads the test registry with test.send decided by members of groups, needing
// quorum approvals and an approver other than the requester; alice and bob are in payments,
// carol in none (issue 21, item 2).
func groupedPolicy(t *testing.T, f *fixture, groups []string, quorum int) {
	t.Helper()
	src := registry.Source{Name: "test", Data: []byte(testRegistry)}
	gen := registry.StructuralPolicy("grouped policy", "test.1", func(e registry.Entry) bool { return e.ID == "test.send" }, src)
	var doc registry.PolicyDocument
	if err := json.Unmarshal(gen.Data, &doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc.Capabilities {
		if doc.Capabilities[i].ID == "test.send" {
			doc.Capabilities[i].ApproverGroups, doc.Capabilities[i].Quorum = groups, quorum
		}
	}
	b, _ := json.Marshal(doc)
	reg, err := registry.Load([]registry.Source{src, {Name: "grouped policy", Data: b}}, testImpls(f))
	if err != nil {
		t.Fatal(err)
	}
	var file approvers.File
	for _, n := range []string{"alice", "bob", "carol"} {
		a := approvers.Approver{Name: n, PublicKey: testCredentials[n].Public()}
		if n != "carol" {
			a.Groups = []string{"payments"}
		}
		file.Approvers = append(file.Approvers, a)
	}
	fb, _ := json.Marshal(file)
	set, err := approvers.Parse(fb)
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Registry, f.acts.Approvers = reg, approvers.Static(set)
}

// A capability decided by the payments group with a quorum of two: carol (no group) is
// refused approver_ineligible without consuming the token (no reissue, nothing decided), and
// cannot deny either; alice's approval counts (quorum_pending, a fresh token); her second one
// does not count twice (approver_already_approved); bob's completes the quorum and the call
// runs once. The store lists both approvals.
func TestQuorumOfEligibleApprovers(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	groupedPolicy(t, f, []string{"payments"}, 2)
	var results []string
	decide := func(at time.Duration, approver, decision string) {
		f.at(at, func() {
			p := f.pending()[0]
			before, _ := f.store.GetConfirmation(context.Background(), p.ConfirmationID)
			f.update(f.decision(p.ConfirmationID, decision, approver, "no"), func(res workflows.DecisionResult, err error) {
				if err != nil {
					t.Errorf("%s: %v", approver, err)
				}
				after, _ := f.store.GetConfirmation(context.Background(), p.ConfirmationID)
				results = append(results, approver+":"+res.Refusal+":"+map[bool]string{true: "reissued", false: "kept"}[after.Generation != before.Generation])
			})
		})
	}
	decide(time.Minute, "carol", workflows.DecisionApprove)
	decide(time.Minute+time.Second, "carol", workflows.DecisionDeny)
	decide(time.Minute+2*time.Second, "alice", workflows.DecisionApprove)
	decide(time.Minute+3*time.Second, "alice", workflows.DecisionApprove)
	decide(time.Minute+4*time.Second, "bob", workflows.DecisionApprove)
	res := f.run(workflows.TurnRequest{Principal: "requester"})
	wantOutcomes(t, res, "executed")
	if f.sends.Load() != 1 || res.Outcomes[0].Approver != "bob" {
		t.Fatalf("sends %d, outcome %+v", f.sends.Load(), res.Outcomes[0])
	}
	want := "carol:approver_ineligible:kept carol:approver_ineligible:kept alice:quorum_pending:reissued alice:approver_already_approved:reissued bob::kept"
	if got := strings.Join(results, " "); got != want {
		t.Fatalf("decisions:\n got %s\nwant %s", got, want)
	}
	approvals, err := f.store.ListApprovals(context.Background(), res.Outcomes[0].ConfirmationID)
	if err != nil || len(approvals) != 2 || approvals[0].Approver != "alice" || approvals[1].Approver != "bob" {
		t.Fatalf("approvals = %+v, %v", approvals, err)
	}
	if got := strings.Join(f.refusals(), " "); got != strings.Join([]string{activities.ApproverIneligible, activities.ApproverIneligible, activities.ApproverAlreadyApproved}, " ") {
		t.Fatalf("audited refusals = %s", got)
	}
	// alice's counted approval is audited as counted, with its approver, never as a refusal.
	if got := f.countedApprovals(); got != "alice:"+activities.QuorumPending {
		t.Fatalf("audited counted approvals = %q, want alice:%s", got, activities.QuorumPending)
	}
	// The token her counted vote took is audited as what it was, never as a refused decision.
	worded := 0
	for _, r := range f.audit() {
		if r.Outcome == activities.AuditTokenReissued && r.Reason == activities.QuorumPending {
			if strings.Contains(r.Detail, "refused") || !strings.Contains(r.Detail, "alice's approval counted towards the quorum") {
				t.Fatalf("a counted vote's reissue is worded %q", r.Detail)
			}
			worded++
		}
	}
	if worded != 1 {
		t.Fatalf("%d token_reissued rows for the counted vote, want 1: %+v", worded, f.audit())
	}
}

// The four-eyes rule holds inside a group and a quorum: the requester alice is in payments but
// her approval is refused approver_is_requester and does not count towards the quorum; one
// denial by an eligible approver (bob) denies at once.
func TestQuorumKeepsFourEyesAndOneDenialDenies(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	groupedPolicy(t, f, []string{"payments"}, 2)
	f.at(time.Minute, func() {
		f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "alice", ""))
	})
	f.at(time.Minute+time.Second, func() {
		f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionDeny, "bob", "not today"))
	})
	res := f.run(workflows.TurnRequest{Principal: "alice"})
	wantOutcomes(t, res, "denied:denied_by_approver")
	if f.sends.Load() != 0 || res.Outcomes[0].Approver != "bob" {
		t.Fatalf("sends %d, outcome %+v", f.sends.Load(), res.Outcomes[0])
	}
	if got := strings.Join(f.refusals(), " "); got != "approver_is_requester" {
		t.Fatalf("refusals = %s", got)
	}
	if a, err := f.store.ListApprovals(context.Background(), res.Outcomes[0].ConfirmationID); err != nil || len(a) != 0 {
		t.Fatalf("approvals = %+v, %v (a refused approval must not count)", a, err)
	}
}
