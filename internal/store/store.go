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
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"  // registers driver "postgres"
	_ "modernc.org/sqlite" // registers driver "sqlite"

	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/redact"
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
const sqlitePragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" + sqliteConnPragmas

// sqliteExistingPragmas are OpenExisting's: the same without journal_mode, which writes to
// the file (an Airlock store is in WAL mode already; a file that is not one stays as it is).
const sqliteExistingPragmas = "_pragma=busy_timeout(5000)" + sqliteConnPragmas

// sqliteConnPragmas are the per-connection settings shared by both.
const sqliteConnPragmas = "&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"

// migrationLockID is the PostgreSQL advisory lock key that serializes
// migrations between processes (an arbitrary constant: "airlock" in ASCII).
const migrationLockID int64 = 0x6169726c6f636b

// Sentinel errors. Callers test them with errors.Is; returned errors usually
// wrap them with the id or key involved.
var (
	// ErrNotFound: the requested row (confirmation, execution, turn result)
	// does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrTokenConsumed: ConsumeToken found the confirmation, but its token had
	// already been consumed (tokens are single-use, successful or not).
	ErrTokenConsumed = errors.New("store: confirmation token already consumed")
	// ErrConflict: a final state was already recorded and differs from the one
	// requested (DecideConfirmation with another decision, FinishExecution
	// with another state). The first recorded state stands.
	ErrConflict = errors.New("store: conflicting final state")
	// ErrNoStore: OpenExisting found no Airlock store at the location: no SQLite file there,
	// or a database without Airlock's schema (no schema_migrations table). Nothing was
	// created.
	ErrNoStore = errors.New("store: no Airlock store")
	// ErrSchemaOutdated: OpenExisting found an Airlock store that lacks migrations this
	// binary needs; a worker (Open) of this version applies them.
	ErrSchemaOutdated = errors.New("store: the store's schema is older than this binary")
)

//go:embed migrations
var migrationsFS embed.FS

// Store is a handle on Airlock's database. It is safe for concurrent use by
// many goroutines. Create it with Open and release it with Close.
type Store struct {
	db     *preparedDB
	driver string
	dsn    string // the driver's connection string, for a PostgreSQL LISTEN connection (changes.go)
	// receiptKey signs the receipts log's checkpoints as records are sequenced (receipts.go);
	// the background sequencer runs once UseReceiptKey started it (seqOnce), woken by seqKick,
	// until Close closes seqStop and waits for seqDone.
	receiptKey atomic.Pointer[receipts.Signer]
	seqOnce    sync.Once
	stopOnce   sync.Once
	seqRunning atomic.Bool
	seqKick    chan struct{}
	seqStop    chan struct{}
	seqDone    chan struct{}
}

// Open connects to the database named by url, creating it when it does not exist, applies
// any pending embedded migrations, and returns the Store. Only commands that serve turns (the
// worker, the evaluation) create the store; every other command opens it with OpenExisting.
//
// Accepted url forms:
//   - "" — SQLite file DefaultSQLitePath (".airlock/airlock.db"); the
//     directory is created if missing.
//   - "sqlite:PATH" (also "sqlite://PATH", so "sqlite:///ABSOLUTE/PATH") — SQLite file
//     PATH; its parent directory is created if missing. A "?query" suffix is passed to the
//     driver after the store's own pragmas. A PATH starting with "~" is refused (no shell
//     expands it here).
//   - "file:PATH" — SQLite URI filename, passed to SQLite as a URI (so SQLite
//     URI parameters such as mode= apply); parent directory created likewise.
//   - "postgres://…" or "postgresql://…" — PostgreSQL via lib/pq. Run-time
//     parameters such as search_path may be given as query parameters. Reserved characters
//     in the user name or password must be percent-encoded.
//
// Schemes are matched without regard to case; any other scheme is an error listing these
// forms.
//
// SQLite connections use WAL, busy_timeout=5000, foreign_keys=1 and
// IMMEDIATE transactions, and the pool is limited to one connection, so
// writers inside this process queue instead of failing with SQLITE_BUSY.
//
// Errors are wrapped with "store: " and the driver and location, redacted with
// redact.URL: an unsupported scheme, a PostgreSQL URL that does not parse, an
// unreachable server, or a failed migration (naming the migration file) all fail Open,
// and no Store is returned. No error ever holds the password or a secret query parameter
// of url: errors of url.Parse and of the driver, which may quote the URL, are never
// returned verbatim.
func Open(ctx context.Context, url string) (*Store, error) {
	return open(ctx, url, true)
}

// OpenExisting is Open for commands that must find an existing store (airlock pending,
// audit, turn show, approve, deny, turn start): it never creates a SQLite file or its
// directory, never creates a table and applies no migration.
//
// Errors: ErrNoStore (wrapped with the location) when the SQLite file does not exist or the
// database has no Airlock schema (no schema_migrations table, as in an empty PostgreSQL
// database or an empty SQLite file); ErrSchemaOutdated when the store lacks migrations
// this binary needs (a worker of this version applies them). Other errors are Open's.
func OpenExisting(ctx context.Context, url string) (*Store, error) {
	return open(ctx, url, false)
}

// sqliteBusyWait bounds how long ping retries a SQLite connect that found the file locked.
const sqliteBusyWait = 10 * time.Second

// ping opens the first connection. On SQLite, a connection's journal_mode(WAL) pragma can be
// answered SQLITE_BUSY at once, without the busy timeout, while other processes open the same
// new file (SQLite refuses to wait there to avoid a deadlock): ping retries that, with backoff
// from 5 ms to 200 ms, for up to sqliteBusyWait, so concurrent first opens (a worker and the
// page starting together) all succeed.
func ping(ctx context.Context, db *sqlx.DB, driver string) error {
	deadline := time.Now().Add(sqliteBusyWait)
	wait := 5 * time.Millisecond
	for {
		err := db.PingContext(ctx)
		if err == nil || driver != DriverSQLite || !sqliteBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// sqliteBusy reports whether err is SQLite's "database is locked" (SQLITE_BUSY, code 5).
func sqliteBusy(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// open implements Open (create) and OpenExisting (!create).
func open(ctx context.Context, rawURL string, create bool) (*Store, error) {
	driver, dsn, where, err := parseURL(rawURL, create)
	if err != nil {
		return nil, err
	}
	secrets := redact.URLSecrets(rawURL)
	prepare := false
	if driver == DriverPostgres {
		if dsn, prepare, err = PrepareOption(dsn); err != nil {
			return nil, redact.Error(fmt.Errorf("store: %s: %w", where, err), secrets...)
		}
	}
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		return nil, redact.Error(fmt.Errorf("store: open %s %s: %w", driver, where, err), secrets...)
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
	if err := ping(ctx, db, driver); err != nil {
		db.Close()
		return nil, redact.Error(fmt.Errorf("store: connect to %s %s: %w", driver, where, err), secrets...)
	}
	s := &Store{db: newPreparedDB(db, prepare), driver: driver, dsn: dsn,
		seqKick: make(chan struct{}, 1), seqStop: make(chan struct{}), seqDone: make(chan struct{})}
	if create {
		err = s.migrate(ctx)
	} else {
		err = s.checkSchema(ctx, driver+" "+where)
	}
	if errors.Is(err, ErrNoStore) || errors.Is(err, ErrSchemaOutdated) {
		db.Close()
		return nil, redact.Error(err, secrets...)
	}
	if err != nil {
		db.Close()
		return nil, redact.Error(fmt.Errorf("store: migrate %s %s: %w", driver, where, err), secrets...)
	}
	return s, nil
}

// PostgresPoolSize bounds (and keeps warm) the PostgreSQL connections of one Store.
const PostgresPoolSize = 16

// acceptedForms lists the url forms Open accepts, for error messages.
const acceptedForms = `want "" (default SQLite file), "sqlite:PATH" or "sqlite:///ABSOLUTE/PATH", ` +
	`"file:PATH", or "postgres://USER:PASSWORD@HOST:PORT/DATABASE" ("postgresql://" alike)`

// parseURL maps an Open url to (driver, DSN, human-readable location). With create, a
// missing SQLite directory is created; without it, a missing SQLite file is ErrNoStore. The
// location and every error are redacted (redact.URL).
func parseURL(raw string, create bool) (driver, dsn, where string, err error) {
	scheme, rest, _ := strings.Cut(raw, ":")
	scheme = strings.ToLower(scheme)
	switch {
	case raw == "":
		return sqliteDSN(DefaultSQLitePath, "", false, create)
	case scheme == "sqlite" || scheme == "file":
		p, query, _ := strings.Cut(rest, "?")
		p = strings.TrimPrefix(p, "//") // sqlite:///abs/path, file:///abs/path
		if p == "" {
			return "", "", "", fmt.Errorf("store: database URL %s names no SQLite file: %s", redact.URL(raw), acceptedForms)
		}
		return sqliteDSN(p, query, scheme == "file", create)
	case scheme == "postgres" || scheme == "postgresql":
		where = redact.URL(raw)
		if !strings.HasPrefix(rest, "//") {
			return "", "", "", fmt.Errorf("store: PostgreSQL URL %s lacks \"//\" after the scheme: %s", where, acceptedForms)
		}
		if err := checkPostgresURL(raw); err != nil {
			return "", "", "", fmt.Errorf("store: PostgreSQL URL %s does not parse: %s; "+
				"percent-encode reserved characters (@ : / ? # %% [ ] and spaces) in the user name and password", where, err)
		}
		return DriverPostgres, withOneRoundTrip(raw), where, nil
	default:
		shown := redact.URL(raw)
		if s, _, ok := strings.Cut(shown, ":"); ok && !strings.HasPrefix(shown, redact.Mask) {
			return "", "", "", fmt.Errorf("store: unsupported database URL scheme %q in %s: %s", s, shown, acceptedForms)
		}
		return "", "", "", fmt.Errorf("store: the database URL is not a URL (not shown: it may hold a password): %s", acceptedForms)
	}
}

// PrepareParam is the PostgreSQL URL query parameter that turns the store's prepared
// statements (preparedDB) off: airlock_prepare=off. Airlock reads and removes it; "on", the
// default, keeps them. Set it off behind a pooler that cannot keep a connection's prepared
// statements (PgBouncer in transaction mode before 1.21, or with max_prepared_statements=0):
// there lib/pq's statement names ("1", "2", …) could reach another client's server connection.
const PrepareParam = "airlock_prepare"

// PrepareOption reads and removes PrepareParam from the PostgreSQL URL raw, keeping the rest of
// its query as written: dsn is the URL for lib/pq, prepare whether the store prepares its
// statements (true unless the parameter says off). Anything else that connects with lib/pq
// to the same URL strips it the same way. Errors: a value other than on or off (the value is
// not quoted: it sits in a URL that may hold a password).
func PrepareOption(raw string) (dsn string, prepare bool, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return raw, true, nil
	}
	prepare = true
	var kept []string
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if key, kerr := url.QueryUnescape(k); kerr != nil || key != PrepareParam {
			kept = append(kept, kv)
			continue
		}
		val, verr := url.QueryUnescape(v)
		if verr != nil {
			return "", false, fmt.Errorf("%s must be on or off (its value is not percent-encoded right)", PrepareParam)
		}
		switch strings.ToLower(val) {
		case "on", "":
			prepare = true
		case "off":
			prepare = false
		default:
			return "", false, fmt.Errorf("%s must be on or off", PrepareParam)
		}
	}
	u.RawQuery = strings.Join(kept, "&")
	return u.String(), prepare, nil
}

// withOneRoundTrip turns on lib/pq's binary_parameters unless the URL sets it: a statement with
// arguments is then parsed, bound and executed in one round trip instead of two (lib/pq
// otherwise prepares the unnamed statement and waits for its description first). A turn runs
// about 50 such statements, so this is a round trip saved on each. The store's values all
// survive it: []byte goes to BYTEA and JSON columns as the raw bytes (their binary forms),
// everything else is sent as text as before.
func withOneRoundTrip(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Query().Has("binary_parameters") {
		return raw
	}
	if u.RawQuery == "" {
		u.RawQuery = "binary_parameters=yes"
	} else {
		u.RawQuery += "&binary_parameters=yes"
	}
	return u.String()
}

// sqliteDSN builds the DSN of SQLite file p (a SQLite URI path when uri is set) with the
// store's pragmas and the caller's extra query. With create, p's directory is created;
// without it, p must be an existing regular file and the DSN forbids SQLite to create it
// (mode=rw), so a path mistyped between the check and the open still creates nothing.
func sqliteDSN(p, query string, uri, create bool) (driver, dsn, where string, err error) {
	where = p
	if strings.HasPrefix(p, "~") {
		return "", "", "", fmt.Errorf("store: SQLite path %s starts with \"~\", which is not expanded here: use an absolute path or $HOME", p)
	}
	memory := p == ":memory:"
	fsPath := p
	if uri {
		if u, err := url.PathUnescape(p); err == nil {
			fsPath = u
		}
	}
	switch {
	case create && !memory:
		if err := os.MkdirAll(filepath.Dir(fsPath), 0o700); err != nil {
			return "", "", "", fmt.Errorf("store: create directory for SQLite file %s: %w", p, err)
		}
		// The store holds arguments, results and the audit: a new file is its owner's alone
		// (an empty file is an empty SQLite database; its -wal and -shm files take its mode).
		if f, err := os.OpenFile(fsPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
		} else if !errors.Is(err, fs.ErrExist) {
			return "", "", "", fmt.Errorf("store: create SQLite file %s: %w", p, err)
		}
	case !create && memory:
		return "", "", "", fmt.Errorf("%w at %s: an in-memory SQLite database is always empty", ErrNoStore, p)
	case !create:
		abs, _ := filepath.Abs(fsPath)
		st, err := os.Stat(fsPath)
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", "", fmt.Errorf("%w at %s%s: the SQLite file does not exist", ErrNoStore, p, absNote(p, abs))
		} else if err != nil {
			return "", "", "", fmt.Errorf("store: SQLite file %s: %w", p, err)
		} else if !st.Mode().IsRegular() {
			return "", "", "", fmt.Errorf("%w at %s%s: it is a %s, not a SQLite file", ErrNoStore, p, absNote(p, abs), fileKind(st.Mode()))
		}
		if err := checkSQLiteHeader(fsPath); err != nil {
			return "", "", "", fmt.Errorf("%w at %s%s: %w", ErrNoStore, p, absNote(p, abs), err)
		}
		// Open through a URI with mode=rw: SQLite then never creates the file.
		if !uri {
			p = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
		}
		dsn = "file:" + p + "?mode=rw&" + sqliteExistingPragmas
		if query != "" {
			dsn += "&" + query
		}
		return DriverSQLite, dsn, where, nil
	}
	dsn = p + "?" + sqlitePragmas
	if uri {
		dsn = "file:" + dsn
	}
	if query != "" {
		dsn += "&" + query
	}
	return DriverSQLite, dsn, where, nil
}

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// checkSQLiteHeader reports a file that is not a SQLite database (an empty file left by a
// mistyped path, a text file): SQLite would otherwise initialize it on first write.
func checkSQLiteHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, len(sqliteHeader))
	if n, _ := io.ReadFull(f, buf); n == 0 {
		return errors.New("the file is empty")
	} else if string(buf[:n]) != sqliteHeader {
		return errors.New("the file is not a SQLite database")
	}
	return nil
}

// absNote is " (ABS)" when abs differs from p, so a relative path names where it was looked for.
func absNote(p, abs string) string {
	if abs == "" || abs == p {
		return ""
	}
	return " (" + abs + ")"
}

func fileKind(m fs.FileMode) string {
	if m.IsDir() {
		return "directory"
	}
	return "special file"
}

// checkPostgresURL reports what is wrong with a postgres:// URL in words of its own: the
// errors of url.Parse quote the URL (password included), so they are never passed on. An
// '@' after a '/', '?' or '#' means a user name or password with an unencoded reserved
// character: lib/pq would connect somewhere else and might echo part of the password.
func checkPostgresURL(raw string) error {
	rest := raw[strings.Index(raw, "://")+3:]
	if i := strings.LastIndexByte(rest, '@'); i >= 0 && strings.ContainsAny(rest[:i], "/?#") {
		return errors.New("an '@' after the host")
	}
	_, err := url.Parse(raw)
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, p := range []struct{ match, say string }{
		{"invalid port", "an invalid port (a ':' in the host part)"},
		{"invalid URL escape", "a malformed %-escape"},
		{"invalid userinfo", "invalid characters in the user name or password"},
		{"control character", "a control character"},
		{"missing ']'", "an unclosed '[' in the host"},
		{"invalid character", "an invalid character in the host"},
	} {
		if strings.Contains(msg, p.match) {
			return errors.New(p.say)
		}
	}
	return errors.New("a malformed URL")
}

// Close closes the database. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.seqOnce.Do(func() {}) // no sequencer starts after Close
	s.stopOnce.Do(func() { close(s.seqStop) })
	if s.seqRunning.Load() {
		<-s.seqDone
	}
	return s.db.Close()
}

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
		"{{time}}", "TIMESTAMPTZ", "{{bytes}}", "BYTEA", "{{bigint}}", "BIGINT", "{{json}}", "JSON", " {{table}}", ""),
	DriverSQLite: strings.NewReplacer(
		"{{id}}", "INTEGER PRIMARY KEY AUTOINCREMENT",
		"{{time}}", "TEXT", "{{bytes}}", "BLOB", "{{bigint}}", "INTEGER", "{{json}}", "TEXT", "{{table}}", "STRICT"),
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

// schemaTableQuery counts the schema_migrations table of the store's schema (search_path
// on PostgreSQL): 0 means the database holds no Airlock store.
var schemaTableQuery = map[string]string{
	DriverPostgres: `SELECT count(*) FROM (SELECT to_regclass('schema_migrations') AS t) r WHERE t IS NOT NULL`,
	DriverSQLite:   `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`,
}

// checkSchema is OpenExisting's migrate: it only reads. ErrNoStore when the database has no
// schema_migrations table; ErrSchemaOutdated when an embedded migration is not applied. where
// (driver and redacted location) names the store in those two errors.
func (s *Store) checkSchema(ctx context.Context, where string) error {
	migs, err := loadMigrations(s.driver)
	if err != nil {
		return fmt.Errorf("load embedded migrations: %w", err)
	}
	var n int
	if err := s.db.GetContext(ctx, &n, schemaTableQuery[s.driver]); err != nil {
		return fmt.Errorf("look for schema_migrations: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w at %s: the database has no Airlock tables (no schema_migrations)", ErrNoStore, where)
	}
	var versions []int
	if err := s.db.SelectContext(ctx, &versions, `SELECT version FROM schema_migrations`); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	for _, v := range versions {
		applied[v] = true
	}
	var missing []string
	for _, m := range migs {
		if !applied[m.version] {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s lacks %s; start a worker of this version to migrate it", ErrSchemaOutdated, where, strings.Join(missing, ", "))
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

// UnmarshalJSON reads a timestamp from JSON (PostgreSQL's row_to_json of a TIMESTAMPTZ: RFC
// 3339 text; null leaves Valid false).
func (d *dbTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = dbTime{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("store: timestamp %s is not a JSON string", b)
	}
	return d.parse(s)
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
