package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// HeartbeatInterval is how often long regular activities (Execute, network Infer, applying a
// proposal decision) heartbeat.
// With the workflow's HeartbeatTimeout (workflows: 2 s), the server notices a dead worker
// within about two seconds and retries the activity elsewhere, instead of waiting out the
// StartToClose timeout (DESIGN "At most once for effects"; issue 7 item 3).
const HeartbeatInterval = 500 * time.Millisecond

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
