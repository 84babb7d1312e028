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
	"github.com/airlock-dev/airlock/registry"
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

// airlock pending says what the worker will judge: the policy's quorum with the votes counted
// so far (not "1 approval(s) needed" for a quorum-2 call), and what the call does and where it
// sends data (the stored disclosure).
func TestPendingShowsQuorumVotesAndDisclosure(t *testing.T) {
	dir := t.TempDir()
	var doc map[string]any
	if err := json.Unmarshal(registry.EmbeddedPolicy, &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range doc["capabilities"].([]any) {
		if e := c.(map[string]any); e["capability/id"] == "web.fetch" {
			e["approval/quorum"], found = 2, true
		}
	}
	if !found {
		t.Fatal("the embedded policy has no web.fetch entry")
	}
	pb, _ := json.Marshal(doc)
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, pb, 0o644); err != nil {
		t.Fatal(err)
	}
	u := "sqlite:" + filepath.Join(dir, "airlock.db")
	st, err := store.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	disc, _ := json.Marshal(registry.Disclosure{Description: "Fetch one public web page.", SideEffect: registry.SideEffectNone, Network: registry.NetworkExternal})
	now := time.Now()
	if _, err := st.CreateConfirmation(context.Background(), store.Confirmation{ID: "cf-q", TokenHash: bytes.Repeat([]byte{7}, 32),
		SealedToken: []byte("sealed"), WorkflowID: "turn/c/1", RunID: "r", Seq: 1, CallID: "c1", CapabilityID: "web.fetch", Version: 1,
		ArgsDigest: "d", Arguments: json.RawMessage(`{"url":"https://example.org"}`), Display: "web_fetch", Disclosure: disc,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddApproval(context.Background(), store.Approval{ConfirmationID: "cf-q", Approver: "erin", Nonce: "n1", At: now}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, err := cli(t, []string{"AIRLOCK_DATABASE_URL=" + u, "AIRLOCK_POLICY=" + policy}, "pending")
	if err != nil || !strings.Contains(out, "deciders:    any approver; 2 needed, 1 so far (erin)") || !strings.Contains(out, "Fetch one public web page.") {
		t.Fatalf("pending (%v):\n%s", err, out)
	}
}

// airlock audit --json prints one object per row with stable snake_case names (never Go's
// field names), so tools that read it survive refactors.
func TestAuditJSONUsesSnakeCase(t *testing.T) {
	u := "sqlite:" + filepath.Join(t.TempDir(), "airlock.db")
	st, err := store.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendAudit(context.Background(), store.AuditEvent{Key: "k1", WorkflowID: "turn/c/1", RunID: "r", Seq: 1, CallID: "c1",
		CapabilityID: "web.fetch", Version: 1, Outcome: "executed", Stage: "execute", ArgsDigest: "d", Approver: "bob"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, err := cli(t, []string{"AIRLOCK_DATABASE_URL=" + u}, "audit", "--json")
	if err != nil {
		t.Fatalf("audit --json: %v\n%s", err, out)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &row); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"id", "key", "workflow_id", "run_id", "seq", "call_id", "capability_id", "version", "outcome", "stage", "args_digest", "approver", "at"} {
		if _, ok := row[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	for k := range row {
		if strings.ToLower(k) != k {
			t.Errorf("a name that is not snake_case: %q", k)
		}
	}
}
