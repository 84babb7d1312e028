package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/bench"
	"github.com/airlock-dev/airlock/workflows"
)

// TestAirlockBenchMeasuresTheWorkload runs airlock bench's harness (internal/bench) on the
// real dev server and PostgreSQL, 4 turns 2 in flight and 2 at 1 in flight, for every class
// and variant: every turn passes the workload's checks (bench.Run fails a row otherwise; in
// the approval variant the approver must have decided exactly one confirmation per turn) and
// each row's numbers are consistent with what it measured. No timing is asserted.
func TestAirlockBenchMeasuresTheWorkload(t *testing.T) {
	specs, err := bench.Specs([]string{bench.ClassRecorded, bench.ClassNetwork}, []string{bench.VariantPlain, bench.VariantApproval})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 6 {
		t.Fatalf("%d rows, want 6 (recorded, network-regular, network-local × plain, approval)", len(specs))
	}
	c := dial(t)
	events := map[string]float64{}
	for _, s := range specs {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		row, err := bench.Run(ctx, bench.Config{Temporal: c, DatabaseURL: pgURL, Turns: 4, Concurrency: 2, C1Turns: 2}, s)
		cancel()
		if err != nil {
			t.Fatalf("%s %s: %v", s.Variant, s.Name(), err)
		}
		t.Logf("%+v", row)
		if row.System != "airlock" || row.Variant != s.Variant || row.Class != s.Name() || row.Turns != 4 || row.Concurrency != 2 || row.C1Turns != 2 {
			t.Errorf("%s %s: row identity %+v", s.Variant, s.Name(), row)
		}
		wantMode := s.InferMode
		if s.Class == bench.ClassRecorded {
			wantMode = workflows.InferLocal
		}
		if row.InferMode != wantMode {
			t.Errorf("%s %s: infer_mode %q, want %q", s.Variant, s.Name(), row.InferMode, wantMode)
		}
		if row.WallS <= 0 || row.TurnsPerS <= 0 || row.P50Ms <= 0 || row.P95Ms < row.P50Ms || row.C1P50Ms <= 0 {
			t.Errorf("%s %s: numbers not sane: %+v", s.Variant, s.Name(), row)
		}
		if d := row.TurnsPerS*row.WallS - float64(row.Turns); d > 0.05 || d < -0.05 {
			t.Errorf("%s %s: turns_per_s × wall_s = %.3f, want %d", s.Variant, s.Name(), row.TurnsPerS*row.WallS, row.Turns)
		}
		// A turn's p50 cannot exceed the whole run's wall time.
		if row.P50Ms > row.WallS*1000 {
			t.Errorf("%s %s: p50 %.0f ms > wall %.0f ms", s.Variant, s.Name(), row.P50Ms, row.WallS*1000)
		}
		if row.HistoryEventsPerTurn < 10 || row.HistoryEventsPerTurn != float64(int(row.HistoryEventsPerTurn)) {
			// every sampled turn runs the same deterministic script, so the mean is a whole number
			t.Errorf("%s %s: history_events_per_turn %v", s.Variant, s.Name(), row.HistoryEventsPerTurn)
		}
		events[s.Variant+"/"+s.Name()] = row.HistoryEventsPerTurn
		b, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		var keys map[string]any
		if err := json.Unmarshal(b, &keys); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"system", "variant", "class", "infer_mode", "turns", "concurrency", "wall_s", "turns_per_s",
			"p50_ms", "p95_ms", "history_events_per_turn", "c1_p50_ms"} {
			if _, ok := keys[k]; !ok {
				t.Errorf("JSON row lacks %q: %s", k, b)
			}
		}
	}
	// The approval variant's decision and the regular activities' round trips are in the
	// history: the measurement saw the work it claims.
	for _, class := range []string{"recorded", "network-regular", "network-local"} {
		if events["approval/"+class] <= events["plain/"+class] {
			t.Errorf("%s: approval turns have %v history events, plain %v: the decision left no trace", class, events["approval/"+class], events["plain/"+class])
		}
	}
	if events["plain/network-regular"] <= events["plain/network-local"] {
		t.Errorf("regular inference has %v events, local %v: the infer mode did not take effect", events["plain/network-regular"], events["plain/network-local"])
	}
}
