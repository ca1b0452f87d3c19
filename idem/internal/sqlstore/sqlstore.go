// Package sqlstore is the shared core of the idem stores on database/sql,
// idem/idemsqlite and idem/idemmysql: what they do alike over the same
// table shape — prepared statements, the compare-and-swap outcome, the
// record columns' decoding, the admin reads' scan loop, page and overview,
// seeding, the sweep's two steps and the transactional Store with its
// WithinTx shell. Each driver keeps only its dialect: its statements, its
// clock (the process's on SQLite, the database's on MySQL) and its quirks
// (SQLite's writer semaphore and write lock, MySQL's deadlock retries).
// The seam is [Ops], the dialect's primitives on one [Executor].
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/migrate"
)

// Executor is what the application writes through inside a store's
// WithinTx: the transaction. *sql.DB, *sql.Conn and *sql.Tx satisfy it;
// the stores' own statements run on one too.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// The statements whose text is the same in both dialects. Each takes its
// arguments in the order its comment gives.
const (
	// queryDeleteVersion deletes a record still at the version an operator
	// saw. It takes scope, operation, key_digest, version.
	queryDeleteVersion = `DELETE FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ? AND version = ?`

	// queryRelease takes scope, operation, key_digest, owner_token, fence.
	queryRelease = `DELETE FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?
  AND owner_token = ? AND fence = ? AND status = 'processing'`

	// queryDelete takes scope, operation, key_digest.
	queryDelete = `DELETE FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?`
)

// Prepared returns query prepared on db, kept in slot. database/sql keeps
// it prepared on each connection it has run on, which spares the database
// parsing the query on every call of the common path (read, reserve,
// complete). Racing first callers may each prepare it; the losers close
// theirs.
func Prepared(ctx context.Context, db *sql.DB, slot *atomic.Pointer[sql.Stmt], query string) (*sql.Stmt, error) {
	if st := slot.Load(); st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if slot.CompareAndSwap(nil, st) {
		return st, nil
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	return slot.Load(), nil
}

// StmtExec runs a prepared statement as an Executor for the statement's
// own query: the query argument is ignored, so it must be the one the
// statement was prepared from.
type StmtExec struct{ St *sql.Stmt }

// ExecContext runs the statement with args.
func (e StmtExec) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	return e.St.ExecContext(ctx, args...)
}

// QueryContext runs the statement with args.
func (e StmtExec) QueryContext(ctx context.Context, _ string, args ...any) (*sql.Rows, error) {
	return e.St.QueryContext(ctx, args...)
}

// QueryRowContext runs the statement with args.
func (e StmtExec) QueryRowContext(ctx context.Context, _ string, args ...any) *sql.Row {
	return e.St.QueryRowContext(ctx, args...)
}

// CASResult turns the outcome of a compare-and-swap statement into an
// error: idemdriver.ErrFenced when it matched no row. Every such statement
// changes version, so a matched row is a changed (affected) row.
func CASResult(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return idemdriver.ErrFenced
	}
	return nil
}

// Release deletes the running record of the owner o, or returns
// idemdriver.ErrFenced.
func Release(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner) error {
	res, err := ex.ExecContext(ctx, queryRelease, id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence)
	return CASResult(res, err)
}

// DeleteRecord deletes the record for id and reports whether there was one.
func DeleteRecord(ctx context.Context, ex Executor, id idemdriver.Ident) (bool, error) {
	res, err := ex.ExecContext(ctx, queryDelete, id.Scope, id.Operation, id.KeyDigest)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// DeleteAtVersion is an operator's deletion (a Settlement with Delete):
// it deletes the record for id if it is still at version, else returns
// idemdriver.ErrStale.
func DeleteAtVersion(ctx context.Context, ex Executor, id idemdriver.Ident, version int64) error {
	res, err := ex.ExecContext(ctx, queryDeleteVersion, id.Scope, id.Operation, id.KeyDigest, version)
	err = CASResult(res, err)
	if errors.Is(err, idemdriver.ErrFenced) {
		return idemdriver.ErrStale
	}
	return err
}

// Micros converts stored Unix microseconds to a UTC time.
func Micros(us int64) time.Time {
	return time.UnixMicro(us).UTC()
}

// NonNil returns ids, or an empty slice for nil so that it encodes as [].
func NonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// DecodeRecord completes rec from the columns both dialects store as text
// and bytes: status (checked), result (a stored empty result stays
// non-nil) and resource_ids (a JSON array of strings; the common "[]"
// needs no decode and an empty list reads as nil). It returns an error,
// never a panic, for columns that do not decode.
func DecodeRecord(rec *idemdriver.Record, status string, result sql.Null[[]byte], resourceIDs string) error {
	rec.Status = idemdriver.Status(status)
	if !rec.Status.Valid() {
		return fmt.Errorf("record %d: unknown status %q", rec.ID, status)
	}
	if result.Valid {
		// database/sql copies []byte destinations out of driver memory.
		rec.Result = result.V
		if rec.Result == nil {
			rec.Result = []byte{}
		}
	}
	if resourceIDs != "[]" {
		var ids []string
		if err := json.Unmarshal([]byte(resourceIDs), &ids); err != nil {
			return fmt.Errorf("record %d: decode resource_ids: %w", rec.ID, err)
		}
		if ids == nil {
			// JSON null decodes without error; "[]" decodes to a non-nil slice.
			return fmt.Errorf("record %d: decode resource_ids: not an array", rec.ID)
		}
		if len(ids) > 0 {
			rec.ResourceIDs = ids
		}
	}
	return nil
}

// Sweep runs a sweep's two steps, each given the limit left (p.Limit, or
// defaultLimit when it is not positive): escalate, which makes the
// abandoned expired records pending, then remove, which deletes the
// finished expired ones; remove does not run once the limit is used up.
func Sweep(p idemdriver.SweepParams, defaultLimit int, escalate, remove func(limit int64) (sql.Result, error)) (idemdriver.SweepResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var out idemdriver.SweepResult
	for _, step := range []struct {
		run func(limit int64) (sql.Result, error)
		n   *int
	}{{escalate, &out.Escalated}, {remove, &out.Deleted}} {
		if limit <= 0 {
			break
		}
		res, err := step.run(int64(limit))
		if err != nil {
			return idemdriver.SweepResult{}, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return idemdriver.SweepResult{}, err
		}
		*step.n = int(n)
		limit -= int(n)
	}
	return out, nil
}

// InTx runs fn in a transaction begun with opts on a connection of db of
// its own, after the statement first when it is not empty (SQLite's
// statement that takes the write lock), and commits if fn returns nil.
// The transaction is begun without ctx's cancellation, so that ctx ending
// neither rolls it back under fn nor cuts COMMIT or ROLLBACK short; each
// statement still ends with ctx. A connection whose ROLLBACK failed is
// discarded rather than returned to the pool.
func InTx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, first string, fn func(tx *sql.Tx) error) error {
	return migrate.WithConn(ctx, db, func(conn *sql.Conn) (err error) {
		tx, err := conn.BeginTx(context.WithoutCancel(ctx), opts)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		done := false
		defer func() {
			if done {
				return
			}
			if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr), migrate.Discard(conn))
			}
		}()
		if first != "" {
			if _, err := tx.ExecContext(ctx, first); err != nil {
				return err
			}
		}
		if err := fn(tx); err != nil {
			return err
		}
		// Both drivers' Commit leave the connection outside a transaction when
		// COMMIT fails (modernc.org/sqlite rolls back a COMMIT that a deferred
		// foreign key refused).
		done = true
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	})
}
