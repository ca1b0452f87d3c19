package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
)

// DB is the database the console's decisions run on, and the one way they
// share a transaction: each decision, on a key or an operation, begins one
// transaction of the database's native type TTx (pgx.Tx on PostgreSQL,
// *sql.Tx on SQLite and MySQL), reads and checks the item on it, applies
// the engine's transition on it (the idempotency store bound to it, or the
// saga runner's …Tx method), writes the console store's rows of the
// decision on it (a bulk item's outcome, a tombstone), appends the audit
// entry on it, and commits: all of it or nothing. Build it with
// [Postgres], [SQLite] or [MySQL]; [NewKeys] and [NewOperations] take it.
// It is safe for concurrent use.
type DB[TTx any] struct {
	trail *audit.Trail
	// tx begins, ends and audits in TTx: pgxTx, sqliteTx or mysqlTx.
	tx dialect[TTx]
	// console is the console store's statements in TTx.
	console consoleTx[TTx]
	// log is where the decisions log what they could not audit.
	log *slog.Logger
	// events inserts the applied decisions' events, on eventQueue; nil
	// emits none ([DB.EmitEvents]).
	events     EventInserter[TTx]
	eventQueue string
}

// orDefaultLog is log, or slog.Default() when it is nil.
func orDefaultLog(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.Default()
	}
	return log
}

// dialect is what a database adds to a decision's transaction of type
// TTx: how it begins (isolation, locking), ends, and appends the audit
// entry in it. Implemented by pgxTx, sqliteTx and mysqlTx.
type dialect[TTx any] interface {
	begin(ctx context.Context) (TTx, error)
	commit(ctx context.Context, tx TTx) error
	rollback(ctx context.Context, tx TTx) error
	appendTx(ctx context.Context, tx TTx, e audit.Entry) (audit.Entry, error)
	// lastMarkedTx reads the newest applied entry on a target before
	// seq whose After has marker (audit.Trail.LastMarkedPgxTx).
	lastMarkedTx(ctx context.Context, tx TTx, kind, id, marker string, before int64) (audit.Marked, bool, error)
}

// consoleTx is the console store's statements in a decision's transaction:
// store.PgxTx on PostgreSQL, store.SQLTx on SQLite and MySQL.
type consoleTx[TTx any] interface {
	MarkBulkItemTx(ctx context.Context, tx TTx, id int64, seq int, outcome, detail string) (bool, error)
	AddTombstoneTx(ctx context.Context, tx TTx, t store.Tombstone) error
}

// Postgres returns the decisions on pool: READ COMMITTED transactions
// (which the audit append requires), audited with trail.AppendPgxTx, the
// console's rows written with console.PgxTx. trail and console must be
// PostgreSQL ones on the same database. The decisions log to log (nil:
// slog.Default()) the audit entries of refusals they failed to append.
func Postgres(pool *pgxpool.Pool, trail *audit.Trail, console *store.DB, log *slog.Logger) (*DB[pgx.Tx], error) {
	if pool == nil || trail == nil || console == nil {
		return nil, errors.New("ops: decisions need a pool, an audit trail and the console store")
	}
	if trail.Dialect() != audit.DialectPostgres || console.Dialect() != store.DialectPostgres {
		return nil, errors.New("ops: decisions on PostgreSQL need a PostgreSQL audit trail and console store")
	}
	return &DB[pgx.Tx]{trail: trail, log: orDefaultLog(log), tx: pgxTx{pool: pool, trail: trail}, console: console.PgxTx()}, nil
}

// pgxTx is the dialect of [Postgres].
type pgxTx struct {
	pool  *pgxpool.Pool
	trail *audit.Trail
}

func (d pgxTx) begin(ctx context.Context) (pgx.Tx, error) {
	return d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
}

func (pgxTx) commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }

func (pgxTx) rollback(ctx context.Context, tx pgx.Tx) error {
	// A connection that pgx closed (a cancelled statement) took its
	// transaction with it; its rollback error says nothing more.
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) && !tx.Conn().IsClosed() {
		return err
	}
	return nil
}

func (d pgxTx) appendTx(ctx context.Context, tx pgx.Tx, e audit.Entry) (audit.Entry, error) {
	return d.trail.AppendPgxTx(ctx, tx, e)
}

func (d pgxTx) lastMarkedTx(ctx context.Context, tx pgx.Tx, kind, id, marker string, before int64) (audit.Marked, bool, error) {
	return d.trail.LastMarkedPgxTx(ctx, tx, kind, id, marker, before)
}

// SQLite returns the decisions on db, audited with trail.AppendSQLiteTx,
// the console's rows written with console.SQLTx. trail and console must be
// SQLite ones on the same file. db must begin its transactions IMMEDIATE,
// as a handle from [OpenImmediate] does, so that a decision holds the
// write lock from its first read to its commit: a deferred transaction
// that read, then writes after another connection's commit, fails with
// SQLITE_BUSY whatever the busy timeout. log is as for [Postgres].
func SQLite(db *sql.DB, trail *audit.Trail, console *store.DB, log *slog.Logger) (*DB[*sql.Tx], error) {
	if db == nil || trail == nil || console == nil {
		return nil, errors.New("ops: decisions need a database handle, an audit trail and the console store")
	}
	if trail.Dialect() != audit.DialectSQLite || console.Dialect() != store.DialectSQLite {
		return nil, errors.New("ops: decisions on SQLite need a SQLite audit trail and console store")
	}
	return &DB[*sql.Tx]{trail: trail, log: orDefaultLog(log), tx: sqliteTx{sqlTx{db: db}, trail}, console: console.SQLTx()}, nil
}

// sqlTx begins and ends the transactions of a database/sql handle with
// opts; sqliteTx and mysqlTx add their audit append.
type sqlTx struct {
	db   *sql.DB
	opts *sql.TxOptions
}

func (d sqlTx) begin(ctx context.Context) (*sql.Tx, error) {
	// database/sql rolls a transaction back when the ctx of its BeginTx
	// ends; the decision's statements still see ctx, its end does not.
	return d.db.BeginTx(context.WithoutCancel(ctx), d.opts)
}

func (sqlTx) commit(_ context.Context, tx *sql.Tx) error { return tx.Commit() }

func (sqlTx) rollback(_ context.Context, tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// sqliteTx is the dialect of [SQLite].
type sqliteTx struct {
	sqlTx
	trail *audit.Trail
}

func (d sqliteTx) appendTx(ctx context.Context, tx *sql.Tx, e audit.Entry) (audit.Entry, error) {
	return d.trail.AppendSQLiteTx(ctx, tx, e)
}

func (d sqliteTx) lastMarkedTx(ctx context.Context, tx *sql.Tx, kind, id, marker string, before int64) (audit.Marked, bool, error) {
	return d.trail.LastMarkedSQLTx(ctx, tx, kind, id, marker, before)
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
	tx, err := d.tx.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		if rerr := d.tx.rollback(context.WithoutCancel(ctx), tx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	done = true // a failed COMMIT ends the transaction too
	if err := d.tx.commit(context.WithoutCancel(ctx), tx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// appendTx appends e in tx, the decision's transaction: last, just before
// the commit, because the append serialises with every other append until
// the transaction ends.
func (d *DB[TTx]) appendTx(ctx context.Context, tx TTx, e audit.Entry) (audit.Entry, error) {
	return d.tx.appendTx(ctx, tx, e)
}

// bulkItem is a bulk request's item whose outcome a decision sets first in
// its transaction, so that it commits with the decision or not at all.
type bulkItem struct {
	bulk            int64
	seq             int
	outcome, detail string
}

// markItem sets the item's outcome in tx, if it is still pending; else it
// returns errAlreadyDecided (another run decided it) and the transaction
// must roll back. A nil it (a decision outside a bulk request) is a no-op.
func (d *DB[TTx]) markItem(ctx context.Context, tx TTx, it *bulkItem) error {
	if it == nil {
		return nil
	}
	ok, err := d.console.MarkBulkItemTx(ctx, tx, it.bulk, it.seq, it.outcome, it.detail)
	if err != nil {
		return err
	}
	if !ok {
		return errAlreadyDecided
	}
	return nil
}
