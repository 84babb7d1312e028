//go:build unix

package stack

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A daemon is one long-running process of the local cluster, started in its own session so
// that it outlives the command that started it. Its state lives in the cluster directory:
// <name>.pid (pid, then the executable path, one a line) and logs/<name>.log (stdout and
// stderr, appended). Names are identifiers such as "history" or "airlock-worker-1".

// ErrDaemonRunning is returned by startDaemon when a live process is recorded under the name.
var ErrDaemonRunning = errors.New("stack: process already running")

func pidPath(dir, name string) string { return filepath.Join(dir, name+".pid") }

// LogPath is the log file of the cluster process name under dir.
func LogPath(dir, name string) string { return filepath.Join(dir, "logs", name+".log") }

// startDaemon starts argv (argv[0] an absolute path) in its own session with env added to
// this process's environment, stdout and stderr appended to LogPath, and records its pid.
// It returns the pid and a channel closed when the process has exited (only meaningful while
// this process is alive; a detached daemon outlives it).
func startDaemon(dir, name string, argv, env []string) (int, <-chan struct{}, error) {
	if pid, ok := daemonPID(dir, name); ok {
		return 0, nil, fmt.Errorf("%w: %s (pid %d)", ErrDaemonRunning, name, pid)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return 0, nil, fmt.Errorf("stack: %s: %w", name, err)
	}
	logFile, err := os.OpenFile(LogPath(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, nil, fmt.Errorf("stack: %s log: %w", name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "--- %s: starting %s ---\n", time.Now().UTC().Format(time.RFC3339), filepath.Base(argv[0]))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("stack: start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	pid := cmd.Process.Pid
	awaitExec(pid, argv[0], done)
	content := strconv.Itoa(pid) + "\n" + argv[0] + "\n"
	tmp := pidPath(dir, name) + ".tmp"
	err = os.WriteFile(tmp, []byte(content), 0o644)
	if err == nil {
		err = os.Rename(tmp, pidPath(dir, name))
	}
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return 0, nil, fmt.Errorf("stack: %s pid file: %w", name, err)
	}
	return pid, done, nil
}

// daemonPID returns the live pid recorded for name. A pid file whose process is gone, or is
// another program (a pid reused after a reboot), is removed and reported as not running.
func daemonPID(dir, name string) (int, bool) {
	b, err := os.ReadFile(pidPath(dir, name))
	if err != nil {
		return 0, false
	}
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 || len(lines) < 2 || !runsExecutable(pid, strings.TrimSpace(lines[1])) {
		_ = os.Remove(pidPath(dir, name))
		return 0, false
	}
	return pid, true
}

// runsExecutable reports whether pid is a live, non-zombie process whose command line starts
// with exe.
func runsExecutable(pid int, exe string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return syscall.Kill(pid, 0) == nil && !procFS() // no /proc (macOS): trust the signal probe
	}
	return bytes.HasPrefix(b, []byte(exe+"\x00"))
}

// awaitExec waits, at most execSettle, until the kernel shows exe as pid's command line or the
// process ends. Start returns once execve is past its point of no return, but the new
// program's argument area is published a moment later (Linux sets it while loading the ELF,
// after it releases the parent): a daemonPID in that window read an empty command line, took
// the daemon for a reused pid and removed its pid file (CI saw it on a loaded machine).
func awaitExec(pid int, exe string, done <-chan struct{}) {
	if !procFS() {
		return
	}
	deadline := time.Now().Add(execSettle)
	for !runsExecutable(pid, exe) && time.Now().Before(deadline) {
		select {
		case <-done:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// execSettle bounds awaitExec; a program not shown by then is left to daemonPID's judgement.
const execSettle = 2 * time.Second

func procFS() bool { _, err := os.Stat("/proc/self/cmdline"); return err == nil }

// signalDaemon sends sig to the process group of the daemon recorded under name.
func signalDaemon(dir, name string, sig syscall.Signal) (int, error) {
	pid, ok := daemonPID(dir, name)
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotRunning, name)
	}
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return pid, fmt.Errorf("stack: signal %s (pid %d): %w", name, pid, err)
	}
	return pid, nil
}

// stopDaemon stops the daemon recorded under name: SIGTERM to its group, SIGKILL after
// grace, then removes the pid file. A daemon that is not running is not an error.
func stopDaemon(dir, name string, grace time.Duration) error {
	pid, err := signalDaemon(dir, name, syscall.SIGTERM)
	if errors.Is(err, ErrNotRunning) {
		return nil
	}
	if err != nil {
		return err
	}
	if !groupGone(pid, grace) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		if !groupGone(pid, killWait) {
			return fmt.Errorf("stack: stop %s (pid %d): still running after SIGKILL", name, pid)
		}
	}
	if err := os.Remove(pidPath(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stack: remove %s pid file: %w", name, err)
	}
	return nil
}

// killDaemon sends SIGKILL to the daemon's group and waits until it is gone.
func killDaemon(dir, name string) error {
	pid, err := signalDaemon(dir, name, syscall.SIGKILL)
	if err != nil {
		return err
	}
	if !groupGone(pid, killWait) {
		return fmt.Errorf("stack: kill %s (pid %d): still running", name, pid)
	}
	_ = os.Remove(pidPath(dir, name))
	return nil
}

// groupGone waits up to limit for every process of group pid to exit (zombies of this process
// are reaped by the goroutine startDaemon runs).
func groupGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if err := syscall.Kill(-pid, 0); err != nil {
			return true
		}
		if !runsAny(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runsAny reports whether pid is alive and not a zombie.
func runsAny(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !procFS() && syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// daemonNames lists the names with a pid file under dir, sorted.
func daemonNames(dir string) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	out := make([]string, 0, len(matches))
	for _, m := range matches {
		out = append(out, strings.TrimSuffix(filepath.Base(m), ".pid"))
	}
	return out
}
