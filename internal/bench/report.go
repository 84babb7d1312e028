package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/airlock-dev/airlock/internal/display"
)

// Targets of issues 12 and 20, shown as pass marks in the comparison report. Issue 20's
// replace issue 12's where both name a row.
const (
	// TargetPlainRecordedRatio: the recorded plain row's turns/s at least this many times
	// LangGraph.js's (issue 20, item 3).
	TargetPlainRecordedRatio = 1.2
	// TargetLocalRatio: the network-local plain row, and the recorded and network-local
	// approval rows, at least this many times LangGraph.js's turns/s (issue 20, item 3).
	TargetLocalRatio = 1.0
	// TargetPlainEvents: history events of a plain 4-round turn in a local infer mode at most
	// this many (issue 12).
	TargetPlainEvents = 24
)

// RoundMarker starts a line that begins a new round of a comparison run: scripts/bench-compare.sh
// runs every system several times, interleaved, and writes "# round K" before each round's
// lines. A file without one is one round.
const RoundMarker = "# round"

// Peer system names as the peer benchmarks print them.
const (
	SystemLangGraph    = "langgraph-js"
	SystemBareTemporal = "bare-temporal"
)

// Result is one JSON line of any system (Row's keys; the peers' lines lack class, infer_mode
// and c1_p50_ms, and print their 1-in-flight runs as lines of their own).
type Result struct {
	Row
	CheckpointRows float64 `json:"checkpoint_rows_per_turn"`
}

// rowKey names a table row across rounds: the system, its variant (the bare loop's local
// variants keep their "-local" suffix) and Airlock's class ("" for the peers).
func rowKey(system, variant, class string) string { return system + "|" + variant + "|" + class }

func (r Result) rowKey() string { return rowKey(r.System, r.Variant, r.Class) }

// round is one round's results, each peer row carrying the p50 of its 1-in-flight run.
type round struct {
	rows  []Result
	byKey map[string]Result
}

// check refuses a result line that names something the report does not know, or whose
// numbers cannot be a measurement: every string it accepts is one of a fixed set (nothing
// read from the file reaches the table as text), and every target is judged on a row whose
// class and mode are what they say.
func (r Result) check() error {
	variants := []string{VariantPlain, VariantApproval}
	switch r.System {
	case "airlock":
		modes := map[string]string{ClassRecorded: "local", ClassNetwork + "-regular": "regular", ClassNetwork + "-local": "local"}
		want, ok := modes[r.Class]
		if !ok {
			return fmt.Errorf("airlock row of unknown class %q (recorded, network-regular, network-local)", display.Visible(r.Class))
		}
		if r.InferMode != want {
			return fmt.Errorf("airlock %s row with infer_mode %q, want %q", r.Class, display.Visible(r.InferMode), want)
		}
	case SystemBareTemporal:
		variants = append(variants, VariantPlain+"-local", VariantApproval+"-local")
		fallthrough
	case SystemLangGraph:
		if r.Class != "" || r.InferMode != "" {
			return fmt.Errorf("%s row with a class or infer_mode (the peers have none)", r.System)
		}
	default:
		return fmt.Errorf("unknown system %q (airlock, %s, %s)", display.Visible(r.System), SystemLangGraph, SystemBareTemporal)
	}
	if !slices.Contains(variants, r.Variant) {
		return fmt.Errorf("%s row of unknown variant %q (%s)", r.System, display.Visible(r.Variant), strings.Join(variants, ", "))
	}
	if r.Turns <= 0 || r.Concurrency <= 0 || r.TurnsPerS <= 0 || r.P50Ms <= 0 || r.P95Ms <= 0 {
		return fmt.Errorf("%s %s row without a measurement (turns, concurrency, turns_per_s, p50_ms and p95_ms must be positive)", r.System, r.Variant)
	}
	if r.HistoryEventsPerTurn < 0 || r.C1P50Ms < 0 || r.CheckpointRows < 0 {
		return fmt.Errorf("%s %s row with a negative count or latency", r.System, r.Variant)
	}
	return nil
}

// readRounds splits the JSON lines into rounds (RoundMarker lines; lines that are not JSON
// objects, such as a peer's progress text, are skipped) and folds each peer's 1-in-flight line
// into its row. Errors: a JSON line that does not parse as a result or names no system (with
// its line number), or the reader's.
func readRounds(r io.Reader) ([]round, error) {
	var rounds []round
	var cur []Result
	c1 := map[string]float64{}
	marked := false // the file has round markers
	// flush closes the round read so far. Each round stands alone: nothing of it (a peer's
	// 1-in-flight p50 included) carries into the next.
	flush := func() error {
		if len(cur) == 0 && len(c1) == 0 {
			if marked && len(rounds) > 0 {
				return fmt.Errorf("round %d has no result lines", len(rounds)+1)
			}
			return nil
		}
		rd := round{byKey: map[string]Result{}}
		for _, res := range cur {
			if res.System != "airlock" {
				k := res.System + "/" + res.Variant
				res.C1P50Ms = c1[k] // 0 without one: its C=1 column shows "-"
				delete(c1, k)
			}
			if _, dup := rd.byKey[res.rowKey()]; dup {
				return fmt.Errorf("round %d has two %s %s %s rows", len(rounds)+1, res.System, res.Variant, res.Class)
			}
			rd.rows = append(rd.rows, res)
			rd.byKey[res.rowKey()] = res
		}
		for k := range c1 {
			return fmt.Errorf("round %d: a 1-in-flight line of %s without its main line", len(rounds)+1, k)
		}
		rounds = append(rounds, rd)
		cur, c1 = nil, map[string]float64{}
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, RoundMarker) {
			if err := flush(); err != nil {
				return nil, fmt.Errorf("bench: report: line %d: %w", n, err)
			}
			marked = true
			continue
		}
		if !strings.HasPrefix(line, "{") {
			continue
		}
		// A line that looks like a result and is not one is an error, not a silent gap in the
		// table: every JSON line of a run is some system's result.
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return nil, fmt.Errorf("bench: report: line %d is not a result line: %w", n, err)
		}
		if res.System == "" {
			return nil, fmt.Errorf("bench: report: line %d names no system", n)
		}
		if err := res.check(); err != nil {
			return nil, fmt.Errorf("bench: report: line %d: %w", n, err)
		}
		if res.System != "airlock" && res.Concurrency == 1 {
			k := res.System + "/" + res.Variant
			if _, dup := c1[k]; dup {
				return nil, fmt.Errorf("bench: report: line %d: a second 1-in-flight line of %s in the round", n, k)
			}
			c1[k] = res.P50Ms
			continue
		}
		cur = append(cur, res)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("bench: report: line %d is longer than 1 MiB", n+1)
		}
		return nil, fmt.Errorf("bench: report: %w", err)
	}
	if err := flush(); err != nil {
		return nil, fmt.Errorf("bench: report: at the end: %w", err)
	}
	if len(rounds) == 0 {
		return nil, errors.New("bench: report: no result lines")
	}
	return rounds, nil
}

// median is the median of xs (the mean of the middle two for an even count; 0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratios is one measure of a row, round by round, against the same round's reference row
// (ratios are taken within a round, where both rows saw the same machine): their median and
// range. n is how many rounds had both.
type ratios struct {
	med, lo, hi float64
	n           int
}

func pairRatios(rounds []round, key, refKey string, measure func(Result) float64) ratios {
	var rs []float64
	for _, rd := range rounds {
		a, ok1 := rd.byKey[key]
		b, ok2 := rd.byKey[refKey]
		if !ok1 || !ok2 || measure(a) <= 0 || measure(b) <= 0 {
			continue
		}
		rs = append(rs, measure(a)/measure(b))
	}
	if len(rs) == 0 {
		return ratios{}
	}
	return ratios{med: median(rs), lo: slices.Min(rs), hi: slices.Max(rs), n: len(rs)}
}

// String prints the median ratio, with the rounds' range when there were several.
func (r ratios) String() string {
	switch {
	case r.n == 0:
		return "-"
	case r.n == 1:
		return fmt.Sprintf("%.2f×", r.med)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", r.med, r.lo, r.hi)
}

// Report reads the JSON lines of one comparison run (the peers' and airlock bench's, in one
// or more rounds; lines that are not JSON objects are skipped, a malformed one is an error)
// and writes a markdown report: per variant, every system's throughput and latency (medians
// over the rounds), its ratio to LangGraph.js (the median of the rounds' ratios, with their
// range) and the targets with pass marks, judged on the medians. note is printed under the
// title (load, machine).
func Report(r io.Reader, w io.Writer, title, note string) error {
	return ReportRuns(w, title, note, RunLines{R: r})
}

// RunLines is one comparison run's JSON lines (R) and the name its errors are given under (its file
// path; none for "").
type RunLines struct {
	Name string
	R    io.Reader
}

// ReportRuns is Report over several runs read as one: their rounds one after the other, in
// the order given (a run without round markers is one round), so that the medians and ranges
// are taken over every round of every run. Errors: Report's, prefixed with the run's Name; a
// run whose rounds are an earlier run's (one file named twice, or a copy): pooled, its rounds
// would count twice.
func ReportRuns(w io.Writer, title, note string, runs ...RunLines) error {
	var rounds []round
	var read [][]round
	for i, run := range runs {
		rs, err := readRounds(run.R)
		if err != nil {
			if run.Name != "" {
				err = fmt.Errorf("%s: %w", run.Name, err)
			}
			return err
		}
		for j, earlier := range read {
			if reflect.DeepEqual(rs, earlier) {
				return fmt.Errorf("bench: report: run %d (%s) has the same rounds as run %d (%s): pooled, they would count twice",
					i+1, run.Name, j+1, runs[j].Name)
			}
		}
		read = append(read, rs)
		rounds = append(rounds, rs...)
	}
	// Rows in their first appearance's order, across rounds.
	var order []Result
	seen := map[string]bool{}
	for _, rd := range rounds {
		for _, res := range rd.rows {
			if !seen[res.rowKey()] {
				seen[res.rowKey()] = true
				order = append(order, res)
			}
		}
	}
	fmt.Fprintf(w, "# %s\n\n%s\n", title, note)
	if len(rounds) > 1 {
		fmt.Fprintf(w, "\n%d rounds, each running every system; numbers are medians over the rounds, ratios the median of each round's ratio (range in brackets).\n", len(rounds))
	}
	turnsPerS := func(r Result) float64 { return r.TurnsPerS }
	c1p50 := func(r Result) float64 { return r.C1P50Ms }
	for _, variant := range []string{VariantPlain, VariantApproval} {
		lgKey := rowKey(SystemLangGraph, variant, "")
		bareRegular := rowKey(SystemBareTemporal, variant, "")
		fmt.Fprintf(w, "\n## %s\n\n", variant)
		fmt.Fprintln(w, "| system | class | infer | turns | C | turns/s | × LangGraph | p50 ms | p95 ms | C=1 p50 ms | C=1 p50 vs LangGraph | events/turn | targets |")
		fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
		for _, first := range order {
			base, _ := strings.CutSuffix(first.Variant, "-local")
			if base != variant {
				continue
			}
			key := first.rowKey()
			// Medians of what each round measured: a value a round did not report (0) is
			// left out, never counted as a measured 0.
			var tps, p50, p95, c1, ev, cp []float64
			present := 0
			for _, rd := range rounds {
				res, ok := rd.byKey[key]
				if !ok {
					continue
				}
				if res.Turns != first.Turns || res.Concurrency != first.Concurrency {
					return fmt.Errorf("bench: report: %s %s %s ran %d turns at C=%d in one round and %d at C=%d in another",
						first.System, first.Variant, first.Class, first.Turns, first.Concurrency, res.Turns, res.Concurrency)
				}
				present++
				tps, p50, p95 = append(tps, res.TurnsPerS), append(p50, res.P50Ms), append(p95, res.P95Ms)
				for _, m := range []struct {
					to *[]float64
					v  float64
				}{{&c1, res.C1P50Ms}, {&ev, res.HistoryEventsPerTurn}, {&cp, res.CheckpointRows}} {
					if m.v > 0 {
						*m.to = append(*m.to, m.v)
					}
				}
			}
			system := first.System
			if present < len(rounds) {
				system = fmt.Sprintf("%s (in %d of %d rounds)", system, present, len(rounds))
			}
			class, infer := first.Class, first.InferMode
			if first.System == SystemBareTemporal {
				class, infer = "scripted", "regular"
				if strings.HasSuffix(first.Variant, "-local") {
					infer = "local"
				}
			}
			if first.System == SystemLangGraph {
				class, infer = "scripted", "-"
			}
			ratio := pairRatios(rounds, key, lgKey, turnsPerS)
			c1ratio := pairRatios(rounds, key, lgKey, c1p50)
			events := "-"
			if e := median(ev); e > 0 {
				events = fmt.Sprintf("%.1f", e)
			} else if c := median(cp); c > 0 {
				events = fmt.Sprintf("(%.0f checkpoint rows)", c)
			}
			var marks string
			if first.System == "airlock" {
				marks = targets(first, median(ev), ratio, c1ratio, pairRatios(rounds, key, bareRegular, turnsPerS))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %.1f | %s | %.0f | %.0f | %s | %s | %s | %s |\n",
				system, class, infer, first.Turns, first.Concurrency, median(tps), ratio, median(p50), median(p95),
				orDash(median(c1)), c1ratio, events, marks)
		}
	}
	fmt.Fprintf(w, "\nTargets (issue 20, item 3): approval, recorded and network-local, ≥ %.1f× LangGraph.js turns/s and C=1 p50 ≤ LangGraph.js's; "+
		"plain recorded ≥ %.1f×, plain network-local ≥ %.1f×; the regular infer mode ahead of the bare loop of regular activities (> 1.0×); "+
		"in the local modes, C=1 p50 ≤ LangGraph.js's for plain turns too and ≤ %d history events for the plain 4-round turn (issue 12). ✓ met, ✗ missed.\n",
		TargetLocalRatio, TargetPlainRecordedRatio, TargetLocalRatio, TargetPlainEvents)
	return nil
}

func orDash(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// targets are the pass marks of an airlock row (first of its rounds; events its median) against
// the targets of its variant and class, given its ratios to LangGraph.js (turns/s, C=1 p50)
// and to the bare loop of regular activities (turns/s). A target the run could not judge (a
// reference row or a measure missing) is marked "?", never left out.
func targets(res Result, events float64, ratio, c1ratio, vsBare ratios) string {
	if res.InferMode == "regular" {
		return fmt.Sprintf("%s bare regular %s", vsBare, markIf(vsBare, vsBare.med > 1.0))
	}
	want := TargetLocalRatio
	if res.Variant == VariantPlain && res.Class == ClassRecorded {
		want = TargetPlainRecordedRatio
	}
	out := []string{
		fmt.Sprintf("≥%.1f× %s", want, markIf(ratio, ratio.med >= want)),
		"C=1 " + markIf(c1ratio, c1ratio.med <= 1.0), // issue 20 for approval turns, issue 12 for plain ones
	}
	if res.Variant == VariantPlain {
		ev := "?"
		if events > 0 {
			ev = mark(events <= TargetPlainEvents)
		}
		out = append(out, fmt.Sprintf("≤%d ev %s", TargetPlainEvents, ev))
	}
	return strings.Join(out, " · ")
}

// markIf is mark(ok) for a measured ratio, "?" for one no round could take.
func markIf(r ratios, ok bool) string {
	if r.n == 0 {
		return "?"
	}
	return mark(ok)
}
