package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No error of Open or OpenExisting shows a password or a secret query parameter, whatever
// shape the URL has: well-formed but unreachable, or malformed so that url.Parse and lib/pq
// (whose errors quote the URL) fail on it.
func TestOpenNeverShowsThePassword(t *testing.T) {
	ctx := testCtx(t)
	cases := map[string][]string{ // URL → fragments of its secret that must never show
		"postgres://nobody:hunter22@127.0.0.1:1/x?sslmode=disable&connect_timeout=2":                 {"hunter22"},
		"postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2&password=hunter22":        {"hunter22"},
		"postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2&sslpassword=hunter22":     {"hunter22"},
		"postgres://nobody:hunter22@127.0.0.1:notaport/x":                                            {"hunter22"},
		"postgres://nobody:hun:ter22@127.0.0.1:1/x?connect_timeout=2":                                {"hun:ter22", "ter22"},
		"postgres://nobody:hun/ter22@127.0.0.1:1/x?connect_timeout=2":                                {"hun/ter22", "ter22"},
		"postgres://nobody:1234/ter22@127.0.0.1:1/x?connect_timeout=2":                               {"1234/ter22", "ter22"},
		"postgres://nobody:hun?ter22@127.0.0.1:1/x?connect_timeout=2":                                {"hun?ter22", "ter22"},
		"postgres://nobody:hun#ter22@127.0.0.1:1/x?connect_timeout=2":                                {"hun#ter22", "ter22"},
		"postgres://nobody:hun%zzter22@127.0.0.1:1/x?connect_timeout=2":                              {"hun%zzter22", "zzter22"},
		"postgres://nobody:hun ter22@127.0.0.1:1/x?connect_timeout=2":                                {"hun ter22", "ter22"},
		"postgres://nobody:hunter22\x01@127.0.0.1:1/x":                                               {"hunter22"},
		"postgres://nobody:hunter22@[::1/x":                                                          {"hunter22"},
		"postgres://127.0.0.1:1/x?password=hun@ter22":                                                {"hun@ter22", "ter22"},
		"postgresql:/nobody:hunter22@127.0.0.1:1/x":                                                  {"hunter22"},
		"postgress://nobody:hunter22@127.0.0.1:1/x":                                                  {"hunter22"},
		"host=127.0.0.1 port=1 user=nobody password=hunter22":                                        {"hunter22"},
		"nobody:hunter22@127.0.0.1:1/x":                                                              {"hunter22"},
		"postgres://nobody:hunter22@127.0.0.1:1/x?sslmode=nosuchmode":                                {"hunter22"},
		"postgres://nobody:hunter22@127.0.0.1:1/x?sslmode=verify-full&sslrootcert=/no/such/file.pem": {"hunter22"},
	}
	for u, secrets := range cases {
		for name, open := range map[string]func() (*Store, error){
			"Open":         func() (*Store, error) { return Open(ctx, u) },
			"OpenExisting": func() (*Store, error) { return OpenExisting(ctx, u) },
		} {
			s, err := open()
			if err == nil {
				s.Close()
				t.Errorf("%s(%q) succeeded", name, u)
				continue
			}
			for _, sec := range secrets {
				if strings.Contains(err.Error(), sec) {
					t.Errorf("%s(%q): error shows %q: %v", name, u, sec, err)
				}
			}
			if !strings.HasPrefix(err.Error(), "store: ") {
				t.Errorf("%s(%q): error not prefixed: %v", name, u, err)
			}
		}
	}
}

// A mistyped URL names what is accepted and creates nothing.
func TestOpenRefusesUnknownForms(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	t.Chdir(dir)
	for _, u := range []string{"sqlite3:a.db", "sqllite:a.db", "mysql://x/a", "postgres:/h/db", "sqlite:~/a.db", "sqlite:", ".airlock/airlock.db"} {
		s, err := Open(ctx, u)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if !strings.Contains(err.Error(), "sqlite:") && !strings.Contains(err.Error(), "not expanded") {
			t.Errorf("Open(%q): error does not list the accepted forms: %v", u, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("refused URLs created %d entries, first %s", len(ents), ents[0].Name())
	}
}

// OpenExisting never creates a SQLite file, its directory or a table: a missing store is
// ErrNoStore naming the path.
func TestOpenExistingSQLiteCreatesNothing(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "mistyped", "airlock.db")
	for _, u := range []string{"sqlite:" + missing, "sqlite://" + missing, "file:" + missing} {
		s, err := OpenExisting(ctx, u)
		if err == nil {
			s.Close()
			t.Fatalf("OpenExisting(%q) succeeded", u)
		}
		if !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("OpenExisting(%q) = %v, want ErrNoStore naming the path", u, err)
		}
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenExisting created the directory: %v", err)
	}

	t.Chdir(dir) // the default location, relative to the working directory
	if _, err := OpenExisting(ctx, ""); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), DefaultSQLitePath) {
		t.Fatalf("OpenExisting(\"\") = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".airlock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenExisting created .airlock: %v", err)
	}

	empty := filepath.Join(dir, "empty.db") // an empty file, as a mistyped path left by an older airlock
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(ctx, "sqlite:"+empty); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), empty) {
		t.Fatalf("OpenExisting(empty file) = %v", err)
	}
	if st, err := os.Stat(empty); err != nil || st.Size() != 0 {
		t.Fatalf("OpenExisting wrote into the empty file (size %d, %v)", st.Size(), err)
	}
	if _, err := OpenExisting(ctx, "sqlite:"+dir); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("OpenExisting(directory) = %v", err)
	}
}

// Against both drivers: an empty database is ErrNoStore and stays empty; once Open created
// the store, OpenExisting opens it; a store missing a migration is ErrSchemaOutdated.
func TestOpenExistingNeedsAnAirlockSchema(t *testing.T) {
	t.Parallel()
	for _, d := range []string{DriverSQLite, DriverPostgres} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			u := freshURL(t, d)
			if d == DriverSQLite { // an existing SQLite database that is not an Airlock store
				db, err := sql.Open("sqlite", strings.TrimPrefix(u, "sqlite:"))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.ExecContext(ctx, `CREATE TABLE other (x INTEGER)`); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			if _, err := OpenExisting(ctx, u); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "no Airlock tables") {
				t.Fatalf("OpenExisting(empty database) = %v, want ErrNoStore", err)
			}
			raw, err := sql.Open(d, strings.TrimPrefix(u, "sqlite:"))
			if err != nil {
				t.Fatal(err)
			}
			var n int
			err = raw.QueryRowContext(ctx, map[string]string{
				DriverSQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name <> 'other'`,
				DriverPostgres: `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`,
			}[d]).Scan(&n)
			raw.Close()
			if err != nil || n != 0 {
				t.Fatalf("OpenExisting created %d tables (%v)", n, err)
			}
			s := openStore(t, u) // Open creates the store
			var tables int
			if err := s.db.GetContext(ctx, &tables, s.q(map[string]string{
				DriverSQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'confirmations'`,
				DriverPostgres: `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'confirmations'`,
			}[d])); err != nil || tables != 1 {
				t.Fatalf("Open did not create the tables: %d, %v", tables, err)
			}
			ro, err := OpenExisting(ctx, u)
			if err != nil {
				t.Fatalf("OpenExisting(existing store) = %v", err)
			}
			if _, err := ro.ListAudit(ctx, ""); err != nil {
				t.Fatal(err)
			}
			ro.Close()
			if _, err := s.db.ExecContext(ctx, `DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)`); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenExisting(ctx, u); !errors.Is(err, ErrSchemaOutdated) {
				t.Fatalf("OpenExisting(outdated store) = %v, want ErrSchemaOutdated", err)
			}
		})
	}
}

// A new SQLite store is readable by its owner only: it holds arguments, results and the audit.
func TestNewSQLiteStoreIsOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", "airlock.db")
	st, err := Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			continue // no WAL file yet
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
}

// A PostgreSQL URL gets lib/pq's one-round-trip mode unless it chooses for itself; the rest of
// the URL (a percent-encoded password included) is kept.
func TestPostgresURLOneRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@h:5432/db", "postgres://u:p@h:5432/db?binary_parameters=yes"},
		{"postgres://u:p%40ss@h/db?sslmode=disable", "postgres://u:p%40ss@h/db?sslmode=disable&binary_parameters=yes"},
		{"postgres://h/db?binary_parameters=no", "postgres://h/db?binary_parameters=no"},
	} {
		_, dsn, where, err := parseURL(tc.in, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if dsn != tc.want {
			t.Errorf("%s: dsn %s, want %s", tc.in, dsn, tc.want)
		}
		if strings.Contains(where, "binary_parameters") && !strings.Contains(tc.in, "binary_parameters") {
			t.Errorf("%s: shown as %s: the added option is not the user's", tc.in, where)
		}
	}
}
