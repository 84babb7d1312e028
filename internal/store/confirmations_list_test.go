package store

import (
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
