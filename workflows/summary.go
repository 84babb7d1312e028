package workflows

import "github.com/airlock-dev/airlock/internal/display"

// SummaryLimit bounds, in runes, the Temporal summary of every activity and timer of a turn.
const SummaryLimit = 80

// summarize makes an activity or timer summary safe to show in Temporal's UI and CLI: a tool
// name or any other model-written part is shown with its hidden runes as <U+XXXX> and the
// whole is cut to SummaryLimit runes (DESIGN "Hostile text is shown faithfully"). Summaries
// are user metadata that replay does not compare, so changing them keeps old histories
// replayable (TestReplay).
func summarize(s string) string { return display.Summary(s, SummaryLimit) }
