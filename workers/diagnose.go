package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/config"
)

// Deploy diagnosis: with Worker Versioning a turn is Pinned to the build it started on, and new
// turns start on the deployment's current version. Two silent traps follow: the current version
// with no worker polling it (its worker stopped, or an older binary restarted after a newer one
// became current) holds every new turn; a build with pinned turns and no worker holds those
// turns, which cannot even be decided until it runs again. DiagnoseVersioning names both, with
// what to run; the worker, `airlock turn start` and `airlock doctor` print it.

// PollerFreshness is how recently a worker must have polled to count as running: a live
// worker's long poll returns at most every ~70 s (the server's 60 s poll timeout), so a build
// whose last poll is older than this has no worker.
const PollerFreshness = 75 * time.Second

// VersionState is one build of a deployment as the diagnosis sees it.
type VersionState struct {
	BuildID string `json:"build_id"`
	// Current and Ramping say whether new turns start on it.
	Current bool `json:"current,omitempty"`
	Ramping bool `json:"ramping,omitempty"`
	// Pollers is how many workers of the build polled the task queue within PollerFreshness.
	Pollers int `json:"pollers"`
	// Pinned is how many running workflows on the task queue are pinned to it.
	Pinned int `json:"pinned"`
	// Drainage is the server's drainage status ("draining", "drained", "").
	Drainage string `json:"drainage,omitempty"`
}

// VersioningProblem is a trap the diagnosis found: what is wrong and what to run.
type VersioningProblem struct {
	Build string `json:"build_id"`
	What  string `json:"what"`
	Fix   string `json:"fix"`
}

// String is the problem in one line, for logs and the CLI.
func (p VersioningProblem) String() string { return p.What + ": " + p.Fix }

// VersioningDiagnosis is a deployment's builds and the traps among them.
type VersioningDiagnosis struct {
	Deployment string `json:"deployment"`
	TaskQueue  string `json:"task_queue"`
	// Current is the current version's build id ("" when new turns go to unversioned workers).
	Current  string              `json:"current,omitempty"`
	Versions []VersionState      `json:"versions"`
	Problems []VersioningProblem `json:"problems,omitempty"`
	// Unversioned is how many unversioned workers poll the task queue.
	Unversioned int `json:"unversioned_pollers,omitempty"`
}

// ErrNoDeployment: the deployment does not exist on the server (no versioned worker ever
// polled): nothing to diagnose.
var ErrNoDeployment = errors.New("workers: the worker deployment does not exist yet (no versioned worker has polled)")

// maxPinnedScan bounds how many running workflows the diagnosis reads to count pinned turns,
// maxDescribes how many of them it describes one by one when the list leaves versioning out.
const (
	maxPinnedScan = 5000
	maxDescribes  = 200
)

// pinnedTo is the deployment and build a workflow's versioning info pins it to: the
// deployment version, else the older version string ("deployment:build" or "deployment.build").
func pinnedTo(vi *workflowpb.WorkflowExecutionVersioningInfo) (deployment, build string) {
	if dv := vi.GetDeploymentVersion(); dv.GetBuildId() != "" {
		return dv.GetDeploymentName(), dv.GetBuildId()
	}
	//lint:ignore SA1019 servers before the deployment version field send only this string
	if pv := vi.GetVersion(); pv != "" {
		for _, sep := range []string{":", "."} {
			if d, b, ok := strings.Cut(pv, sep); ok {
				return d, b
			}
		}
	}
	return "", ""
}

// DiagnoseVersioning describes deployment's builds on taskQueue (in namespace) at now: which is current, which
// has workers (pollers within PollerFreshness), how many running workflows each has pinned,
// and the problems: the current (or ramping) build without a worker; a build with pinned
// workflows and no worker. Errors: ErrNoDeployment, or the server's.
func DiagnoseVersioning(ctx context.Context, c client.Client, namespace, deployment, taskQueue string, now time.Time) (VersioningDiagnosis, error) {
	d := VersioningDiagnosis{Deployment: deployment, TaskQueue: taskQueue}
	desc, err := c.WorkerDeploymentClient().GetHandle(deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return d, ErrNoDeployment
	} else if err != nil {
		return d, fmt.Errorf("describe worker deployment %s: %w", deployment, err)
	}
	byBuild := map[string]*VersionState{}
	state := func(build string) *VersionState {
		if s, ok := byBuild[build]; ok {
			return s
		}
		s := &VersionState{BuildID: build}
		byBuild[build] = s
		return s
	}
	rc := desc.Info.RoutingConfig
	if rc.CurrentVersion != nil {
		d.Current = rc.CurrentVersion.BuildID
		state(d.Current).Current = true
	}
	if rc.RampingVersion != nil && rc.RampingVersionPercentage > 0 {
		state(rc.RampingVersion.BuildID).Ramping = true
	}
	for _, v := range desc.Info.VersionSummaries {
		s := state(v.Version.BuildID)
		switch v.DrainageStatus {
		case client.WorkerDeploymentVersionDrainageStatusDraining:
			s.Drainage = "draining"
		case client.WorkerDeploymentVersionDrainageStatusDrained:
			s.Drainage = "drained"
		}
	}

	tq, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace: namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: taskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW})
	if err != nil {
		return d, fmt.Errorf("describe task queue %s: %w", taskQueue, err)
	}
	for _, p := range tq.GetPollers() {
		if t := p.GetLastAccessTime(); t == nil || now.Sub(t.AsTime()) > PollerFreshness {
			continue
		}
		opt := p.GetDeploymentOptions()
		if opt == nil || opt.GetBuildId() == "" || opt.GetWorkerVersioningMode() != enumspb.WORKER_VERSIONING_MODE_VERSIONED {
			d.Unversioned++
			continue
		}
		if opt.GetDeploymentName() == deployment {
			state(opt.GetBuildId()).Pollers++
		}
	}

	q := fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Running'", strings.ReplaceAll(taskQueue, "'", ""))
	var token []byte
	described := 0
	for scanned := 0; scanned < maxPinnedScan; {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: q, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return d, fmt.Errorf("list running workflows on %s: %w", taskQueue, err)
		}
		for _, ex := range resp.GetExecutions() {
			scanned++
			vi := ex.GetVersioningInfo()
			if vi == nil && described < maxDescribes {
				// List results may leave the versioning info out: the execution's own
				// description has it.
				described++
				if dr, err := c.DescribeWorkflow(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()); err == nil && dr.RawResponse != nil {
					vi = dr.RawResponse.GetWorkflowExecutionInfo().GetVersioningInfo()
				}
			}
			if vi.GetBehavior() != enumspb.VERSIONING_BEHAVIOR_PINNED {
				continue
			}
			if dep, b := pinnedTo(vi); dep == deployment && b != "" {
				state(b).Pinned++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}

	builds := make([]string, 0, len(byBuild))
	for b := range byBuild {
		builds = append(builds, b)
	}
	sort.Strings(builds)
	var running []string
	for _, b := range builds {
		d.Versions = append(d.Versions, *byBuild[b])
		if byBuild[b].Pollers > 0 {
			running = append(running, b)
		}
	}
	promoteHint := "start a worker of build %s (AIRLOCK_BUILD_ID=%s airlock worker)"
	if len(running) > 0 {
		promoteHint += fmt.Sprintf(", or make a running build current: airlock deploy promote %s", running[len(running)-1])
	}
	for _, v := range d.Versions {
		if v.Pollers > 0 {
			continue
		}
		switch {
		case v.Current:
			d.Problems = append(d.Problems, VersioningProblem{Build: v.BuildID,
				What: fmt.Sprintf("new turns on task queue %s start on build %s (the current version of deployment %s), which no worker runs: they wait and never start", taskQueue, v.BuildID, deployment),
				Fix:  fmt.Sprintf(promoteHint, v.BuildID, v.BuildID)})
		case v.Ramping:
			d.Problems = append(d.Problems, VersioningProblem{Build: v.BuildID,
				What: fmt.Sprintf("some new turns on %s start on build %s (ramping), which no worker runs", taskQueue, v.BuildID),
				Fix:  fmt.Sprintf("start a worker of build %s, or stop the ramp: temporal worker deployment set-ramping-version --deployment-name %s --delete", v.BuildID, deployment)})
		}
		if v.Pinned > 0 {
			d.Problems = append(d.Problems, VersioningProblem{Build: v.BuildID,
				What: fmt.Sprintf("%d running turn(s) are pinned to build %s, which no worker runs: they cannot go on, nor be decided, until it runs again", v.Pinned, v.BuildID),
				Fix:  fmt.Sprintf("start a worker of build %s (AIRLOCK_BUILD_ID=%s airlock worker) until they end (airlock deploy status shows them drain)", v.BuildID, v.BuildID)})
		}
	}
	slices.SortStableFunc(d.Problems, func(a, b VersioningProblem) int { return strings.Compare(a.Build, b.Build) })
	return d, nil
}

// VersioningCheckInterval is how often a worker repeats the deploy diagnosis.
const VersioningCheckInterval = time.Minute

// WatchVersioning runs the deploy diagnosis 10 s after the worker starts and then every
// VersioningCheckInterval until ctx ends, and logs each problem as a warning when it first
// appears (and again when it clears): an older build restarted after a newer one became
// current, or the current build's workers stopped, says so in the running worker's log.
func WatchVersioning(ctx context.Context, c client.Client, v Versioning, taskQueue string, log *slog.Logger) {
	o, err := config.TemporalOptions()
	if err != nil {
		return
	}
	said := map[string]bool{}
	wait := 10 * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = VersioningCheckInterval
		d, err := DiagnoseVersioning(ctx, c, o.Namespace, v.Deployment, taskQueue, time.Now())
		if err != nil {
			continue
		}
		now := map[string]bool{}
		for _, p := range d.Problems {
			now[p.What] = true
			if !said[p.What] {
				log.Warn("deploy: "+p.What, "run", p.Fix, "this_build", v.BuildID)
			}
		}
		for what := range said {
			if !now[what] {
				log.Info("deploy: resolved: " + what)
			}
		}
		said = now
	}
}
