package store

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

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
// transactions (sqlx.Tx, unchanged) and QueryRowxContext (a row's error shows only when it is
// scanned, too late to run the statement again; the store reads one row through GetContext).
//
// Behaviour is the unprepared one's: the same results and errors.
//   - A statement PostgreSQL refuses to prepare runs unprepared, so its error is the query's.
//   - A prepared statement the server answers with an error (a *pq.Error: the statement failed
//     whole and, outside a transaction, left nothing behind) runs once more as written, and
//     the caller gets that run's result. If the second run succeeds, the cache was stale:
//     another process migrated the schema ("cached plan must not change result type", or
//     parameter types fixed before a column was widened), so every cached statement is
//     dropped and prepared again on next use. An error that is not the server's (a connection
//     lost mid-statement) is returned as it is: the statement may have run.
//   - A dropped statement is closed a minute later, never under a caller that just took it.
//
// A pooler that multiplexes sessions in transaction mode (PgBouncer before 1.21, or without
// max_prepared_statements) cannot keep a connection's prepared statements: turn them off with
// PrepareParam.
type preparedDB struct {
	*sqlx.DB
	prepare bool
	stmts   sync.Map // statement text → *sqlx.Stmt
	n       atomic.Int64
}

// closeDropped is how long a dropped statement stays open for callers that took it before it
// was dropped.
const closeDropped = time.Minute

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
	// Reserve a slot first, so racing first uses of new texts never cache more than the bound.
	if d.n.Add(1) > MaxPreparedStatements {
		d.n.Add(-1)
		return nil
	}
	st, err := d.DB.PreparexContext(ctx, query)
	if err != nil {
		d.n.Add(-1)
		return nil
	}
	if v, loaded := d.stmts.LoadOrStore(query, st); loaded {
		d.n.Add(-1)
		_ = st.Close() // never handed out
		return v.(*sqlx.Stmt)
	}
	return st
}

// serverError reports whether err is PostgreSQL's answer to the statement (which then failed
// whole), not a failure to reach it or to read its answer.
func serverError(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr)
}

// stale handles a prepared statement's server error once the statement, run again unprepared,
// succeeded: the cached statements no longer fit the schema, so all are dropped (closed after
// closeDropped) and prepared again on next use.
func (d *preparedDB) stale() {
	d.stmts.Range(func(k, v any) bool {
		if d.stmts.CompareAndDelete(k, v) {
			d.n.Add(-1)
			st := v.(*sqlx.Stmt)
			time.AfterFunc(closeDropped, func() { _ = st.Close() })
		}
		return true
	})
}

// retried runs query prepared (prepared) when it can and, after a server error, as written
// (plain), as preparedDB describes.
func (d *preparedDB) retried(ctx context.Context, query string, prepared func(*sqlx.Stmt) error, plain func() error) error {
	st := d.stmt(ctx, query)
	if st == nil {
		return plain()
	}
	err := prepared(st)
	if err == nil || !serverError(err) {
		return err
	}
	if err := plain(); err != nil {
		return err
	}
	d.stale()
	return nil
}

// ExecContext is sqlx.DB's, prepared (preparedDB).
func (d *preparedDB) ExecContext(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = d.retried(ctx, query,
		func(st *sqlx.Stmt) (err error) { res, err = st.ExecContext(ctx, args...); return err },
		func() (err error) { res, err = d.DB.ExecContext(ctx, query, args...); return err })
	return res, err
}

// QueryContext is sqlx.DB's, prepared (preparedDB). Only the query's own error is retried: one
// met while reading its rows is the caller's.
func (d *preparedDB) QueryContext(ctx context.Context, query string, args ...any) (rows *sql.Rows, err error) {
	err = d.retried(ctx, query,
		func(st *sqlx.Stmt) (err error) { rows, err = st.QueryContext(ctx, args...); return err },
		func() (err error) { rows, err = d.DB.QueryContext(ctx, query, args...); return err })
	return rows, err
}

// QueryxContext is sqlx.DB's, prepared (preparedDB), as QueryContext.
func (d *preparedDB) QueryxContext(ctx context.Context, query string, args ...any) (rows *sqlx.Rows, err error) {
	err = d.retried(ctx, query,
		func(st *sqlx.Stmt) (err error) { rows, err = st.QueryxContext(ctx, args...); return err },
		func() (err error) { rows, err = d.DB.QueryxContext(ctx, query, args...); return err })
	return rows, err
}

// QueryRowxContext is sqlx.DB's, unprepared: its error shows only when the row is scanned, too
// late to run the statement again (preparedDB). The store reads one row with GetContext.
func (d *preparedDB) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	return d.DB.QueryRowxContext(ctx, query, args...)
}

// GetContext is sqlx.DB's, prepared (preparedDB).
func (d *preparedDB) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	return d.retried(ctx, query,
		func(st *sqlx.Stmt) error { return st.GetContext(ctx, dest, args...) },
		func() error { return d.DB.GetContext(ctx, dest, query, args...) })
}

// SelectContext is sqlx.DB's, prepared (preparedDB); the run again starts from an empty dest.
func (d *preparedDB) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	return d.retried(ctx, query,
		func(st *sqlx.Stmt) error { return st.SelectContext(ctx, dest, args...) },
		func() error {
			if v := reflect.ValueOf(dest); v.Kind() == reflect.Pointer && !v.IsNil() {
				v.Elem().Set(reflect.Zero(v.Elem().Type()))
			}
			return d.DB.SelectContext(ctx, dest, query, args...)
		})
}

// getContext is GetContext on x: the store's prepared one on its handle, sqlx's on a
// transaction.
func getContext(ctx context.Context, x sqlx.QueryerContext, dest any, query string, args ...any) error {
	if d, ok := x.(*preparedDB); ok {
		return d.GetContext(ctx, dest, query, args...)
	}
	return sqlx.GetContext(ctx, x, dest, query, args...)
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
