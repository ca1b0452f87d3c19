package store

// Trends and incident groups (SPEC K14, K15): the tables of migration 006,
// unstuck_console_trend, unstuck_console_incident and
// unstuck_console_incident_hour. This file is the only one that reads or
// writes them. Their times are Unix seconds in every dialect, so that the
// same SQL buckets them.

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
)

// Retention of the snapshots.
const (
	// TrendMinuteRetention is how long minute counts are kept.
	TrendMinuteRetention = 7 * 24 * time.Hour
	// TrendQuarterRetention is how long quarter-hour counts are kept.
	TrendQuarterRetention = 2 * 24 * time.Hour
	// TrendHourRetention is how long hourly counts are kept.
	TrendHourRetention = 90 * 24 * time.Hour
	// IncidentRetention is how long a group that has gone (count 0) is
	// kept, with its hourly counts.
	IncidentRetention = 7 * 24 * time.Hour
)

// snapshotLockID is the first key of the PostgreSQL advisory lock of the
// snapshot leader ("unsn"); the second is the hash of the schema.
const snapshotLockID int32 = 0x756e736e

// Resolution is the period of a stored trend count.
type Resolution string

// The resolutions of the trend table: a minute's count is the first
// snapshot's of the minute; a quarter-hour's and an hour's are the highest
// of their snapshots.
const (
	TrendMinute  Resolution = "m"
	TrendQuarter Resolution = "q"
	TrendHour    Resolution = "h"
)

// Seconds is the period's length in seconds.
func (r Resolution) Seconds() int64 {
	switch r {
	case TrendQuarter:
		return 900
	case TrendHour:
		return 3600
	}
	return 60
}

// start is the start of the period that holds t, in Unix seconds.
func (r Resolution) start(t time.Time) int64 {
	return t.Unix() - t.Unix()%r.Seconds()
}

// TrendPoint is one count of a snapshot: how many keys or operations
// (Kind "key" or "operation") were in State.
type TrendPoint struct {
	Kind  string
	State string
	Count int64
	// Exact is false for an estimate or a lower bound.
	Exact bool
}

// IncidentGroup is one incident group as the snapshots keep it.
type IncidentGroup struct {
	// Key is the group's identity (incident.Fields.Key).
	Key                                                  string
	Kind, State, Operation, Step, Class, Message, System string
	// Sample is one member's own message, not normalized.
	Sample string
	// Count is how many members the latest snapshot found; a lower bound
	// when Exact is false (the scan was capped).
	Count int64
	Exact bool
	// FirstSeen is the earliest UpdatedAt of a member any snapshot saw;
	// LastSeen the latest. UpdatedAt is the latest snapshot that counted
	// the group.
	FirstSeen, LastSeen, UpdatedAt time.Time
}

// Snapshot is what one snapshot writes: the counts per state and every
// current incident group, as of At.
type Snapshot struct {
	At     time.Time
	Trends []TrendPoint
	Groups []IncidentGroup
}

// snapshotLockSQL takes the MySQL snapshot leader's lock without waiting:
// GET_LOCK names are server-wide, so the name holds the hash of the
// database's name (a name is at most 64 characters), and consoles of
// other databases on the same server are not this one's rivals. 1 when
// taken, 0 when another session holds it.
const snapshotLockSQL = `SELECT GET_LOCK(CONCAT('unstuck_snapshot_', SHA1(DATABASE())), 0)`

// snapshotUnlockSQL releases it.
const snapshotUnlockSQL = `SELECT RELEASE_LOCK(CONCAT('unstuck_snapshot_', SHA1(DATABASE())))`

// snapExec runs statements on a transaction of any dialect, rewriting $n
// to ?n for SQLite and to positional ? for MySQL (my).
type snapExec struct {
	pg   pgx.Tx
	lite sqlExec
	my   bool
}

// sqlExec is a *sql.Tx or the *sql.Conn of a BEGIN IMMEDIATE transaction.
type sqlExec interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// strings runs a query of one text column.
func (e snapExec) strings(ctx context.Context, query string) ([]string, error) {
	var out []string
	if e.pg != nil {
		rows, err := e.pg.Query(ctx, query)
		if err != nil {
			return nil, pgMapError(err)
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return out, pgMapError(err)
	}
	rows, err := e.lite.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (e snapExec) exec(ctx context.Context, query string, args ...any) error {
	if e.pg != nil {
		_, err := e.pg.Exec(ctx, query, args...)
		return pgMapError(err)
	}
	if e.my {
		query, args = mysqlRebind(query, args)
	} else {
		query = bulkParam.ReplaceAllString(query, "?$1")
	}
	_, err := e.lite.ExecContext(ctx, query, args...)
	return err
}

// SnapshotResult is what [DB.WriteSnapshot] did.
type SnapshotResult struct {
	// Leader is false when another console held the snapshot lock: nothing
	// was computed or written.
	Leader bool
	// New are the groups of the snapshot that were not current before it
	// (absent, or gone to 0): read in the writing transaction, so that of
	// two consoles only the one that wrote a group first reports it.
	New []IncidentGroup
}

// WriteSnapshot takes a snapshot as the leader: on PostgreSQL it begins a
// transaction and takes the advisory lock of the snapshots of its schema
// with pg_try_advisory_xact_lock; on MySQL it takes, on one connection,
// the lock GET_LOCK('unstuck_snapshot_' + SHA1(DATABASE()), 0), held until
// its transaction has committed. When another console holds the lock, it
// returns Leader false without calling compute. Otherwise (and always on
// SQLite, whose writes are serialized) it calls compute, outside any
// transaction of the engine's tables, and writes its result in one
// transaction, together with the retention deletes. Every write is an
// idempotent upsert (a minute's counts are inserted once, hourly counts
// keep the highest, a group's count is replaced), so a snapshot written
// twice, or by two racing consoles, never double-counts.
func (d *DB) WriteSnapshot(ctx context.Context, compute func(ctx context.Context) (Snapshot, error)) (SnapshotResult, error) {
	if d.dialect == DialectMySQL {
		return d.writeSnapshotMySQL(ctx, compute)
	}
	var res SnapshotResult
	if d.dialect == DialectPostgres {
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			return res, fmt.Errorf("store: snapshot: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		var got bool
		// The lock is per schema: consoles of other schemas of the same
		// database (tenants, tests) are not this one's rivals.
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))`, snapshotLockID).Scan(&got); err != nil {
			return res, fmt.Errorf("store: snapshot lock: %w", pgMapError(err))
		}
		if !got {
			return res, nil
		}
		res.Leader = true
		snap, err := compute(ctx)
		if err != nil {
			return res, err
		}
		if res.New, err = writeSnapshot(ctx, snapExec{pg: tx}, snap); err != nil {
			return res, fmt.Errorf("store: snapshot: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return res, fmt.Errorf("store: snapshot: %w", err)
		}
		return res, nil
	}
	res.Leader = true
	snap, err := compute(ctx)
	if err != nil {
		return res, err
	}
	// BEGIN IMMEDIATE: a second console's snapshot waits for the write
	// lock (busy_timeout) instead of failing with SQLITE_BUSY when a
	// deferred transaction that read first upgrades to a write.
	err = migratesqlite.Immediate(ctx, d.sqlite, func(conn *sql.Conn) error {
		var werr error
		res.New, werr = writeSnapshot(ctx, snapExec{lite: conn}, snap)
		return werr
	})
	if err != nil {
		return res, fmt.Errorf("store: snapshot: %w", err)
	}
	return res, nil
}

// writeSnapshotMySQL is WriteSnapshot on MySQL: the lock, compute and the
// transaction on one connection, which goes back to the pool only without
// the lock (released, or the connection discarded).
func (d *DB) writeSnapshotMySQL(ctx context.Context, compute func(ctx context.Context) (Snapshot, error)) (res SnapshotResult, err error) {
	conn, err := d.sqlite.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("store: snapshot: %w", err)
	}
	defer func() { _ = conn.Close() }()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, snapshotLockSQL).Scan(&got); err != nil {
		// The server may have granted the lock before the failure (a
		// cancelled context): the connection is closed, not pooled.
		discardConn(conn)
		return res, fmt.Errorf("store: snapshot lock: %w", err)
	}
	if !got.Valid {
		return res, errors.New("store: snapshot lock: GET_LOCK returned NULL")
	}
	if got.Int64 != 1 {
		return res, nil
	}
	defer func() {
		// The lock ends with the session too: a connection whose release
		// failed is closed rather than pooled with the lock.
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), snapshotUnlockSQL); rerr != nil {
			discardConn(conn)
			err = errors.Join(err, fmt.Errorf("store: snapshot unlock: %w", rerr))
		}
	}()
	res.Leader = true
	snap, err := compute(ctx)
	if err != nil {
		return res, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("store: snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if res.New, err = writeSnapshot(ctx, snapExec{lite: tx, my: true}, snap); err != nil {
		return res, fmt.Errorf("store: snapshot: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("store: snapshot: %w", err)
	}
	return res, nil
}

// discardConn marks conn bad, so that its Close closes it instead of
// pooling it (and the session's locks end with it).
func discardConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

const (
	// $1 res, $2 at, $3 kind, $4 state, $5 count, $6 exact.
	insertTrendMinuteSQL = `INSERT INTO unstuck_console_trend (res, at, kind, state, count, exact) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (res, at, kind, state) DO NOTHING`
	upsertTrendMaxSQL = `INSERT INTO unstuck_console_trend AS t (res, at, kind, state, count, exact) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (res, at, kind, state) DO UPDATE SET
    exact = CASE WHEN excluded.count > t.count THEN excluded.exact ELSE t.exact END,
    count = CASE WHEN excluded.count > t.count THEN excluded.count ELSE t.count END`
	// $1 key … $14 updated_at. An older snapshot never overwrites a newer one.
	upsertIncidentSQL = `INSERT INTO unstuck_console_incident AS g (group_key, kind, state, operation, step, class, message, system, sample,
    count, exact, first_seen, last_seen, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (group_key) DO UPDATE SET
    sample = CASE WHEN excluded.updated_at >= g.updated_at THEN excluded.sample ELSE g.sample END,
    count = CASE WHEN excluded.updated_at >= g.updated_at THEN excluded.count ELSE g.count END,
    exact = CASE WHEN excluded.updated_at >= g.updated_at THEN excluded.exact ELSE g.exact END,
    first_seen = CASE WHEN excluded.first_seen < g.first_seen THEN excluded.first_seen ELSE g.first_seen END,
    last_seen = CASE WHEN excluded.last_seen > g.last_seen THEN excluded.last_seen ELSE g.last_seen END,
    updated_at = CASE WHEN excluded.updated_at > g.updated_at THEN excluded.updated_at ELSE g.updated_at END`
	// $1 the snapshot's time: groups it did not count have gone.
	closeIncidentsSQL = `UPDATE unstuck_console_incident SET count = 0, updated_at = $1 WHERE updated_at < $1 AND count > 0`
	// $1 key, $2 hour, $3 count.
	upsertIncidentHourSQL = `INSERT INTO unstuck_console_incident_hour AS h (group_key, hour, count) VALUES ($1, $2, $3)
ON CONFLICT (group_key, hour) DO UPDATE SET count = CASE WHEN excluded.count > h.count THEN excluded.count ELSE h.count END`
	deleteTrendsSQL       = `DELETE FROM unstuck_console_trend WHERE res = $1 AND at < $2`
	deleteIncidentsSQL    = `DELETE FROM unstuck_console_incident WHERE count = 0 AND updated_at < $1`
	deleteIncidentHourSQL = `DELETE FROM unstuck_console_incident_hour WHERE hour < $1`
)

// The same upserts on MySQL, each a multi-row INSERT (the rows' (?, …)
// between the prefix and the suffix), so that a snapshot costs a few
// statements rather than one per row. ON DUPLICATE KEY UPDATE assigns
// left to right, each assignment seeing the ones before, so a column is
// set before the columns its condition reads; VALUES(c) is the refused
// row's value (MariaDB has no row alias). A minute's row is never
// updated; a quarter's or an hour's keeps the highest count.
const (
	mysqlTrendPrefix = `INSERT INTO unstuck_console_trend (res, at, kind, state, count, exact) VALUES `
	mysqlTrendSuffix = `
ON DUPLICATE KEY UPDATE
    exact = IF(res <> 'm' AND VALUES(count) > count, VALUES(exact), exact),
    count = IF(res <> 'm', GREATEST(count, VALUES(count)), count)`
	mysqlIncidentPrefix = "INSERT INTO unstuck_console_incident (group_key, kind, state, operation, step, class, message, `system`, sample," +
		" count, exact, first_seen, last_seen, updated_at) VALUES "
	mysqlIncidentSuffix = `
ON DUPLICATE KEY UPDATE
    sample = IF(VALUES(updated_at) >= updated_at, VALUES(sample), sample),
    count = IF(VALUES(updated_at) >= updated_at, VALUES(count), count),
    exact = IF(VALUES(updated_at) >= updated_at, VALUES(exact), exact),
    first_seen = LEAST(first_seen, VALUES(first_seen)),
    last_seen = GREATEST(last_seen, VALUES(last_seen)),
    updated_at = GREATEST(updated_at, VALUES(updated_at))`
	mysqlIncidentHourPrefix = `INSERT INTO unstuck_console_incident_hour (group_key, hour, count) VALUES `
	mysqlIncidentHourSuffix = `
ON DUPLICATE KEY UPDATE count = GREATEST(count, VALUES(count))`
)

// mysqlBatchRows is the most rows of one multi-row INSERT on MySQL: at
// 14 placeholders a row, far under the 65,535 of a statement.
const mysqlBatchRows = 1000

// mysqlInsertRows runs prefix (?, …), (?, …) … suffix over args, cols
// values a row, in statements of at most mysqlBatchRows rows.
func mysqlInsertRows(ctx context.Context, x sqlExec, prefix, suffix string, cols int, args []any) error {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	for chunk := range slices.Chunk(args, cols*mysqlBatchRows) {
		n := len(chunk) / cols
		q := prefix + strings.Repeat(row+", ", n-1) + row + suffix
		if _, err := x.ExecContext(ctx, q, chunk...); err != nil {
			return err
		}
	}
	return nil
}

// writeRowsMySQL is the upserts of writeSnapshot on MySQL.
func writeRowsMySQL(ctx context.Context, x sqlExec, s Snapshot) error {
	at := s.At.Unix()
	args := make([]any, 0, 6*3*len(s.Trends))
	for _, p := range s.Trends {
		for _, r := range []Resolution{TrendMinute, TrendQuarter, TrendHour} {
			args = append(args, string(r), r.start(s.At), p.Kind, p.State, p.Count, boolInt(p.Exact))
		}
	}
	if err := mysqlInsertRows(ctx, x, mysqlTrendPrefix, mysqlTrendSuffix, 6, args); err != nil {
		return err
	}
	args = make([]any, 0, 14*len(s.Groups))
	hours := make([]any, 0, 3*len(s.Groups))
	for _, g := range s.Groups {
		first, last := g.seen(s.At)
		args = append(args, g.Key, g.Kind, g.State, g.Operation, g.Step, g.Class, g.Message, g.System, g.Sample,
			g.Count, boolInt(g.Exact), first, last, at)
		hours = append(hours, g.Key, TrendHour.start(s.At), g.Count)
	}
	if err := mysqlInsertRows(ctx, x, mysqlIncidentPrefix, mysqlIncidentSuffix, 14, args); err != nil {
		return err
	}
	return mysqlInsertRows(ctx, x, mysqlIncidentHourPrefix, mysqlIncidentHourSuffix, 3, hours)
}

// seen is g's first and last seen in Unix seconds, at (the snapshot's
// time) where unset.
func (g IncidentGroup) seen(at time.Time) (first, last int64) {
	f, l := g.FirstSeen, g.LastSeen
	if f.IsZero() {
		f = at
	}
	if l.IsZero() {
		l = at
	}
	return f.Unix(), l.Unix()
}

func writeSnapshot(ctx context.Context, e snapExec, s Snapshot) ([]IncidentGroup, error) {
	if s.At.IsZero() {
		return nil, errors.New("snapshot without a time")
	}
	at := s.At.Unix()
	// The retention deletes come first: on SQLite a transaction whose
	// first statement writes takes the write lock (waiting for it), where
	// one that reads first could not upgrade while another writer commits.
	for _, st := range []struct {
		q    string
		args []any
	}{
		{deleteTrendsSQL, []any{string(TrendMinute), at - int64(TrendMinuteRetention/time.Second)}},
		{deleteTrendsSQL, []any{string(TrendQuarter), at - int64(TrendQuarterRetention/time.Second)}},
		{deleteTrendsSQL, []any{string(TrendHour), at - int64(TrendHourRetention/time.Second)}},
		{deleteIncidentsSQL, []any{at - int64(IncidentRetention/time.Second)}},
		{deleteIncidentHourSQL, []any{at - int64(IncidentRetention/time.Second)}},
	} {
		if err := e.exec(ctx, st.q, st.args...); err != nil {
			return nil, err
		}
	}
	current, err := e.strings(ctx, `SELECT group_key FROM unstuck_console_incident WHERE count > 0`)
	if err != nil {
		return nil, err
	}
	cur := make(map[string]bool, len(current))
	for _, k := range current {
		cur[k] = true
	}
	var fresh []IncidentGroup
	for _, g := range s.Groups {
		if !cur[g.Key] {
			fresh = append(fresh, g)
		}
	}
	if e.my {
		if err := writeRowsMySQL(ctx, e.lite, s); err != nil {
			return nil, err
		}
	} else if err := writeRows(ctx, e, s); err != nil {
		return nil, err
	}
	// Groups this snapshot did not count have gone.
	if err := e.exec(ctx, closeIncidentsSQL, at); err != nil {
		return nil, err
	}
	return fresh, nil
}

// writeRows is the upserts of writeSnapshot on PostgreSQL and SQLite, a
// statement a row.
func writeRows(ctx context.Context, e snapExec, s Snapshot) error {
	at, hour := s.At.Unix(), TrendHour.start(s.At)
	b := func(v bool) any {
		if e.pg != nil {
			return v
		}
		if v {
			return int64(1)
		}
		return int64(0)
	}
	for _, p := range s.Trends {
		if err := e.exec(ctx, insertTrendMinuteSQL, string(TrendMinute), TrendMinute.start(s.At), p.Kind, p.State, p.Count, b(p.Exact)); err != nil {
			return err
		}
		for _, r := range []Resolution{TrendQuarter, TrendHour} {
			if err := e.exec(ctx, upsertTrendMaxSQL, string(r), r.start(s.At), p.Kind, p.State, p.Count, b(p.Exact)); err != nil {
				return err
			}
		}
	}
	for _, g := range s.Groups {
		first, last := g.seen(s.At)
		if err := e.exec(ctx, upsertIncidentSQL, g.Key, g.Kind, g.State, g.Operation, g.Step, g.Class, g.Message, g.System, g.Sample,
			g.Count, b(g.Exact), first, last, at); err != nil {
			return err
		}
		if err := e.exec(ctx, upsertIncidentHourSQL, g.Key, hour, g.Count); err != nil {
			return err
		}
	}
	return nil
}

// TrendSample is one stored count: of Kind/State in the period of its
// resolution that starts At.
type TrendSample struct {
	Kind, State string
	At          time.Time
	Count       int64
}

// $1 resolution, $2 since: one indexed range of the primary key, unsorted
// (a sort by the text columns in the database's collation costs more than
// the read; Trends sorts by bytes).
const trendsSQL = `SELECT kind, state, at, count FROM unstuck_console_trend WHERE res = $1 AND at >= $2`

// Trends returns the counts of resolution res whose period starts at or
// after since, by kind, state and time. Periods without a snapshot are
// absent.
func (d *DB) Trends(ctx context.Context, res Resolution, since time.Time) ([]TrendSample, error) {
	var out []TrendSample
	err := bulkConn{d}.each(ctx, trendsSQL, []any{string(res), since.Unix()}, func(scan func(...any) error) error {
		var (
			s  TrendSample
			at int64
		)
		if err := scan(&s.Kind, &s.State, &at, &s.Count); err != nil {
			return err
		}
		s.At = time.Unix(at, 0).UTC()
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: trends: %w", err)
	}
	slices.SortFunc(out, func(a, b TrendSample) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.State, b.State), a.At.Compare(b.At))
	})
	return out, nil
}

const incidentColumns = `group_key, kind, state, operation, step, class, message, system, sample, count, exact, first_seen, last_seen, updated_at`

// incidentCols is incidentColumns in d's dialect: SYSTEM is a reserved
// word of MySQL 8.
func (d *DB) incidentCols() string {
	if d.dialect == DialectMySQL {
		return strings.Replace(incidentColumns, "system", "`system`", 1)
	}
	return incidentColumns
}

func scanIncident(scan func(...any) error) (IncidentGroup, error) {
	var (
		g                   IncidentGroup
		exact               anyBool
		first, last, update int64
	)
	if err := scan(&g.Key, &g.Kind, &g.State, &g.Operation, &g.Step, &g.Class, &g.Message, &g.System, &g.Sample, &g.Count, &exact,
		&first, &last, &update); err != nil {
		return g, err
	}
	g.Exact = exact.b
	g.FirstSeen, g.LastSeen, g.UpdatedAt = time.Unix(first, 0).UTC(), time.Unix(last, 0).UTC(), time.Unix(update, 0).UTC()
	return g, nil
}

// MaxIncidentGroups bounds what [DB.IncidentGroups] returns.
const MaxIncidentGroups = 500

// IncidentGroups returns the current groups (count > 0), the largest
// first, at most limit (MaxIncidentGroups when <= 0 or above it).
func (d *DB) IncidentGroups(ctx context.Context, limit int) ([]IncidentGroup, error) {
	if limit <= 0 || limit > MaxIncidentGroups {
		limit = MaxIncidentGroups
	}
	var out []IncidentGroup
	err := bulkConn{d}.each(ctx, `SELECT `+d.incidentCols()+` FROM unstuck_console_incident WHERE count > 0
ORDER BY count DESC, group_key LIMIT $1`, []any{limit}, func(scan func(...any) error) error {
		g, err := scanIncident(scan)
		if err != nil {
			return err
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: incident groups: %w", err)
	}
	return out, nil
}

// IncidentGroup returns the group key, current or gone; ok is false when
// there is none.
func (d *DB) IncidentGroup(ctx context.Context, key string) (g IncidentGroup, ok bool, err error) {
	err = bulkConn{d}.each(ctx, `SELECT `+d.incidentCols()+` FROM unstuck_console_incident WHERE group_key = $1`, []any{key},
		func(scan func(...any) error) error {
			var serr error
			g, serr = scanIncident(scan)
			ok = serr == nil
			return serr
		})
	if err != nil {
		return IncidentGroup{}, false, fmt.Errorf("store: incident group: %w", err)
	}
	return g, ok, nil
}

// IncidentHours returns the hourly counts since since of the current
// groups (count > 0): per group key, the highest count of each hour that
// had a snapshot, by the hour's start.
func (d *DB) IncidentHours(ctx context.Context, since time.Time) (map[string]map[time.Time]int64, error) {
	out := map[string]map[time.Time]int64{}
	err := bulkConn{d}.each(ctx, `SELECT h.group_key, h.hour, h.count FROM unstuck_console_incident_hour h
JOIN unstuck_console_incident g ON g.group_key = h.group_key
WHERE g.count > 0 AND h.hour >= $1`, []any{since.Unix()}, func(scan func(...any) error) error {
		var (
			key   string
			hour  int64
			count int64
		)
		if err := scan(&key, &hour, &count); err != nil {
			return err
		}
		if out[key] == nil {
			out[key] = map[time.Time]int64{}
		}
		out[key][time.Unix(hour, 0).UTC()] = count
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: incident hours: %w", err)
	}
	return out, nil
}

// LastSnapshot returns the time of the latest snapshot; ok is false when
// none was taken.
func (d *DB) LastSnapshot(ctx context.Context) (at time.Time, ok bool, err error) {
	var v sql.NullInt64
	err = bulkConn{d}.each(ctx, `SELECT max(at) FROM unstuck_console_trend WHERE res = 'm'`, nil, func(scan func(...any) error) error {
		return scan(&v)
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("store: last snapshot: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return time.Unix(v.Int64, 0).UTC(), true, nil
}

// IncidentTotal sums the current groups of one kind.
type IncidentTotal struct {
	Kind   string
	Groups int64
	Items  int64
	// Exact is false when some group's count is a lower bound.
	Exact bool
}

// IncidentTotals returns the number of current groups and their items per
// kind (kinds without a group are absent).
func (d *DB) IncidentTotals(ctx context.Context) ([]IncidentTotal, error) {
	var out []IncidentTotal
	q := `SELECT kind, count(*), CAST(sum(count) AS BIGINT), CAST(sum(CASE WHEN exact THEN 0 ELSE 1 END) AS BIGINT)
FROM unstuck_console_incident WHERE count > 0 GROUP BY kind ORDER BY kind`
	if d.dialect == DialectMySQL { // MySQL's CAST has SIGNED, not BIGINT
		q = strings.ReplaceAll(q, "AS BIGINT", "AS SIGNED")
	}
	err := bulkConn{d}.each(ctx, q, nil, func(scan func(...any) error) error {
		var (
			t       IncidentTotal
			inexact int64
		)
		if err := scan(&t.Kind, &t.Groups, &t.Items, &inexact); err != nil {
			return err
		}
		t.Exact = inexact == 0
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: incident totals: %w", err)
	}
	return out, nil
}

// TrendRow is one stored count of the trend table, for [DB.ImportTrends].
type TrendRow struct {
	// Res is the count's resolution.
	Res Resolution
	// At is in the period (truncated to its start).
	At    time.Time
	Kind  string
	State string
	Count int64
	Exact bool
}

// ImportTrends loads past counts as given, for benchmarks and imports:
// rows whose (resolution, At, Kind, State) exist already are skipped. It
// bypasses the snapshotter and its retention.
func (d *DB) ImportTrends(ctx context.Context, rows []TrendRow) error {
	res := func(r TrendRow) (string, int64) {
		if r.Res == "" {
			r.Res = TrendMinute
		}
		return string(r.Res), r.Res.start(r.At)
	}
	if d.dialect == DialectPostgres {
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE trend_import (LIKE unstuck_console_trend) ON COMMIT DROP`); err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"trend_import"}, []string{"res", "at", "kind", "state", "count", "exact"},
			pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r, at := res(rows[i])
				return []any{r, at, rows[i].Kind, rows[i].State, rows[i].Count, rows[i].Exact}, nil
			})); err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO unstuck_console_trend SELECT * FROM trend_import ON CONFLICT DO NOTHING`); err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
		return nil
	}
	tx, err := d.sqlite.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: import trends: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if d.dialect == DialectMySQL {
		args := make([]any, 0, 6*len(rows))
		for _, r := range rows {
			rs, at := res(r)
			args = append(args, rs, at, r.Kind, r.State, r.Count, boolInt(r.Exact))
		}
		// A row whose key exists is left as it is.
		if err := mysqlInsertRows(ctx, tx, mysqlTrendPrefix, "\nON DUPLICATE KEY UPDATE count = count", 6, args); err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
		return nil
	}
	for _, r := range rows {
		rs, at := res(r)
		exact := int64(0)
		if r.Exact {
			exact = 1
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO unstuck_console_trend (res, at, kind, state, count, exact) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING`, rs, at, r.Kind, r.State, r.Count, exact); err != nil {
			return fmt.Errorf("store: import trends: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: import trends: %w", err)
	}
	return nil
}
