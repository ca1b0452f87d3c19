package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// DB is the database the console's decisions run on, and the one way they
// share a transaction: each decision, on a key or an operation, begins one
// transaction of the database's native type TTx (pgx.Tx on PostgreSQL,
// *sql.Tx on SQLite), reads and checks the item on it, applies the
// engine's transition on it (the idempotency store bound to it, or the
// saga runner's …Tx method), appends the audit entry on it, and commits:
// all of it or nothing. Build it with [Postgres] or [SQLite]; [NewKeys]
// and [NewOperations] take it. It is safe for concurrent use.
type DB[TTx any] struct {
	trail    *audit.Trail
	begin    func(ctx context.Context) (TTx, error)
	commit   func(ctx context.Context, tx TTx) error
	rollback func(ctx context.Context, tx TTx) error
	appendTx func(ctx context.Context, tx TTx, e audit.Entry) (audit.Entry, error)
}

// Postgres returns the decisions on pool: READ COMMITTED transactions
// (which the audit append requires), audited with trail.AppendPgxTx.
// trail must be a PostgreSQL trail on the same database.
func Postgres(pool *pgxpool.Pool, trail *audit.Trail) (*DB[pgx.Tx], error) {
	if pool == nil || trail == nil {
		return nil, errors.New("ops: decisions need a pool and an audit trail")
	}
	if trail.Dialect() != audit.DialectPostgres {
		return nil, errors.New("ops: decisions on PostgreSQL need a PostgreSQL audit trail")
	}
	return &DB[pgx.Tx]{
		trail: trail,
		begin: func(ctx context.Context) (pgx.Tx, error) {
			return pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		},
		commit: func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		rollback: func(ctx context.Context, tx pgx.Tx) error {
			// A connection that pgx closed (a cancelled statement) took its
			// transaction with it; its rollback error says nothing more.
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) && !tx.Conn().IsClosed() {
				return err
			}
			return nil
		},
		appendTx: trail.AppendPgxTx,
	}, nil
}

// SQLite returns the decisions on db, audited with trail.AppendSQLiteTx.
// trail must be a SQLite trail on the same file. db must begin its
// transactions IMMEDIATE, as a handle from [OpenImmediate] does, so that a
// decision holds the write lock from its first read to its commit: a
// deferred transaction that read, then writes after another connection's
// commit, fails with SQLITE_BUSY whatever the busy timeout.
func SQLite(db *sql.DB, trail *audit.Trail) (*DB[*sql.Tx], error) {
	if db == nil || trail == nil {
		return nil, errors.New("ops: decisions need a database handle and an audit trail")
	}
	if trail.Dialect() != audit.DialectSQLite {
		return nil, errors.New("ops: decisions on SQLite need a SQLite audit trail")
	}
	return &DB[*sql.Tx]{
		trail: trail,
		begin: func(ctx context.Context) (*sql.Tx, error) {
			// database/sql rolls a transaction back when the ctx of its
			// BeginTx ends; the decision's statements still see ctx, its
			// end does not.
			return db.BeginTx(context.WithoutCancel(ctx), nil)
		},
		commit: func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		rollback: func(_ context.Context, tx *sql.Tx) error {
			if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
				return err
			}
			return nil
		},
		appendTx: func(ctx context.Context, tx *sql.Tx, e audit.Entry) (audit.Entry, error) {
			return trail.AppendSQLiteTx(ctx, tx, e)
		},
	}, nil
}

// OpenImmediate opens a second handle on the SQLite file of db for
// decisions (and River): one connection, the pragmas of idemsqlite.Open
// (busy timeout, WAL, foreign keys, synchronous NORMAL) and
// _txlock=immediate, so that its write transactions take the write lock at
// BEGIN. Its read-only transactions (sql.TxOptions.ReadOnly) still begin
// deferred, and db is left as it is: ordinary reads never take the write
// lock. The caller closes the handle.
func OpenImmediate(ctx context.Context, db *sql.DB) (*sql.DB, error) {
	var path string
	if err := db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		return nil, fmt.Errorf("ops: sqlite file: %w", err)
	}
	if path == "" {
		return nil, errors.New("ops: decisions need an SQLite database file, not an in-memory one")
	}
	q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"}, "_txlock": {"immediate"}}
	dsn := (&url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}).String()
	imm, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("ops: open %s: %w", path, err)
	}
	// One connection: decisions of this process queue in the pool, not
	// in SQLite's busy handler (riversqlite gives the same advice).
	imm.SetMaxOpenConns(1)
	if err := imm.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("ops: open %s: %w", path, err), imm.Close())
	}
	return imm, nil
}

// within runs fn in one transaction of d and commits it if fn returns nil;
// otherwise, or if fn panics, it rolls back and returns fn's error. COMMIT
// and ROLLBACK run without ctx's cancellation, so that a cancelled request
// still ends the transaction and never leaves a commit in doubt by the
// cancellation alone.
func (d *DB[TTx]) within(ctx context.Context, fn func(ctx context.Context, tx TTx) error) (err error) {
	tx, err := d.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		if rerr := d.rollback(context.WithoutCancel(ctx), tx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	done = true // a failed COMMIT ends the transaction too
	if err := d.commit(context.WithoutCancel(ctx), tx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// txHook is a statement a decision runs first in its transaction, which it
// gets as a pgx.Tx or a *sql.Tx: a bulk item's outcome (store.DB's
// MarkBulkItemTx), so that it commits with the decision or not at all.
type txHook func(ctx context.Context, tx any) error

// txRunner runs fn in one transaction of a DB, with the audit append
// bound to it, and commits if fn returns nil.
type txRunner interface {
	run(ctx context.Context, fn func(ctx context.Context, tx any, appendEntry func(audit.Entry) error) error) error
}

func (d *DB[TTx]) run(ctx context.Context, fn func(ctx context.Context, tx any, appendEntry func(audit.Entry) error) error) error {
	return d.within(ctx, func(ctx context.Context, tx TTx) error {
		return fn(ctx, tx, func(e audit.Entry) error {
			_, err := d.appendTx(ctx, tx, e)
			return err
		})
	})
}
