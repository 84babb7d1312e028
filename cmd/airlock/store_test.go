package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/store"
)

// TestCLIProcess is not a test: run by cli below in a child process, it is the airlock command
// (main, with its exit status and stderr) for the arguments after "--".
func TestCLIProcess(t *testing.T) {
	if os.Getenv("AIRLOCK_TEST_CLI_PROCESS") != "1" {
		t.Skip("helper process for cli")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Args = append([]string{"airlock"}, args...)
	main()
	os.Exit(0)
}

// cli runs the airlock command in a child process with env added to a clean environment and
// returns its combined output and exit error.
func cli(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestCLIProcess$", "--"}, args...)...)
	cmd.Env = append([]string{"AIRLOCK_TEST_CLI_PROCESS=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"TEMPORAL_ADDRESS=127.0.0.1:1", "AIRLOCK_CORPUS=" + t.TempDir()}, env...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Commands that only read a store never create one: a mistyped AIRLOCK_HOME is an error naming
// the path (not "no pending confirmations"), and nothing is written there.
func TestReadCommandsNeverCreateAStore(t *testing.T) {
	for _, args := range [][]string{
		{"pending"}, {"audit"}, {"audit", "--json"}, {"turn", "show", "turn/demo/1"},
		{"approve", "cf-0123456789abcdef0123"}, {"deny", "cf-0123456789abcdef0123", "--reason", "no"},
		{"turn", "start", "--conversation", "c", "hello"},
	} {
		home := filepath.Join(t.TempDir(), "mistyped")
		out, err := cli(t, []string{"AIRLOCK_HOME=" + home}, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("airlock %s with no store: exit %v, want non-zero\n%s", strings.Join(args, " "), err, out)
		}
		if want := filepath.Join(home, "airlock.db"); !strings.Contains(out, want) || !strings.Contains(out, "AIRLOCK_HOME") {
			t.Errorf("airlock %s: output does not name %s and AIRLOCK_HOME:\n%s", strings.Join(args, " "), want, out)
		}
		if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("airlock %s created %s (%v)", strings.Join(args, " "), home, err)
		}
	}
}

// A database URL the command cannot use never shows its password, whatever its shape.
func TestBadDatabaseURLNeverShowsThePassword(t *testing.T) {
	for _, u := range []string{
		"postgres://airlock:Hunter2secret@127.0.0.1:1/airlock?sslmode=disable&connect_timeout=2",
		"postgres://airlock:Hunter2secret@127.0.0.1:bad/airlock",
		"postgres://airlock:Hunter2/secret@127.0.0.1:1/airlock",
		"postgres://airlock:Hunter2?secret@127.0.0.1:1/airlock",
		"postgres://airlock:Hunter2%secret@127.0.0.1:1/airlock",
		"postgres://airlock@127.0.0.1:1/airlock?connect_timeout=2&password=Hunter2secret",
		"postgresql:/airlock:Hunter2secret@127.0.0.1:1/airlock",
		"host=127.0.0.1 user=airlock password=Hunter2secret",
	} {
		for _, args := range [][]string{{"pending"}, {"audit"}, {"--database-url", u, "pending"}, {"--help"}, {"pending", "--help"}} {
			env := []string{"AIRLOCK_DATABASE_URL=" + u}
			out, err := cli(t, env, args...)
			if help := strings.HasSuffix(args[len(args)-1], "--help"); help != (err == nil) {
				t.Errorf("airlock %s with %q: exit %v:\n%s", strings.Join(args, " "), u, err, out)
			}
			for _, leak := range []string{"Hunter2secret", "secret"} {
				if strings.Contains(out, leak) {
					t.Errorf("airlock %s with a bad URL shows %q:\n%s", strings.Join(args, " "), leak, out)
				}
			}
		}
	}
}

// airlock pending prints at most --limit confirmations (default DefaultPendingLimit), oldest
// first, and says how many it left out; --limit 0 prints all.
func TestPendingIsBounded(t *testing.T) {
	dir := t.TempDir()
	u := "sqlite:" + filepath.Join(dir, "airlock.db")
	st, err := store.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 3 {
		id := fmt.Sprintf("cf-%d", i)
		if _, err := st.CreateConfirmation(context.Background(), store.Confirmation{ID: id, TokenHash: bytes.Repeat([]byte{byte(i + 1)}, 32),
			SealedToken: []byte("sealed"), WorkflowID: fmt.Sprintf("turn/c/%d", i+1), RunID: "r", Seq: 1, CallID: "c1",
			CapabilityID: "web.fetch", Version: 1, ArgsDigest: "d", Arguments: json.RawMessage(`{"url":"https://example.org"}`),
			Display: "web_fetch", CreatedAt: now.Add(time.Duration(i) * time.Second), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	env := []string{"AIRLOCK_DATABASE_URL=" + u}
	out, err := cli(t, env, "pending", "--limit", "2")
	if err != nil || !strings.Contains(out, "cf-0") || !strings.Contains(out, "cf-1") || strings.Contains(out, "cf-2") ||
		!strings.Contains(out, "showing 2 of 3 pending confirmations") {
		t.Fatalf("pending --limit 2 (%v):\n%s", err, out)
	}
	out, err = cli(t, env, "pending", "--limit", "0")
	if err != nil || !strings.Contains(out, "cf-2") || strings.Contains(out, "showing") {
		t.Fatalf("pending --limit 0 (%v):\n%s", err, out)
	}
}
