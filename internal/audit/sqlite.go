package audit

// The SQLite half of the trail. As in idem/idemsqlite, at is INTEGER Unix
// microseconds, UTC, and the clock is the process's, read once the write
// lock is held: SQLite is embedded, so every writer runs on one host, but
// writers in several processes each bring their own clock.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

const sqliteHeadSQL = `SELECT seq, hash FROM unstuck_audit_entry ORDER BY seq DESC LIMIT 1`

const sqliteInsertSQL = `INSERT INTO unstuck_audit_entry (` + columns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// sqliteAppend reads the head and inserts e after it, MACed with keys, on
// ex, which must be inside a write transaction: SQLite's single writer is
// what serialises appends there.
func sqliteAppend(ctx context.Context, ex Executor, e Entry, keys *Keyring) (Entry, error) {
	var (
		headSeq  int64
		headHash []byte
	)
	err := ex.QueryRowContext(ctx, sqliteHeadSQL).Scan(&headSeq, &headHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Entry{}, sqliteMapError(fmt.Errorf("read the head: %w", err))
	}
	e = chain(e, headSeq, headHash, time.Now(), keys)
	if _, err := ex.ExecContext(ctx, sqliteInsertSQL, e.Seq, e.At.UnixMicro(), e.Actor, e.Role, e.Action,
		e.TargetKind, e.TargetID, e.Reason, nullText(e.Before), nullText(e.After), e.Outcome, e.RequestID,
		e.ClientAddr, e.UserAgent, e.PrevHash, e.Hash, e.KeyID); err != nil {
		return Entry{}, sqliteMapError(fmt.Errorf("insert seq %d: %w", e.Seq, err))
	}
	return e, nil
}

// sqliteEach runs query on the handle and calls fn with each entry read, in
// the query's order. fn's error stops the loop and is returned as is.
func (t *Trail) sqliteEach(ctx context.Context, query string, args []any, fn func(*Entry) error) error {
	rows, err := t.sqldb.QueryContext(ctx, query, args...)
	if err != nil {
		return sqliteMapError(err)
	}
	defer rows.Close()
	var (
		e             Entry
		at            int64
		before, after sql.NullString
	)
	for rows.Next() {
		if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.Role, &e.Action, &e.TargetKind, &e.TargetID, &e.Reason,
			&before, &after, &e.Outcome, &e.RequestID, &e.ClientAddr, &e.UserAgent, &e.PrevHash, &e.Hash, &e.KeyID); err != nil {
			return sqliteMapError(err)
		}
		e.At = time.UnixMicro(at).UTC()
		e.Before, e.After = nullState(before), nullState(after)
		if err := fn(&e); err != nil {
			return err
		}
	}
	return sqliteMapError(rows.Err())
}

func nullState(s sql.NullString) []byte {
	if !s.Valid {
		return nil
	}
	return []byte(s.String)
}

// sqliteMapError maps a missing table to ErrNotMigrated. SQLite reports it
// with the generic SQLITE_ERROR code, so the message is what tells. The
// MySQL trail shares SQLite's reads, so its errors pass here too.
func sqliteMapError(err error) error {
	var serr *modernc.Error
	if !errors.As(err, &serr) {
		return mysqlMapError(err)
	}
	switch serr.Code() {
	case sqlite3.SQLITE_ERROR:
		if strings.Contains(serr.Error(), "no such table: unstuck_audit_") {
			return fmt.Errorf("%w: %w", ErrNotMigrated, err)
		}
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("the chain's head moved during the append (was the transaction holding the write lock?): %w", err)
	}
	return err
}
