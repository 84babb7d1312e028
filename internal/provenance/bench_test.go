package provenance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCompute: a send_money-like proposal against a 200-entry context (100 user
// messages, 100 results of 2 KB each): the cost IssueConfirmation adds to a confirmation.
func BenchmarkCompute(b *testing.B) {
	var entries []Entry
	for i := range 100 {
		entries = append(entries, Entry{Kind: SourceUser, Text: fmt.Sprintf("please pay bill %d of 98.70 to DE8937040044053201%04d", i, i)})
		entries = append(entries, Entry{Kind: SourceResult, Capability: "files.read", Text: strings.Repeat(fmt.Sprintf("line %d amount 12.50 recipient GB29NWBK6016133192%04d ", i, i), 30)})
	}
	args := json.RawMessage(`{"recipient":"US133000000121212121212","amount":98.7,"subject":"Bill for December 2023, see https://bank.example/pay?id=7","date":"2023-12-01"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compute(args, entries); err != nil {
			b.Fatal(err)
		}
	}
}
