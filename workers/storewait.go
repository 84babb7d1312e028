package workers

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/store"
)

// storeWait tells operators, in the worker log, that a turn's step failed because the store
// (PostgreSQL) could not be reached, and that the step is retried with backoff: the turn's
// activities are retried for over a minute (workflows: the retry policies of Infer, Execute
// and the local store steps), so a store outage that short costs the turn nothing. /healthz
// says the same (the store does not answer).
type storeWait struct {
	interceptor.WorkerInterceptorBase
}

func (*storeWait) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &storeWaitActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}}
}

type storeWaitActivity struct {
	interceptor.ActivityInboundInterceptorBase
}

// ExecuteActivity runs the activity; when it failed for want of the store, it logs a warning
// naming the turn, the step and the attempt.
func (a *storeWaitActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := a.Next.ExecuteActivity(ctx, in)
	if err != nil && store.Unavailable(err) {
		info := activity.GetInfo(ctx)
		activity.GetLogger(ctx).Warn("store unreachable: the turn waits and this step is retried with backoff (an outage of up to a minute is ridden out)",
			"turn", info.WorkflowExecution.ID, "step", info.ActivityType.Name, "attempt", info.Attempt,
			"error", display.Visible(err.Error()))
	}
	return res, err
}
