package workflows

import (
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

// A turn's attribute is believed only while its run is open or when the turn itself ended it:
// a run terminated (or timed out, or cancelled) while waiting reads as such, never as waiting.
func TestTurnStatusReadsClosedRunsFromTemporal(t *testing.T) {
	for _, c := range []struct {
		exec enumspb.WorkflowExecutionStatus
		attr string
		want string
	}{
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, StatusAwaitingConfirmation, StatusAwaitingConfirmation},
		{enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, "", StatusRunning},
		{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, StatusCompleted, StatusCompleted},
		{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, StatusRunning, StatusCompleted},
		{enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, StatusFailed, StatusFailed},
		{enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, StatusAwaitingConfirmation, StatusFailed},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, StatusAwaitingConfirmation, "terminated"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, StatusRunning, "terminated"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, StatusCompleted, StatusCompleted},
		{enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT, StatusAwaitingConfirmation, "timed_out"},
		{enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, StatusAwaitingConfirmation, "canceled"},
		{enumspb.WorkflowExecutionStatus(99), StatusAwaitingConfirmation, "closed"},
	} {
		if got := TurnStatus(c.exec, c.attr); got != c.want {
			t.Errorf("TurnStatus(%s, %q) = %q, want %q", c.exec, c.attr, got, c.want)
		}
	}
	if QueryAwaiting != `AirlockStatus = "awaiting-confirmation" AND ExecutionStatus = "Running"` {
		t.Errorf("QueryAwaiting = %s", QueryAwaiting)
	}
}
