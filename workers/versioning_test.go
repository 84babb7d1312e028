package workers

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

func TestVersioningFromEnvDefaults(t *testing.T) {
	for _, k := range []string{"AIRLOCK_DEPLOYMENT", "AIRLOCK_BUILD_ID", "AIRLOCK_PROMOTE", "AIRLOCK_WORKER_VERSIONING"} {
		t.Setenv(k, "")
	}
	v, err := VersioningFromEnv("airlock-turns")
	if err != nil {
		t.Fatal(err)
	}
	if v.Off || v.Deployment != "airlock-turns" || v.Promote != PromoteAuto || v.BuildID != BuildID() {
		t.Fatalf("defaults = %+v, want deployment airlock-turns, build %s, promote auto", v, BuildID())
	}
	// A test binary has no clean commit stamped: its id is the executable's digest.
	if !strings.HasPrefix(v.BuildID, "bin-") || len(v.BuildID) != len("bin-")+12 || BuildID() != v.BuildID {
		t.Fatalf("BuildID() = %q, want bin-<12 hex>, stable", v.BuildID)
	}
	if got := v.String(); got != "airlock-turns:"+v.BuildID {
		t.Fatalf("String() = %q", got)
	}
}

func TestVersioningFromEnvRefusesBadValues(t *testing.T) {
	cases := []struct{ key, val, want string }{
		{"AIRLOCK_WORKER_VERSIONING", "maybe", "want on or off"},
		{"AIRLOCK_PROMOTE", "sometimes", "want auto, always or never"},
		{"AIRLOCK_BUILD_ID", "v1.2", "without ':', '.'"},
		{"AIRLOCK_DEPLOYMENT", "a:b", "without ':', '.'"},
		{"AIRLOCK_BUILD_ID", " padded", "surrounding space"},
		{"AIRLOCK_BUILD_ID", strings.Repeat("x", 256), "1-255 characters"},
	}
	for _, c := range cases {
		t.Run(c.key+"="+c.val[:min(len(c.val), 12)], func(t *testing.T) {
			t.Setenv(c.key, c.val)
			_, err := VersioningFromEnv("q")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("err = %v, want one naming %s and %q", err, c.key, c.want)
			}
		})
	}
	t.Run("off ignores names", func(t *testing.T) {
		t.Setenv("AIRLOCK_WORKER_VERSIONING", "off")
		t.Setenv("AIRLOCK_BUILD_ID", "v1.2")
		v, err := VersioningFromEnv("q")
		if err != nil || !v.Off || v.String() != "unversioned" {
			t.Fatalf("off = %+v, %v", v, err)
		}
	})
}

// TestNewReturnsBadSettingFromStart: an invalid AIRLOCK_* setting is not a panic or a silently
// unversioned worker: Start returns it before polling.
func TestNewReturnsBadSettingFromStart(t *testing.T) {
	t.Setenv("AIRLOCK_PROMOTE", "sometimes")
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	w := New(c, nil, "q")
	if err := w.Start(); err == nil || !strings.Contains(err.Error(), "AIRLOCK_PROMOTE") {
		t.Fatalf("Start = %v, want the AIRLOCK_PROMOTE error", err)
	}
}
