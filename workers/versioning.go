package workers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// Promotion says when a starting worker makes its build the deployment's current version, the
// one new turns start on (issue 20, item 1). The values are those of AIRLOCK_PROMOTE.
type Promotion string

const (
	// PromoteAuto (the default) makes the build current when the deployment has no current
	// version, or when the server first saw this build after the current one: a new build
	// takes new turns as soon as it polls, while an old build's worker that restarts (a crash,
	// a host reboot in the middle of a rainbow deploy) never takes them back.
	PromoteAuto Promotion = "auto"
	// PromoteAlways makes the build current whenever a worker of it starts (a rollback to an
	// older build; a development loop).
	PromoteAlways Promotion = "always"
	// PromoteNever leaves routing to the operator (`temporal worker deployment
	// set-current-version`, or a ramp with set-ramping-version).
	PromoteNever Promotion = "never"
)

// Versioning is the Worker Deployment Version a turn worker runs as (Temporal Worker
// Versioning, issue 20 item 1): workflows.TurnWorkflow is Pinned to the build it started on,
// workflows.ProposalWorkflow auto-upgrades.
type Versioning struct {
	// Off runs the worker unversioned (AIRLOCK_WORKER_VERSIONING=off), for a server without
	// Worker Deployments (before v1.29). Turns then move to whatever build polls next, so a
	// deploy must drain every running turn first: the workflow code has no GetVersion branches.
	Off bool
	// Deployment is the worker deployment's name (AIRLOCK_DEPLOYMENT; default the task queue's
	// name, so two task queues never share a deployment by accident).
	Deployment string
	// BuildID identifies the code (AIRLOCK_BUILD_ID; default BuildID()).
	BuildID string
	// Promote says when the build becomes current (AIRLOCK_PROMOTE: auto, always, never).
	Promote Promotion
}

// VersioningFromEnv reads Versioning for taskQueue from AIRLOCK_WORKER_VERSIONING (on, off;
// default on), AIRLOCK_DEPLOYMENT, AIRLOCK_BUILD_ID and AIRLOCK_PROMOTE. It fails on a value it
// does not know, or a name Temporal would refuse.
func VersioningFromEnv(taskQueue string) (Versioning, error) {
	v := Versioning{Deployment: os.Getenv("AIRLOCK_DEPLOYMENT"), BuildID: os.Getenv("AIRLOCK_BUILD_ID"),
		Promote: Promotion(os.Getenv("AIRLOCK_PROMOTE"))}
	switch s := os.Getenv("AIRLOCK_WORKER_VERSIONING"); s {
	case "", "on":
	case "off":
		v.Off = true
	default:
		return v, fmt.Errorf("AIRLOCK_WORKER_VERSIONING=%q: want on or off", s)
	}
	if v.Deployment == "" {
		v.Deployment = taskQueue
	}
	if v.BuildID == "" {
		v.BuildID = BuildID()
	}
	if v.Promote == "" {
		v.Promote = PromoteAuto
	}
	return v, v.Validate()
}

// Validate checks the names against what Temporal accepts in a deployment version
// ("<deployment>:<build id>": neither may hold ':' or '.', nor be empty or over 255 bytes) and
// the promotion against its three values.
func (v Versioning) Validate() error {
	if v.Off {
		return nil
	}
	for _, f := range []struct{ name, val string }{{"AIRLOCK_DEPLOYMENT", v.Deployment}, {"AIRLOCK_BUILD_ID", v.BuildID}} {
		if f.val == "" || len(f.val) > 255 || strings.ContainsAny(f.val, ":.") || strings.TrimSpace(f.val) != f.val {
			return fmt.Errorf("%s=%q: want 1-255 characters without ':', '.' or surrounding space", f.name, f.val)
		}
	}
	switch v.Promote {
	case PromoteAuto, PromoteAlways, PromoteNever:
		return nil
	}
	return fmt.Errorf("AIRLOCK_PROMOTE=%q: want auto, always or never", v.Promote)
}

// String is the version as Temporal prints it ("<deployment>:<build id>"), or "unversioned".
func (v Versioning) String() string {
	if v.Off {
		return "unversioned"
	}
	return v.Deployment + ":" + v.BuildID
}

var buildID = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" && !modified {
			return "git-" + rev[:min(len(rev), 12)]
		}
	}
	// No clean commit (a dirty tree, go test, go run): the executable itself names the code,
	// so two different binaries never share a build id and replay each other's pinned turns.
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err == nil {
				return "bin-" + hex.EncodeToString(h.Sum(nil))[:12]
			}
		}
	}
	return "unknown"
})

// BuildID is the default build id of this binary: "git-<12 hex of the commit>" for a build of a
// clean checkout (the Go toolchain stamps vcs.revision), else "bin-<12 hex of the executable's
// SHA-256>", so a dirty or test build never shares an id with other code.
func BuildID() string { return buildID() }

// versioned is a worker.Worker that makes its build current (Versioning.Promote) once it polls.
type versioned struct {
	worker.Worker
	c client.Client
	v Versioning
	// err is an invalid versioning setting, returned by Start.
	err error
}

// Start starts the worker, then promotes its build (promote): a worker that returned from Start
// with PromoteAlways, or PromoteAuto on a new build, receives new turns.
func (w *versioned) Start() error {
	if w.err != nil {
		return w.err
	}
	if err := w.Worker.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), PromoteTimeout)
	defer cancel()
	if err := promote(ctx, w.c, w.v); err != nil {
		w.Worker.Stop()
		return err
	}
	return nil
}

// Run is worker.Worker's Run through this Start.
func (w *versioned) Run(interruptCh <-chan any) error {
	if err := w.Start(); err != nil {
		return err
	}
	<-interruptCh
	w.Stop()
	return nil
}

// PromoteTimeout bounds how long Start waits for the server to know a new build (its first poll
// registers it) and to make it current.
const PromoteTimeout = 30 * time.Second

// ErrVersioningUnsupported is returned by Start when the server has no Worker Deployments.
var ErrVersioningUnsupported = errors.New("the Temporal server does not support Worker Deployments (server v1.29.1 or later; or set AIRLOCK_WORKER_VERSIONING=off)")

// promote makes v current per v.Promote. The version exists on the server only once a poller
// of it arrived, so it retries until then.
func promote(ctx context.Context, c client.Client, v Versioning) error {
	if v.Off || v.Promote == PromoteNever {
		return nil
	}
	h := c.WorkerDeploymentClient().GetHandle(v.Deployment)
	for {
		err := promoteOnce(ctx, h, v)
		if err == nil {
			return nil
		}
		var unimpl *serviceerror.Unimplemented
		if errors.As(err, &unimpl) {
			return fmt.Errorf("%w: %v", ErrVersioningUnsupported, err)
		}
		select {
		case <-ctx.Done():
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				// A poller of the build has been sending all along: the likeliest reason the
				// server never registered its deployment is its limit of deployments a namespace.
				return fmt.Errorf("make %s the current version of deployment %s: %w (the server never registered the deployment; it refuses more than matching.maxDeployments deployments a namespace, 100 by default: let workers share one with AIRLOCK_DEPLOYMENT, or raise the limit)", v.BuildID, v.Deployment, err)
			}
			return fmt.Errorf("make %s the current version of deployment %s: %w", v.BuildID, v.Deployment, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errNotSeen: the server has not registered the version yet (no poll of it arrived).
var errNotSeen = errors.New("the server has not seen a poller of this build yet")

func promoteOnce(ctx context.Context, h client.WorkerDeploymentHandle, v Versioning) error {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return err
	}
	info := desc.Info
	var mine, cur *client.WorkerDeploymentVersionSummary
	current := info.RoutingConfig.CurrentVersion
	for i, s := range info.VersionSummaries {
		if s.Version.BuildID == v.BuildID {
			mine = &info.VersionSummaries[i]
		}
		if current != nil && s.Version.BuildID == current.BuildID {
			cur = &info.VersionSummaries[i]
		}
	}
	if mine == nil {
		return errNotSeen
	}
	if current != nil && current.BuildID == v.BuildID {
		return nil
	}
	if v.Promote == PromoteAuto && current != nil && cur != nil && !mine.CreateTime.After(cur.CreateTime) {
		return nil // an older build's worker restarting: routing stays with the newer build
	}
	_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
		BuildID: v.BuildID, ConflictToken: desc.ConflictToken, IgnoreMissingTaskQueues: true})
	return err
}
