// Package store is Airlock's durable state: the audit log, confirmations
// (hashed single-use tokens), the execution ledger that makes effects run at
// most once, and conversation state (turn sequence, durable context, turn
// results).
//
// One sqlx-based implementation serves two drivers: PostgreSQL (lib/pq) for
// production and tests, and an embedded SQLite file (modernc.org/sqlite, pure
// Go) as the zero-setup default. Every query is written once with `?`
// placeholders and passed through sqlx.Rebind. Schema changes are embedded SQL
// migrations under migrations/<driver>/NNNN_name.sql, applied by Open, tracked
// in schema_migrations and serialized between processes (a transaction-scoped
// pg_advisory_xact_lock on PostgreSQL, a BEGIN IMMEDIATE transaction on
// SQLite), so concurrent Opens are safe and a second Open is a no-op.
//
// Timestamps: every time the store writes is converted to UTC and truncated to
// microseconds, and is written as fixed-width RFC 3339 text
// "2006-01-02T15:04:05.000000Z" (TIMESTAMPTZ on PostgreSQL, TEXT on SQLite,
// where that form sorts in time order). Every time the store reads is in UTC.
// A value therefore round-trips identically on both drivers: what comes back
// equals t.UTC().Truncate(time.Microsecond).
//
// Idempotency is the rule throughout: audit rows are keyed, confirmations and
// executions are keyed by the caller's deterministic identity, and a retry
// (activity retry, workflow replay) never creates a second row.
package store

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"  // registers driver "postgres"
	_ "modernc.org/sqlite" // registers driver "sqlite"
)

// Driver names returned by (*Store).Driver.
const (
	// DriverSQLite is the embedded SQLite driver (modernc.org/sqlite).
	DriverSQLite = "sqlite"
	// DriverPostgres is the PostgreSQL driver (github.com/lib/pq).
	DriverPostgres = "postgres"
)

// DefaultSQLitePath is the SQLite file Open uses when the URL is empty,
// relative to the working directory. Its directory is created (mode 0700) if
// missing.
const DefaultSQLitePath = ".airlock/airlock.db"

// sqlitePragmas are appended to every SQLite DSN: WAL so readers never block
// the writer, a 5 s busy timeout so a second process waits instead of failing
// with SQLITE_BUSY, foreign keys on, and IMMEDIATE transactions so a
// transaction takes the write lock at BEGIN (no lock-upgrade deadlock between
// processes).
const sqlitePragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
	"&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// migrationLockID is the PostgreSQL advisory lock key that serializes
// migrations between processes (an arbitrary constant: "airlock" in ASCII).
const migrationLockID int64 = 0x6169726c6f636b

// Sentinel errors. Callers test them with errors.Is; returned errors usually
// wrap them with the id or key involved.
var (
	// ErrNotFound: the requested row (confirmation, execution, turn result)
	// does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrTokenUnknown: ConsumeToken found no confirmation with this token hash.
	ErrTokenUnknown = errors.New("store: confirmation token unknown")
	// ErrTokenConsumed: ConsumeToken found the confirmation, but its token had
	// already been consumed (tokens are single-use, successful or not).
	ErrTokenConsumed = errors.New("store: confirmation token already consumed")
	// ErrConflict: a final state was already recorded and differs from the one
	// requested (DecideConfirmation with another decision, FinishExecution
	// with another state). The first recorded state stands.
	ErrConflict = errors.New("store: conflicting final state")
)

//go:embed migrations
var migrationsFS embed.FS

// Store is a handle on Airlock's database. It is safe for concurrent use by
// many goroutines. Create it with Open and release it with Close.
type Store struct {
	db     *sqlx.DB
	driver string
}

// Open connects to the database named by url, applies any pending embedded
// migrations, and returns the Store.
//
// Accepted url forms:
//   - "" — SQLite file DefaultSQLitePath (".airlock/airlock.db"); the
//     directory is created if missing.
//   - "sqlite:PATH" (also "sqlite://PATH") — SQLite file PATH; its parent
//     directory is created if missing. A "?query" suffix is passed to the
//     driver after the store's own pragmas.
//   - "file:PATH" — SQLite URI filename, passed to SQLite as a URI (so SQLite
//     URI parameters such as mode= apply); parent directory created likewise.
//   - "postgres://…" or "postgresql://…" — PostgreSQL via lib/pq. Run-time
//     parameters such as search_path may be given as query parameters.
//
// SQLite connections use WAL, busy_timeout=5000, foreign_keys=1 and
// IMMEDIATE transactions, and the pool is limited to one connection, so
// writers inside this process queue instead of failing with SQLITE_BUSY.
//
// Errors are wrapped with "store: " and the driver and (password-redacted)
// location: an unsupported scheme, an unreachable server, or a failed
// migration (naming the migration file) all fail Open, and no Store is
// returned.
func Open(ctx context.Context, url string) (*Store, error) {
	driver, dsn, where, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s %s: %w", driver, where, err)
	}
	if driver == DriverSQLite {
		db.SetMaxOpenConns(1)
	} else {
		// A new PostgreSQL connection costs 0.1-0.4 s here; keep a warm pool so 16 turns in
		// flight never dial per statement (database/sql keeps only 2 idle by default).
		db.SetMaxOpenConns(PostgresPoolSize)
		db.SetMaxIdleConns(PostgresPoolSize)
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: connect to %s %s: %w", driver, where, err)
	}
	s := &Store{db: db, driver: driver}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrate %s %s: %w", driver, where, err)
	}
	return s, nil
}

// PostgresPoolSize bounds (and keeps warm) the PostgreSQL connections of one Store.
const PostgresPoolSize = 16

// parseURL maps an Open url to (driver, DSN, human-readable location).
func parseURL(raw string) (driver, dsn, where string, err error) {
	switch {
	case raw == "":
		if err := os.MkdirAll(filepath.Dir(DefaultSQLitePath), 0o700); err != nil {
			return "", "", "", fmt.Errorf("store: create directory for %s: %w", DefaultSQLitePath, err)
		}
		return DriverSQLite, DefaultSQLitePath + "?" + sqlitePragmas, DefaultSQLitePath, nil
	case strings.HasPrefix(raw, "sqlite:"), strings.HasPrefix(raw, "file:"):
		uri := strings.HasPrefix(raw, "file:")
		rest := strings.TrimPrefix(strings.TrimPrefix(raw, "sqlite:"), "file:")
		p, query, _ := strings.Cut(rest, "?")
		p = strings.TrimPrefix(p, "//") // sqlite:///abs/path, file:///abs/path
		if p == "" {
			return "", "", "", fmt.Errorf("store: database URL %q names no SQLite file", raw)
		}
		if p != ":memory:" {
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return "", "", "", fmt.Errorf("store: create directory for SQLite file %s: %w", p, err)
			}
		}
		dsn = p + "?" + sqlitePragmas
		if uri {
			dsn = "file:" + dsn
		}
		if query != "" {
			dsn += "&" + query
		}
		return DriverSQLite, dsn, p, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		where = "(unparseable URL)"
		if u, perr := url.Parse(raw); perr == nil {
			where = u.Redacted()
		}
		return DriverPostgres, raw, where, nil
	default:
		scheme, _, _ := strings.Cut(raw, ":")
		return "", "", "", fmt.Errorf(`store: unsupported database URL scheme %q: want "" (default SQLite file), "sqlite:PATH", "file:PATH", "postgres://…" or "postgresql://…"`, scheme)
	}
}

// Close closes the database. The Store must not be used afterwards.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks that the database is reachable (one round trip).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping %s: %w", s.driver, err)
	}
	return nil
}

// Driver reports which driver the Store uses: DriverSQLite ("sqlite") or
// DriverPostgres ("postgres").
func (s *Store) Driver() string { return s.driver }

// q rebinds a `?`-placeholder query for the Store's driver.
func (s *Store) q(query string) string { return s.db.Rebind(query) }

// ---- migrations ----

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the embedded migrations for driver, ordered by
// version. File names are NNNN_description.sql; versions must be unique.
// dialects maps the placeholders of the one set of migrations to each driver's SQL.
var dialects = map[string]*strings.Replacer{
	DriverPostgres: strings.NewReplacer(
		"{{id}}", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
		"{{time}}", "TIMESTAMPTZ", "{{bytes}}", "BYTEA", "{{json}}", "JSON", " {{table}}", ""),
	DriverSQLite: strings.NewReplacer(
		"{{id}}", "INTEGER PRIMARY KEY AUTOINCREMENT",
		"{{time}}", "TEXT", "{{bytes}}", "BLOB", "{{json}}", "TEXT", "{{table}}", "STRICT"),
}

// loadMigrations reads the one set of embedded migrations (migrations/NNNN_name.sql) and
// renders it in driver's dialect. A placeholder left unrendered is an error.
func loadMigrations(driver string) ([]migration, error) {
	dialect, ok := dialects[driver]
	if !ok {
		return nil, fmt.Errorf("no SQL dialect for driver %q", driver)
	}
	entries, err := fs.ReadDir(migrationsFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_description.sql", e.Name())
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migration files %s and %s share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		body, err := migrationsFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		sql := dialect.Replace(stripComments(string(body)))
		if strings.Contains(sql, "{{") {
			return nil, fmt.Errorf("migration file %s: unknown placeholder in %q", e.Name(), sql[strings.Index(sql, "{{"):])
		}
		out = append(out, migration{version: v, name: e.Name(), sql: sql})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// stripComments drops whole-line "--" comments (they document the placeholders).
func stripComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

var createSchemaMigrations = map[string]string{
	DriverPostgres: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)`,
	DriverSQLite: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT`,
}

// migrate applies pending migrations in one transaction that first takes the
// cross-process migration lock, so two processes opening at once apply each
// migration exactly once; the loser sees them recorded and applies nothing.
// Versions recorded in the database but unknown to this binary (a newer
// binary migrated first) are left alone.
func (s *Store) migrate(ctx context.Context) error {
	migs, err := loadMigrations(s.driver)
	if err != nil {
		return fmt.Errorf("load embedded migrations: %w", err)
	}
	tx, err := s.db.BeginTxx(ctx, nil) // SQLite: BEGIN IMMEDIATE (write lock now)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if s.driver == DriverPostgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockID); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, createSchemaMigrations[s.driver]); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var versions []int
	if err := tx.SelectContext(ctx, &versions, `SELECT version FROM schema_migrations`); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	for _, v := range versions {
		applied[v] = true
	}
	for _, m := range migs {
		if applied[m.version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("apply %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
			m.version, m.name, tsArg(time.Now())); err != nil {
			return fmt.Errorf("record %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ---- value conversion shared by both drivers ----

// timeLayout is the one stored form of a timestamp: UTC, microseconds, fixed
// width (so SQLite TEXT comparisons are time comparisons).
const timeLayout = "2006-01-02T15:04:05.000000Z"

// tsArg converts t to its stored form.
func tsArg(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(timeLayout)
}

// orNow returns t, or the current time when t is zero.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// dbTime scans a stored timestamp from either driver: time.Time (lib/pq
// TIMESTAMPTZ) or text (SQLite). NULL leaves Valid false.
type dbTime struct {
	Time  time.Time
	Valid bool
}

// Scan implements sql.Scanner.
func (d *dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d = dbTime{}
		return nil
	case time.Time:
		*d = dbTime{Time: v.UTC(), Valid: true}
		return nil
	case string:
		return d.parse(v)
	case []byte:
		return d.parse(string(v))
	default:
		return fmt.Errorf("store: cannot scan %T into a timestamp", src)
	}
}

func (d *dbTime) parse(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("store: bad stored timestamp %q: %w", s, err)
	}
	*d = dbTime{Time: t.UTC(), Valid: true}
	return nil
}

// ptr returns the time, or nil when NULL.
func (d dbTime) ptr() *time.Time {
	if !d.Valid {
		return nil
	}
	t := d.Time
	return &t
}

// jsonArg converts a JSON value to its stored form: text, or NULL when empty.
// Invalid JSON is an error on both drivers (SQLite would otherwise accept it).
func jsonArg(what string, m json.RawMessage) (any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	if !json.Valid(m) {
		return nil, fmt.Errorf("store: %s is not valid JSON", what)
	}
	return string(m), nil
}

// bytesArg converts a byte string to its stored form (NULL when empty).
func bytesArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// rawJSON converts a scanned JSON column to json.RawMessage (nil for NULL).
func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// notFound maps sql.ErrNoRows to ErrNotFound, describing what was missing.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: "+format, append([]any{ErrNotFound}, args...)...)
	}
	return fmt.Errorf("store: "+format+": %w", append(args, err)...)
}
