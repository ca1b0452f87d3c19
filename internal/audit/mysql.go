package audit

// The MySQL half of the trail (MySQL 8, MariaDB 10.6+). The queries of
// lists, exports and verification are SQLite's (database/sql, ? markers,
// at in Unix microseconds); what differs is the append, serialised by a
// lock row, and the clock, the database's.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/unstuckhq/unstuck/migrate/migratemysql"
)

// mysqlNow is the database's clock in Unix microseconds, UTC.
const mysqlNow = `CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED)`

const (
	// mysqlLockSQL takes the append lock until the transaction ends.
	mysqlLockSQL = `SELECT id FROM unstuck_audit_lock WHERE id = 1 FOR UPDATE`
	// mysqlHeadSQL reads the clock and the head with a locking read,
	// which sees the latest committed entry whatever the transaction's
	// isolation (a REPEATABLE READ snapshot taken before the lock would
	// not).
	mysqlHeadSQL  = `SELECT ` + mysqlNow + `, seq, hash FROM unstuck_audit_entry ORDER BY seq DESC LIMIT 1 LOCK IN SHARE MODE`
	mysqlClockSQL = `SELECT ` + mysqlNow
)

// AppendMySQLTx is [Trail.AppendPgxTx] on ex, a MySQL transaction the
// caller began and owns (a *sql.Tx), with the same contract: appends are
// serialised by the lock row of unstuck_audit_lock, which AppendMySQLTx
// locks FOR UPDATE until ex ends, so call it last, just before the
// commit. Any isolation level works: the head is read with a locking
// read. It fails on a trail of another dialect.
func (t *Trail) AppendMySQLTx(ctx context.Context, ex Executor, e Entry) (Entry, error) {
	if t.dialect != DialectMySQL {
		return Entry{}, errors.New("audit: append: a MySQL transaction given to a " + t.dialect + " trail")
	}
	e, err := t.normalize(e)
	if err != nil {
		return Entry{}, err
	}
	out, err := mysqlAppend(ctx, ex, e, t.keys)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	return out, nil
}

// mysqlAppendOwn appends the normalized e in a READ COMMITTED transaction
// of its own.
func (t *Trail) mysqlAppendOwn(ctx context.Context, e Entry) (Entry, error) {
	tx, err := t.sqldb.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return Entry{}, mysqlMapError(err)
	}
	out, err := mysqlAppend(ctx, tx, e, t.keys)
	if err != nil {
		return Entry{}, errors.Join(err, ignoreTxDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, fmt.Errorf("commit: %w", err)
	}
	return out, nil
}

func ignoreTxDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// mysqlAppend locks the trail, reads the head and the clock, and inserts
// e after the head, MACed with keys, all on ex.
func mysqlAppend(ctx context.Context, ex Executor, e Entry, keys *Keyring) (Entry, error) {
	var one int
	if err := ex.QueryRowContext(ctx, mysqlLockSQL).Scan(&one); err != nil {
		return Entry{}, mysqlMapError(fmt.Errorf("lock: %w", err))
	}
	var (
		now, headSeq int64
		headHash     []byte
	)
	err := ex.QueryRowContext(ctx, mysqlHeadSQL).Scan(&now, &headSeq, &headHash)
	if errors.Is(err, sql.ErrNoRows) {
		err = ex.QueryRowContext(ctx, mysqlClockSQL).Scan(&now)
	}
	if err != nil {
		return Entry{}, mysqlMapError(fmt.Errorf("read the head: %w", err))
	}
	e = chain(e, headSeq, headHash, time.UnixMicro(now).UTC(), keys)
	if _, err := ex.ExecContext(ctx, sqliteInsertSQL, e.Seq, e.At.UnixMicro(), e.Actor, e.Role, e.Action,
		e.TargetKind, e.TargetID, e.Reason, nullText(e.Before), nullText(e.After), e.Outcome, e.RequestID,
		e.ClientAddr, e.UserAgent, e.PrevHash, e.Hash, e.KeyID); err != nil {
		return Entry{}, mysqlMapError(fmt.Errorf("insert seq %d: %w", e.Seq, err))
	}
	return e, nil
}

// mysqlMapError maps a missing table (1146) to ErrNotMigrated.
func mysqlMapError(err error) error {
	if migratemysql.IsMySQLError(err, 1146) {
		return fmt.Errorf("%w: %w", ErrNotMigrated, err)
	}
	return err
}
