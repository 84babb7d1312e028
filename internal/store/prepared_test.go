package store

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lib/pq"
)

// On PostgreSQL the store's statements are prepared once and reused: the same text twice is
// one cached statement, and what it returns is what the unprepared statement returns.
func TestPreparedStatementsAreReused(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE prep_t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	before := s.db.n.Load()
	for i := range 5 {
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO prep_t (k, v) VALUES (?, ?)`), fmt.Sprint("k", i), i); err != nil {
			t.Fatal(err)
		}
	}
	var vs []int
	for range 3 {
		vs = nil
		if err := s.db.SelectContext(ctx, &vs, s.q(`SELECT v FROM prep_t WHERE v >= ? ORDER BY v`), 2); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(vs) != "[2 3 4]" {
		t.Fatalf("prepared select returned %v, want [2 3 4]", vs)
	}
	var v int
	if err := s.db.GetContext(ctx, &v, s.q(`SELECT v FROM prep_t WHERE k = ?`), "k3"); err != nil || v != 3 {
		t.Fatalf("prepared get: %d, %v; want 3", v, err)
	}
	if got := s.db.n.Load() - before; got != 3 {
		t.Fatalf("%d statements cached for 3 texts run 9 times, want 3", got)
	}
	// No rows is sql.ErrNoRows, as unprepared.
	if err := s.db.GetContext(ctx, &v, s.q(`SELECT v FROM prep_t WHERE k = ?`), "none"); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("prepared get of no row: %v, want sql.ErrNoRows", err)
	}
}

// A statement PostgreSQL refuses to prepare runs unprepared, so the caller sees the query's
// own error, and nothing is cached.
func TestPreparedStatementErrorsAreTheQuerys(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	before := s.db.n.Load()
	_, err := s.db.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "42P01" {
		t.Fatalf("insert into a missing table: %v, want undefined_table (42P01)", err)
	}
	if got := s.db.n.Load() - before; got != 0 {
		t.Fatalf("a statement that failed to prepare was cached (%d)", got)
	}
}

// A cached plan the schema outgrew (another process migrated it: "cached plan must not
// change result type") is dropped and the statement run again: the caller gets the new
// schema's rows, not an error.
func TestPreparedStatementSurvivesSchemaChange(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE prep_s (a INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO prep_s (a) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	q := `SELECT * FROM prep_s`
	var rows []map[string]any
	read := func() error {
		rows = nil
		r, err := s.db.QueryxContext(ctx, q)
		if err != nil {
			return err
		}
		defer r.Close()
		for r.Next() {
			m := map[string]any{}
			if err := r.MapScan(m); err != nil {
				return err
			}
			rows = append(rows, m)
		}
		return r.Err()
	}
	if err := read(); err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("first read: %v %v", rows, err)
	}
	if _, err := s.db.DB.ExecContext(ctx, `ALTER TABLE prep_s ADD COLUMN b INTEGER NOT NULL DEFAULT 7`); err != nil {
		t.Fatal(err)
	}
	if err := read(); err != nil {
		t.Fatalf("read after the schema changed: %v", err)
	}
	if len(rows) != 1 || fmt.Sprint(rows[0]["b"]) != "7" {
		t.Fatalf("read after the schema changed returned %v, want a row with b=7", rows)
	}
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM prep_s`); err != nil || n != 1 {
		t.Fatalf("count: %d %v", n, err)
	}
}

// Past MaxPreparedStatements texts, statements run unprepared and still answer.
func TestPreparedStatementsAreBounded(t *testing.T) {
	s := openStore(t, freshURL(t, DriverPostgres))
	ctx := testCtx(t)
	for i := range MaxPreparedStatements + 10 {
		var got int
		if err := s.db.GetContext(ctx, &got, fmt.Sprintf(`SELECT %d`, i)); err != nil || got != i {
			t.Fatalf("SELECT %d: %d %v", i, got, err)
		}
	}
	if n := s.db.n.Load(); n != MaxPreparedStatements {
		t.Fatalf("%d statements cached, want the bound %d", n, MaxPreparedStatements)
	}
}

// SQLite runs statements unprepared: nothing is cached.
func TestSQLiteStatementsAreNotCached(t *testing.T) {
	s := openStore(t, freshURL(t, DriverSQLite))
	var n int
	if err := s.db.GetContext(testCtx(t), &n, `SELECT 1`); err != nil || n != 1 {
		t.Fatalf("SELECT 1: %d %v", n, err)
	}
	if c := s.db.n.Load(); c != 0 {
		t.Fatalf("SQLite cached %d statements", c)
	}
}

// airlock_prepare=off (PrepareParam) turns prepared statements off, and is removed from the URL
// lib/pq sees (PostgreSQL would refuse it as an unknown run-time parameter); the rest of the
// query stays as written. Any value but on or off is an error that does not quote the URL.
func TestPrepareOption(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		prepare  bool
	}{
		{"postgres://u:p@h/db", "postgres://u:p@h/db", true},
		{"postgres://u:p@h/db?airlock_prepare=off", "postgres://u:p@h/db", false},
		{"postgres://u:p@h/db?sslmode=disable&airlock_prepare=OFF&search_path=s", "postgres://u:p@h/db?sslmode=disable&search_path=s", false},
		{"postgres://u:p@h/db?airlock_prepare=on&binary_parameters=yes", "postgres://u:p@h/db?binary_parameters=yes", true},
	} {
		dsn, prepare, err := PrepareOption(tc.in)
		if err != nil || dsn != tc.want || prepare != tc.prepare {
			t.Errorf("%s: %q, %v, %v; want %q, %v", tc.in, dsn, prepare, err, tc.want, tc.prepare)
		}
	}
	if _, _, err := PrepareOption("postgres://u:secret@h/db?airlock_prepare=maybe"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a bad value: %v, want an error that does not quote the URL", err)
	}
	if _, err := Open(testCtx(t), freshURL(t, DriverPostgres)+"&airlock_prepare=sometimes"); err == nil {
		t.Fatal("Open accepted airlock_prepare=sometimes")
	}

	s := openStore(t, freshURL(t, DriverPostgres)+"&airlock_prepare=off")
	var n int
	if err := s.db.GetContext(testCtx(t), &n, `SELECT 1`); err != nil || n != 1 {
		t.Fatalf("SELECT 1 with prepared statements off: %d %v", n, err)
	}
	if c := s.db.n.Load(); c != 0 {
		t.Fatalf("airlock_prepare=off still cached %d statements", c)
	}
}
