package store

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAuditAppend is one audit row of a call's outcome on each driver: "row" is the row
// alone (the statement before issue 36), "row+receipts" the row with its two records written
// in one transaction (AppendAudit now), the store's background sequencer placing and signing
// them meanwhile.
func BenchmarkAuditAppend(b *testing.B) {
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		for _, mode := range []string{"row", "row+receipts"} {
			b.Run(d+"/"+mode, func(b *testing.B) {
				s := openStore(b, freshURL(b, d))
				sg, _ := receiptKeys(b)
				s.UseReceiptKey(sg)
				ctx := testCtx(b)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e := AuditEvent{Key: fmt.Sprintf("turn/b/%d/run/1/executed", i), WorkflowID: fmt.Sprintf("turn/b/%d", i), RunID: "run", Seq: 1,
						CapabilityID: "system.health", Version: 1, Outcome: "executed", Stage: "execute", At: time.Now(),
						Facts: &ReceiptFacts{Rule: "local_read_only", RegistryRevision: "reg:1", Fingerprint: "cap:1"}}
					var err error
					if mode == "row" {
						_, err = s.appendAudit(ctx, s.db, e)
					} else {
						_, err = s.AppendAudit(ctx, e)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
