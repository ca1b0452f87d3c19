package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Statistics is what the planner knows of the operation table, for the
// estimated counts: its row count and the most common statuses with their
// frequencies, as of Analyzed (nil when never analyzed). Rows < 0 means
// never counted.
type Statistics struct {
	Rows     float64
	Analyzed *time.Time
	Values   []string
	Freqs    []float64
}

// listColumns are the operation's columns without the input, which lists
// do not read, in scanListed's order.
const listColumns = `id, type, status, correlation_id, current_step, last_error, review_reason, resolution, version, created_at, updated_at, finished_at, definition_version`

func scanListed(rows Rows) (sagadriver.Operation, error) {
	var op sagadriver.Operation
	var status string
	if err := rows.Scan(&op.ID, &op.Type, &status, &op.CorrelationID, &op.CurrentStep, &op.LastError, &op.ReviewReason,
		&op.Resolution, &op.Version, reqTime{&op.CreatedAt}, reqTime{&op.UpdatedAt}, nullTime{&op.FinishedAt},
		&op.DefinitionVersion); err != nil {
		return op, fmt.Errorf("scan operation: %w", err)
	}
	op.Status = sagadriver.Status(status)
	if !slices.Contains(sagadriver.Statuses, op.Status) {
		return op, fmt.Errorf("operation %q has unknown status %q", op.ID, status)
	}
	return op, nil
}

func (s Store) listed(ctx context.Context, q Querier, query string, args ...any) ([]sagadriver.Operation, error) {
	rows, done, err := q.Query(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("select operations: %w", err)
	}
	defer done()
	var ops []sagadriver.Operation
	for rows.Next() {
		op, err := scanListed(rows)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select operations: %w", err)
	}
	return ops, nil
}

// filter builds the WHERE clause of a checked filter, each condition
// written so that an index of migration 003 serves it.
type filter struct {
	s     Store
	conds []string
	args  []any
}

func (w *filter) arg(v any) string {
	w.args = append(w.args, v)
	return fmt.Sprintf("$%d", len(w.args))
}

func (w *filter) add(f sagadriver.OperationFilter) {
	if f.Status != "" {
		w.conds = append(w.conds, "status = "+w.arg(string(f.Status)))
	}
	if f.Type != "" {
		w.conds = append(w.conds, "type = "+w.arg(f.Type))
	}
	if f.CorrelationID != "" {
		w.conds = append(w.conds, "correlation_id = "+w.arg(f.CorrelationID)+" AND correlation_id <> ''")
	}
	if f.ExternalID != "" {
		w.conds = append(w.conds, "id IN (SELECT s.operation_id FROM unstuck_saga_step s WHERE s.external_id = "+
			w.arg(f.ExternalID)+" AND s.external_id <> '')")
	}
	if !f.From.IsZero() {
		w.conds = append(w.conds, "updated_at >= "+w.arg(w.s.D.Time(f.From)))
	}
	if !f.To.IsZero() {
		w.conds = append(w.conds, "updated_at < "+w.arg(w.s.D.Time(f.To)))
	}
}

func (w *filter) where() string {
	if len(w.conds) == 0 {
		return ""
	}
	return "\nWHERE " + strings.Join(w.conds, " AND ")
}

// ListSQL returns the list query of q and its arguments: newest change
// first (oldest first for OrderOldest), keyset on (updated_at, id), one row more than the page. Exported
// for the drivers' query-plan tests.
func (s Store) ListSQL(q sagadriver.OperationQuery) (string, []any) {
	w := filter{s: s}
	w.add(q.OperationFilter)
	cmp, dir := "<", "DESC"
	if q.Order.Oldest() {
		cmp, dir = ">", "ASC"
	}
	if q.HasAfter {
		w.conds = append(w.conds, "(updated_at, id) "+cmp+" ("+w.arg(s.D.Time(q.AfterUpdatedAt))+", "+w.arg(q.AfterID)+")")
	}
	return s.q(`SELECT ` + listColumns + `
FROM unstuck_saga_operation` + w.where() + `
ORDER BY updated_at ` + dir + `, id ` + dir + `
LIMIT ` + w.arg(q.Limit+1)), w.args
}

// CountFiltered implements sagadriver.Admin: the filter's operations
// counted up to upTo+1, a scan that stops there.
func (s Store) CountFiltered(ctx context.Context, q Querier, f sagadriver.OperationFilter, upTo int) (sagadriver.FilteredCount, error) {
	f.After = "" // ignored, as the contract says
	qu, err := f.Check()
	if err != nil {
		return sagadriver.FilteredCount{}, err
	}
	if upTo <= 0 {
		upTo = sagadriver.DefaultCountCap
	}
	upTo = min(upTo, sagadriver.MaxCountCap)
	w := filter{s: s}
	w.add(qu.OperationFilter)
	var n int64
	query := `SELECT count(*) FROM (SELECT 1 FROM unstuck_saga_operation` + w.where() + `
LIMIT ` + w.arg(upTo+1) + `) c`
	if err := s.count(ctx, q, &n, query, w.args...); err != nil {
		return sagadriver.FilteredCount{}, err
	}
	if n > int64(upTo) {
		return sagadriver.FilteredCount{N: int64(upTo)}, nil
	}
	return sagadriver.FilteredCount{N: n, Exact: true}, nil
}

// PageOperations implements sagadriver.Admin.
func (s Store) PageOperations(ctx context.Context, q Querier, f sagadriver.OperationFilter) (sagadriver.OperationPage, error) {
	qu, err := f.Check()
	if err != nil {
		return sagadriver.OperationPage{}, err
	}
	query, args := s.ListSQL(qu)
	ops, err := s.listed(ctx, q, query, args...)
	if err != nil {
		return sagadriver.OperationPage{}, err
	}
	return sagadriver.NewOperationPage(qu, ops), nil
}

// ReviewRequiredSQL takes $1 the limit: the head of the (status,
// updated_at, id) index.
const ReviewRequiredSQL = `SELECT ` + listColumns + `
FROM unstuck_saga_operation
WHERE status = 'review_required'
ORDER BY updated_at, id
LIMIT $1`

// ReviewRequired implements sagadriver.Admin.
func (s Store) ReviewRequired(ctx context.Context, q Querier, limit int) ([]sagadriver.Operation, error) {
	return s.listed(ctx, q, ReviewRequiredSQL, sagadriver.ClampLimit(limit))
}

// EachOperation implements sagadriver.Admin; read runs one batch's
// statement, each in a transaction of its own.
func (s Store) EachOperation(ctx context.Context, read func(ctx context.Context, fn func(q Querier) error) error, f sagadriver.OperationFilter,
	batchSize int, fn func([]sagadriver.Operation) error) error {
	if f.After != "" {
		return &sagadriver.FieldError{Field: "after", Reason: "EachOperation starts at the first operation"}
	}
	f.Limit = 0
	if _, err := f.Check(); err != nil {
		return err
	}
	batchSize = sagadriver.ClampLimit(batchSize)
	last, first := "", true
	for {
		w := filter{s: s}
		w.add(f)
		if !first {
			w.conds = append(w.conds, "id > "+w.arg(last))
		}
		query := `SELECT ` + listColumns + ` FROM unstuck_saga_operation` + w.where() + ` ORDER BY id LIMIT ` + w.arg(batchSize)
		var batch []sagadriver.Operation
		if err := read(ctx, func(q Querier) error {
			var err error
			batch, err = s.listed(ctx, q, query, w.args...)
			return err
		}); err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		if err := fn(batch); err != nil {
			return err
		}
		if len(batch) < batchSize {
			return nil
		}
		last, first = batch[len(batch)-1].ID, false
	}
}

// ReadOperation implements sagadriver.Admin, in q's snapshot.
func (s Store) ReadOperation(ctx context.Context, q Querier, id string, maxEvents int) (sagadriver.OperationDetail, error) {
	if maxEvents <= 0 {
		maxEvents = sagadriver.DefaultMaxEvents
	}
	var det sagadriver.OperationDetail
	now, err := s.Now(ctx, q, s.D.NowSQL)
	if err != nil {
		return det, err
	}
	det.ReadAt = now
	if det.Operation, err = s.GetOperation(ctx, q, id, false); err != nil {
		return det, err
	}
	rows, done, err := q.Query(ctx, s.q(`SELECT id, operation_id, step, action, from_status, to_status, actor, message, attempt, at
FROM unstuck_saga_event WHERE operation_id = $1 ORDER BY id DESC LIMIT $2`), id, maxEvents+1)
	if err != nil {
		return det, fmt.Errorf("select events: %w", err)
	}
	for rows.Next() {
		var e sagadriver.Event
		if err := rows.Scan(&e.ID, &e.OperationID, &e.Step, &e.Action, &e.From, &e.To, &e.Actor, &e.Message, &e.Attempt, reqTime{&e.At}); err != nil {
			done()
			return det, fmt.Errorf("scan event: %w", err)
		}
		det.Events = append(det.Events, e)
	}
	err = rows.Err()
	done()
	if err != nil {
		return det, fmt.Errorf("select events: %w", err)
	}
	if len(det.Events) > maxEvents {
		det.Events = det.Events[:maxEvents]
		if err := s.count(ctx, q, &det.EventsOmitted, `SELECT count(*) FROM unstuck_saga_event WHERE operation_id = $1 AND id < $2`,
			id, det.Events[maxEvents-1].ID); err != nil {
			return det, fmt.Errorf("count events: %w", err)
		}
	}
	slices.Reverse(det.Events)
	if det.Findings, err = s.ListFindings(ctx, q, id, false); err != nil {
		return det, err
	}
	return det, nil
}

func (s Store) count(ctx context.Context, q Querier, dst *int64, query string, args ...any) error {
	rows, done, err := q.Query(ctx, s.q(query), args...)
	if err != nil {
		return err
	}
	defer done()
	if !rows.Next() {
		return errors.Join(errors.New("no row"), rows.Err())
	}
	return errors.Join(rows.Scan(dst), rows.Err())
}

// CountsSQL counts, for each status of $1 in that order, its operations
// up to $2 (an index-only scan of the (status, updated_at, id) index that
// stops there) and its least updated_at. PostgreSQL only.
const CountsSQL = `SELECT s.status,
    (SELECT count(*) FROM (SELECT 1 FROM unstuck_saga_operation o WHERE o.status = s.status LIMIT $2) c),
    (SELECT min(o.updated_at) FROM unstuck_saga_operation o WHERE o.status = s.status)
FROM unnest($1::text[]) WITH ORDINALITY AS s(status, n)
ORDER BY s.n`

// exactCountsSQL counts every status exactly, with its least updated_at,
// in one pass over the (status, updated_at, id) index.
const exactCountsSQL = `SELECT status, count(*), min(updated_at) FROM unstuck_saga_operation GROUP BY status`

// CountOperations implements sagadriver.Admin. With D.Statistics it counts
// each status up to exactUpTo and estimates beyond; without, it counts
// every status exactly.
func (s Store) CountOperations(ctx context.Context, q Querier, exactUpTo int) (sagadriver.OperationCounts, error) {
	if exactUpTo <= 0 {
		exactUpTo = sagadriver.DefaultCountCap
	}
	now, err := s.Now(ctx, q, s.D.NowSQL)
	if err != nil {
		return sagadriver.OperationCounts{}, err
	}
	o := sagadriver.OperationCounts{AsOf: now}
	found := map[sagadriver.Status]sagadriver.OperationCount{}
	var rows Rows
	var done func()
	if s.D.Statistics != nil {
		statuses := make([]string, len(sagadriver.Statuses))
		for i, st := range sagadriver.Statuses {
			statuses[i] = string(st)
		}
		rows, done, err = q.Query(ctx, CountsSQL, statuses, exactUpTo+1)
	} else {
		rows, done, err = q.Query(ctx, exactCountsSQL)
	}
	if err != nil {
		return o, fmt.Errorf("count operations: %w", err)
	}
	capped := false
	for rows.Next() {
		var (
			c      sagadriver.OperationCount
			status string
			oldest *time.Time
		)
		if err := rows.Scan(&status, &c.Count, nullTime{&oldest}); err != nil {
			done()
			return o, fmt.Errorf("count operations: %w", err)
		}
		c.Status = sagadriver.Status(status)
		c.Exact = s.D.Statistics == nil || c.Count <= int64(exactUpTo)
		capped = capped || !c.Exact
		if oldest != nil {
			c.Oldest = *oldest
		}
		found[c.Status] = c
	}
	err = rows.Err()
	done()
	if err != nil {
		return o, fmt.Errorf("count operations: %w", err)
	}
	for _, st := range sagadriver.Statuses {
		c, ok := found[st]
		if !ok {
			c = sagadriver.OperationCount{Status: st, Exact: true}
		}
		o.Counts = append(o.Counts, c)
	}
	if !capped {
		return o, nil
	}
	stats, err := s.D.Statistics(ctx, q)
	if err != nil {
		return o, fmt.Errorf("read statistics: %w", err)
	}
	estimated := false
	for i, c := range o.Counts {
		if c.Exact {
			continue
		}
		k := slices.Index(stats.Values, string(c.Status))
		if stats.Rows < 0 || k < 0 || k >= len(stats.Freqs) {
			continue // no statistics: keep the capped count, a lower bound
		}
		o.Counts[i].Count = max(int64(math.Round(stats.Rows*stats.Freqs[k])), c.Count)
		estimated = true
	}
	if estimated && stats.Analyzed != nil {
		o.AsOf = stats.Analyzed.UTC()
	}
	return o, nil
}
