package proposals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/airlock-dev/airlock/internal/store"
)

// pgStore opens a store on a fresh PostgreSQL schema (AIRLOCK_TEST_DATABASE_URL).
func pgStore(t *testing.T) *store.Store {
	t.Helper()
	base := os.Getenv("AIRLOCK_TEST_DATABASE_URL")
	if base == "" {
		t.Fatal("AIRLOCK_TEST_DATABASE_URL is not set")
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "prop_" + hex.EncodeToString(b)
	admin, err := sqlx.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a, _ := sqlx.Open("postgres", base)
		a.Exec("DROP SCHEMA " + schema + " CASCADE")
		a.Close()
	})
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	st, err := store.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

const baseDoc = "---\nid: team-memory\n---\n# Memory\n\n- the team meets on Mondays\n"

// setup writes memory.md into a fresh root, scans it and returns the memory and its binding.
func setup(t *testing.T) (Memory, *store.Store, MemoryBinding) {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, MemoryPath), []byte(baseDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	st := pgStore(t)
	m := Memory{Root: root, MaxBytes: 4096}
	v, err := m.Scan(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return m, st, *Binding(v)
}

func code(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Code
	}
	if err == nil {
		return ""
	}
	return "other: " + err.Error()
}

// An append lands atomically with mode 0600, the new version becomes current with the
// written bytes and hash, and the lock is released.
func TestMaterializeAppend(t *testing.T) {
	m, st, b := setup(t)
	res, err := m.Materialize(context.Background(), st, b, "append", "- standups moved to 10:00")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(m.Root, MemoryPath))
	if string(got) != baseDoc+"- standups moved to 10:00\n" || res.SHA256 != Digest(got) || res.Bytes != int64(len(got)) || res.BaseVersionID != b.VersionID {
		t.Fatalf("result %+v, file %q", res, got)
	}
	fi, _ := os.Stat(filepath.Join(m.Root, MemoryPath))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	cur, _ := st.CurrentMemory(context.Background(), m.Source())
	if cur.VersionID != res.NewVersionID {
		t.Fatalf("current %s, want %s", cur.VersionID, res.NewVersionID)
	}
	if _, err := os.Lstat(filepath.Join(m.Root, LockName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock left behind: %v", err)
	}
	// The same proposal again is stale: its base is no longer current (never rebased).
	if _, err := m.Materialize(context.Background(), st, b, "append", "again"); code(err) != FailStaleBase {
		t.Fatalf("second apply: %v", err)
	}
}

// Every listed failure, each with its content-free code and the file untouched.
func TestMaterializeFailures(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		prepare func(t *testing.T, m Memory, b *MemoryBinding)
		op      string
		text    string
		want    string
	}{
		{"stale base: the file changed on disk", func(t *testing.T, m Memory, b *MemoryBinding) {
			os.WriteFile(filepath.Join(m.Root, MemoryPath), []byte(baseDoc+"edited by hand\n"), 0o600)
		}, "append", "x", FailStaleBase},
		{"memory.md is a symlink", func(t *testing.T, m Memory, b *MemoryBinding) {
			other := filepath.Join(t.TempDir(), "elsewhere.md")
			os.WriteFile(other, []byte(baseDoc), 0o600)
			os.Remove(filepath.Join(m.Root, MemoryPath))
			os.Symlink(other, filepath.Join(m.Root, MemoryPath))
		}, "append", "x", FailSymlink},
		{"path escape: the binding names another source", func(t *testing.T, m Memory, b *MemoryBinding) {
			b.Source = "filesystem:/etc"
		}, "append", "x", FailPathInvalid},
		{"frontmatter id changes", nil, "replace-document", "---\nid: someone-else\n---\nnew\n", FailFrontmatterChange},
		{"frontmatter removed", nil, "replace-document", "no frontmatter at all\n", FailFrontmatter},
		{"size limit", nil, "append", strings.Repeat("y", 5000), FailTooLarge},
		{"lock held by a live process", func(t *testing.T, m Memory, b *MemoryBinding) {
			cmd := exec.Command("sleep", "60")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			start, _, _ := processStart(cmd.Process.Pid)
			writeLock(t, m, cmd.Process.Pid, start)
		}, "append", "x", FailLockHeld},
		{"malformed lock fails closed", func(t *testing.T, m Memory, b *MemoryBinding) {
			os.WriteFile(filepath.Join(m.Root, LockName), []byte("not json"), 0o600)
		}, "append", "x", FailLockMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, st, b := setup(t)
			if tc.prepare != nil {
				tc.prepare(t, m, &b)
			}
			before, _ := os.ReadFile(filepath.Join(m.Root, MemoryPath))
			_, err := m.Materialize(ctx, st, b, tc.op, tc.text)
			if code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			after, _ := os.ReadFile(filepath.Join(m.Root, MemoryPath))
			if string(before) != string(after) {
				t.Fatal("the file changed on a failure")
			}
			if strings.Contains(err.Error(), tc.text) && len(tc.text) > 3 {
				t.Fatal("the failure quotes the proposed text")
			}
		})
	}
}

func writeLock(t *testing.T, m Memory, pid int, start uint64) {
	t.Helper()
	boot, _ := bootID()
	b, _ := json.Marshal(LockOwner{BootID: boot, PID: pid, StartTime: start, Token: strings.Repeat("ab", 16)})
	if err := os.WriteFile(filepath.Join(m.Root, LockName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A lock left by a dead process, by a reused PID or by an earlier boot is reclaimed.
func TestMaterializeReclaimsDeadLocks(t *testing.T) {
	for _, name := range []string{"dead", "pid reused", "rebooted"} {
		t.Run(name, func(t *testing.T) {
			m, st, b := setup(t)
			switch name {
			case "dead":
				cmd := exec.Command("true")
				cmd.Run()
				writeLock(t, m, cmd.Process.Pid, 12345)
			case "pid reused":
				start, _, _ := processStart(os.Getpid())
				writeLock(t, m, os.Getpid(), start+1)
			case "rebooted":
				start, _, _ := processStart(os.Getpid())
				bb, _ := json.Marshal(LockOwner{BootID: "00000000-0000-0000-0000-000000000000", PID: os.Getpid(), StartTime: start, Token: strings.Repeat("cd", 16)})
				os.WriteFile(filepath.Join(m.Root, LockName), bb, 0o600)
			}
			if _, err := m.Materialize(context.Background(), st, b, "append", "- reclaimed"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The fixed acknowledgements, one per kind or combination, name no identifier.
func TestAcknowledgements(t *testing.T) {
	for kinds, want := range map[string]string{
		"memory-change":                 "I saved that as a memory suggestion.",
		"self-correction":               "I saved that as a proposed correction.",
		"memory-change,self-correction": "I saved those as memory and correction suggestions.",
		"focus-declaration":             "I saved that as a focus proposal.",
	} {
		if got := Acknowledgement(strings.Split(kinds, ",")); got != want {
			t.Errorf("%s: %q", kinds, got)
		}
	}
}

// Path escapes: a memory root that is itself a symlink (replaced by one after the proposal
// was bound) is refused with FailSymlink; a root reached through a symlinked ancestor, so
// that memory.md resolves outside the configured root, is refused with FailPathEscape. In
// both, neither the file the link points at nor anything else changes, and no lock is left.
func TestMaterializePathEscapes(t *testing.T) {
	ctx := context.Background()
	t.Run("the root is a symlink", func(t *testing.T) {
		m, st, b := setup(t)
		elsewhere := filepath.Join(t.TempDir(), "real-root")
		if err := os.Rename(m.Root, elsewhere); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, m.Root); err != nil {
			t.Fatal(err)
		}
		_, err := m.Materialize(ctx, st, b, "append", "- escaped through the root")
		if code(err) != FailSymlink {
			t.Fatalf("got %v, want %s", err, FailSymlink)
		}
		got, _ := os.ReadFile(filepath.Join(elsewhere, MemoryPath))
		if string(got) != baseDoc {
			t.Fatalf("the file behind the symlinked root changed: %q", got)
		}
		if _, err := os.Lstat(filepath.Join(elsewhere, LockName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a lock was taken behind the symlink: %v", err)
		}
	})
	t.Run("memory.md resolves outside the root", func(t *testing.T) {
		// The configured root is base/via/root; after the proposal was bound, via is replaced
		// by a symlink to outside/, so the root still Lstats as a real directory and memory.md
		// as a regular file with the base bytes, but it resolves outside the configured root.
		base, outside := t.TempDir(), t.TempDir()
		root := filepath.Join(base, "via", "root")
		for _, d := range []string{root, filepath.Join(outside, "root")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, MemoryPath), []byte(baseDoc), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		m := Memory{Root: root, MaxBytes: 4096}
		st := pgStore(t)
		v, err := m.Scan(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(base, "via"), filepath.Join(base, "moved")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(base, "via")); err != nil {
			t.Fatal(err)
		}
		_, err = m.Materialize(ctx, st, *Binding(v), "append", "- escaped through an ancestor")
		if c := code(err); c != FailPathEscape {
			t.Fatalf("got %v, want %s", err, FailPathEscape)
		}
		for _, d := range []string{filepath.Join(outside, "root"), filepath.Join(base, "moved", "root")} {
			got, _ := os.ReadFile(filepath.Join(d, MemoryPath))
			ents, _ := os.ReadDir(d)
			if string(got) != baseDoc || len(ents) != 1 {
				t.Fatalf("%s changed: %q, %d entries", d, got, len(ents))
			}
		}
		// Configured that way from the start, the root is refused at scan: never admitted.
		if _, err := m.Scan(ctx, pgStore(t)); code(err) != FailPathEscape {
			t.Fatalf("scan through a symlinked ancestor: %v", err)
		}
	})
}

// A retried materialization after a crash between the rename and the receipt completes what
// the first attempt started, whether the version pointer had moved or not: the receipt never
// calls an applied change failed, and the text is in memory.md exactly once.
func TestMaterializeRetryAfterACrashCompletes(t *testing.T) {
	const text = "- remember X\n"
	t.Run("pointer moved", func(t *testing.T) {
		m, st, b := setup(t)
		first, err := m.Materialize(context.Background(), st, b, "append", text)
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.Materialize(context.Background(), st, b, "append", text)
		if err != nil || again.NewVersionID != first.NewVersionID || again.SHA256 != first.SHA256 {
			t.Fatalf("retry = %+v, %v; want the first result %+v", again, err, first)
		}
		if got, _ := os.ReadFile(filepath.Join(m.Root, MemoryPath)); string(got) != baseDoc+text {
			t.Fatalf("memory.md = %q", got)
		}
	})
	t.Run("renamed, pointer not moved", func(t *testing.T) {
		m, st, b := setup(t)
		if err := os.WriteFile(filepath.Join(m.Root, MemoryPath), []byte(baseDoc+text), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := m.Materialize(context.Background(), st, b, "append", text)
		if err != nil || res.BaseVersionID != b.VersionID {
			t.Fatalf("retry = %+v, %v", res, err)
		}
		cur, _ := st.CurrentMemory(context.Background(), m.Source())
		got, _ := os.ReadFile(filepath.Join(m.Root, MemoryPath))
		if cur.VersionID != res.NewVersionID || string(got) != baseDoc+text {
			t.Fatalf("current %s (want %s), memory.md %q", cur.VersionID, res.NewVersionID, got)
		}
	})
}
