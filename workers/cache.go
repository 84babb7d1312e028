package workers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"go.temporal.io/sdk/worker"
)

// WorkflowCacheSizeEnv names the environment variable that sets how many turns a worker
// process keeps cached (sticky) in memory: AIRLOCK_WORKFLOW_CACHE_SIZE.
const WorkflowCacheSizeEnv = "AIRLOCK_WORKFLOW_CACHE_SIZE"

// DefaultWorkflowCacheSize is the sticky workflow cache size when WorkflowCacheSizeEnv is
// unset. The cache is what bounds a worker's memory when many turns wait for confirmation:
// a cached turn keeps its workflow state and a blocked coroutine; an evicted one costs a
// replay of its history when its next task (a decision, an expiry) arrives. The SDK's own
// default is 10,000 cached workflows; 2,000 keeps a worker with 10,000 waiting turns well
// under a few hundred MB (docs/bench/scale.md).
const DefaultWorkflowCacheSize = 2000

var cacheOnce sync.Once

// WorkflowCacheSize is the sticky workflow cache size this process uses: WorkflowCacheSizeEnv
// if set to a positive integer, DefaultWorkflowCacheSize if unset. Any other value is an error.
func WorkflowCacheSize() (int, error) {
	v := strings.TrimSpace(os.Getenv(WorkflowCacheSizeEnv))
	if v == "" {
		return DefaultWorkflowCacheSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s must be a positive number of cached workflows (got %q)", WorkflowCacheSizeEnv, v)
	}
	return n, nil
}

// configureWorkflowCache sets the process-wide sticky workflow cache size once, before the
// first worker of the process starts (the SDK reads it when the first worker starts; later
// calls have no effect). A malformed WorkflowCacheSizeEnv is refused by Build at start-up;
// here it falls back to the default.
func configureWorkflowCache() {
	cacheOnce.Do(func() {
		n, err := WorkflowCacheSize()
		if err != nil {
			n = DefaultWorkflowCacheSize
		}
		worker.SetStickyWorkflowCacheSize(n)
	})
}
