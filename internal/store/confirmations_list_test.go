package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestConfirmationListings(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		mk := func(id string, hash byte, wf string, seq int, created time.Time, ttl time.Duration) {
			c := newConfirmation(id, hash)
			c.WorkflowID, c.Seq, c.CreatedAt, c.ExpiresAt = wf, seq, created, created.Add(ttl)
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		mk("cf-old", 1, "turn/a/1", 1, base, time.Second) // its expiry passed, not yet recorded
		mk("cf-mid", 2, "turn/a/1", 2, base.Add(time.Minute), time.Hour)
		mk("cf-new", 3, "turn/b/1", 1, base.Add(2*time.Minute), time.Hour)
		mk("cf-done", 4, "turn/a/1", 3, base.Add(3*time.Minute), time.Hour)
		mk("cf-done2", 5, "turn/b/1", 2, base.Add(4*time.Minute), time.Hour)
		if err := s.DecideConfirmation(ctx, "cf-done", DecisionDenied, "alice", "no", base.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideConfirmation(ctx, "cf-done2", DecisionApproved, "bob", "", base.Add(6*time.Minute)); err != nil {
			t.Fatal(err)
		}
		ids := func(cs []Confirmation, err error) []string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range cs {
				out = append(out, c.ID)
			}
			return out
		}
		check := func(what string, got []string, want ...string) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s = %v, want %v", what, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s = %v, want %v", what, got, want)
				}
			}
		}
		check("undecided, newest first", ids(s.ListUndecidedConfirmations(ctx, 0)), "cf-new", "cf-mid", "cf-old")
		check("undecided, limit 2", ids(s.ListUndecidedConfirmations(ctx, 2)), "cf-new", "cf-mid")
		check("decided, latest decision first", ids(s.ListDecidedConfirmations(ctx, 0)), "cf-done2", "cf-done")
		check("turn a, by seq", ids(s.ListTurnConfirmations(ctx, "turn/a/1")), "cf-old", "cf-mid", "cf-done")
		check("unknown turn", ids(s.ListTurnConfirmations(ctx, "turn/zz/1")))
	})
}

// ListUndecidedPage and CountUndecided page through undecided confirmations narrowed by
// conversation (exactly: not a conversation whose name extends it, nor one differing in case,
// nor one whose name a LIKE pattern would match) and capability.
func TestUndecidedPagesAndFilters(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		mk := func(id string, hash byte, wf, capability string, created time.Time) {
			c := newConfirmation(id, hash)
			c.WorkflowID, c.CapabilityID, c.CreatedAt, c.ExpiresAt = wf, capability, created, created.Add(time.Hour)
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < 7; i++ {
			mk(fmt.Sprintf("p-%d", i), byte(10+i), fmt.Sprintf("turn/a_b/%d", i+1), "web.fetch", base.Add(time.Duration(i)*time.Minute))
		}
		mk("other-1", 30, "turn/a_b/x/1", "web.fetch", base.Add(time.Hour))  // conversation "a_b/x"
		mk("other-2", 31, "turn/aXb/1", "web.fetch", base.Add(time.Hour))    // "_" is no wildcard
		mk("other-3", 32, "turn/A_B/1", "web.fetch", base.Add(time.Hour))    // case matters
		mk("other-4", 33, "turn/a_b/8", "test.write", base.Add(2*time.Hour)) // another capability
		ids := func(cs []Confirmation, err error) string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range cs {
				out = append(out, c.ID)
			}
			return strings.Join(out, " ")
		}
		count := func(f UndecidedFilter) int {
			t.Helper()
			n, err := s.CountUndecided(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		f := UndecidedFilter{Conversation: "a_b", CapabilityID: "web.fetch"}
		if got := ids(s.ListUndecidedPage(ctx, f, 3, 0)); got != "p-6 p-5 p-4" {
			t.Fatalf("page 1 = %s", got)
		}
		if got := ids(s.ListUndecidedPage(ctx, f, 3, 6)); got != "p-0" {
			t.Fatalf("page 3 = %s", got)
		}
		if got := ids(s.ListUndecidedPage(ctx, f, 3, 9)); got != "" {
			t.Fatalf("past the end = %s", got)
		}
		if n := count(f); n != 7 {
			t.Fatalf("count = %d", n)
		}
		if n := count(UndecidedFilter{Conversation: "a_b"}); n != 8 {
			t.Fatalf("count of conversation a_b = %d", n)
		}
		if n := count(UndecidedFilter{}); n != 11 {
			t.Fatalf("count of all = %d", n)
		}
		if got := ids(s.ListUndecidedPage(ctx, UndecidedFilter{Conversation: "a_b/x"}, 0, 0)); got != "other-1" {
			t.Fatalf("conversation a_b/x = %s", got)
		}
	})
}

// PendingIDs lists exactly the undecided, unexpired confirmations, oldest first, whatever
// order they were inserted in.
func TestPendingIDs(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		add := func(id string, hash byte, created time.Time, ttl time.Duration) {
			c := newConfirmation(id, hash)
			c.CreatedAt, c.ExpiresAt = created, created.Add(ttl)
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		add("p-late", 1, base.Add(2*time.Second), time.Hour) // inserted first, created last
		add("p-early", 2, base, time.Hour)
		add("p-decided", 3, base.Add(time.Second), time.Hour)
		add("p-expired", 4, base.Add(time.Second), time.Minute)
		if err := s.DecideProved(ctx, "p-decided", DecisionDenied, "bob", "no", "", base); err != nil {
			t.Fatal(err)
		}
		ids, err := s.PendingIDs(ctx, base.Add(10*time.Minute))
		if err != nil || strings.Join(ids, ",") != "p-early,p-late" {
			t.Fatalf("PendingIDs = %v, %v; want p-early,p-late", ids, err)
		}
		if ids, err := s.PendingIDs(ctx, base.Add(2*time.Hour)); err != nil || len(ids) != 0 {
			t.Fatalf("PendingIDs after every expiry = %v, %v; want none", ids, err)
		}
	})
}
