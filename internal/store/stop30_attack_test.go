package store

// Attacks on the prepared-statement wrapper (prepared.go, PrepareOption), stop 30. Tests named
// TestAttackFixed... are defects the attack found, fixed in prepared.go and PrepareOption; the
// others are attacks that held.

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// attackPair opens a prepared and an unprepared store on the same fresh PostgreSQL schema, and
// a plain lib/pq handle on it standing for another process.
func attackPair(t *testing.T, extra string) (prep, plain *Store, other *sql.DB) {
	t.Helper()
	u := freshURL(t, DriverPostgres) + extra
	prep = openStore(t, u)
	plain = openStore(t, u+"&airlock_prepare=off")
	if !prep.db.prepare || plain.db.prepare {
		t.Fatalf("prepare flags: %v %v", prep.db.prepare, plain.db.prepare)
	}
	other, err := sql.Open("postgres", prep.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return prep, plain, other
}

// mustExec runs q on db (another process's connection), failing the test on an error.
func mustExec(t *testing.T, ctx context.Context, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(ctx, q, args...); err != nil {
		t.Fatal(err)
	}
}

func pqCode(err error) string {
	var e *pq.Error
	if errors.As(err, &e) {
		return string(e.Code)
	}
	if err == nil {
		return "<nil>"
	}
	return "non-pq: " + err.Error()
}

// Found and fixed; the defect was:
// a stale plan found by one goroutine closes the cached *sqlx.Stmt that other
// goroutines have already loaded from the cache (or, worse, the fresh one another goroutine
// just prepared, since stale() deletes whatever is cached under the text): their
// Exec/Query then fail with "sql: statement is closed", which is not a *pq.Error and is
// returned to the caller instead of being re-run.
func TestAttackFixedStaleEvictionClosesStatementsInUse(t *testing.T) {
	prep, _, other := attackPair(t, "")
	ctx := testCtx(t)
	mustExec(t, ctx, other, `CREATE TABLE atk_stale (k TEXT PRIMARY KEY, a INTEGER NOT NULL)`)
	mustExec(t, ctx, other, `INSERT INTO atk_stale VALUES ('x', 1)`)
	q := prep.q(`SELECT a FROM atk_stale WHERE k = ?`)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]int{}
	var ok atomic.Int64
	for range 96 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var a int64
				if err := prep.db.GetContext(ctx, &a, q, "x"); err != nil {
					mu.Lock()
					errs[err.Error()]++
					mu.Unlock()
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	types := []string{"BIGINT", "INTEGER"}
	for i := range 60 {
		time.Sleep(40 * time.Millisecond)
		mustExec(t, ctx, other, `ALTER TABLE atk_stale ALTER COLUMN a TYPE `+types[i%2])
	}
	time.Sleep(40 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d reads succeeded", ok.Load())
	for msg, n := range errs {
		t.Errorf("%d reads failed while another process changed the column's type: %s", n, msg)
	}
}

// Found and fixed; the defect was:
// a prepared statement keeps the parameter types PostgreSQL inferred when it was
// prepared. After another process widens a column (INTEGER -> BIGINT, the kind of migration
// 0014's {{bigint}} is), the cached statement still converts its argument to integer, so a
// value the new schema accepts fails with 22003 (numeric_value_out_of_range) on every pooled
// connection that prepared it, for as long as the store lives; stale() only knows 0A000. The
// unprepared store, parsing each time, succeeds.
func TestAttackFixedCachedParamTypesOutliveMigration(t *testing.T) {
	prep, plain, other := attackPair(t, "")
	ctx := testCtx(t)
	mustExec(t, ctx, other, `CREATE TABLE atk_widen (k TEXT PRIMARY KEY, n INTEGER NOT NULL)`)
	mustExec(t, ctx, other, `INSERT INTO atk_widen VALUES ('x', 1)`)
	upd := prep.q(`UPDATE atk_widen SET n = ? WHERE k = ?`)
	sel := prep.q(`SELECT k FROM atk_widen WHERE n = ?`)
	for _, s := range []*Store{prep, plain} {
		if _, err := s.db.ExecContext(ctx, upd, 2, "x"); err != nil {
			t.Fatal(err)
		}
		var k string
		if err := s.db.GetContext(ctx, &k, sel, 2); err != nil {
			t.Fatal(err)
		}
	}
	// Another process (a newer worker) migrates the column to BIGINT.
	mustExec(t, ctx, other, `ALTER TABLE atk_widen ALTER COLUMN n TYPE BIGINT`)
	big := int64(1) << 40
	_, errPlain := plain.db.ExecContext(ctx, upd, big, "x")
	_, errPrep := prep.db.ExecContext(ctx, upd, big, "x")
	if errPlain != nil {
		t.Fatalf("unprepared update after the migration: %v", errPlain)
	}
	if errPrep != nil {
		t.Errorf("prepared update after the migration failed where the unprepared one succeeded: %v (SQLSTATE %s)", errPrep, pqCode(errPrep))
	}
	// And it does not heal: the statement is never dropped from the cache.
	_, errPrep = prep.db.ExecContext(ctx, upd, big, "x")
	if errPrep != nil {
		t.Errorf("prepared update, again: %v", errPrep)
	}
	// A lookup prepared before the migration cannot even express a key the new schema holds.
	mustExec(t, ctx, other, `UPDATE atk_widen SET n = $1`, big)
	var k string
	errPlain = plain.db.GetContext(ctx, &k, sel, big)
	errPrep = prep.db.GetContext(ctx, &k, sel, big)
	if errPlain != nil || k != "x" {
		t.Fatalf("unprepared lookup: %q %v", k, errPlain)
	}
	if errPrep != nil {
		t.Errorf("prepared lookup of a row that exists: %v", errPrep)
	}
}

// Found and fixed; the defect was:
// the store runs statements through sqlx.GetContext(ctx, s.db, ...) (execChanging,
// decideConfirmation's read of the existing decision): sqlx calls preparedDB.QueryRowxContext,
// which never drops a stale statement. After another process changes a result column's type,
// that statement fails with 0A000 "cached plan must not change result type" on every call, for
// the life of the store (the unprepared store answers). Here: DecideConfirmation's retry of a
// decision already made, after confirmations.decision became VARCHAR.
func TestAttackFixedStalePlanStuckThroughSqlxGetContext(t *testing.T) {
	prep, plain, other := attackPair(t, "")
	ctx := testCtx(t)
	if _, err := prep.CreateConfirmation(ctx, newConfirmation("c-1", 1)); err != nil {
		t.Fatal(err)
	}
	decide := func(s *Store) error {
		return s.DecideConfirmation(ctx, "c-1", DecisionApproved, "alice", "ok", base)
	}
	for range 3 { // decided, then a retry of the same decision (reads the existing one)
		if err := decide(prep); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, ctx, other, `ALTER TABLE confirmations ALTER COLUMN decision TYPE VARCHAR(64)`)
	if err := decide(plain); err != nil {
		t.Fatalf("unprepared retry after the migration: %v", err)
	}
	for i := range 3 {
		if err := decide(prep); err != nil {
			t.Errorf("prepared retry %d after the migration: %v", i, err)
		}
	}
	// The same through the wrapper directly.
	q := prep.q(`SELECT decision FROM confirmations WHERE id = ?`)
	var d string
	for i := range 3 {
		if err := sqlx.GetContext(ctx, prep.db, &d, q, "c-1"); err != nil {
			t.Errorf("sqlx.GetContext(s.db) %d: %v", i, err)
		}
	}
}

// Found and fixed; the defect was:
// the bound is checked (n.Load) before preparing and counted (n.Add) after, so
// goroutines that start new texts together all pass the check: the cache exceeds
// MaxPreparedStatements by up to the number of concurrent callers.
func TestAttackFixedBoundExceededByConcurrentNewTexts(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	for i := 0; s.db.n.Load() < MaxPreparedStatements-1; i++ {
		var got int
		if err := s.db.GetContext(ctx, &got, fmt.Sprintf(`SELECT %d`, 100000+i)); err != nil {
			t.Fatal(err)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var got int
			if err := s.db.GetContext(ctx, &got, fmt.Sprintf(`SELECT %d /* race */`, i)); err != nil || got != i {
				t.Errorf("SELECT %d: %d %v", i, got, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	cached := 0
	s.db.stmts.Range(func(any, any) bool { cached++; return true })
	if n := s.db.n.Load(); n > MaxPreparedStatements || cached > MaxPreparedStatements {
		t.Errorf("%d statements cached (counter %d), bound %d", cached, n, MaxPreparedStatements)
	}
}

// Found and fixed (minor); the defect was:
// PrepareOption promises an error for any value but on or off, but a value
// whose percent-encoding is malformed is read as "" and so as on: a mistyped
// airlock_prepare=off% (meant to disable prepared statements behind a transaction pooler)
// silently leaves them on.
func TestAttackFixedPrepareOptionMalformedValueIsOn(t *testing.T) {
	for _, raw := range []string{
		"postgres://u:p@h/db?airlock_prepare=off%",
		"postgres://u:p@h/db?airlock_prepare=of%ZZ",
	} {
		dsn, prepare, err := PrepareOption(raw)
		if err == nil {
			t.Errorf("%s: accepted (dsn %q, prepare %v), want an error", raw, dsn, prepare)
		}
	}
}

// ---- attacks that held ----

// Results and errors of the prepared path equal the unprepared path's for the value classes
// the store uses (binary_parameters=yes is on by default).
func TestAttackHeldValueParity(t *testing.T) {
	prep, plain, other := attackPair(t, "")
	ctx := testCtx(t)
	mustExec(t, ctx, other, `CREATE TABLE atk_vals (
		id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		k TEXT UNIQUE, b BYTEA, j JSON, ts TIMESTAMPTZ, n INTEGER, u UUID)`)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	huge := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	cases := []struct {
		name string
		args []any
	}{
		{"plain", []any{"a", []byte("bin"), []byte(`{"x": 1,  "y":[1,2]}`), "2026-03-14T15:09:26.535897Z", 7, "6f1c1b4e-2f7e-4e39-9d4b-0f7a3c1e2d3b"}},
		{"nulls", []any{nil, nil, nil, nil, nil, nil}},
		{"allbytes", []any{"b", all, []byte(`"\u0000"`), "2026-03-14T15:09:26Z", -1, nil}},
		{"huge", []any{"c", huge, []byte(`"` + strings.Repeat("z", 1<<20) + `"`), nil, 1 << 30, nil}},
		{"emptybytes", []any{"d", []byte{}, nil, nil, 0, nil}},
		{"nul in text", []any{"e\x00f", nil, nil, nil, nil, nil}},
		{"invalid utf8", []any{"g\xff", nil, nil, nil, nil, nil}},
		{"invalid utf8 json", []any{"h", nil, []byte("\"\xff\""), nil, nil, nil}},
		{"bad json", []any{"i", nil, []byte("{"), nil, nil, nil}},
		{"bad ts", []any{"j", nil, nil, "yesterday-ish", nil, nil}},
		{"int overflow", []any{"k", nil, nil, nil, int64(1) << 40, nil}},
		{"dup", []any{"a", nil, nil, nil, nil, nil}},
	}
	ins := prep.q(`INSERT INTO atk_vals (k, b, j, ts, n, u) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`)
	for _, tc := range cases {
		var idPrep, idPlain int64
		errPrep := prep.db.GetContext(ctx, &idPrep, ins, tc.args...)
		mustExec(t, ctx, other, `DELETE FROM atk_vals WHERE id = $1`, idPrep)
		errPlain := plain.db.GetContext(ctx, &idPlain, ins, tc.args...)
		if pqCode(errPrep) != pqCode(errPlain) {
			t.Errorf("%s: prepared %v (%s), unprepared %v (%s)", tc.name, errPrep, pqCode(errPrep), errPlain, pqCode(errPlain))
		}
		if errPrep != nil || errPlain != nil {
			continue
		}
		type row struct {
			K  sql.NullString `db:"k"`
			B  []byte         `db:"b"`
			J  []byte         `db:"j"`
			TS sql.NullTime   `db:"ts"`
			N  sql.NullInt64  `db:"n"`
			U  sql.NullString `db:"u"`
		}
		var rp, ru []row
		sel := prep.q(`SELECT k, b, j, ts, n, u FROM atk_vals WHERE id IN (?, ?) ORDER BY id`)
		if err := prep.db.SelectContext(ctx, &rp, sel, idPlain, idPlain); err != nil {
			t.Fatal(err)
		}
		if err := plain.db.SelectContext(ctx, &ru, sel, idPlain, idPlain); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rp) != fmt.Sprint(ru) || len(rp) != 1 {
			t.Errorf("%s: prepared read %.200v, unprepared %.200v", tc.name, rp, ru)
		}
		if b, ok := tc.args[1].([]byte); ok && !bytes.Equal(rp[0].B, b) {
			t.Errorf("%s: bytea came back different (%d bytes, want %d)", tc.name, len(rp[0].B), len(b))
		}
		mustExec(t, ctx, other, `DELETE FROM atk_vals WHERE id <> 0 AND k IS DISTINCT FROM 'a'`)
	}
	// Many rows of binary bytea through one prepared Select: no aliasing of lib/pq's buffer.
	mustExec(t, ctx, other, `DELETE FROM atk_vals`)
	for i := range 50 {
		if _, err := prep.db.ExecContext(ctx, prep.q(`INSERT INTO atk_vals (k, b) VALUES (?, ?)`), fmt.Sprint("r", i), []byte{byte(i), byte(i), byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var bs [][]byte
	for range 2 {
		bs = nil
		if err := prep.db.SelectContext(ctx, &bs, `SELECT b FROM atk_vals ORDER BY id`); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range bs {
		if !bytes.Equal(b, []byte{byte(i), byte(i), byte(i)}) {
			t.Fatalf("row %d: %v", i, b)
		}
	}
}

// The store's own error mapping (ErrNotFound, ErrNoRows) is unchanged through its API.
func TestAttackHeldStoreNotFound(t *testing.T) {
	prep, _, _ := attackPair(t, "")
	ctx := testCtx(t)
	for range 3 {
		if _, err := prep.GetSnapshot(ctx, "missing"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetSnapshot of a missing id: %v, want ErrNotFound", err)
		}
	}
	b, err := prep.PutSnapshot(ctx, "s1", "wf", 1, []byte(`{"a":1}`))
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("PutSnapshot: %q %v", b, err)
	}
	b, err = prep.PutSnapshot(ctx, "s1", "wf", 1, []byte(`{"a":2}`))
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("PutSnapshot again: %q %v", b, err)
	}
	if got, err := prep.GetSnapshot(ctx, "s1"); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("GetSnapshot: %q %v", got, err)
	}
}

// Many goroutines running one new text at once: one statement cached, no errors.
func TestAttackHeldConcurrentFirstUse(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	before := s.db.n.Load()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var got int
			if err := s.db.GetContext(ctx, &got, `SELECT $1::int + 1`, i); err != nil || got != i+1 {
				t.Errorf("%d: %d %v", i, got, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if d := s.db.n.Load() - before; d != 1 {
		t.Fatalf("%d statements cached for one text", d)
	}
}

// Two stores on two schemas in one process, same statement text: each reads its own table.
func TestAttackHeldSearchPathIsolation(t *testing.T) {
	a := openStore(t, freshURL(t, DriverPostgres))
	b := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	for i, s := range []*Store{a, b} {
		if _, err := s.db.DB.ExecContext(ctx, `CREATE TABLE atk_sp (v INTEGER)`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.DB.ExecContext(ctx, `INSERT INTO atk_sp VALUES ($1)`, i+10); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		for i, s := range []*Store{a, b} {
			var v int
			if err := s.db.GetContext(ctx, &v, `SELECT v FROM atk_sp`); err != nil || v != i+10 {
				t.Fatalf("store %d read %d %v", i, v, err)
			}
		}
	}
}

// Another process drops and recreates a table, drops a column under SELECT *, renames: the
// cached statements follow (re-analysed, or dropped on 0A000).
func TestAttackHeldSchemaChurn(t *testing.T) {
	prep, plain, other := attackPair(t, "")
	ctx := testCtx(t)
	mustExec := func(q string) {
		t.Helper()
		mustExec(t, ctx, other, q)
	}
	mustExec(`CREATE TABLE atk_ch (a INTEGER, b TEXT)`)
	mustExec(`INSERT INTO atk_ch VALUES (1, 'one')`)
	read := func(s *Store) (string, error) {
		r, err := s.db.QueryxContext(ctx, `SELECT * FROM atk_ch`)
		if err != nil {
			return "", err
		}
		defer r.Close()
		var out []string
		for r.Next() {
			m := map[string]any{}
			if err := r.MapScan(m); err != nil {
				return "", err
			}
			out = append(out, fmt.Sprint(m))
		}
		return strings.Join(out, ";"), r.Err()
	}
	check := func(step string) {
		t.Helper()
		for range 3 {
			gp, ep := read(prep)
			gu, eu := read(plain)
			if gp != gu || pqCode(ep) != pqCode(eu) {
				t.Fatalf("%s: prepared %q %v, unprepared %q %v", step, gp, ep, gu, eu)
			}
		}
	}
	check("initial")
	mustExec(`ALTER TABLE atk_ch DROP COLUMN b`)
	check("drop column")
	mustExec(`DROP TABLE atk_ch`)
	check("dropped")
	mustExec(`CREATE TABLE atk_ch (a TEXT, c INTEGER)`)
	mustExec(`INSERT INTO atk_ch VALUES ('x', 2)`)
	check("recreated")
	mustExec(`ALTER TABLE atk_ch RENAME TO atk_ch_old`)
	mustExec(`CREATE TABLE atk_ch (z BOOLEAN)`)
	check("renamed away")
	// RETURNING * through ExecContext and GetContext after a change.
	mustExec(`ALTER TABLE atk_ch ADD COLUMN w INTEGER DEFAULT 5`)
	var w int
	for range 2 {
		var z bool
		if err := prep.db.QueryRowxContext(ctx, `SELECT true`).Scan(&z); err != nil {
			t.Fatal(err)
		}
		if err := prep.db.GetContext(ctx, &w, `INSERT INTO atk_ch (z) VALUES (true) RETURNING w`); err != nil || w != 5 {
			t.Fatalf("insert returning: %d %v", w, err)
		}
		mustExec(`ALTER TABLE atk_ch ALTER COLUMN w TYPE BIGINT`)
	}
}

// The store's backends killed under it (pg_terminate_backend): the prepared store recovers as
// the unprepared one does.
func TestAttackHeldTerminatedBackends(t *testing.T) {
	var rnd [4]byte
	rand.Read(rnd[:])
	app := "atk_" + hex.EncodeToString(rnd[:])
	prep, plain, other := attackPair(t, "&application_name="+app)
	ctx := testCtx(t)
	mustExec(t, ctx, other, `CREATE TABLE atk_term (v INTEGER)`)
	run := func(s *Store) (fails int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var n int
				err := s.db.GetContext(ctx, &n, s.q(`SELECT count(*) FROM atk_term WHERE v <> ?`), i)
				if err == nil {
					_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO atk_term (v) VALUES (?)`), i)
				}
				if err != nil {
					mu.Lock()
					fails++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return fails
	}
	for _, s := range []*Store{prep, plain} {
		run(s)
	}
	for round := range 3 {
		mustExec(t, ctx, other, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, app)
		time.Sleep(50 * time.Millisecond)
		fp, fu := run(prep), run(plain)
		t.Logf("round %d: failures right after the kill: prepared %d, unprepared %d", round, fp, fu)
		// After the failures surfaced, both work again.
		if fp, fu = run(prep), run(plain); fp != 0 || fu != 0 {
			t.Fatalf("round %d: failures after recovery: prepared %d, unprepared %d", round, fp, fu)
		}
	}
}

// Connection churn from a short idle time: statements re-prepare on new connections.
func TestAttackHeldConnChurn(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	s.db.SetConnMaxIdleTime(5 * time.Millisecond)
	s.db.SetConnMaxLifetime(20 * time.Millisecond)
	deadline := time.Now().Add(1 * time.Second)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				var got int
				if err := s.db.GetContext(ctx, &got, `SELECT $1::int * 2`, i+g); err != nil || got != 2*(i+g) {
					t.Errorf("%d %v", got, err)
					return
				}
				if i%7 == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// Pool exhaustion: 16 open Rows hold every connection; a 17th prepared query waits for one
// instead of deadlocking or failing, once one is released.
func TestAttackHeldPoolExhaustion(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	var held []*sql.Rows
	for range PostgresPoolSize {
		r, err := s.db.QueryContext(ctx, `SELECT generate_series(1, 3)`)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	done := make(chan error, 1)
	go func() {
		var n int
		done <- s.db.GetContext(ctx, &n, `SELECT 41 + 1 /* new text */`)
	}()
	select {
	case err := <-done:
		t.Fatalf("a query ran with every connection held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	held[0].Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the query never got the released connection")
	}
	for _, r := range held[1:] {
		r.Close()
	}
}

// Close while queries run: callers get errors, nothing panics or hangs.
func TestAttackHeldCloseWhileRunning(t *testing.T) {
	s, err := Open(testCtx(t), freshURL(t, DriverPostgres))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				var n int
				if err := s.db.GetContext(ctx, &n, `SELECT $1::int`, g*1000+i); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	s.Close()
	wg.Wait()
}

// Statements that must not be prepared (several commands in one text, SET, LISTEN, DDL)
// still run: a failed prepare falls back to the simple protocol.
func TestAttackHeldUnpreparableStatements(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	for _, q := range []string{
		`CREATE TABLE atk_multi (v INTEGER); INSERT INTO atk_multi VALUES (1)`,
		`SET application_name = 'x'; SELECT 1`,
		`LISTEN atk_channel`,
		`UNLISTEN atk_channel`,
		`CREATE INDEX atk_multi_v ON atk_multi (v)`,
	} {
		for range 2 {
			if _, err := s.db.ExecContext(ctx, q); err != nil && !strings.Contains(err.Error(), "already exists") {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
}

// PrepareOption parsing: tricks with the key's spelling and place.
func TestAttackHeldPrepareOptionParsing(t *testing.T) {
	for _, tc := range []struct {
		in      string
		prepare bool
		wantErr bool
		notIn   string
	}{
		{"postgres://u:airlock_prepare=off@h/db?x=1", true, false, ""},
		{"postgres://u:p@h/airlock_prepare=off?x=1", true, false, ""},
		{"postgres://u:p@h/db?airlock%5Fprepare=off", false, false, "airlock"},
		{"postgres://u:p@h/db?airlock_prepare=%6F%66%66", false, false, "airlock"},
		{"postgres://u:p@h/db?airlock_prepare=off&airlock_prepare=on", true, false, "airlock"},
		{"postgres://u:p@h/db?airlock_prepare=Off", false, false, "airlock"},
		{"postgres://u:p@h/db?airlock_prepare", true, false, "airlock"},
		{"postgres://u:s3cret@h/db?airlock_prepare=s3cret", false, true, ""},
		{"postgres://u:p@h/db#airlock_prepare=off", true, false, ""},
	} {
		dsn, prepare, err := PrepareOption(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && prepare != tc.prepare) {
			t.Errorf("%s: %q %v %v", tc.in, dsn, prepare, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error quotes the secret: %v", err)
		}
		if tc.notIn != "" && strings.Contains(dsn, tc.notIn) {
			t.Errorf("%s: %q still holds the parameter", tc.in, dsn)
		}
	}
	// The password survives the re-serialization, percent-encoded characters included.
	raw := "postgres://u:p%40ss%2Fw%3Ard%25%20x@h:5432/db?sslmode=disable&airlock_prepare=off"
	dsn, _, err := PrepareOption(raw)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := url.Parse(raw)
	b, _ := url.Parse(dsn)
	pa, _ := a.User.Password()
	pb, _ := b.User.Password()
	if pa != pb || a.Host != b.Host || a.Path != b.Path {
		t.Fatalf("%q -> %q", raw, dsn)
	}
	// Open with a bad value: the error does not quote the password.
	base := os.Getenv("AIRLOCK_TEST_DATABASE_URL")
	if base != "" {
		u, _ := url.Parse(base)
		u.User = url.UserPassword("airlock", "hunter2secret")
		u.RawQuery += "&airlock_prepare=hunter2secret"
		_, err := Open(context.Background(), u.String())
		if err == nil || strings.Contains(err.Error(), "hunter2secret") {
			t.Fatalf("Open: %v", err)
		}
	}
}
