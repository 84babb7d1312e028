package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/registry"
	"github.com/airlock-dev/airlock/workflows"
)

// SweepInterval is how often a worker looks for turns ended from outside (RunSweeper).
const SweepInterval = 15 * time.Second

// ReasonTurnClosed prefixes the reason recorded on a confirmation whose turn ended without
// closing it ("turn_terminated", "turn_timed_out", …).
const ReasonTurnClosed = "turn_"

// SweepClosedTurns closes what turns ended from outside left in the store (issue 20, item 4): a
// terminated turn runs no code, so its pending confirmations would stay in every approver's
// inbox until they expire, and no result would say how it ended. For each confirmation still
// undecided whose turn is no longer running, it records the confirmation expired (reason
// "turn_<status>") with an expired audit row for its proposal, and, when the turn saved no
// result, a failed one (end reason "turn_<status>"). It returns how many confirmations it
// closed; a turn Temporal no longer knows is closed as "turn_not_found". Idempotent: several
// workers may sweep at once.
func SweepClosedTurns(ctx context.Context, c client.Client, acts *activities.Activities) (int, error) {
	pend, err := acts.Store.ListPendingConfirmations(ctx, time.Time{})
	if err != nil {
		return 0, err
	}
	closed := 0
	status := map[string]string{} // run → "" (running) or why it ended
	for _, p := range pend {
		key := p.WorkflowID + "/" + p.RunID
		why, seen := status[key]
		if !seen {
			why, err = turnEnded(ctx, c, p.WorkflowID, p.RunID)
			if err != nil {
				return closed, err
			}
			status[key] = why
			if why != "" {
				if err := saveEndedResult(ctx, acts, p.WorkflowID, why); err != nil {
					return closed, err
				}
			}
		}
		if why == "" {
			continue
		}
		rec := activities.RecordInput{
			Audit: &activities.AuditRecord{Kind: string(activities.OutcomeExpired), WorkflowID: p.WorkflowID, RunID: p.RunID, Seq: p.Seq,
				CallID: p.CallID, CapabilityID: p.CapabilityID, Version: p.Version, Stage: activities.StageConfirm, Reason: why,
				Detail: "the turn ended (" + why + ") while this call waited for a decision; it was not run", ArgsDigest: p.ArgsDigest},
			Decision: &activities.Decision{ConfirmationID: p.ID, Decision: store.DecisionExpired, Reason: why},
		}
		if err := acts.Record(ctx, rec); err != nil && !errors.Is(err, store.ErrConflict) {
			return closed, fmt.Errorf("close confirmation %s of ended turn %s: %w", p.ID, p.WorkflowID, err)
		}
		closed++
	}
	return closed, nil
}

// turnEnded is "" while the run is open, else the reason its confirmations are closed with.
func turnEnded(ctx context.Context, c client.Client, workflowID, runID string) (string, error) {
	d, err := c.DescribeWorkflow(ctx, workflowID, runID)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return ReasonTurnClosed + "not_found", nil
	}
	if err != nil {
		return "", fmt.Errorf("describe turn %s: %w", workflowID, err)
	}
	st := d.RawResponse.GetWorkflowExecutionInfo().GetStatus()
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "", nil
	}
	name := strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_"))
	if name == "" || name == "unspecified" {
		name = "closed"
	}
	return ReasonTurnClosed + name, nil
}

// saveEndedResult saves a failed result for a turn that ended without saving one.
func saveEndedResult(ctx context.Context, acts *activities.Activities, workflowID, why string) error {
	if _, err := acts.Store.GetTurnResult(ctx, workflowID); err == nil {
		return nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	conversation := ""
	if parts := strings.Split(workflowID, "/"); len(parts) >= 3 && parts[0] == "turn" {
		conversation = strings.Join(parts[1:len(parts)-1], "/")
	}
	b, err := json.Marshal(workflows.TurnResult{WorkflowID: workflowID, Status: workflows.StatusFailed, EndReason: why,
		Citations: []registry.Citation{}, Results: []workflows.CapabilityResult{}, Outcomes: []workflows.ProposalOutcome{}})
	if err != nil {
		return err
	}
	return acts.FinishTurn(ctx, activities.FinishInput{WorkflowID: workflowID, Conversation: conversation, Result: b})
}

// RunSweeper runs SweepClosedTurns every interval until ctx ends, logging what it closed and
// any error (a sweep that fails is tried again at the next interval).
func RunSweeper(ctx context.Context, c client.Client, acts *activities.Activities, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := SweepClosedTurns(ctx, c, acts)
		if n > 0 {
			log.Info("closed the pending confirmations of turns ended from outside", "confirmations", n)
		}
		if err != nil && ctx.Err() == nil {
			log.Error("sweep turns ended from outside", "error", err)
		}
	}
}
