package store

// Bulk decisions and approvals (SPEC K12, K13): the tables of migration
// 005, unstuck_console_bulk and unstuck_console_bulk_item. This file
// reads and writes them, except the item outcome of a decision, set in the
// decision's own transaction ([PgxTx.MarkBulkItemTx], [SQLTx.MarkBulkItemTx]
// in tx.go).

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/unstuckhq/unstuck/migrate/migratemysql"
)

// Statuses of a bulk request.
const (
	// BulkDraft is a previewed request: its items are frozen, it waits for
	// its requester's reason and confirmation, and expires unsubmitted.
	BulkDraft           = "draft"
	BulkWaitingApproval = "waiting_approval"
	BulkRejected        = "rejected"
	BulkExpired         = "expired"
	BulkRunning         = "running"
	// BulkPaused is a run stopped until someone resumes or cancels it: by
	// a person, or by the run itself when failures crossed its threshold.
	BulkPaused    = "paused"
	BulkCancelled = "cancelled"
	BulkDone      = "done"
)

// Outcomes of a bulk item.
const (
	ItemPending = "pending"
	ItemApplied = "applied"
	ItemSkipped = "skipped" // changed since the request: never forced
	ItemRefused = "refused" // not legal in its state
	ItemFailed  = "failed"
)

// Bulk is a bulk request, or a single decision waiting for approval
// (Single, one item).
type Bulk struct {
	ID     int64
	Kind   string // "keys" or "operations"
	Action string // forget, confirm, retry, compensate, resolve
	Single bool
	// Filter is the list's filter as a query string; Params the action's
	// parameters as JSON.
	Filter, Params string
	Reason         string
	RequestedBy    string
	RequestedRole  string
	Status         string
	Total          int64
	// NotLegal counts the items the filter matched but the action was not
	// legal for when the request was made: they are not in the set.
	NotLegal       int64
	DecidedBy      string
	DecisionReason string
	CancelledBy    string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      time.Time // zero: never (no approval needed)
	FinishedAt     time.Time
	// Summary is what the preview showed when the items were frozen (JSON
	// the ops package reads and writes).
	Summary string
	// Canary is the size of the run's first batch.
	Canary int
	// PausedBy and PausedReason say who paused the run and why ("system"
	// for a pause of the run itself); empty when it is not paused.
	PausedBy, PausedReason string
	// Counts per item outcome, and the first and last decision of an item,
	// filled by BulkByID.
	Counts                    map[string]int64
	FirstDecided, LastDecided time.Time
}

// BulkItem is one item of a request: its target (a key record's ID or an
// operation's ID), its version when the request was made, and its outcome.
type BulkItem struct {
	Seq      int
	TargetID string
	Version  int64
	Step     string // a retry's step
	Outcome  string
	Detail   string
	// DecidedAt is when its outcome was set; zero while pending.
	DecidedAt time.Time
}

// bulkConn runs the bulk statements on either dialect: $n parameters are
// rebound to ?n on SQLite, and times are Unix microseconds there.
type bulkConn struct{ d *DB }

var bulkParam = regexp.MustCompile(`\$(\d+)`)

func (c bulkConn) q(query string) string {
	if c.d.dialect == DialectPostgres {
		return query
	}
	return bulkParam.ReplaceAllString(query, "?$1")
}

// sqlArgs is query and args as the database/sql dialect takes them:
// ?n markers on SQLite, positional ? with the arguments in order on MySQL.
func (c bulkConn) sqlArgs(query string, args []any) (string, []any) {
	if c.d.dialect == DialectMySQL {
		return mysqlRebind(mysqlConcatSQL(query), args)
	}
	return c.q(query), args
}

func (c bulkConn) ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	if c.d.dialect == DialectPostgres {
		return t.UTC()
	}
	return t.UnixMicro()
}

func (c bulkConn) exec(ctx context.Context, query string, args ...any) (int64, error) {
	if c.d.dialect == DialectPostgres {
		tag, err := c.d.pool.Exec(ctx, query, args...)
		if err != nil {
			return 0, pgMapError(err)
		}
		return tag.RowsAffected(), nil
	}
	query, args = c.sqlArgs(query, args)
	res, err := c.d.sqlite.ExecContext(ctx, query, args...)
	// A single statement in autocommit that InnoDB chose as a deadlock
	// victim was rolled back whole: it is run again, a few times.
	for i := 0; i < 3 && c.d.dialect == DialectMySQL && migratemysql.IsMySQLError(err, mysqlErrDeadlock); i++ {
		res, err = c.d.sqlite.ExecContext(ctx, query, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c bulkConn) each(ctx context.Context, query string, args []any, scan func(func(...any) error) error) error {
	if c.d.dialect == DialectPostgres {
		rows, err := c.d.pool.Query(ctx, query, args...)
		if err != nil {
			return pgMapError(err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows.Scan); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	query, args = c.sqlArgs(query, args)
	rows, err := c.d.sqlite.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		if err := scan(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// anyTime scans a timestamp of either dialect: a time (PostgreSQL) or Unix
// microseconds (SQLite); NULL is the zero time.
type anyTime struct{ t time.Time }

func (a *anyTime) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		a.t = time.Time{}
	case time.Time:
		a.t = x.UTC()
	case int64:
		a.t = time.UnixMicro(x).UTC()
	default:
		return fmt.Errorf("store: cannot scan %T as a time", v)
	}
	return nil
}

var _ sql.Scanner = (*anyTime)(nil)

// anyBool scans a boolean of either dialect (SQLite: 0 or 1).
type anyBool struct{ b bool }

func (a *anyBool) Scan(v any) error {
	switch x := v.(type) {
	case bool:
		a.b = x
	case int64:
		a.b = x != 0
	default:
		return fmt.Errorf("store: cannot scan %T as a boolean", v)
	}
	return nil
}

func (c bulkConn) boolArg(b bool) driver.Value {
	if c.d.dialect == DialectPostgres {
		return b
	}
	if b {
		return int64(1)
	}
	return int64(0)
}

const bulkColumns = `id, kind, action, single, filter, params, reason, requested_by, requested_role, status, total, not_legal,
decided_by, decision_reason, cancelled_by, created_at, updated_at, expires_at, finished_at, summary, canary, paused_by, paused_reason`

func scanBulk(scan func(...any) error) (Bulk, error) {
	var (
		b                 Bulk
		single            anyBool
		cr, up, exp, fini anyTime
	)
	err := scan(&b.ID, &b.Kind, &b.Action, &single, &b.Filter, &b.Params, &b.Reason, &b.RequestedBy, &b.RequestedRole, &b.Status,
		&b.Total, &b.NotLegal, &b.DecidedBy, &b.DecisionReason, &b.CancelledBy, &cr, &up, &exp, &fini, &b.Summary, &b.Canary, &b.PausedBy, &b.PausedReason)
	b.Single, b.CreatedAt, b.UpdatedAt, b.ExpiresAt, b.FinishedAt = single.b, cr.t, up.t, exp.t, fini.t
	return b, err
}

// CreateBulk records b (its ID, times but ExpiresAt, and counts are
// ignored) with its items, in one transaction, and returns it with its ID.
// Items get Seq 1…n in the order given and the outcome pending.
func (d *DB) CreateBulk(ctx context.Context, b Bulk, items []BulkItem) (Bulk, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	b.CreatedAt, b.UpdatedAt, b.Total = now, now, int64(len(items))
	c := bulkConn{d}
	args := []any{b.Kind, b.Action, c.boolArg(b.Single), b.Filter, b.Params, b.Reason, b.RequestedBy, b.RequestedRole, b.Status,
		b.Total, b.NotLegal, c.ts(now), c.ts(b.ExpiresAt), b.Summary, b.Canary}
	const ins = `INSERT INTO unstuck_console_bulk (kind, action, single, filter, params, reason, requested_by, requested_role, status,
total, not_legal, created_at, updated_at, expires_at, summary, canary) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14, $15) RETURNING id`
	if d.dialect == DialectPostgres {
		err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, ins, args...).Scan(&b.ID); err != nil {
				return err
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"unstuck_console_bulk_item"}, []string{"bulk_id", "seq", "target_id", "version", "step"},
				pgx.CopyFromSlice(len(items), func(i int) ([]any, error) {
					return []any{b.ID, int32(i + 1), items[i].TargetID, items[i].Version, items[i].Step}, nil
				}))
			return err
		})
		if err != nil {
			return Bulk{}, fmt.Errorf("store: create bulk request: %w", pgMapError(err))
		}
		return b, nil
	}
	tx, err := d.sqlite.BeginTx(ctx, nil)
	if err != nil {
		return Bulk{}, fmt.Errorf("store: create bulk request: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if d.dialect == DialectMySQL {
		// No RETURNING: the id is the insert's AUTO_INCREMENT.
		q, a := c.sqlArgs(strings.TrimSuffix(ins, " RETURNING id"), args)
		res, err := tx.ExecContext(ctx, q, a...)
		if err == nil {
			b.ID, err = res.LastInsertId()
		}
		if err != nil {
			return Bulk{}, fmt.Errorf("store: create bulk request: %w", err)
		}
	} else if err := tx.QueryRowContext(ctx, c.q(ins), args...).Scan(&b.ID); err != nil {
		return Bulk{}, fmt.Errorf("store: create bulk request: %w", err)
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO unstuck_console_bulk_item (bulk_id, seq, target_id, version, step) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return Bulk{}, fmt.Errorf("store: create bulk request: %w", err)
	}
	defer func() { _ = st.Close() }()
	for i, it := range items {
		if _, err := st.ExecContext(ctx, b.ID, i+1, it.TargetID, it.Version, it.Step); err != nil {
			return Bulk{}, fmt.Errorf("store: create bulk request: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Bulk{}, fmt.Errorf("store: create bulk request: %w", err)
	}
	return b, nil
}

// BulkByID returns request id with its counts per outcome.
func (d *DB) BulkByID(ctx context.Context, id int64) (Bulk, bool, error) {
	c := bulkConn{d}
	var (
		b     Bulk
		found bool
	)
	err := c.each(ctx, `SELECT `+bulkColumns+` FROM unstuck_console_bulk WHERE id = $1`, []any{id}, func(scan func(...any) error) error {
		var err error
		b, err = scanBulk(scan)
		found = true
		return err
	})
	if err != nil || !found {
		return Bulk{}, false, wrapBulk("read bulk request", err)
	}
	b.Counts = map[string]int64{}
	err = c.each(ctx, `SELECT outcome, count(*), min(decided_at), max(decided_at) FROM unstuck_console_bulk_item WHERE bulk_id = $1
GROUP BY outcome`, []any{id},
		func(scan func(...any) error) error {
			var (
				o           string
				n           int64
				first, last anyTime
			)
			if err := scan(&o, &n, &first, &last); err != nil {
				return err
			}
			b.Counts[o] = n
			if !first.t.IsZero() && (b.FirstDecided.IsZero() || first.t.Before(b.FirstDecided)) {
				b.FirstDecided = first.t
			}
			if last.t.After(b.LastDecided) {
				b.LastDecided = last.t
			}
			return nil
		})
	if err != nil {
		return Bulk{}, false, wrapBulk("count bulk items", err)
	}
	return b, true, nil
}

// ListBulk returns up to limit requests, newest first; status "" lists
// every status but drafts.
func (d *DB) ListBulk(ctx context.Context, status string, limit int) ([]Bulk, error) {
	c := bulkConn{d}
	var out []Bulk
	err := c.each(ctx, `SELECT `+bulkColumns+` FROM unstuck_console_bulk WHERE (($1 = '' AND status <> 'draft') OR status = $1)
ORDER BY id DESC LIMIT $2`,
		[]any{status, limit}, func(scan func(...any) error) error {
			b, err := scanBulk(scan)
			out = append(out, b)
			return err
		})
	return out, wrapBulk("list bulk requests", err)
}

// CountBulk counts the requests in status.
func (d *DB) CountBulk(ctx context.Context, status string) (int64, error) {
	var n int64
	err := bulkConn{d}.each(ctx, `SELECT count(*) FROM unstuck_console_bulk WHERE status = $1`, []any{status},
		func(scan func(...any) error) error { return scan(&n) })
	return n, wrapBulk("count bulk requests", err)
}

// SetBulkStatus moves request id from one of from to status to, recording
// by and reason as its approver (to running or rejected from waiting),
// who paused it and why (paused), or its canceller (cancelled); a resume
// (paused to running) clears the pause. It reports false, and changes
// nothing, when the request is in none of from.
func (d *DB) SetBulkStatus(ctx context.Context, id int64, from []string, to, by, reason string) (bool, error) {
	c := bulkConn{d}
	args := []any{id, to, c.ts(time.Now())}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	set := `status = $2, updated_at = $3`
	switch {
	case to == BulkRunning && slices.Equal(from, []string{BulkPaused}):
		set += `, paused_by = '', paused_reason = ''`
	case to == BulkPaused:
		set += `, paused_by = ` + arg(by) + `, paused_reason = ` + arg(reason)
	case to == BulkRunning, to == BulkRejected:
		set += `, decided_by = ` + arg(by) + `, decision_reason = ` + arg(reason)
	case to == BulkCancelled:
		set += `, cancelled_by = ` + arg(by)
		if reason != "" {
			set += `, decision_reason = ` + arg(reason)
		}
	}
	if to != BulkRunning && to != BulkWaitingApproval && to != BulkPaused {
		set += `, finished_at = $3`
	}
	in := make([]string, len(from))
	for i, s := range from {
		in[i] = arg(s)
	}
	n, err := c.exec(ctx, `UPDATE unstuck_console_bulk SET `+set+` WHERE id = $1 AND status IN (`+strings.Join(in, ", ")+`)`, args...)
	if err != nil {
		return false, wrapBulk("set bulk status", err)
	}
	return n == 1, nil
}

// SubmitBulk moves draft id of by to status to (waiting_approval or
// running) with the request's reason and expiry; it reports false, and
// changes nothing, when id is not a draft of by.
func (d *DB) SubmitBulk(ctx context.Context, id int64, by, to, reason string, expiresAt time.Time) (bool, error) {
	c := bulkConn{d}
	n, err := c.exec(ctx, `UPDATE unstuck_console_bulk SET status = $2, reason = $3, expires_at = $4, updated_at = $5
WHERE id = $1 AND status = 'draft' AND requested_by = $6`, id, to, reason, c.ts(expiresAt), c.ts(time.Now()), by)
	if err != nil {
		return false, wrapBulk("submit bulk request", err)
	}
	return n == 1, nil
}

// ExpireBulk moves the requests waiting for approval whose expiry has
// passed to expired, and returns their IDs; it deletes the drafts past
// theirs, which decided nothing.
func (d *DB) ExpireBulk(ctx context.Context, now time.Time) ([]int64, error) {
	c := bulkConn{d}
	for _, q := range []string{
		`DELETE FROM unstuck_console_bulk_item WHERE bulk_id IN (SELECT id FROM unstuck_console_bulk WHERE status = 'draft' AND expires_at <= $1)`,
		`DELETE FROM unstuck_console_bulk WHERE status = 'draft' AND expires_at <= $1`,
	} {
		if _, err := c.exec(ctx, q, c.ts(now)); err != nil {
			return nil, wrapBulk("delete expired drafts", err)
		}
	}
	var ids []int64
	err := c.each(ctx, `SELECT id FROM unstuck_console_bulk WHERE status = $1 AND expires_at IS NOT NULL AND expires_at <= $2`,
		[]any{BulkWaitingApproval, c.ts(now)}, func(scan func(...any) error) error {
			var id int64
			err := scan(&id)
			ids = append(ids, id)
			return err
		})
	if err != nil {
		return nil, wrapBulk("expire bulk requests", err)
	}
	var out []int64
	for _, id := range ids {
		ok, err := d.SetBulkStatus(ctx, id, []string{BulkWaitingApproval}, BulkExpired, "", "")
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// BulkItems returns up to limit items of request id after seq after, in
// order; outcome "" returns every outcome.
func (d *DB) BulkItems(ctx context.Context, id int64, outcome string, after, limit int) ([]BulkItem, error) {
	var out []BulkItem
	err := bulkConn{d}.each(ctx, `SELECT seq, target_id, version, step, outcome, detail, decided_at FROM unstuck_console_bulk_item
WHERE bulk_id = $1 AND ($2 = '' OR outcome = $2) AND seq > $3 ORDER BY seq LIMIT $4`, []any{id, outcome, after, limit},
		func(scan func(...any) error) error {
			var (
				it BulkItem
				at anyTime
			)
			err := scan(&it.Seq, &it.TargetID, &it.Version, &it.Step, &it.Outcome, &it.Detail, &at)
			it.DecidedAt = at.t
			out = append(out, it)
			return err
		})
	return out, wrapBulk("read bulk items", err)
}

func wrapBulk(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// DecidedBy returns the newest other request of kind than id that applied
// its decision to target: the reason an item both hold is skipped by the
// later run.
func (d *DB) DecidedBy(ctx context.Context, kind, target string, id int64) (int64, bool, error) {
	var (
		other int64
		found bool
	)
	err := bulkConn{d}.each(ctx, `SELECT i.bulk_id FROM unstuck_console_bulk_item i JOIN unstuck_console_bulk b ON b.id = i.bulk_id
WHERE i.target_id = $1 AND i.bulk_id <> $2 AND i.outcome = 'applied' AND b.kind = $3 ORDER BY i.bulk_id DESC LIMIT 1`,
		[]any{target, id, kind}, func(scan func(...any) error) error {
			found = true
			return scan(&other)
		})
	return other, found, wrapBulk("find the request that decided an item", err)
}

// BulkStatus returns the status of request id alone: what a run checks
// between items, without counting them.
func (d *DB) BulkStatus(ctx context.Context, id int64) (string, bool, error) {
	var (
		status string
		found  bool
	)
	err := bulkConn{d}.each(ctx, `SELECT status FROM unstuck_console_bulk WHERE id = $1`, []any{id}, func(scan func(...any) error) error {
		found = true
		return scan(&status)
	})
	return status, found, wrapBulk("read bulk status", err)
}
