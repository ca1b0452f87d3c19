package audit

// The PostgreSQL half of the trail. Names are unqualified: they resolve in
// the pool's search_path. The clock is the database's clock_timestamp(),
// read once the append lock is held, so that entries' times follow their
// seq as long as the server's clock does not step back.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgAppendLockID is the transaction-scoped advisory lock that serialises
// appends ("unstaudt" in ASCII). It differs from the migration lock
// (0x756e737475636b00), which appends must not wait for.
const pgAppendLockID int64 = 0x756e737461756474

// columns lists the table's columns in the order every query reads them
// and every insert writes them.
const columns = `seq, at, actor, role, action, target_kind, target_id, reason, before_state, after_state,
    outcome, request_id, client_addr, user_agent, prev_hash, hash, key_id`

// pgHeadSQL reads, once the lock is held, the transaction's isolation
// level, the clock and the chain's head (NULLs on an empty trail). It runs
// as a statement of its own after the lock's, so that under READ COMMITTED
// its snapshot includes the append that released the lock.
const pgHeadSQL = `SELECT current_setting('transaction_isolation'), clock_timestamp(), h.seq, h.hash
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (SELECT seq, hash FROM unstuck_audit_entry ORDER BY seq DESC LIMIT 1) AS h ON true`

const pgInsertSQL = `INSERT INTO unstuck_audit_entry (` + columns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`

// pgAppend takes the append lock, reads the head and inserts e after it,
// MACed with keys, all on tx, in two round trips (the lock and the head
// read are sent as one batch).
func pgAppend(ctx context.Context, tx pgx.Tx, e Entry, keys *Keyring) (Entry, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, pgAppendLockID)
	b.Queue(pgHeadSQL)
	br := tx.SendBatch(ctx, b)
	var (
		iso      string
		now      time.Time
		headSeq  *int64
		headHash []byte
	)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&iso, &now, &headSeq, &headHash)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Entry{}, pgMapError(fmt.Errorf("lock and read the head: %w", err))
	}
	if iso != "read committed" {
		return Entry{}, fmt.Errorf("the transaction is %s: appends need READ COMMITTED, to read the head committed before the lock", iso)
	}
	var seq int64
	if headSeq != nil {
		seq = *headSeq
	}
	e = chain(e, seq, headHash, now, keys)
	if _, err := tx.Exec(ctx, pgInsertSQL, e.Seq, e.At, e.Actor, e.Role, e.Action, e.TargetKind, e.TargetID,
		e.Reason, nullText(e.Before), nullText(e.After), e.Outcome, e.RequestID, e.ClientAddr, e.UserAgent,
		e.PrevHash, e.Hash, e.KeyID); err != nil {
		return Entry{}, pgMapError(fmt.Errorf("insert seq %d: %w", e.Seq, err))
	}
	return e, nil
}

// nullText is a state as a text parameter: NULL when empty.
func nullText(state []byte) *string {
	if len(state) == 0 {
		return nil
	}
	s := string(state)
	return &s
}

// pgEach runs query on the pool and calls fn with each entry read, in the
// query's order. fn's error stops the loop and is returned as is.
func (t *Trail) pgEach(ctx context.Context, query string, args []any, fn func(*Entry) error) error {
	rows, err := t.pool.Query(ctx, query, args...)
	if err != nil {
		return pgMapError(err)
	}
	defer rows.Close()
	var (
		e             Entry
		before, after *string
	)
	for rows.Next() {
		if err := rows.Scan(&e.Seq, &e.At, &e.Actor, &e.Role, &e.Action, &e.TargetKind, &e.TargetID, &e.Reason,
			&before, &after, &e.Outcome, &e.RequestID, &e.ClientAddr, &e.UserAgent, &e.PrevHash, &e.Hash, &e.KeyID); err != nil {
			return pgMapError(err)
		}
		e.At = e.At.UTC()
		e.Before, e.After = stateBytes(before), stateBytes(after)
		if err := fn(&e); err != nil {
			return err
		}
	}
	return pgMapError(rows.Err())
}

// stateBytes is a nullable text column as a state.
func stateBytes(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

// pgMapError maps a missing table to ErrNotMigrated and explains a unique
// violation on the chain, which only appends that bypass the lock cause.
func pgMapError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "42P01": // undefined_table
		return fmt.Errorf("%w (in the pool's search_path): %w", ErrNotMigrated, err)
	case "23505": // unique_violation
		return fmt.Errorf("the chain's head moved during the append, which the append lock prevents: %w", err)
	}
	return err
}
