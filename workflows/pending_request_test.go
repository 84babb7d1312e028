package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// The turn's pending query states what the user asked, as the stored confirmation does
// (bounded the same way): surfaces without the store (turn start --wait, make run, the client
// package's fallback) show it, never "(not known)".
func TestPendingQueryCarriesTheUsersRequest(t *testing.T) {
	f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("done"))
	long := "pay the bill " + strings.Repeat("é", 3000) // over the 4096-byte bound, cut on a rune
	f.at(time.Minute, func() {
		p := f.pending()
		if len(p) != 1 {
			t.Fatalf("pending: %+v", p)
		}
		row, err := f.store.GetConfirmation(context.Background(), p[0].ConfirmationID)
		if err != nil {
			t.Fatal(err)
		}
		if p[0].UserRequest == "" || p[0].UserRequest != row.UserRequest || !strings.HasSuffix(p[0].UserRequest, "…") {
			t.Errorf("query %q…, store %q…", first(p[0].UserRequest, 40), first(row.UserRequest, 40))
		}
		f.signal(f.decision(p[0].ConfirmationID, workflows.DecisionDeny, "alice", "no"))
	})
	f.run(workflows.TurnRequest{Message: long, ConfirmationTTL: 4 * time.Minute})
}

// A four-eyes capability's pending query says so (DistinctApprover), as its stored
// confirmation does: surfaces without the store say "other than the requester" too. A
// capability without the rule says nothing of it.
func TestPendingQueryCarriesFourEyes(t *testing.T) {
	for _, fourEyes := range []bool{true, false} {
		f := newFixture(t, calls(call("c1", "test_send", `{"to":"a","amount":1}`)), answer("done"))
		if fourEyes {
			src := registry.Source{Name: "test", Data: []byte(testRegistry)}
			reg, err := registry.Load([]registry.Source{src, registry.StructuralPolicy("four-eyes policy", "test.1",
				func(e registry.Entry) bool { return e.ID == "test.send" }, src)}, testImpls(f))
			if err != nil {
				t.Fatal(err)
			}
			f.acts.Registry = reg
		}
		f.at(time.Minute, func() {
			p := f.pending()
			if len(p) != 1 {
				t.Fatalf("pending: %+v", p)
			}
			row, err := f.store.GetConfirmation(context.Background(), p[0].ConfirmationID)
			if err != nil {
				t.Fatal(err)
			}
			if p[0].DistinctApprover != fourEyes || row.DistinctApprover != fourEyes {
				t.Errorf("four eyes %v: query DistinctApprover %v, store %v", fourEyes, p[0].DistinctApprover, row.DistinctApprover)
			}
			f.signal(f.decision(p[0].ConfirmationID, workflows.DecisionDeny, "bob", "no"))
		})
		f.run(workflows.TurnRequest{Principal: "alice", Message: "send a 1", ConfirmationTTL: 4 * time.Minute})
	}
}

func first(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
