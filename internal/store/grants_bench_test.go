package store

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkUseGrant is what a repeat grant costs each confirmation (issue 37, item 4), on each
// driver: "none" is the common case, a call no grant covers (the issue activity's one extra
// transaction: the confirmation's earlier use, then the open grants of its scope, none);
// "use" takes one use of an open grant (the update, the use's row, the commit). 100 other
// scopes hold open grants, as a busy deployment's table would.
func BenchmarkUseGrant(b *testing.B) {
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		for _, mode := range []string{"none", "use"} {
			b.Run(d+"/"+mode, func(b *testing.B) {
				s := openStore(b, freshURL(b, d))
				ctx := testCtx(b)
				at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
				for i := 0; i < 100; i++ {
					if _, err := s.CreateGrant(ctx, Grant{ID: fmt.Sprintf("rg-other-%d", i), ConfirmationID: fmt.Sprintf("cf-other-%d", i),
						Conversation: fmt.Sprintf("c%d", i), Principal: "p", CapabilityID: "x.send", Version: 1, ArgsDigest: "d",
						RegistryRevision: "cap:1", Approver: "alice", Granted: 20, GrantedAt: at, ExpiresAt: at.Add(time.Hour)}); err != nil {
						b.Fatal(err)
					}
				}
				if mode == "use" {
					if _, err := s.CreateGrant(ctx, Grant{ID: "rg-mine", ConfirmationID: "cf-mine", Conversation: "mine", Principal: "p",
						CapabilityID: "x.send", Version: 1, ArgsDigest: "d", RegistryRevision: "cap:1", Approver: "alice",
						Granted: b.N + 1, GrantedAt: at, ExpiresAt: at.Add(time.Hour)}); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					use, _, err := s.UseGrant(ctx, GrantScope{ConfirmationID: fmt.Sprintf("cf-%d", i), Conversation: "mine", Principal: "p",
						CapabilityID: "x.send", Version: 1, ArgsDigest: "d", RegistryRevision: "cap:1", At: at.Add(time.Minute)})
					if err != nil || (mode == "use") != (use != nil) {
						b.Fatalf("use %+v, %v", use, err)
					}
				}
			})
		}
	}
}
