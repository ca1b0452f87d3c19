package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Marked is an entry found by [Trail.LastMarkedPgxTx] or
// [Trail.LastMarkedSQLTx]: its seq and time.
type Marked struct {
	Seq int64
	At  time.Time
}

const pgLastMarkedSQL = `SELECT seq, at FROM unstuck_audit_entry
WHERE target_kind = $1 AND target_id = $2 AND seq < $3 AND outcome = '` + OutcomeApplied + `' AND strpos(after_state, $4) > 0
ORDER BY seq DESC LIMIT 1`

// LastMarkedPgxTx reads in tx the newest applied entry on the target
// (kind, id) before seq whose After contains marker, a compacted JSON
// fragment such as `"k":true`: a read of the target index. ok is false
// when there is none.
func (t *Trail) LastMarkedPgxTx(ctx context.Context, tx pgx.Tx, kind, id, marker string, before int64) (m Marked, ok bool, err error) {
	if t.dialect != DialectPostgres {
		return Marked{}, false, errors.New("audit: a pgx transaction given to a " + t.dialect + " trail")
	}
	err = tx.QueryRow(ctx, pgLastMarkedSQL, kind, id, before, marker).Scan(&m.Seq, &m.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return Marked{}, false, nil
	}
	if err != nil {
		return Marked{}, false, err
	}
	m.At = m.At.UTC()
	return m, true, nil
}

const sqlLastMarkedSQL = `SELECT seq, at FROM unstuck_audit_entry
WHERE target_kind = ? AND target_id = ? AND seq < ? AND outcome = '` + OutcomeApplied + `' AND instr(after_state, ?) > 0
ORDER BY seq DESC LIMIT 1`

// LastMarkedSQLTx is [Trail.LastMarkedPgxTx] on ex, a SQLite or MySQL
// transaction.
func (t *Trail) LastMarkedSQLTx(ctx context.Context, ex Executor, kind, id, marker string, before int64) (m Marked, ok bool, err error) {
	if t.dialect != DialectSQLite && t.dialect != DialectMySQL {
		return Marked{}, false, errors.New("audit: a database/sql transaction given to a " + t.dialect + " trail")
	}
	row := ex.QueryRowContext(ctx, sqlLastMarkedSQL, kind, id, before, marker)
	// Both keep at as Unix microseconds, UTC.
	var at int64
	err = row.Scan(&m.Seq, &at)
	m.At = time.UnixMicro(at).UTC()
	if errors.Is(err, sql.ErrNoRows) {
		return Marked{}, false, nil
	}
	if err != nil {
		return Marked{}, false, err
	}
	return m, true, nil
}

// MarkedAfter returns up to limit (at most MaxLimit) applied entries
// whose After contains marker and whose seq is above after, oldest
// first: a reader's next page past its cursor. It scans the trail from
// after on by seq, so a reader that keeps its cursor near the end reads
// little.
func (t *Trail) MarkedAfter(ctx context.Context, marker string, after int64, limit int) ([]Entry, error) {
	if limit <= 0 || limit > MaxLimit {
		limit = MaxLimit
	}
	find := "instr(after_state, ?) > 0"
	if t.dialect == DialectPostgres {
		find = "strpos(after_state, $3) > 0"
	}
	q := "SELECT " + columns + " FROM unstuck_audit_entry WHERE seq > " + t.placeholder(1) + " AND outcome = " + t.placeholder(2) +
		" AND " + find + " ORDER BY seq LIMIT " + t.placeholder(4)
	var out []Entry
	err := t.each(ctx, q, []any{after, OutcomeApplied, marker, limit}, func(e *Entry) error {
		out = append(out, *e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: marked entries: %w", err)
	}
	return out, nil
}

// LastMarked is [Trail.LastMarkedPgxTx] outside a transaction, on any
// dialect.
func (t *Trail) LastMarked(ctx context.Context, kind, id, marker string, before int64) (m Marked, ok bool, err error) {
	if t.dialect == DialectPostgres {
		err = t.pool.QueryRow(ctx, pgLastMarkedSQL, kind, id, before, marker).Scan(&m.Seq, &m.At)
		if errors.Is(err, pgx.ErrNoRows) {
			return Marked{}, false, nil
		}
		m.At = m.At.UTC()
		return m, err == nil, err
	}
	var at int64
	err = t.sqldb.QueryRowContext(ctx, sqlLastMarkedSQL, kind, id, before, marker).Scan(&m.Seq, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Marked{}, false, nil
	}
	m.At = time.UnixMicro(at).UTC()
	return m, err == nil, err
}

// Newest returns the seq of the newest entry, 0 for an empty trail.
func (t *Trail) Newest(ctx context.Context) (int64, error) {
	entries, _, err := t.List(ctx, Filter{Limit: 1})
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	return entries[0].Seq, nil
}
