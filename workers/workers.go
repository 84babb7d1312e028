// Package workers wires Airlock's workflows and activities into Temporal workers. Register is
// the one registration function used by the real worker, the test environment and the
// replayer, so all three run exactly the same names.
package workers

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/workflows"
)

// TurnWorkflowName is the registered workflow type name clients start.
const TurnWorkflowName = "TurnWorkflow"

// WorkflowRegistry is what RegisterWorkflows needs: satisfied by worker.Worker,
// *testsuite.TestWorkflowEnvironment and worker.WorkflowReplayer.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// RegisterWorkflows registers every workflow under its stable type name, with its Worker
// Versioning behavior (issue 20): a turn is short (bounded by its confirmation expiry and its
// rounds) and Pinned, so it finishes on the build it started on and its code needs no
// workflow.GetVersion; a proposal waits for a human for as long as it takes, so it
// auto-upgrades to the current build and patches with GetVersion where its code changes.
func RegisterWorkflows(r WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.TurnWorkflow, workflow.RegisterOptions{Name: TurnWorkflowName,
		VersioningBehavior: workflow.VersioningBehaviorPinned})
	r.RegisterWorkflowWithOptions(workflows.ProposalWorkflow, workflow.RegisterOptions{Name: workflows.ProposalWorkflowName,
		VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade})
	// A call (issue 35) is as short as a turn (bounded by its confirmation expiry): Pinned.
	r.RegisterWorkflowWithOptions(workflows.CallWorkflow, workflow.RegisterOptions{Name: workflows.CallWorkflowName,
		VersioningBehavior: workflow.VersioningBehaviorPinned})
}

// Register registers the workflows and every method of acts (as activities and local
// activities) on r. acts may be nil, which registers the methods with empty dependencies.
func Register(r worker.Registry, acts *activities.Activities) {
	RegisterWorkflows(r)
	if acts == nil {
		acts = &activities.Activities{}
	}
	r.RegisterActivityWithOptions(acts, activity.RegisterOptions{SkipInvalidStructFunctions: true})
}

// StickyScheduleToStartTimeout is how long a workflow task waits on the sticky queue of the
// worker that cached the turn before the server hands it to any worker (the SDK default is
// 5 s). A worker that died holds its turns' next tasks this long: with the workflow task
// timeout (workflows.WorkflowTaskTimeout) and the activity heartbeat timeout
// (workflows.HeartbeatTimeout), a turn whose worker died resumes within about 2 s of a live
// worker polling (issue 7, item 3). A busy live worker that misses it only costs a replay of
// the turn's history on another worker.
const StickyScheduleToStartTimeout = time.Second

// New builds the turn worker on taskQueue ("" = workflows.TaskQueue) with the Worker Versioning
// of VersioningFromEnv (an invalid setting is returned by the worker's Start). Sticky execution
// stays on (the default): a turn's workflow state stays cached between inference rounds.
func New(c client.Client, acts *activities.Activities, taskQueue string) worker.Worker {
	if taskQueue == "" {
		taskQueue = workflows.TaskQueue
	}
	v, err := VersioningFromEnv(taskQueue)
	if err != nil {
		return &versioned{Worker: NewVersioned(c, acts, taskQueue, Versioning{Off: true}), c: c, err: err}
	}
	return NewVersioned(c, acts, taskQueue, v)
}

// NewVersioned is New with explicit versioning v (validated by Start). Its Start returns once
// the worker polls and, per v.Promote, its build is the deployment's current version.
func NewVersioned(c client.Client, acts *activities.Activities, taskQueue string, v Versioning) worker.Worker {
	configureWorkflowCache() // AIRLOCK_WORKFLOW_CACHE_SIZE (cache.go)
	var dep worker.DeploymentOptions
	if !v.Off {
		dep = worker.DeploymentOptions{UseVersioning: true,
			Version: worker.WorkerDeploymentVersion{DeploymentName: v.Deployment, BuildID: v.BuildID}}
	}
	if err := v.Validate(); err != nil {
		v.Off, dep = true, worker.DeploymentOptions{}
		return &versioned{Worker: NewVersioned(c, acts, taskQueue, v), c: c, err: err}
	}
	w := worker.New(c, taskQueue, worker.Options{
		DeploymentOptions: dep,
		// A turn is mostly short workflow tasks that run local activities against the store;
		// more pollers keep tasks from queueing behind each other (measured: the default 2
		// pollers left new turns waiting ~600 ms for their first workflow task at 16 in flight).
		MaxConcurrentWorkflowTaskPollers: 8,
		MaxConcurrentActivityTaskPollers: 8,
		StickyScheduleToStartTimeout:     StickyScheduleToStartTimeout,
		// Send every heartbeat at once (the SDK's default throttle is 80% of the heartbeat
		// timeout): with workflows.HeartbeatTimeout 1 s a live worker has 750 ms of slack,
		// and a dead one is noticed within the second (issue 20, item 5).
		MaxHeartbeatThrottleInterval: activities.HeartbeatInterval,
		// A retried activity leaves a dead worker's sticky queue (activities.WithStickyReset).
		BackgroundActivityContext: activities.WithStickyReset(context.Background()),
		// A step that failed for want of the store is logged as such (storewait.go).
		Interceptors: []interceptor.WorkerInterceptor{&storeWait{}},
	})
	Register(w, acts)
	return &versioned{Worker: w, c: c, v: v}
}
