package audit

import (
	"context"
	"database/sql"
	"errors"
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
