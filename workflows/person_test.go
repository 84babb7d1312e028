package workflows_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/workflows"
)

// Four-eyes compares persons, not strings (issue 33, item 3): a chat backend's requester
// "user:alice@corp" and the approver "alice" are one person when the approvers file says so
// (alice's "principals"), so alice's approval of her own request is refused
// approver_is_requester; bob's is accepted.
func TestFourEyesComparesPersons(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	groupedPolicy(t, f, nil, 1)
	file := approvers.File{Approvers: []approvers.Approver{
		{Name: "alice", PublicKey: testCredentials["alice"].Public(), Principals: []string{"user:alice@corp"}},
		{Name: "bob", PublicKey: testCredentials["bob"].Public()},
	}}
	b, _ := json.Marshal(file)
	set, err := approvers.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Approvers = approvers.Static(set)
	var results []string
	for i, who := range []string{"alice", "bob"} {
		f.at(time.Minute+time.Duration(i)*time.Second, func() {
			f.update(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, who, ""), func(res workflows.DecisionResult, err error) {
				results = append(results, who+":"+res.Refusal)
			})
		})
	}
	res := f.run(workflows.TurnRequest{Principal: "user:alice@corp"})
	if got := strings.Join(results, " "); got != "alice:approver_is_requester bob:" {
		t.Fatalf("decisions = %s (alice approved her own request as user:alice@corp)", got)
	}
	wantOutcomes(t, res, "executed")
	if res.Outcomes[0].Approver != "bob" {
		t.Fatalf("outcome %+v", res.Outcomes[0])
	}
}
