package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/jackc/pgx/v5"
)

// The console store's statements that run in a caller's transaction: an
// operator decision's own (package ops), so that they commit with the
// decision and its audit entry or not at all. Each database's transaction
// type has its view, [DB.PgxTx] (PostgreSQL) and [DB.SQLTx] (SQLite,
// MySQL); both run the same statements.

// PgxTx is the console store's statements in a pgx.Tx of its pool.
type PgxTx struct{ d *DB }

// PgxTx returns d's statements in a pgx transaction; d must be a
// PostgreSQL store ([NewPostgres]) on the transaction's database.
func (d *DB) PgxTx() PgxTx { return PgxTx{d} }

// MarkBulkItemTx is [setBulkItem] in tx.
func (p PgxTx) MarkBulkItemTx(ctx context.Context, tx pgx.Tx, id int64, seq int, outcome, detail string) (bool, error) {
	return setBulkItem(ctx, p, tx, id, seq, outcome, detail)
}

// AddTombstoneTx is [insertTombstone] in tx.
func (p PgxTx) AddTombstoneTx(ctx context.Context, tx pgx.Tx, t Tombstone) error {
	return insertTombstone(ctx, p, tx, t)
}

func (p PgxTx) conn() bulkConn { return bulkConn(p) }

func (p PgxTx) exec(ctx context.Context, tx pgx.Tx, query string, args []any) (int64, error) {
	tag, err := tx.Exec(ctx, query, args...)
	if err != nil {
		return 0, pgMapError(err)
	}
	return tag.RowsAffected(), nil
}

// SQLTx is the console store's statements in a *sql.Tx of its handle.
type SQLTx struct{ d *DB }

// SQLTx returns d's statements in a database/sql transaction; d must be a
// SQLite or MySQL store ([NewSQLite], [NewMySQL]) on the transaction's
// database.
func (d *DB) SQLTx() SQLTx { return SQLTx{d} }

// MarkBulkItemTx is [setBulkItem] in tx.
func (s SQLTx) MarkBulkItemTx(ctx context.Context, tx *sql.Tx, id int64, seq int, outcome, detail string) (bool, error) {
	return setBulkItem(ctx, s, tx, id, seq, outcome, detail)
}

// AddTombstoneTx is [insertTombstone] in tx.
func (s SQLTx) AddTombstoneTx(ctx context.Context, tx *sql.Tx, t Tombstone) error {
	return insertTombstone(ctx, s, tx, t)
}

func (s SQLTx) conn() bulkConn { return bulkConn(s) }

func (s SQLTx) exec(ctx context.Context, tx *sql.Tx, query string, args []any) (int64, error) {
	q, a := bulkConn(s).sqlArgs(query, args)
	res, err := tx.ExecContext(ctx, q, a...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// txExec runs one statement, written with $n parameters, in a
// transaction of type TTx: PgxTx or SQLTx.
type txExec[TTx any] interface {
	conn() bulkConn
	exec(ctx context.Context, tx TTx, query string, args []any) (int64, error)
}

// setBulkItem sets the outcome of item seq of request id, if it is still
// pending, in tx: the decision's own transaction, so that the item's
// outcome commits with its decision or not at all. It reports false when
// the item was already decided: the caller must then roll back. On
// PostgreSQL the update locks the item's row, so a second run deciding the
// same item waits for the first one's transaction and then finds it
// decided.
func setBulkItem[TTx any](ctx context.Context, x txExec[TTx], tx TTx, id int64, seq int, outcome, detail string) (bool, error) {
	const upd = `UPDATE unstuck_console_bulk_item SET outcome = $3, detail = $4, decided_at = $5
WHERE bulk_id = $1 AND seq = $2 AND outcome = 'pending'`
	if len(detail) > 1000 {
		detail = detail[:1000]
	}
	n, err := x.exec(ctx, tx, upd, []any{id, seq, outcome, detail, x.conn().ts(time.Now())})
	if err != nil {
		return false, wrapBulk("mark bulk item", err)
	}
	return n == 1, nil
}

// insertTombstone records t in tx, the removing decision's own transaction,
// so that it commits with the decision or not at all. A record forgotten
// again (its ID reused by a store after a new first request) replaces its
// tombstone.
func insertTombstone[TTx any](ctx context.Context, x txExec[TTx], tx TTx, t Tombstone) error {
	const del = `DELETE FROM unstuck_console_tombstone WHERE record_id = $1`
	const ins = `INSERT INTO unstuck_console_tombstone (record_id, scope, operation, key_digest, key_hash, status, external_ref, action, actor, reason, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
	if len(t.Reason) > 4000 {
		t.Reason = t.Reason[:4000]
	}
	if _, err := x.exec(ctx, tx, del, []any{t.RecordID}); err != nil {
		return wrapBulk("add tombstone", err)
	}
	_, err := x.exec(ctx, tx, ins, []any{t.RecordID, t.Scope, t.Operation, t.KeyDigest, t.KeyHash, t.Status, t.ExternalRef, t.Action, t.Actor, t.Reason, x.conn().ts(t.At)})
	return wrapBulk("add tombstone", err)
}
