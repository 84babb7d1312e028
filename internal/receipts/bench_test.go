package receipts

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppend is one record's append as the store's sequencer does it:
// encode the record (canonical JSON), hash the leaf, advance the compact range of a log of a
// million records, and sign the new checkpoint (Ed25519, signed note).
func BenchmarkAppend(b *testing.B) {
	s, _ := newKey(b, "airlock.bench/receipts")
	h := Head{}
	for i := 0; i < 1<<20; i++ {
		h, _, _ = h.Append(LeafHash([]byte{byte(i), byte(i >> 8), byte(i >> 16)}))
	}
	rec := Record{Type: TypeSettlement, Event: "turn/c/1/run/1/executed", Turn: "turn/c/1", Seq: 1, Capability: "web.fetch", Version: 1,
		ArgsDigest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", At: time.Now(),
		Settlement: &Settlement{Outcome: SettlementExecuted, ResultDigest: Digest([]byte("result"))}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		leaf, err := rec.Leaf()
		if err != nil {
			b.Fatal(err)
		}
		next, ap, err := h.Append(LeafHash(leaf))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Sign(ap.Index+1, ap.Root); err != nil {
			b.Fatal(err)
		}
		_ = next
	}
}

// BenchmarkSignCheckpoint is signing one checkpoint alone.
func BenchmarkSignCheckpoint(b *testing.B) {
	s, _ := newKey(b, "airlock.bench/receipts")
	root := bytes.Repeat([]byte{7}, HashSize)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := s.Sign(uint64(i), root); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify verifies exports whose records each carry their own signed checkpoint and
// proof, plus a final checkpoint; one op is a whole export (ns/record reported): "quick" is
// Verify on a file-like reader (the final checkpoint proves every record), "each-record" checks
// every record's own signature too (VerifyOptions.EachRecord).
func BenchmarkVerify(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		each bool
	}{{"quick", 10_000, false}, {"quick", 1_000_000, false}, {"each-record", 10_000, true}} {
		b.Run(fmt.Sprintf("%s/records=%d", c.name, c.n), func(b *testing.B) {
			s, vkey := newKey(b, "airlock.bench/receipts")
			kr, _ := ParseKeyring([]byte(vkey))
			exp := buildExport(b, s, c.n)
			b.SetBytes(int64(len(exp)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rep, err := Verify(bytes.NewReader(exp), kr, VerifyOptions{EachRecord: c.each})
				if err != nil || rep.Records != uint64(c.n) {
					b.Fatal(rep, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.n), "ns/record")
		})
	}
}
