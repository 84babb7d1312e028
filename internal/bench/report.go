package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Targets of issue 12, shown as pass marks in the comparison report.
const (
	// TargetNetworkRatio: a network row's turns/s at least this many times LangGraph.js's.
	TargetNetworkRatio = 1.0
	// TargetRecordedRatio: a recorded row's turns/s at least this many times LangGraph.js's.
	TargetRecordedRatio = 1.2
	// TargetPlainEvents: history events of a plain 4-round turn at most this many.
	TargetPlainEvents = 24
)

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

// Report reads the JSON lines of one comparison run (the peers' and airlock bench's; other
// lines are skipped) and writes a markdown report: per variant, every system's throughput and
// latency, its ratio to LangGraph.js and the targets with pass marks. note is printed
// under the title (load, machine).
func Report(r io.Reader, w io.Writer, title, note string) error {
	var main []Result
	c1 := map[string]float64{} // system/variant → p50 of its 1-in-flight run (peers)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var res Result
		if err := json.Unmarshal([]byte(line), &res); err != nil || res.System == "" {
			continue
		}
		if res.System != "airlock" && res.Concurrency == 1 {
			c1[res.System+"/"+res.Variant] = res.P50Ms
			continue
		}
		main = append(main, res)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("bench: report: %w", err)
	}
	for i := range main {
		if main[i].System != "airlock" {
			main[i].C1P50Ms = c1[main[i].System+"/"+main[i].Variant]
		}
	}
	fmt.Fprintf(w, "# %s\n\n%s\n", title, note)
	for _, variant := range []string{VariantPlain, VariantApproval} {
		var lg *Result
		for i := range main {
			if main[i].System == SystemLangGraph && main[i].Variant == variant {
				lg = &main[i]
			}
		}
		fmt.Fprintf(w, "\n## %s\n\n", variant)
		fmt.Fprintln(w, "| system | class | infer | turns | C | turns/s | × LangGraph | p50 ms | p95 ms | C=1 p50 ms | C=1 p50 vs LangGraph | events/turn | targets |")
		fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
		for _, res := range main {
			base, _ := strings.CutSuffix(res.Variant, "-local")
			if base != variant {
				continue
			}
			class, infer := res.Class, res.InferMode
			if res.System == SystemBareTemporal {
				class, infer = "scripted", "regular"
				if strings.HasSuffix(res.Variant, "-local") {
					infer = "local"
				}
			}
			if res.System == SystemLangGraph {
				class, infer = "scripted", "-"
			}
			ratio, c1ratio := "-", "-"
			if lg != nil && lg.TurnsPerS > 0 {
				ratio = fmt.Sprintf("%.2f×", res.TurnsPerS/lg.TurnsPerS)
			}
			if lg != nil && lg.C1P50Ms > 0 && res.C1P50Ms > 0 {
				c1ratio = fmt.Sprintf("%.2f×", res.C1P50Ms/lg.C1P50Ms)
			}
			events := "-"
			if res.HistoryEventsPerTurn > 0 {
				events = fmt.Sprintf("%.1f", res.HistoryEventsPerTurn)
			} else if res.CheckpointRows > 0 {
				events = fmt.Sprintf("(%.0f checkpoint rows)", res.CheckpointRows)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %.1f | %s | %.0f | %.0f | %s | %s | %s | %s |\n",
				res.System, class, infer, res.Turns, res.Concurrency, res.TurnsPerS, ratio, res.P50Ms, res.P95Ms,
				orDash(res.C1P50Ms), c1ratio, events, targets(res, lg))
		}
	}
	fmt.Fprintf(w, "\nTargets (issue 12): network ≥ %.1f× LangGraph.js turns/s, plain and approval; recorded ≥ %.1f×; "+
		"C=1 p50 ≤ LangGraph.js's; ≤ %d history events for the plain 4-round turn. ✓ met, ✗ missed.\n",
		TargetNetworkRatio, TargetRecordedRatio, TargetPlainEvents)
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

// targets are the pass marks of an airlock row against LangGraph.js's row of its variant.
func targets(res Result, lg *Result) string {
	if res.System != "airlock" || lg == nil || lg.TurnsPerS <= 0 {
		return ""
	}
	var out []string
	ratio := res.TurnsPerS / lg.TurnsPerS
	switch {
	case res.Class == ClassRecorded:
		out = append(out, fmt.Sprintf("≥%.1f× %s", TargetRecordedRatio, mark(ratio >= TargetRecordedRatio)))
	case strings.HasPrefix(res.Class, ClassNetwork):
		out = append(out, fmt.Sprintf("≥%.1f× %s", TargetNetworkRatio, mark(ratio >= TargetNetworkRatio)))
	}
	if lg.C1P50Ms > 0 && res.C1P50Ms > 0 {
		out = append(out, "C=1 "+mark(res.C1P50Ms <= lg.C1P50Ms))
	}
	if res.Variant == VariantPlain {
		out = append(out, fmt.Sprintf("≤%d ev %s", TargetPlainEvents, mark(res.HistoryEventsPerTurn <= TargetPlainEvents)))
	}
	return strings.Join(out, " · ")
}
