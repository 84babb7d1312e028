package store

import (
	"testing"
	"time"
)

// Repeat grants (issue 37, item 4) on both drivers: a grant is created once per approval; each
// confirmation takes at most one use (asked again, it gets its use back, nothing taken); the
// last use closes it exhausted; calls of another scope, digest or revision find none; an
// expired grant and one granted under another revision are closed and reported lapsed.
func TestRepeatGrants(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
		g := Grant{ID: "rg-cf-1", ConfirmationID: "cf-1", Conversation: "c", Principal: "p", CapabilityID: "x.send", Version: 1,
			ArgsDigest: "d1", RegistryRevision: "cap:1", Approver: "alice", Granted: 2, GrantedAt: at, ExpiresAt: at.Add(10 * time.Minute)}
		if _, err := s.CreateGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		again, err := s.CreateGrant(ctx, Grant{ID: g.ID, ConfirmationID: "cf-1", CapabilityID: "x.send", ArgsDigest: "d1", Approver: "mallory", Granted: 20, GrantedAt: at, ExpiresAt: at.Add(time.Hour)})
		if err != nil || again.Approver != "alice" || again.Remaining != 2 {
			t.Fatalf("a second create = %+v, %v (the first grant stands)", again, err)
		}
		sc := GrantScope{ConfirmationID: "cf-2", Conversation: "c", Principal: "p", CapabilityID: "x.send", Version: 1, ArgsDigest: "d1", RegistryRevision: "cap:1", At: at.Add(time.Minute)}
		for _, other := range []GrantScope{
			{ConfirmationID: "cf-x", Conversation: "other", Principal: "p", CapabilityID: "x.send", Version: 1, ArgsDigest: "d1", RegistryRevision: "cap:1", At: sc.At},
			{ConfirmationID: "cf-x", Conversation: "c", Principal: "q", CapabilityID: "x.send", Version: 1, ArgsDigest: "d1", RegistryRevision: "cap:1", At: sc.At},
			{ConfirmationID: "cf-x", Conversation: "c", Principal: "p", CapabilityID: "x.send", Version: 1, ArgsDigest: "d2", RegistryRevision: "cap:1", At: sc.At},
		} {
			if use, lapsed, err := s.UseGrant(ctx, other); err != nil || use != nil || len(lapsed) != 0 {
				t.Fatalf("another scope %+v used %+v (lapsed %v, %v)", other, use, lapsed, err)
			}
		}
		use, _, err := s.UseGrant(ctx, sc)
		if err != nil || use == nil || use.Remaining != 1 || use.Again {
			t.Fatalf("first use = %+v, %v", use, err)
		}
		if use, _, err := s.UseGrant(ctx, sc); err != nil || use == nil || !use.Again || use.Remaining != 1 {
			t.Fatalf("the same confirmation again = %+v, %v (its one use, nothing taken)", use, err)
		}
		sc.ConfirmationID = "cf-3"
		if use, _, err := s.UseGrant(ctx, sc); err != nil || use == nil || use.Remaining != 0 || use.Grant.Closed != GrantExhausted {
			t.Fatalf("last use = %+v, %v", use, err)
		}
		sc.ConfirmationID = "cf-4"
		if use, _, err := s.UseGrant(ctx, sc); err != nil || use != nil {
			t.Fatalf("an exhausted grant was used: %+v, %v", use, err)
		}
		for _, tc := range []struct{ id, rev, why string }{{"rg-exp", "cap:1", GrantExpired}, {"rg-rev", "cap:0", GrantPolicyChanged}} {
			g2 := g
			g2.ID, g2.ConfirmationID, g2.RegistryRevision, g2.ArgsDigest = tc.id, "cf-"+tc.id, tc.rev, "d-"+tc.id
			g2.ExpiresAt = at.Add(2 * time.Minute)
			if _, err := s.CreateGrant(ctx, g2); err != nil {
				t.Fatal(err)
			}
			late := GrantScope{ConfirmationID: "cf-late-" + tc.id, Conversation: "c", Principal: "p", CapabilityID: "x.send", Version: 1, ArgsDigest: g2.ArgsDigest, RegistryRevision: "cap:1", At: at.Add(time.Minute)}
			if tc.why == GrantExpired {
				late.At = at.Add(2 * time.Minute) // expires_at is exclusive
			}
			use, lapsed, err := s.UseGrant(ctx, late)
			if err != nil || use != nil || len(lapsed) != 1 || lapsed[0].Closed != tc.why {
				t.Fatalf("%s: use %+v, lapsed %+v, %v", tc.why, use, lapsed, err)
			}
			if got, _ := s.GetGrant(ctx, tc.id); got.Closed != tc.why {
				t.Fatalf("%s: stored as closed %q", tc.why, got.Closed)
			}
		}
	})
}

// The caller's Accept judges each open grant before a use is taken: GrantSkip leaves it open
// and unused (another call may take it), any other reason closes it and reports it lapsed.
func TestUseGrantAsksTheCallerFirst(t *testing.T) {
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
		g := Grant{ID: "rg-a", ConfirmationID: "cf-a", Conversation: "c", Principal: "p", CapabilityID: "x.send", Version: 1,
			ArgsDigest: "d", RegistryRevision: "cap:1", Approver: "alice", Granted: 2, GrantedAt: at, ExpiresAt: at.Add(time.Hour)}
		if _, err := s.CreateGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		sc := GrantScope{ConfirmationID: "cf-b", Conversation: "c", Principal: "p", CapabilityID: "x.send", Version: 1, ArgsDigest: "d",
			RegistryRevision: "cap:1", At: at.Add(time.Minute), Accept: func(Grant) string { return GrantSkip }}
		if use, lapsed, err := s.UseGrant(ctx, sc); err != nil || use != nil || len(lapsed) != 0 {
			t.Fatalf("skipped: use %+v, lapsed %v, %v", use, lapsed, err)
		}
		if got, err := s.GetGrant(ctx, "rg-a"); err != nil || got.Remaining != 2 || got.Closed != "" {
			t.Fatalf("after a skip the grant is %+v, %v: want it open with both uses", got, err)
		}
		sc.Accept = func(Grant) string { return GrantApproverGone }
		if use, lapsed, err := s.UseGrant(ctx, sc); err != nil || use != nil || len(lapsed) != 1 || lapsed[0].Closed != GrantApproverGone {
			t.Fatalf("refused: use %+v, lapsed %+v, %v", use, lapsed, err)
		}
		sc.Accept = nil
		if use, _, err := s.UseGrant(ctx, sc); err != nil || use != nil {
			t.Fatalf("a closed grant was used: %+v, %v", use, err)
		}
	})
}
