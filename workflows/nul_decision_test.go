package workflows_test

import (
	"testing"
	"time"

	"github.com/airlock-dev/airlock/workflows"
)

// The same NUL-approver decision on the SQLite store (control for TestAttackPGNULInDecision).
func TestAttackSQLiteNULApprover(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("ok"))
	f.at(time.Minute, func() {
		f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "mal\x00lory", ""))
	})
	f.at(time.Minute+10*time.Second, func() {
		f.signal(f.decision(f.pending()[0].ConfirmationID, workflows.DecisionApprove, "alice", ""))
	})
	res := f.run(workflows.TurnRequest{})
	t.Logf("outcomes %v refusals %v", outcomes(res), f.refusals())
	for _, r := range f.audit() {
		if r.Reason != "" && r.Approver != "" {
			t.Logf("audit %s %s approver %q", r.Outcome, r.Reason, r.Approver)
		}
	}
}
