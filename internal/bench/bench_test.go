package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/workflows"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 20; i++ {
		ds = append(ds, time.Duration(21-i)*time.Millisecond)
	}
	if got := Percentile(ds, 0.5); got != 10*time.Millisecond {
		t.Errorf("p50 = %v, want 10ms", got)
	}
	if got := Percentile(ds, 0.95); got != 19*time.Millisecond {
		t.Errorf("p95 = %v, want 19ms", got)
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func goodResult(variant string) workflows.TurnResult {
	res := workflows.TurnResult{Status: workflows.StatusCompleted, EndReason: "answered", Rounds: Rounds, Prose: Answer}
	for r := 1; r < Rounds; r++ {
		o := workflows.ProposalOutcome{Seq: r, Round: r, Name: toolFor(variant, r), Outcome: activities.OutcomeExecuted}
		if variant == VariantApproval && r == approvalRound {
			o.Approver = Approver
		}
		res.Outcomes = append(res.Outcomes, o)
		res.Results = append(res.Results, workflows.CapabilityResult{Seq: r, Data: json.RawMessage(`{"value":"v` + string(rune('0'+r)) + `"}`)})
	}
	return res
}

func TestCheckResultAcceptsOnlyTheWorkload(t *testing.T) {
	for _, v := range []string{VariantPlain, VariantApproval} {
		if err := CheckResult(v, goodResult(v)); err != nil {
			t.Errorf("%s: a correct turn is refused: %v", v, err)
		}
	}
	bad := map[string]func(*workflows.TurnResult){
		"not answered":       func(r *workflows.TurnResult) { r.EndReason = "max_rounds" },
		"a call denied":      func(r *workflows.TurnResult) { r.Outcomes[1].Outcome = activities.OutcomeDenied },
		"a call missing":     func(r *workflows.TurnResult) { r.Outcomes = r.Outcomes[:2] },
		"a wrong value":      func(r *workflows.TurnResult) { r.Results[2].Data = json.RawMessage(`{"value":"v9"}`) },
		"no approver":        func(r *workflows.TurnResult) { r.Outcomes[1].Approver = "" },
		"a different answer": func(r *workflows.TurnResult) { r.Prose = "done" },
	}
	for name, mutate := range bad {
		res := goodResult(VariantApproval)
		mutate(&res)
		if err := CheckResult(VariantApproval, res); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRecordedSessionIsTheScript(t *testing.T) {
	s, err := Recorded(SessionName(VariantApproval))
	if err != nil {
		t.Fatal(err)
	}
	rounds, err := s.Rounds()
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) != Rounds {
		t.Fatalf("%d rounds", len(rounds))
	}
	if c := rounds[1].Assistant.Calls; len(c) != 1 || c[0].Name != ToolLookupConfirmed || string(c[0].Args) != `{"key":"k2"}` {
		t.Errorf("round 2: %+v", c)
	}
	if rounds[3].Assistant.Content != Answer || len(rounds[3].Assistant.Calls) != 0 {
		t.Errorf("round 4: %+v", rounds[3].Assistant)
	}
	if _, err := Recorded("other"); err == nil {
		t.Error("an unknown session is served")
	}
}

func TestReportRatiosAndTargets(t *testing.T) {
	lines := strings.Join([]string{
		`{"system":"langgraph-js","variant":"plain","turns":200,"concurrency":16,"wall_s":10,"turns_per_s":20,"p50_ms":800,"p95_ms":1500,"checkpoint_rows_per_turn":48}`,
		`{"system":"langgraph-js","variant":"plain","turns":50,"concurrency":1,"wall_s":3,"turns_per_s":16,"p50_ms":60,"p95_ms":70}`,
		`{"system":"bare-temporal","variant":"plain-local","turns":200,"concurrency":16,"wall_s":5,"turns_per_s":40,"p50_ms":300,"p95_ms":500,"history_events_per_turn":20}`,
		`{"system":"bare-temporal","variant":"plain","turns":200,"concurrency":16,"wall_s":5,"turns_per_s":8,"p50_ms":300,"p95_ms":500,"history_events_per_turn":47}`,
		`{"system":"airlock","variant":"plain","class":"recorded","infer_mode":"local","turns":200,"concurrency":16,"wall_s":8,"turns_per_s":25,"p50_ms":600,"p95_ms":900,"history_events_per_turn":22,"c1_p50_ms":50}`,
		`{"system":"airlock","variant":"plain","class":"network-regular","infer_mode":"regular","turns":200,"concurrency":16,"wall_s":20,"turns_per_s":10,"p50_ms":1600,"p95_ms":2000,"history_events_per_turn":50,"c1_p50_ms":140}`,
		`{"system":"airlock","variant":"plain","class":"network-local","infer_mode":"local","turns":200,"concurrency":16,"wall_s":20,"turns_per_s":19,"p50_ms":700,"p95_ms":1000,"history_events_per_turn":14,"c1_p50_ms":55}`,
		"not json",
	}, "\n")
	var out bytes.Buffer
	if err := Report(strings.NewReader(lines), &out, "t", "n"); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		"| airlock | recorded | local | 200 | 16 | 25.0 | 1.25× | 600 | 900 | 50 | 0.83× | 22.0 | ≥1.2× ✓ · C=1 ✓ · ≤24 ev ✓ |",
		"| airlock | network-regular | regular | 200 | 16 | 10.0 | 0.50× | 1600 | 2000 | 140 | 2.33× | 50.0 | 1.25× bare regular ✓ |",
		"| airlock | network-local | local | 200 | 16 | 19.0 | 0.95× | 700 | 1000 | 55 | 0.92× | 14.0 | ≥1.0× ✗ · C=1 ✓ · ≤24 ev ✓ |",
		"| langgraph-js | scripted | - | 200 | 16 | 20.0 | 1.00× | 800 | 1500 | 60 | 1.00× | (48 checkpoint rows) |  |",
		"| bare-temporal | scripted | local | 200 | 16 | 40.0 | 2.00× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "rounds,") {
		t.Errorf("a run of one round is reported as several:\n%s", md)
	}
}

// Several rounds: each row shows its medians, each ratio is the median of the rounds' own
// ratios (not the ratio of medians) with their range, and the targets judge the medians.
func TestReportMediansOverRounds(t *testing.T) {
	lg := func(tps, c1 float64) string {
		return fmt.Sprintf(`{"system":"langgraph-js","variant":"approval","turns":200,"concurrency":16,"turns_per_s":%g,"p50_ms":400,"p95_ms":900}`+"\n"+
			`{"system":"langgraph-js","variant":"approval","turns":50,"concurrency":1,"turns_per_s":20,"p50_ms":%g,"p95_ms":50}`, tps, c1)
	}
	al := func(tps, c1 float64) string {
		return fmt.Sprintf(`{"system":"airlock","variant":"approval","class":"recorded","infer_mode":"local","turns":200,"concurrency":16,"turns_per_s":%g,"p50_ms":300,"p95_ms":600,"history_events_per_turn":23,"c1_p50_ms":%g}`, tps, c1)
	}
	run := strings.Join([]string{
		"# round 1", lg(30, 40), al(33, 38), // 1.10×, C=1 0.95×
		"# round 2", al(36, 45), lg(45, 41), // 0.80×: the worst round alone would miss
		"# round 3", lg(36, 35), al(45, 34), // 1.25×
	}, "\n")
	var out bytes.Buffer
	if err := Report(strings.NewReader(run), &out, "t", "n"); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		"3 rounds, each running every system",
		"| airlock | recorded | local | 200 | 16 | 36.0 | 1.10× (0.80–1.25) | 300 | 600 | 38 | 0.97× (0.95–1.10) | 23.0 | ≥1.0× ✓ · C=1 ✓ |",
		"| langgraph-js | scripted | - | 200 | 16 | 36.0 | 1.00× (1.00–1.00) | 400 | 900 | 40 | 1.00× (1.00–1.00) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "| airlock |"); n != 1 {
		t.Errorf("%d airlock rows for one row measured in 3 rounds:\n%s", n, md)
	}
}

// Several runs read as one (ReportRuns, airlock bench report with several files) are their
// rounds one after the other: the same report as one file of all those rounds, a run without
// round markers counting as one round. A bad line is named with its run and its line there.
func TestReportPoolsRuns(t *testing.T) {
	lg := func(tps float64) string {
		return fmt.Sprintf(`{"system":"langgraph-js","variant":"plain","turns":200,"concurrency":16,"turns_per_s":%g,"p50_ms":400,"p95_ms":900}`, tps)
	}
	al := func(tps float64) string {
		return fmt.Sprintf(`{"system":"airlock","variant":"plain","class":"recorded","infer_mode":"local","turns":200,"concurrency":16,"turns_per_s":%g,"p50_ms":300,"p95_ms":600,"history_events_per_turn":14}`, tps)
	}
	run1 := strings.Join([]string{"# round 1", lg(30), al(33), "# round 2", lg(40), al(36)}, "\n") // 1.10×, 0.90×
	run2 := strings.Join([]string{lg(30), al(45)}, "\n")                                           // one round: 1.50×
	var pooled, whole bytes.Buffer
	if err := ReportRuns(&pooled, "t", "n", RunLines{Name: "a", R: strings.NewReader(run1)}, RunLines{Name: "b", R: strings.NewReader(run2)}); err != nil {
		t.Fatal(err)
	}
	if err := Report(strings.NewReader(run1+"\n# round 3\n"+run2), &whole, "t", "n"); err != nil {
		t.Fatal(err)
	}
	if pooled.String() != whole.String() {
		t.Errorf("pooled runs:\n%s\nwant the report of their rounds in one file:\n%s", pooled.String(), whole.String())
	}
	for _, want := range []string{"3 rounds", "| airlock | recorded | local | 200 | 16 | 36.0 | 1.10× (0.90–1.50) |"} {
		if !strings.Contains(pooled.String(), want) {
			t.Errorf("pooled report lacks %q:\n%s", want, pooled.String())
		}
	}
	// One run twice (the same file named twice, or a copy) would count its rounds twice.
	if err := ReportRuns(&pooled, "t", "n", RunLines{Name: "a", R: strings.NewReader(run1)}, RunLines{Name: "a-copy", R: strings.NewReader(run1)}); err == nil ||
		!strings.Contains(err.Error(), "same rounds") {
		t.Errorf("a run given twice: %v, want an error that it has the same rounds", err)
	}
	err := ReportRuns(&pooled, "t", "n", RunLines{Name: "a", R: strings.NewReader(run1)}, RunLines{Name: "b.jsonl", R: strings.NewReader(lg(30) + "\n{\"variant\":\"plain\"}")})
	if err == nil || !strings.HasPrefix(err.Error(), "b.jsonl: ") || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line in the second run: %v, want an error naming b.jsonl and line 2", err)
	}
}

// A line that looks like a result and is not one fails the report with its line number,
// instead of leaving a row silently out of the table.
func TestReportRefusesMalformedResultLines(t *testing.T) {
	good := `{"system":"langgraph-js","variant":"plain","turns":200,"concurrency":16,"turns_per_s":20,"p50_ms":800,"p95_ms":1500}`
	for name, bad := range map[string]string{
		"truncated":  `{"system":"airlock","variant":"plain","turns_per_s":`,
		"wrong type": `{"system":"airlock","variant":"plain","turns_per_s":"fast"}`,
		"no system":  `{"variant":"plain","turns_per_s":25}`,
	} {
		var out bytes.Buffer
		err := Report(strings.NewReader(good+"\nprogress text\n"+bad+"\n"), &out, "t", "n")
		if err == nil || !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%s: err = %v, want an error naming line 3", name, err)
		}
	}
}

// What cannot be a result of a run is refused with its line: names outside the known systems,
// variants, classes and modes (nothing read from the file reaches the table as text), numbers
// that are no measurement, a row twice in a round, a 1-in-flight line without its row, and a
// file with no rows at all.
func TestReportRefusesWhatCannotBeAResult(t *testing.T) {
	lg := `{"system":"langgraph-js","variant":"plain","turns":200,"concurrency":16,"turns_per_s":20,"p50_ms":800,"p95_ms":1500}`
	al := func(fields string) string {
		return `{"system":"airlock","variant":"plain","class":"recorded","infer_mode":"local","turns":200,"concurrency":16,"turns_per_s":25,"p50_ms":600,"p95_ms":900` + fields + `}`
	}
	for name, c := range map[string]struct{ in, want string }{
		"unknown system":      {lg + "\n" + `{"system":"<script>x</script>","variant":"plain","turns":1,"concurrency":16,"turns_per_s":5,"p50_ms":1,"p95_ms":1}`, "line 2: unknown system"},
		"class with a pipe":   {lg + "\n" + al(`,"class":"recorded | ✓"`), "line 2: airlock row of unknown class"},
		"mode of another":     {lg + "\n" + al(`,"class":"network-regular","infer_mode":"Regular"`), `infer_mode "Regular", want "regular"`},
		"unknown variant":     {lg + "\n" + al(`,"variant":"turbo"`), "unknown variant"},
		"no throughput":       {lg + "\n" + al(`,"turns_per_s":0`), "without a measurement"},
		"negative events":     {lg + "\n" + al(`,"history_events_per_turn":-3`), "negative"},
		"a row twice":         {lg + "\n" + al("") + "\n" + al(""), "two airlock plain recorded rows"},
		"a lone 1-in-flight":  {strings.Replace(lg, `"concurrency":16`, `"concurrency":1`, 1) + "\n" + al(""), "without its main line"},
		"empty":               {"", "no result lines"},
		"markers only":        {"# round 1\n# round 2\n", "no result lines"},
		"an empty round":      {"# round 1\n" + lg + "\n# round 2\n# round 3\n" + lg, "round 2 has no result lines"},
		"a line over 1 MiB":   {lg + "\n" + strings.Repeat("x", 1<<20+1), "line 2 is longer than 1 MiB"},
		"turns differ by run": {"# round 1\n" + lg + "\n" + al("") + "\n# round 2\n" + lg + "\n" + al(`,"turns":5`), "ran 200 turns at C=16 in one round and 5"},
	} {
		var out bytes.Buffer
		err := Report(strings.NewReader(c.in), &out, "t", "n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", name, err, c.want)
		}
	}
}

// A target the run could not judge is marked "?", never left out; a round that did not report
// a measure does not count as a measured 0; a row missing from some rounds says so; and a
// peer's 1-in-flight p50 never carries into the next round.
func TestReportMarksWhatItCouldNotJudge(t *testing.T) {
	al := func(events, c1 float64) string {
		return fmt.Sprintf(`{"system":"airlock","variant":"plain","class":"recorded","infer_mode":"local","turns":200,"concurrency":16,"turns_per_s":30,"p50_ms":600,"p95_ms":900,"history_events_per_turn":%g,"c1_p50_ms":%g}`, events, c1)
	}
	lg := `{"system":"langgraph-js","variant":"plain","turns":200,"concurrency":16,"turns_per_s":20,"p50_ms":800,"p95_ms":1500}`
	lgC1 := `{"system":"langgraph-js","variant":"plain","turns":50,"concurrency":1,"turns_per_s":20,"p50_ms":40,"p95_ms":50}`
	var out bytes.Buffer
	run := strings.Join([]string{
		"# round 1", al(0, 0), // no LangGraph.js row: nothing to take a ratio against
		"# round 2", al(0, 0), lg, lgC1,
		"# round 3", al(30, 50), lg, // LangGraph.js's C=1 line is round 2's, not this round's
		"# round 4", al(30, 0), lg,
	}, "\n")
	if err := Report(strings.NewReader(run), &out, "t", "n"); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		// events: the median of the two rounds that reported them (30), not of [0 0 30 30]
		"| airlock | recorded | local | 200 | 16 | 30.0 | 1.50× (1.50–1.50) | 600 | 900 | 50 | - | 30.0 | ≥1.2× ✓ · C=1 ? · ≤24 ev ✗ |",
		"| langgraph-js (in 3 of 4 rounds) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	out.Reset()
	if err := Report(strings.NewReader(al(20, 0)), &out, "t", "n"); err != nil {
		t.Fatal(err)
	}
	if want := "≥1.2× ? · C=1 ? · ≤24 ev ✓"; !strings.Contains(out.String(), want) {
		t.Errorf("a row with no reference shows %q, want its targets marked ?:\n%s", out.String(), want)
	}
}

// Specs refuses a row asked twice (it would be measured twice and reported as one) and a
// selection with no row at all.
func TestSpecsRefusesDuplicateAndEmptySelections(t *testing.T) {
	for _, c := range [][]string{{ClassNetwork + "-regular", ClassNetwork}, {ClassRecorded, ClassRecorded}, {}} {
		if _, err := Specs(c, []string{VariantPlain}); err == nil {
			t.Errorf("Specs(%q) accepted", c)
		}
	}
	specs, err := Specs([]string{ClassRecorded, ClassNetwork + "-local"}, []string{VariantPlain, VariantApproval})
	if err != nil || len(specs) != 4 {
		t.Fatalf("Specs = %v, %v; want 4 rows", specs, err)
	}
}
