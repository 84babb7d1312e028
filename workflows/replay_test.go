package workflows_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/airlock-dev/airlock/workers"
)

// versionMarker is the marker workflow.GetVersion records.
var versionMarker = regexp.MustCompile(`"markerName":\s*"Version"`)

// TestReplayCommittedHistories replays every history recorded from a real dev server (make
// histories: integration TestMixedTurnHistory, TestReplayedSessionHistory,
// TestDecisionProtocolHistory and TestBatchEditHistory with AIRLOCK_WRITE_HISTORIES=1) against the
// current workflow code. A turn is Pinned to the build it started on (Worker Versioning), so a
// change that fails here ships as a new build id with re-recorded histories, never as a
// workflow.GetVersion branch: no committed turn history holds a version marker.
func TestReplayCommittedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("%d committed histories in testdata/, want the 5 of make histories", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if versionMarker.Match(b) || strings.Contains(string(b), "TemporalChangeVersion") {
				t.Fatalf("%s holds a workflow.GetVersion marker: TurnWorkflow has one code path", f)
			}
			r := worker.NewWorkflowReplayer()
			workers.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
