package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/internal/redact"
)

// Every test runs against both drivers: SQLite in t.TempDir() and PostgreSQL
// from AIRLOCK_TEST_DATABASE_URL, each test in a fresh schema. Without that
// variable the postgres subtests FAIL (set AIRLOCK_TEST_SKIP_POSTGRES=1 to
// skip them deliberately).

const pgHowTo = "AIRLOCK_TEST_DATABASE_URL is not set, so the PostgreSQL half of the store tests cannot run.\n" +
	"Start a local PostgreSQL 15 and point the tests at it (as root, from the repo root):\n" +
	"    export AIRLOCK_TEST_DATABASE_URL=\"$(scripts/ensure-postgres.sh)\"\n" +
	"or set AIRLOCK_TEST_SKIP_POSTGRES=1 to skip the PostgreSQL subtests on purpose."

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eachDriver runs f as subtests "sqlite" and "postgres", each with a fresh
// database location (url) and a Store opened on it.
func eachDriver(t *testing.T, f func(t *testing.T, s *Store, url string)) {
	t.Helper()
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			u := freshURL(t, d)
			f(t, openStore(t, u), u)
		})
	}
}

// freshURL returns the URL of an empty database location for driver.
func freshURL(t testing.TB, driver string) string {
	t.Helper()
	if driver == DriverSQLite {
		return "sqlite:" + filepath.Join(t.TempDir(), "airlock.db")
	}
	base := os.Getenv("AIRLOCK_TEST_DATABASE_URL")
	if base == "" {
		if os.Getenv("AIRLOCK_TEST_SKIP_POSTGRES") == "1" {
			t.Skip("AIRLOCK_TEST_SKIP_POSTGRES=1: PostgreSQL subtests skipped")
		}
		t.Fatal(pgHowTo)
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	schema := "airlock_t_" + hex.EncodeToString(rnd[:])
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatalf("open %s: %v", redact.URL(base), err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(testCtx(t), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create test schema on %s: %v\n(is the server up? %s)", redact.URL(base), err, "scripts/ensure-postgres.sh")
	}
	t.Cleanup(func() {
		db, err := sql.Open("postgres", base)
		if err != nil {
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Logf("drop test schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse AIRLOCK_TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema) // lib/pq passes unknown keys as run-time parameters
	u.RawQuery = q.Encode()
	return u.String()
}

func openStore(t testing.TB, u string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), u)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if s.Driver() == DriverPostgres { // prove the test is isolated in its schema
		var cur string
		if err := s.db.Get(&cur, "SELECT current_schema()"); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(cur, "airlock_t_") {
			t.Fatalf("search_path not applied: current_schema() = %q", cur)
		}
	}
	return s
}

// norm is what a stored time must come back as.
func norm(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(norm(want)) || got.Location() != time.UTC || got.Nanosecond()%1000 != 0 {
		t.Errorf("%s = %s (%v), want %s UTC", what, got.Format(time.RFC3339Nano), got.Location(), norm(want).Format(time.RFC3339Nano))
	}
}

var zone = time.FixedZone("UTC+5:30", 5*3600+1800)

// base is a timestamp with nanoseconds, in a non-UTC zone.
var base = time.Date(2026, 3, 14, 15, 9, 26, 535897932, zone)

func TestPostgresConfigured(t *testing.T) {
	if os.Getenv("AIRLOCK_TEST_DATABASE_URL") == "" && os.Getenv("AIRLOCK_TEST_SKIP_POSTGRES") != "1" {
		t.Fatal(pgHowTo)
	}
}

func TestOneSetOfMigrationsRendersForBothDrivers(t *testing.T) {
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		migs, err := loadMigrations(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(migs) < 3 || migs[0].name != "0001_init.sql" {
			t.Fatalf("%s migrations = %d", d, len(migs))
		}
		for _, m := range migs {
			if strings.Contains(m.sql, "{{") {
				t.Fatalf("%s %s: unrendered placeholder", d, m.name)
			}
		}
	}
	pg, _ := loadMigrations(DriverPostgres)
	lite, _ := loadMigrations(DriverSQLite)
	if !strings.Contains(pg[0].sql, "TIMESTAMPTZ") || strings.Contains(pg[0].sql, "STRICT") ||
		!strings.Contains(lite[0].sql, ") STRICT;") || strings.Contains(lite[0].sql, "BYTEA") {
		t.Fatal("dialect rendering is wrong")
	}
	if _, err := fs.Stat(migrationsFS, "migrations/0001_init.sql"); err != nil {
		t.Fatal(err)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, u string) {
		ctx := testCtx(t)
		migs, _ := loadMigrations(s.Driver())
		count := func(s *Store) int {
			var n int
			if err := s.db.GetContext(ctx, &n, "SELECT COUNT(*) FROM schema_migrations"); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if _, err := s.AppendAudit(ctx, AuditEvent{Key: "k", Outcome: "executed"}); err != nil {
			t.Fatal(err)
		}
		// Open twice more (sequentially, then concurrently) on the same database.
		s2 := openStore(t, u)
		if got := count(s2); got != len(migs) {
			t.Fatalf("schema_migrations rows after reopen = %d, want %d", got, len(migs))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s3, err := Open(ctx, u)
				if err != nil {
					errs <- err
					return
				}
				errs <- s3.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent Open: %v", err)
			}
		}
		if got := count(s); got != len(migs) {
			t.Fatalf("schema_migrations rows = %d, want %d", got, len(migs))
		}
		if ev, err := s2.ListAudit(ctx, ""); err != nil || len(ev) != 1 {
			t.Fatalf("data lost across reopen: %v, %v", ev, err)
		}
	})
}

func TestConcurrentFirstOpen(t *testing.T) {
	t.Parallel()
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			u := freshURL(t, d) // nothing migrated yet: every opener races to migrate
			ctx := testCtx(t)
			var wg sync.WaitGroup
			stores := make([]*Store, 8)
			errs := make([]error, 8)
			for i := range stores {
				wg.Add(1)
				go func() {
					defer wg.Done()
					stores[i], errs[i] = Open(ctx, u)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("opener %d: %v", i, err)
				}
				defer stores[i].Close()
			}
			migs, _ := loadMigrations(d)
			var n int
			if err := stores[0].db.GetContext(ctx, &n, "SELECT COUNT(*) FROM schema_migrations"); err != nil {
				t.Fatal(err)
			}
			if n != len(migs) {
				t.Fatalf("schema_migrations rows = %d, want %d", n, len(migs))
			}
		})
	}
}

func TestOpenURLForms(t *testing.T) {
	ctx := testCtx(t)
	if _, err := Open(ctx, "mysql://x"); err == nil || !strings.Contains(err.Error(), `unsupported database URL scheme "mysql"`) {
		t.Fatalf("unsupported scheme: err = %v", err)
	}
	if _, err := Open(ctx, "sqlite:"); err == nil {
		t.Fatal("sqlite: with no path must fail")
	}
	_, err := Open(ctx, "postgres://nobody:secret@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.HasPrefix(err.Error(), "store: ") {
		t.Fatalf("unreachable postgres: err = %v (must fail, be prefixed, and not leak the password)", err)
	}

	dir := t.TempDir()
	t.Chdir(dir)
	s, err := Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Driver() != DriverSQLite {
		t.Fatalf("Driver = %q", s.Driver())
	}
	if _, err := os.Stat(filepath.Join(dir, ".airlock", "airlock.db")); err != nil {
		t.Fatalf("default database file: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "busy_timeout": "5000", "foreign_keys": "1"} {
		var got string
		if err := s.db.GetContext(ctx, &got, "PRAGMA "+pragma); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}

	for _, u := range []string{"file:" + filepath.Join(dir, "sub", "a.db"), "sqlite://" + filepath.Join(dir, "sub2", "b.db")} {
		s, err := Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if _, err := s.AppendAudit(ctx, AuditEvent{Key: "x", Outcome: "executed"}); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "sub2", "b.db")); err != nil {
		t.Fatal(err)
	}
}

func TestAuditIdempotent(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		e := AuditEvent{
			Key: "turn/c/1/3/executed", WorkflowID: "turn/c/1", RunID: "run-1", Seq: 3,
			CallID: "call_3", CapabilityID: "web.fetch", Version: 1, Outcome: "executed",
			Stage: "execute", Reason: "", Detail: "ok", ArgsDigest: "sha256:ab", Approver: "alice", At: base,
		}
		ins, err := s.AppendAudit(ctx, e)
		if err != nil || !ins {
			t.Fatalf("first append: inserted=%v err=%v", ins, err)
		}
		dup := e
		dup.Detail = "a replay must not overwrite"
		ins, err = s.AppendAudit(ctx, dup)
		if err != nil || ins {
			t.Fatalf("second append: inserted=%v err=%v, want false,nil", ins, err)
		}
		other := AuditEvent{Key: "turn/c/2/1/denied", WorkflowID: "turn/c/2", Outcome: "denied", At: base.Add(time.Second)}
		if _, err := s.AppendAudit(ctx, other); err != nil {
			t.Fatal(err)
		}
		third := e
		third.Key, third.Seq, third.Outcome = "turn/c/1/4/rejected", 4, "rejected"
		if _, err := s.AppendAudit(ctx, third); err != nil {
			t.Fatal(err)
		}

		got, err := s.ListAudit(ctx, "turn/c/1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("ListAudit rows = %d, want 2: %+v", len(got), got)
		}
		want := e
		want.ID = got[0].ID
		want.At = norm(base)
		if !reflect.DeepEqual(got[0], want) {
			t.Fatalf("round trip:\n got  %+v\n want %+v", got[0], want)
		}
		if got[1].Key != third.Key || got[1].ID <= got[0].ID {
			t.Fatalf("order: %+v", got)
		}
		all, err := s.ListAudit(ctx, "")
		if err != nil || len(all) != 3 {
			t.Fatalf("ListAudit(\"\") = %d rows, %v", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].ID <= all[i-1].ID {
				t.Fatalf("ListAudit(\"\") not ordered by ID: %+v", all)
			}
		}
		if none, err := s.ListAudit(ctx, "nope"); err != nil || len(none) != 0 {
			t.Fatalf("ListAudit(unknown) = %v, %v", none, err)
		}
		if _, err := s.AppendAudit(ctx, AuditEvent{Outcome: "executed"}); err == nil {
			t.Fatal("AppendAudit without Key must fail")
		}
	})
}

func TestAuditListAllIsBounded(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if s.Driver() == DriverPostgres { // one round trip for speed
			if _, err := s.db.ExecContext(ctx, `INSERT INTO audit_events (event_key, outcome, at)
				SELECT 'k' || g, 'executed', now() FROM generate_series(1, 1005) g`); err != nil {
				t.Fatal(err)
			}
		} else {
			if _, err := s.db.ExecContext(ctx, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM g WHERE n < 1005)
				INSERT INTO audit_events (event_key, outcome, at) SELECT 'k' || n, 'executed', '2026-01-01T00:00:00.000000Z' FROM g`); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.ListAudit(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1000 || all[0].Key != "k6" || all[999].Key != "k1005" {
			t.Fatalf("ListAudit(\"\"): %d rows, first %q last %q; want the 1000 most recent oldest first", len(all), all[0].Key, all[len(all)-1].Key)
		}
	})
}

func newConfirmation(id string, hash byte) Confirmation {
	return Confirmation{
		ID: id, TokenHash: bytes.Repeat([]byte{hash}, 32), SealedToken: []byte("sealed-" + id),
		WorkflowID: "turn/c/1", RunID: "run-1", Seq: 2, CallID: "call_2",
		CapabilityID: "files.write", Version: 1, ArgsDigest: "sha256:0123",
		Arguments: json.RawMessage(`{"path": "a.txt",  "data":"x", "n": 1.50}`),
		Display:   "write a.txt", CreatedAt: base, ExpiresAt: base.Add(5 * time.Minute),
	}
}

func TestConfirmationCreateIdempotent(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		c := newConfirmation("conf-1", 0xA1)
		got, err := s.CreateConfirmation(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		want := c
		want.CreatedAt, want.ExpiresAt = norm(c.CreatedAt), norm(c.ExpiresAt)
		assertConfirmation(t, got, want)

		retry := newConfirmation("conf-1", 0xB2) // a retry minted a different token
		retry.Display = "changed"
		again, err := s.CreateConfirmation(ctx, retry)
		if err != nil {
			t.Fatal(err)
		}
		assertConfirmation(t, again, want)
		if !bytes.Equal(again.TokenHash, want.TokenHash) {
			t.Fatalf("the retry's token must not have been stored: %x", again.TokenHash)
		}
		fetched, err := s.GetConfirmation(ctx, "conf-1")
		if err != nil {
			t.Fatal(err)
		}
		assertConfirmation(t, fetched, want)

		if _, err := s.GetConfirmation(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetConfirmation(unknown) err = %v, want ErrNotFound", err)
		}
		dupHash := newConfirmation("conf-2", 0xA1)
		if _, err := s.CreateConfirmation(ctx, dupHash); err == nil {
			t.Fatal("a second confirmation with the same token hash must fail")
		}
		bad := newConfirmation("conf-3", 0xC3)
		bad.Arguments = json.RawMessage(`{not json`)
		if _, err := s.CreateConfirmation(ctx, bad); err == nil {
			t.Fatal("invalid JSON arguments must fail")
		}
		bare := Confirmation{ID: "conf-4", TokenHash: []byte{1}, ExpiresAt: base}
		gotBare, err := s.CreateConfirmation(ctx, bare)
		if err != nil {
			t.Fatal(err)
		}
		if gotBare.Arguments != nil || gotBare.SealedToken != nil || gotBare.CreatedAt.IsZero() {
			t.Fatalf("bare confirmation: %+v", gotBare)
		}
	})
}

// TestConfirmationDistinctApproverRoundTrips: the four-eyes flag a confirmation was issued
// under is stored and read back by every read (one stored fact every surface words).
func TestConfirmationDistinctApproverRoundTrips(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		four := newConfirmation("conf-4eyes", 0xD1)
		four.DistinctApprover, four.Quorum = true, 2
		plain := newConfirmation("conf-plain", 0xD2)
		for _, c := range []Confirmation{four, plain} {
			got, err := s.CreateConfirmation(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if got.DistinctApprover != c.DistinctApprover {
				t.Fatalf("%s: created DistinctApprover = %v, want %v", c.ID, got.DistinctApprover, c.DistinctApprover)
			}
			fetched, err := s.GetConfirmation(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if fetched.DistinctApprover != c.DistinctApprover || fetched.Quorum != c.Quorum {
				t.Fatalf("%s: fetched DistinctApprover = %v, quorum %d; want %v, %d", c.ID, fetched.DistinctApprover, fetched.Quorum, c.DistinctApprover, c.Quorum)
			}
		}
		pending, err := s.ListPendingConfirmations(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, c := range pending {
			got[c.ID] = c.DistinctApprover
		}
		if len(got) != 2 || !got["conf-4eyes"] || got["conf-plain"] {
			t.Fatalf("pending DistinctApprover = %v, want conf-4eyes only", got)
		}
	})
}

func assertConfirmation(t *testing.T, got, want Confirmation) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Fatalf("confirmation:\n got  %s\n want %s", g, w)
	}
	if !bytes.Equal(got.Arguments, want.Arguments) {
		t.Fatalf("arguments not byte-identical: %q vs %q", got.Arguments, want.Arguments)
	}
}

func TestPresentTokenReissueAndNonces(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		c := newConfirmation("conf-1", 0x01)
		if _, err := s.CreateConfirmation(ctx, c); err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Minute + 123456789)
		got, err := s.PresentToken(ctx, "conf-1", "wf/run/1/1", at)
		if err != nil {
			t.Fatalf("first presentation: %v", err)
		}
		if got.ID != "conf-1" || got.ConsumedAt == nil || got.ConsumedBy != "wf/run/1/1" || got.Generation != 0 {
			t.Fatalf("consumed row: %+v", got)
		}
		sameTime(t, "ConsumedAt", *got.ConsumedAt, at)
		if again, err := s.PresentToken(ctx, "conf-1", "wf/run/1/1", at.Add(time.Second)); err != nil || again.ConsumedBy != "wf/run/1/1" {
			t.Fatalf("a retry of the same presentation must get the row back: %+v %v", again, err)
		}
		other, err := s.PresentToken(ctx, "conf-1", "wf/run/1/2", at.Add(time.Second))
		if !errors.Is(err, ErrTokenConsumed) || other.ID != "conf-1" || !other.ConsumedAt.Equal(norm(at)) {
			t.Fatalf("another presentation of a consumed token = %+v, %v; want the row and ErrTokenConsumed", other, err)
		}
		if _, err := s.PresentToken(ctx, "nope", "p", at); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown confirmation err = %v, want ErrNotFound", err)
		}
		if _, err := s.PresentToken(ctx, "conf-1", "", at); err == nil {
			t.Fatal("a presentation without an identity must fail")
		}

		// Take-over: only from the presentation that holds it.
		if _, err := s.TakeOverToken(ctx, "conf-1", "wf/run/1/7", "wf/run/1/8", at); !errors.Is(err, ErrTokenConsumed) {
			t.Fatalf("take-over from a presentation that does not hold the token err = %v", err)
		}
		moved, err := s.TakeOverToken(ctx, "conf-1", "wf/run/1/1", "wf/run/1/8", at)
		if err != nil || moved.ConsumedBy != "wf/run/1/8" {
			t.Fatalf("take-over = %+v, %v", moved, err)
		}
		if again, err := s.TakeOverToken(ctx, "conf-1", "wf/run/1/1", "wf/run/1/8", at); err != nil || again.ConsumedBy != "wf/run/1/8" {
			t.Fatalf("a retried take-over = %+v, %v", again, err)
		}
		if _, err := s.TakeOverToken(ctx, "conf-1", "wf/run/1/8", "wf/run/1/1", at); err != nil {
			t.Fatalf("take back: %v", err)
		}

		// Reissue: only by the presentation that consumed it, only from the current generation.
		if ok, err := s.ReissueToken(ctx, "conf-1", "wf/run/1/2", 1, []byte{0xEE}, []byte("sealed-1")); err != nil || ok {
			t.Fatalf("reissue by a presentation that did not consume = %v, %v; want false", ok, err)
		}
		if ok, err := s.ReissueToken(ctx, "conf-1", "wf/run/1/1", 1, []byte{0xEE}, []byte("sealed-1")); err != nil || !ok {
			t.Fatalf("reissue = %v, %v", ok, err)
		}
		if ok, err := s.ReissueToken(ctx, "conf-1", "wf/run/1/1", 1, []byte{0xEF}, []byte("sealed-x")); err != nil || ok {
			t.Fatalf("a retried reissue must change nothing = %v, %v", ok, err)
		}
		row, err := s.GetConfirmation(ctx, "conf-1")
		if err != nil {
			t.Fatal(err)
		}
		if row.Generation != 1 || row.ConsumedAt != nil || row.ConsumedBy != "" || !bytes.Equal(row.TokenHash, []byte{0xEE}) || string(row.SealedToken) != "sealed-1" {
			t.Fatalf("reissued row: %+v", row)
		}
		if _, err := s.PresentToken(ctx, "conf-1", "wf/run/1/3", at); err != nil {
			t.Fatalf("the fresh token must be presentable: %v", err)
		}
		if err := s.DecideConfirmation(ctx, "conf-1", DecisionApproved, "alice", "", at); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.ReissueToken(ctx, "conf-1", "wf/run/1/3", 2, []byte{0xED}, nil); err != nil || ok {
			t.Fatalf("a decided confirmation is never reissued = %v, %v", ok, err)
		}

		// Nonces: recorded once; the earlier record answers every later presentation of it.
		n := DecisionNonce{Nonce: "n-1", ConfirmationID: "conf-1", Presentation: "wf/run/1/3", Approver: "alice",
			Decision: "approve", Verdict: VerdictAccepted, At: at}
		if prev, err := s.RecordNonce(ctx, n); err != nil || prev != nil {
			t.Fatalf("first RecordNonce = %+v, %v", prev, err)
		}
		dup := n
		dup.Presentation, dup.Verdict = "wf/run/1/9", "nonce_replayed"
		prev, err := s.RecordNonce(ctx, dup)
		if err != nil || prev == nil || prev.Presentation != "wf/run/1/3" || prev.Verdict != VerdictAccepted {
			t.Fatalf("second RecordNonce = %+v, %v; want the first record", prev, err)
		}
		got2, err := s.GetNonce(ctx, "n-1")
		if err != nil || got2.Approver != "alice" || got2.ConfirmationID != "conf-1" {
			t.Fatalf("GetNonce = %+v, %v", got2, err)
		}
		sameTime(t, "nonce At", got2.At, at)
		if _, err := s.GetNonce(ctx, "n-2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown nonce err = %v", err)
		}
		if _, err := s.RecordNonce(ctx, DecisionNonce{Verdict: "x"}); err == nil {
			t.Fatal("a nonce record without a nonce must fail")
		}
	})
}

func TestPresentTokenConcurrent(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for round := range 3 {
			c := newConfirmation(fmt.Sprintf("conf-%d", round), byte(0x10+round))
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
			const n = 20
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = s.PresentToken(ctx, c.ID, fmt.Sprintf("p%d", i), base.Add(time.Duration(i)*time.Millisecond))
				}()
			}
			close(start)
			wg.Wait()
			wins, consumed := 0, 0
			for _, err := range errs {
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ErrTokenConsumed):
					consumed++
				default:
					t.Fatalf("unexpected error: %v", err)
				}
			}
			if wins != 1 || consumed != n-1 {
				t.Fatalf("round %d: %d winners and %d ErrTokenConsumed, want 1 and %d", round, wins, consumed, n-1)
			}
		}
	})
}

func TestDecideAndPending(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		mk := func(id string, h byte, created time.Time, ttl time.Duration) {
			c := newConfirmation(id, h)
			c.CreatedAt, c.ExpiresAt = created, created.Add(ttl)
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		mk("c-late", 1, base.Add(2*time.Second), 5*time.Minute)
		mk("c-early", 2, base, 10*time.Minute)
		mk("c-decided", 3, base.Add(time.Second), 5*time.Minute)
		mk("c-expired", 4, base.Add(-time.Hour), time.Minute)
		mk("c-edge", 5, base.Add(3*time.Second), 5*time.Minute-3*time.Second) // expires exactly at now

		at := base.Add(30*time.Second + 999)
		if err := s.DecideConfirmation(ctx, "c-decided", DecisionApproved, "alice", "looks fine", at); err != nil {
			t.Fatal(err)
		}
		if err := s.DecideConfirmation(ctx, "c-decided", DecisionApproved, "bob", "retry", at.Add(time.Hour)); err != nil {
			t.Fatalf("same decision again must be a no-op: %v", err)
		}
		if err := s.DecideConfirmation(ctx, "c-decided", DecisionDenied, "bob", "", at); !errors.Is(err, ErrConflict) {
			t.Fatalf("different decision err = %v, want ErrConflict", err)
		}
		if err := s.DecideConfirmation(ctx, "nope", DecisionDenied, "bob", "", at); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id err = %v, want ErrNotFound", err)
		}
		if err := s.DecideConfirmation(ctx, "c-late", "maybe", "bob", "", at); err == nil {
			t.Fatal("invalid decision must fail")
		}
		d, err := s.GetConfirmation(ctx, "c-decided")
		if err != nil {
			t.Fatal(err)
		}
		if d.Decision != DecisionApproved || d.Approver != "alice" || d.Reason != "looks fine" || d.DecidedAt == nil {
			t.Fatalf("decided row: %+v", d)
		}
		sameTime(t, "DecidedAt", *d.DecidedAt, at)

		now := base.Add(5 * time.Minute)
		pending, err := s.ListPendingConfirmations(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range pending {
			ids = append(ids, p.ID)
		}
		if fmt.Sprint(ids) != "[c-early c-late]" {
			t.Fatalf("pending = %v, want [c-early c-late]", ids)
		}
		if err := s.DecideConfirmation(ctx, "c-early", DecisionExpired, "", "ttl", now); err != nil {
			t.Fatal(err)
		}
		pending, _ = s.ListPendingConfirmations(ctx, now)
		if len(pending) != 1 || pending[0].ID != "c-late" {
			t.Fatalf("pending after expiry = %+v", pending)
		}
	})
}

func TestExecutions(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		e := Execution{Key: "turn/c/1/2/files.write@1", WorkflowID: "turn/c/1", Seq: 2, CapabilityID: "files.write", Version: 1, StartedAt: base}
		existing, err := s.BeginExecution(ctx, e)
		if err != nil || existing != nil {
			t.Fatalf("first Begin = %+v, %v; want nil, nil", existing, err)
		}
		existing, err = s.BeginExecution(ctx, e)
		if err != nil || existing == nil {
			t.Fatalf("second Begin = %v, %v; want the existing row", existing, err)
		}
		want := e
		want.State, want.StartedAt, want.Attempts = ExecStarted, norm(base), 1
		if fmt.Sprintf("%+v", *existing) != fmt.Sprintf("%+v", want) {
			t.Fatalf("existing:\n got  %+v\n want %+v", *existing, want)
		}
		if n, err := s.CountExecutions(ctx, "files.write"); err != nil || n != 1 {
			t.Fatalf("CountExecutions = %d, %v", n, err)
		}

		if n, err := s.RetryExecution(ctx, e.Key, base); err != nil || n != 2 {
			t.Fatalf("RetryExecution of a started row = %d, %v; want attempt 2", n, err)
		}
		res := json.RawMessage(`{"ok": true, "bytes": 12}`)
		fin := base.Add(1500 * time.Millisecond)
		if err := s.FinishExecution(ctx, e.Key, ExecCompleted, res, fin); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishExecution(ctx, e.Key, ExecCompleted, json.RawMessage(`{"ok":"again"}`), fin); err != nil {
			t.Fatalf("finishing again with the same state must be a no-op: %v", err)
		}
		if err := s.FinishExecution(ctx, e.Key, ExecFailed, nil, fin); !errors.Is(err, ErrConflict) {
			t.Fatalf("finishing with another state err = %v, want ErrConflict", err)
		}
		if err := s.FinishExecution(ctx, e.Key, ExecStarted, nil, fin); err == nil {
			t.Fatal("finishing to 'started' must fail")
		}
		if err := s.FinishExecution(ctx, "nope", ExecFailed, nil, fin); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown key err = %v, want ErrNotFound", err)
		}
		got, err := s.GetExecution(ctx, e.Key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RetryExecution(ctx, e.Key, fin); !errors.Is(err, ErrConflict) {
			t.Fatalf("RetryExecution of a finished row err = %v, want ErrConflict", err)
		}
		if _, err := s.RetryExecution(ctx, "nope", fin); !errors.Is(err, ErrNotFound) {
			t.Fatalf("RetryExecution of an unknown row err = %v, want ErrNotFound", err)
		}
		if got.State != ExecCompleted || string(got.Result) != string(res) || got.FinishedAt == nil || got.Attempts != 2 {
			t.Fatalf("finished row: %+v", got)
		}
		sameTime(t, "StartedAt", got.StartedAt, base)
		sameTime(t, "FinishedAt", *got.FinishedAt, fin)
		again, err := s.BeginExecution(ctx, e)
		if err != nil || again == nil || again.State != ExecCompleted {
			t.Fatalf("Begin after finish = %+v, %v", again, err)
		}
		if _, err := s.GetExecution(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetExecution(unknown) err = %v", err)
		}

		// Concurrent Begin on one key: exactly one caller may run the effect.
		const n = 20
		var wg sync.WaitGroup
		fresh := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ex, err := s.BeginExecution(ctx, Execution{Key: "race", CapabilityID: "mail.send", Version: 1})
				fresh[i], errs[i] = ex == nil && err == nil, err
			}()
		}
		wg.Wait()
		winners := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if fresh[i] {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("%d concurrent Begin calls got (nil, nil), want 1", winners)
		}
		if total, err := s.CountExecutions(ctx, ""); err != nil || total != 2 {
			t.Fatalf("CountExecutions(\"\") = %d, %v; want 2", total, err)
		}
	})
}

func TestNextTurnSeqConcurrent(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		const n = 40
		var wg sync.WaitGroup
		seqs := make([]int, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seqs[i], errs[i] = s.NextTurnSeq(ctx, "conv-a")
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		sort.Ints(seqs)
		for i, v := range seqs {
			if v != i+1 {
				t.Fatalf("sequence numbers %v are not 1..%d", seqs, n)
			}
		}
		if v, err := s.NextTurnSeq(ctx, "conv-b"); err != nil || v != 1 {
			t.Fatalf("other conversation starts at %d, %v", v, err)
		}
		if v, err := s.NextTurnSeq(ctx, "conv-a"); err != nil || v != n+1 {
			t.Fatalf("next = %d, %v; want %d", v, err, n+1)
		}
		if _, err := s.NextTurnSeq(ctx, ""); err == nil {
			t.Fatal("empty conversation must fail")
		}
	})
}

func TestContext(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		entry := func(conv, key string, i int) ContextEntry {
			return ContextEntry{Conversation: conv, Key: key, WorkflowID: "turn/" + conv + "/1",
				Payload: json.RawMessage(fmt.Sprintf(`{"i": %d, "kind":"untrusted"}`, i)), CreatedAt: base.Add(time.Duration(i) * time.Microsecond)}
		}
		var batch []ContextEntry
		for i := 1; i <= 5; i++ {
			batch = append(batch, entry("c", fmt.Sprintf("k%d", i), i))
		}
		batch = append(batch, entry("c", "k2", 99)) // duplicate inside the batch
		if err := s.AppendContext(ctx, batch); err != nil {
			t.Fatal(err)
		}
		// A retry with overlapping keys and different payloads: only k6 is new.
		if err := s.AppendContext(ctx, []ContextEntry{entry("c", "k4", 40), entry("c", "k6", 6), entry("other", "k1", 7)}); err != nil {
			t.Fatal(err)
		}
		all, err := s.LoadContext(ctx, "c", 0)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range all {
			keys = append(keys, e.Key)
		}
		if fmt.Sprint(keys) != "[k1 k2 k3 k4 k5 k6]" {
			t.Fatalf("keys = %v", keys)
		}
		if string(all[1].Payload) != `{"i": 2, "kind":"untrusted"}` || string(all[3].Payload) != `{"i": 4, "kind":"untrusted"}` {
			t.Fatalf("duplicates must keep the first payload: %s / %s", all[1].Payload, all[3].Payload)
		}
		sameTime(t, "CreatedAt", all[4].CreatedAt, base.Add(5*time.Microsecond))

		last3, err := s.LoadContext(ctx, "c", 3)
		if err != nil {
			t.Fatal(err)
		}
		keys = nil
		for _, e := range last3 {
			keys = append(keys, e.Key)
		}
		if fmt.Sprint(keys) != "[k4 k5 k6]" || last3[0].ID >= last3[1].ID {
			t.Fatalf("LoadContext(limit 3) = %v, want [k4 k5 k6] oldest first", keys)
		}
		if big, _ := s.LoadContext(ctx, "c", 100); len(big) != 6 {
			t.Fatalf("LoadContext(limit 100) = %d entries", len(big))
		}
		if o, _ := s.LoadContext(ctx, "other", 10); len(o) != 1 || o[0].Conversation != "other" {
			t.Fatalf("other conversation: %+v", o)
		}
		if none, err := s.LoadContext(ctx, "none", 10); err != nil || len(none) != 0 {
			t.Fatalf("unknown conversation: %v, %v", none, err)
		}

		// One transaction: an invalid entry means nothing of the batch is written.
		bad := []ContextEntry{entry("c", "k7", 7), {Conversation: "c", Key: "k8", Payload: json.RawMessage(`{`)}}
		if err := s.AppendContext(ctx, bad); err == nil {
			t.Fatal("invalid payload must fail")
		}
		if all, _ := s.LoadContext(ctx, "c", 0); len(all) != 6 {
			t.Fatalf("a failed batch wrote %d entries", len(all)-6)
		}
		if err := s.AppendContext(ctx, nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAppendContextAtomicOnDatabaseError(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		// A trigger makes the database reject the second entry of the batch,
		// after the first one was inserted inside the transaction.
		refuseContextKey(t, s, "boom")
		err := s.AppendContext(ctx, []ContextEntry{
			{Conversation: "c", Key: "a", Payload: json.RawMessage(`1`)},
			{Conversation: "c", Key: "boom", Payload: json.RawMessage(`2`)},
		})
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err = %v, want the trigger's error", err)
		}
		if got, _ := s.LoadContext(ctx, "c", 0); len(got) != 0 {
			t.Fatalf("partial batch committed: %+v", got)
		}
		if err := s.AppendContext(ctx, []ContextEntry{{Conversation: "c", Key: "a", Payload: json.RawMessage(`1`)}}); err != nil {
			t.Fatalf("store unusable after a failed batch: %v", err)
		}
	})
}

// refuseContextKey installs a trigger that makes the database reject the insert of a context
// entry with key (a database error in mid-statement, after other rows were written).
func refuseContextKey(t *testing.T, s *Store, key string) {
	t.Helper()
	refuseInsert(t, s, "context_entries", "entry_key", key)
}

// refuseInsert installs a trigger that makes the database reject, with the error "boom", the
// insert into table of a row whose column is value (one such trigger per table).
func refuseInsert(t *testing.T, s *Store, table, column, value string) {
	t.Helper()
	var ddl []string
	if s.Driver() == DriverPostgres {
		ddl = []string{
			`CREATE FUNCTION boom_` + table + `() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.` + column + ` = '` + value + `' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$`,
			`CREATE TRIGGER boom_` + table + ` BEFORE INSERT ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION boom_` + table + `()`,
		}
	} else {
		ddl = []string{`CREATE TRIGGER boom_` + table + ` BEFORE INSERT ON ` + table + `
			WHEN NEW.` + column + ` = '` + value + `' BEGIN SELECT RAISE(ABORT, 'boom'); END`}
	}
	for _, q := range ddl {
		if _, err := s.db.ExecContext(testCtx(t), q); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTurnResult(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if _, err := s.GetTurnResult(ctx, "turn/c/1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		r1 := json.RawMessage(`{"prose": "hi",  "results": []}`)
		if err := s.SaveTurnResult(ctx, "turn/c/1", "c", r1, base); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetTurnResult(ctx, "turn/c/1")
		if err != nil || string(got) != string(r1) {
			t.Fatalf("got %s, %v", got, err)
		}
		r2 := json.RawMessage(`{"prose":"updated"}`)
		if err := s.SaveTurnResult(ctx, "turn/c/1", "c", r2, base.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTurnResult(ctx, "turn/c/1"); string(got) != string(r2) {
			t.Fatalf("upsert: got %s", got)
		}
		if err := s.SaveTurnResult(ctx, "turn/c/2", "c", json.RawMessage(`nope`), base); err == nil {
			t.Fatal("invalid JSON must fail")
		}
	})
}

func TestTimestampsRoundTrip(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		base,
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2038, 1, 19, 3, 14, 8, 1000, time.FixedZone("", -7*3600)),
		time.Date(2026, 6, 1, 0, 0, 0, 0, time.Local),
		time.Now(), // carries a monotonic reading
	}
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		for i, ts := range times {
			key := fmt.Sprintf("t%d", i)
			if _, err := s.AppendAudit(ctx, AuditEvent{Key: key, WorkflowID: "w", Outcome: "executed", At: ts}); err != nil {
				t.Fatal(err)
			}
			c := newConfirmation(key, byte(i+1))
			c.CreatedAt, c.ExpiresAt = ts, ts.Add(time.Nanosecond*1001)
			if _, err := s.CreateConfirmation(ctx, c); err != nil {
				t.Fatal(err)
			}
			got, err := s.PresentToken(ctx, c.ID, "p", ts)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.DecideConfirmation(ctx, key, DecisionDenied, "a", "", ts); err != nil {
				t.Fatal(err)
			}
			got, err = s.GetConfirmation(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			sameTime(t, key+" CreatedAt", got.CreatedAt, ts)
			sameTime(t, key+" ExpiresAt", got.ExpiresAt, ts.Add(1001))
			sameTime(t, key+" ConsumedAt", *got.ConsumedAt, ts)
			sameTime(t, key+" DecidedAt", *got.DecidedAt, ts)
			if _, err := s.BeginExecution(ctx, Execution{Key: key, StartedAt: ts}); err != nil {
				t.Fatal(err)
			}
			if err := s.FinishExecution(ctx, key, ExecFailed, nil, ts); err != nil {
				t.Fatal(err)
			}
			ex, err := s.GetExecution(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			sameTime(t, key+" StartedAt", ex.StartedAt, ts)
			sameTime(t, key+" FinishedAt", *ex.FinishedAt, ts)
			if ex.Result != nil {
				t.Fatalf("nil result came back as %q", ex.Result)
			}
			if err := s.AppendContext(ctx, []ContextEntry{{Conversation: "c", Key: key, Payload: json.RawMessage(`null`), CreatedAt: ts}}); err != nil {
				t.Fatal(err)
			}
		}
		ev, err := s.ListAudit(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		ce, err := s.LoadContext(ctx, "c", 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, ts := range times {
			sameTime(t, fmt.Sprintf("audit %d At", i), ev[i].At, ts)
			sameTime(t, fmt.Sprintf("context %d CreatedAt", i), ce[i].CreatedAt, ts)
			if string(ce[i].Payload) != "null" {
				t.Fatalf("payload %q", ce[i].Payload)
			}
		}
		// Expiry comparison happens in the database on the stored form.
		pending, err := s.ListPendingConfirmations(ctx, times[1])
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 0 {
			t.Fatalf("decided confirmations listed as pending: %d", len(pending))
		}
	})
}

// An edit decides a confirmation once (denied, edited_by_approver, with the edited digest):
// the same edit again is a no-op, anything else a conflict. The edited proposal's confirmation
// is created already approved, in one statement, and never listed as pending.
func TestConfirmationEditAndApprovedCreate(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		if _, err := s.CreateConfirmation(ctx, newConfirmation("conf-e", 0xE1)); err != nil {
			t.Fatal(err)
		}
		if err := s.EditConfirmation(ctx, "conf-e", "alice", "", base); err == nil {
			t.Fatal("an edit without its digest must fail")
		}
		if err := s.EditConfirmation(ctx, "conf-e", "alice", "d1", base); err != nil {
			t.Fatal(err)
		}
		if err := s.EditConfirmation(ctx, "conf-e", "alice", "d1", base); err != nil {
			t.Fatalf("the same edit again: %v", err)
		}
		if err := s.EditConfirmation(ctx, "conf-e", "alice", "d2", base); !errors.Is(err, ErrConflict) {
			t.Fatalf("another edit = %v, want ErrConflict", err)
		}
		if err := s.DecideConfirmation(ctx, "conf-e", DecisionApproved, "bob", "", base); !errors.Is(err, ErrConflict) {
			t.Fatalf("an approval after the edit = %v, want ErrConflict", err)
		}
		if err := s.DecideConfirmation(ctx, "conf-e", DecisionDenied, "alice", ReasonEditedByApprover, base); err != nil {
			t.Fatalf("recording the edit's denial again: %v", err)
		}
		got, err := s.GetConfirmation(ctx, "conf-e")
		if err != nil || got.Decision != DecisionDenied || got.Reason != ReasonEditedByApprover || got.Approver != "alice" || got.EditedDigest != "d1" {
			t.Fatalf("edited row = %+v, %v", got, err)
		}

		c := newConfirmation("conf-n", 0xE2)
		c.SealedToken, c.Approver, c.Reason = nil, "alice", "edit of conf-e"
		if _, err := s.CreateApprovedConfirmation(ctx, Confirmation{ID: "x", TokenHash: []byte{9}, ExpiresAt: base}); err == nil {
			t.Fatal("an approved confirmation needs its approver")
		}
		row, err := s.CreateApprovedConfirmation(ctx, c)
		if err != nil || row.Decision != DecisionApproved || row.Approver != "alice" || row.DecidedAt == nil || row.SealedToken != nil {
			t.Fatalf("approved row = %+v, %v", row, err)
		}
		retry := newConfirmation("conf-n", 0xE3)
		retry.Approver = "mallory"
		again, err := s.CreateApprovedConfirmation(ctx, retry)
		if err != nil || again.Approver != "alice" || !bytes.Equal(again.TokenHash, row.TokenHash) {
			t.Fatalf("a retry must return the existing row: %+v, %v", again, err)
		}
		pending, err := s.ListPendingConfirmations(ctx, base.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pending {
			if p.ID == "conf-n" || p.ID == "conf-e" {
				t.Fatalf("%s is listed as pending", p.ID)
			}
		}
	})
}

// A confirmation and an audit row keep the provenance report they were given (issue 24);
// invalid JSON is refused, and rows without one read back nil.
func TestProvenanceRoundTrip(t *testing.T) {
	t.Parallel()
	eachDriver(t, func(t *testing.T, s *Store, _ string) {
		ctx := testCtx(t)
		rep := json.RawMessage(`{"rules":"provenance.v1","values":[{"path":"/to","kind":"string","text":"US13","status":"found","sources":[{"kind":"result","result":1}]}]}`)
		c := newConfirmation("conf-prov", 0xD4)
		c.Provenance = rep
		got, err := s.CreateConfirmation(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Provenance) != string(rep) {
			t.Fatalf("confirmation provenance = %s, want %s", got.Provenance, rep)
		}
		plain, err := s.CreateConfirmation(ctx, newConfirmation("conf-plain", 0xD5))
		if err != nil || plain.Provenance != nil {
			t.Fatalf("confirmation without provenance = %s, %v; want nil", plain.Provenance, err)
		}
		bad := newConfirmation("conf-bad", 0xD6)
		bad.Provenance = json.RawMessage(`{"rules":`)
		if _, err := s.CreateConfirmation(ctx, bad); err == nil {
			t.Fatal("invalid provenance JSON must fail")
		}
		if _, err := s.AppendAudit(ctx, AuditEvent{Key: "turn/p/1/r/1/denied", WorkflowID: "turn/p/1", Outcome: "denied", Provenance: rep}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendAudit(ctx, AuditEvent{Key: "turn/p/1/r/2/bad", WorkflowID: "turn/p/1", Outcome: "denied", Provenance: json.RawMessage(`[`)}); err == nil {
			t.Fatal("invalid audit provenance JSON must fail")
		}
		rows, err := s.ListAudit(ctx, "turn/p/1")
		if err != nil || len(rows) != 1 || string(rows[0].Provenance) != string(rep) {
			t.Fatalf("audit rows = %+v, %v; want one with the report", rows, err)
		}
	})
}
