package store

import (
	"fmt"
	"testing"
	"time"
)

// benchAuditEvent is the i-th audit row of an automatic call's outcome.
func benchAuditEvent(i int) AuditEvent {
	return AuditEvent{Key: fmt.Sprintf("turn/b/%d/run/1/executed", i), WorkflowID: fmt.Sprintf("turn/b/%d", i), RunID: "run", Seq: 1,
		CapabilityID: "system.health", Version: 1, Outcome: "executed", Stage: "execute", At: time.Now(),
		Facts: &ReceiptFacts{Rule: "local_read_only", RegistryRevision: "reg:1", Fingerprint: "cap:1"}}
}

// BenchmarkAuditAppend is one audit row of a call's outcome on each driver: "row" is the row
// alone (the statement before issue 36), "row+receipts" the row with its receipts draft
// (AppendAudit now: one statement on PostgreSQL, a transaction on SQLite), the store's
// background sequencer building, placing and signing the records meanwhile.
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
					e := benchAuditEvent(i)
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

// BenchmarkSequenceReceipts is the sequencer's work for one audit row of a call's outcome
// (two records: built, reading the call's confirmation and requester, hashed into the tree,
// each signed, stored), in batches as the background sequencer runs them.
func BenchmarkSequenceReceipts(b *testing.B) {
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		b.Run(d, func(b *testing.B) {
			s := openStore(b, freshURL(b, d))
			sg, _ := receiptKeys(b)
			s.receiptKey.Store(sg) // signing without the background sequencer: this benchmark sequences
			ctx := testCtx(b)
			for i := 0; i < b.N; i++ {
				if _, err := s.AppendAudit(ctx, benchAuditEvent(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			n, err := s.SequenceReceipts(ctx)
			if err != nil || n != 2*b.N {
				b.Fatalf("sequenced %d of %d records: %v", n, 2*b.N, err)
			}
		})
	}
}
