package workers

import (
	"context"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/internal/config"
)

func TestWorkflowCacheSizeFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int
		bad  bool
	}{{"", DefaultWorkflowCacheSize, false}, {"500", 500, false}, {" 10000 ", 10000, false},
		{"0", 0, true}, {"-3", 0, true}, {"lots", 0, true}} {
		t.Setenv(WorkflowCacheSizeEnv, c.env)
		n, err := WorkflowCacheSize()
		if (err != nil) != c.bad || n != c.want {
			t.Errorf("%s=%q: %d, %v; want %d (error %v)", WorkflowCacheSizeEnv, c.env, n, err, c.want, c.bad)
		}
	}
}

// A worker refuses to start on a malformed cache size instead of silently using another.
func TestBuildRefusesAMalformedWorkflowCacheSize(t *testing.T) {
	t.Setenv(WorkflowCacheSizeEnv, "many")
	_, err := Build(context.Background(), config.Config{Home: t.TempDir()}, nil)
	if err == nil || !strings.Contains(err.Error(), WorkflowCacheSizeEnv) {
		t.Fatalf("Build = %v, want an error naming %s", err, WorkflowCacheSizeEnv)
	}
}
