package workflows_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/airlock-dev/airlock/workers"
)

// TestReplayCommittedHistories replays every history recorded from a real dev server
// (integration TestMixedTurnHistory with AIRLOCK_WRITE_HISTORIES=1) against the current
// workflow code: a change that would break running turns fails here until it is put behind
// workflow.GetVersion.
func TestReplayCommittedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.history.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no committed histories in testdata/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			workers.RegisterWorkflows(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
