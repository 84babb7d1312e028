package activities

import (
	"context"
	"time"

	"go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
)

// HeartbeatInterval is how often long regular activities (Execute, network Infer, applying a
// proposal decision) heartbeat; the worker sends each to the server at once (its heartbeat
// throttle is this interval, workers.New). With the workflow's HeartbeatTimeout (workflows:
// 1 s), the server notices a dead worker within a second and retries the activity elsewhere,
// instead of waiting out the StartToClose timeout (DESIGN "At most once for effects"; issue 7
// item 3, issue 20 item 5), and a live worker has 750 ms of slack for each heartbeat.
const HeartbeatInterval = 250 * time.Millisecond

// keepAlive heartbeats every HeartbeatInterval until the returned stop is called. It does
// nothing in a local activity (those are covered by the workflow task's own timeout) or
// outside an activity (unit tests calling the method directly).
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).IsLocalActivity {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// leaveDeadWorker, in a retried attempt of a regular activity, resets its workflow's sticky
// task queue (ResetStickyTaskQueue): the attempt before it most likely died with its worker
// (a heartbeat timeout), and the workflow task this attempt's result schedules would otherwise
// wait StickyScheduleToStartTimeout on the dead worker's queue before any live worker may take
// it. The cost on a live worker is one replay of the turn's history. Best effort: an error only
// keeps that wait (issue 20, item 5). Only a worker whose activity context allows it
// (WithStickyReset: workers.New) does it; the test environment's mocked service does not.
func leaveDeadWorker(ctx context.Context) {
	if !activity.IsActivity(ctx) || ctx.Value(stickyResetKey{}) == nil {
		return
	}
	info := activity.GetInfo(ctx)
	if info.IsLocalActivity || info.Attempt < 2 {
		return
	}
	c := activity.GetClient(ctx)
	if c == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := c.WorkflowService().ResetStickyTaskQueue(rctx, &workflowservice.ResetStickyTaskQueueRequest{
		Namespace: info.Namespace,
		Execution: &common.WorkflowExecution{WorkflowId: info.WorkflowExecution.ID, RunId: info.WorkflowExecution.RunID},
	})
	if err != nil {
		activity.GetLogger(ctx).Warn("reset the sticky task queue of a retried attempt", "error", err)
	}
}

type stickyResetKey struct{}

// WithStickyReset returns ctx marked so that a retried regular activity resets its workflow's
// sticky task queue (leaveDeadWorker); workers.New makes it the activities' background context.
func WithStickyReset(ctx context.Context) context.Context {
	return context.WithValue(ctx, stickyResetKey{}, true)
}
