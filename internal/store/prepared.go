package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// MaxPreparedStatements bounds the statements a Store keeps prepared (preparedDB). The store
// runs about 80 distinct statement texts; a text built with a variable number of rows (a batch
// insert of n context entries) is one more each n, so the bound keeps a pool's prepared
// statements, on the client and on each PostgreSQL connection, from growing without end.
// Statements past it run unprepared.
const MaxPreparedStatements = 256

// preparedDB is the store's database handle: a *sqlx.DB whose statements outside transactions
// run as prepared statements on PostgreSQL, each text prepared once per pooled connection
// (database/sql prepares a *sql.Stmt on each connection it runs on) and then only bound and
// executed. PostgreSQL otherwise parses, analyses and plans every statement of lib/pq's
// unnamed-statement protocol each time; a turn runs about 28 statements, most of them the same
// few texts (issue 20, item 3: the store's share of a turn's CPU). SQLite runs every statement
// as before (one connection, in-process: nothing to save), and so do statements in
// transactions (sqlx.Tx, unchanged).
//
// Behaviour is the unprepared one's: the same results and errors. A statement whose prepare
// fails runs unprepared, so its error is the one the query itself reports; one whose cached
// plan went stale (PostgreSQL's "cached plan must not change result type", after another
// process migrated the schema) is dropped and run once more unprepared.
//
// A pooler that multiplexes sessions in transaction mode (PgBouncer before 1.21, or without
// max_prepared_statements) cannot keep a connection's prepared statements: point Airlock at
// PostgreSQL or a session-mode pool.
type preparedDB struct {
	*sqlx.DB
	prepare bool
	stmts   sync.Map // statement text → *sqlx.Stmt
	n       atomic.Int64
}

// newPreparedDB wraps db; prepare is false for SQLite.
func newPreparedDB(db *sqlx.DB, prepare bool) *preparedDB {
	return &preparedDB{DB: db, prepare: prepare}
}

// stmt returns the prepared statement of query, preparing it on first use; nil when the
// statement runs unprepared (SQLite, the bound reached, or a prepare that failed).
func (d *preparedDB) stmt(ctx context.Context, query string) *sqlx.Stmt {
	if !d.prepare {
		return nil
	}
	if v, ok := d.stmts.Load(query); ok {
		return v.(*sqlx.Stmt)
	}
	if d.n.Load() >= MaxPreparedStatements {
		return nil
	}
	st, err := d.DB.PreparexContext(ctx, query)
	if err != nil {
		return nil
	}
	if v, loaded := d.stmts.LoadOrStore(query, st); loaded {
		_ = st.Close()
		return v.(*sqlx.Stmt)
	}
	d.n.Add(1)
	return st
}

// stale reports whether err says the statement's cached plan no longer fits the schema; the
// statement is dropped from the cache so the next use prepares it again.
func (d *preparedDB) stale(query string, err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "0A000" || !strings.Contains(pqErr.Message, "cached plan") {
		return false
	}
	if v, ok := d.stmts.LoadAndDelete(query); ok {
		d.n.Add(-1)
		_ = v.(*sqlx.Stmt).Close()
	}
	return true
}

// ExecContext is sqlx.DB's, prepared (preparedDB).
func (d *preparedDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := d.stmt(ctx, query); st != nil {
		res, err := st.ExecContext(ctx, args...)
		if err == nil || !d.stale(query, err) {
			return res, err
		}
	}
	return d.DB.ExecContext(ctx, query, args...)
}

// QueryContext is sqlx.DB's, prepared (preparedDB).
func (d *preparedDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := d.stmt(ctx, query); st != nil {
		rows, err := st.QueryContext(ctx, args...)
		if err == nil || !d.stale(query, err) {
			return rows, err
		}
	}
	return d.DB.QueryContext(ctx, query, args...)
}

// QueryxContext is sqlx.DB's, prepared (preparedDB).
func (d *preparedDB) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	if st := d.stmt(ctx, query); st != nil {
		rows, err := st.QueryxContext(ctx, args...)
		if err == nil || !d.stale(query, err) {
			return rows, err
		}
	}
	return d.DB.QueryxContext(ctx, query, args...)
}

// QueryRowxContext is sqlx.DB's, prepared (preparedDB). A row's error shows only when it is
// scanned, so a stale plan is not retried here: GetContext (through QueryxContext) is.
func (d *preparedDB) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	if st := d.stmt(ctx, query); st != nil {
		return st.QueryRowxContext(ctx, args...)
	}
	return d.DB.QueryRowxContext(ctx, query, args...)
}

// GetContext is sqlx.DB's, prepared (preparedDB).
func (d *preparedDB) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	if st := d.stmt(ctx, query); st != nil {
		err := st.GetContext(ctx, dest, args...)
		if err == nil || !d.stale(query, err) {
			return err
		}
	}
	return d.DB.GetContext(ctx, dest, query, args...)
}

// SelectContext is sqlx.DB's, prepared (preparedDB).
func (d *preparedDB) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	if st := d.stmt(ctx, query); st != nil {
		err := st.SelectContext(ctx, dest, args...)
		if err == nil || !d.stale(query, err) {
			return err
		}
	}
	return d.DB.SelectContext(ctx, dest, query, args...)
}

// Close closes the prepared statements and the pool.
func (d *preparedDB) Close() error {
	d.stmts.Range(func(k, v any) bool {
		_ = v.(*sqlx.Stmt).Close()
		d.stmts.Delete(k)
		return true
	})
	return d.DB.Close()
}
