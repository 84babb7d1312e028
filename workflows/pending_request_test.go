package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

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

func first(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
