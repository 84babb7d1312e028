//go:build unix

package stack

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A daemon is recorded by pid and executable; a second start under its name is refused; Kill
// and stopDaemon end its process group and remove the pid file; a pid file naming a live
// process of another program (a reused pid) is never taken for the daemon.
func TestDaemonLifecycle(t *testing.T) {
	dir := t.TempDir()
	sleep := "/bin/sleep"
	if _, err := os.Stat(sleep); err != nil {
		t.Skip("no /bin/sleep")
	}
	pid, done, err := startDaemon(dir, "sleeper", []string{sleep, "60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := daemonPID(dir, "sleeper"); !ok || got != pid {
		t.Fatalf("daemonPID = %d %v, want %d", got, ok, pid)
	}
	if _, _, err := startDaemon(dir, "sleeper", []string{sleep, "60"}, nil); !errors.Is(err, ErrDaemonRunning) {
		t.Fatalf("second start: %v", err)
	}
	if st := ClusterStatus(dir); !containsRunning(st, "sleeper") {
		t.Fatalf("status = %+v", st)
	}
	if err := killDaemon(dir, "sleeper"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("killed daemon still running")
	}
	if _, ok := daemonPID(dir, "sleeper"); ok {
		t.Fatal("pid file survived the kill")
	}

	// Our own pid recorded under another executable: not a daemon of ours, and removed.
	stale := strconv.Itoa(os.Getpid()) + "\n/usr/bin/not-this-program\n"
	if err := os.WriteFile(filepath.Join(dir, "ghost.pid"), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := daemonPID(dir, "ghost"); ok {
		t.Fatal("a reused pid was taken for the daemon")
	}
	if _, err := os.Stat(filepath.Join(dir, "ghost.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale pid file kept: %v", err)
	}
	if err := stopDaemon(dir, "ghost", time.Second); err != nil {
		t.Fatalf("stopping what is not running: %v", err)
	}

	if _, _, err := startDaemon(dir, "sleeper", []string{sleep, "60"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := StopCluster(dir); err != nil {
		t.Fatal(err)
	}
	if _, ok := daemonPID(dir, "sleeper"); ok {
		t.Fatal("StopCluster left the daemon running")
	}
}

func containsRunning(st []ProcessStatus, name string) bool {
	for _, p := range st {
		if p.Name == name && p.Running {
			return true
		}
	}
	return false
}
