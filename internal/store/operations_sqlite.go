package store

// The SQLite half of the operations read model. Tables are the saga
// driver's (saga/sagasqlite): times are INTEGER Unix microseconds, UTC,
// JSON is TEXT, booleans are INTEGER.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/unstuckhq/unstuck/saga"
)

// sqliteOpColumns are the operation's columns in sqliteScanOperation's
// order, without the input, which only the detail reads.
const sqliteOpColumns = `id, type, status, correlation_id, current_step, last_error, review_reason, resolution,
    version, created_at, updated_at, finished_at`

// sqliteOperationListSQL returns the list query of q and its arguments:
// newest change first, keyset on (updated_at, id), one row more than the
// page.
func sqliteOperationListSQL(q opQuery) (string, []any) {
	w := where{
		placeholder: question,
		timeArg:     func(t time.Time) any { return t.UnixMicro() },
		now:         func(w *where) string { return w.arg(sqliteClock().UnixMicro()) },
	}
	w.operations(q)
	sql := `SELECT ` + sqliteOpColumns + `
FROM unstuck_saga_operation
` + w.sql() + `
ORDER BY updated_at DESC, id DESC
LIMIT ` + w.arg(q.Limit+1)
	return sql, w.args
}

// sqliteReviewRequiredSQL takes ?1 the limit.
const sqliteReviewRequiredSQL = `SELECT ` + sqliteOpColumns + `
FROM unstuck_saga_operation
WHERE status = 'review_required'
ORDER BY updated_at, id
LIMIT ?1`

// ?1 id.
const sqliteOperationSQL = `SELECT ` + sqliteOpColumns + `, input
FROM unstuck_saga_operation
WHERE id = ?1`

// ?1 operation id.
const sqliteStepsSQL = `SELECT name, seq, kind, system, status, idempotency_key, external_id, result,
    attempts, max_attempts, verifications, last_error, last_error_class, compensable, comp_seq, comp_key,
    comp_status, comp_attempts, comp_max_attempts, comp_error, generation, started_at, finished_at, updated_at
FROM unstuck_saga_step
WHERE operation_id = ?1
ORDER BY seq`

// ?1 operation id, ?2 how many: the latest first.
const sqliteEventsSQL = `SELECT id, operation_id, step, action, from_status, to_status, actor, message, attempt, at
FROM unstuck_saga_event
WHERE operation_id = ?1
ORDER BY id DESC
LIMIT ?2`

// ?1 operation id, ?2 the least event id returned.
const sqliteEventsBeforeSQL = `SELECT count(*) FROM unstuck_saga_event WHERE operation_id = ?1 AND id < ?2`

// ?1 operation id.
const sqliteFindingsSQL = `SELECT id, operation_id, step, kind, external_id, detail, detected_at, resolved_at
FROM unstuck_saga_finding
WHERE operation_id = ?1
ORDER BY id`

// sqliteOperationCountsSQL counts every status exactly, with its least
// updated_at, in one pass over the (status, updated_at, id) index.
const sqliteOperationCountsSQL = `SELECT status, count(*), min(updated_at)
FROM unstuck_saga_operation
GROUP BY status`

func sqliteListOperations(ctx context.Context, db sqliteExecutor, q opQuery) ([]saga.Operation, error) {
	query, args := sqliteOperationListSQL(q)
	return sqliteQueryOperations(ctx, db, query, args...)
}

func sqliteReviewRequired(ctx context.Context, db sqliteExecutor, limit int) ([]saga.Operation, error) {
	return sqliteQueryOperations(ctx, db, sqliteReviewRequiredSQL, limit)
}

func sqliteQueryOperations(ctx context.Context, db sqliteExecutor, query string, args ...any) ([]saga.Operation, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sqliteSagaError(err)
	}
	defer rows.Close()
	var ops []saga.Operation
	for rows.Next() {
		op, err := sqliteScanOperation(rows)
		if err != nil {
			return nil, sqliteSagaError(err)
		}
		ops = append(ops, op)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteSagaError(err)
	}
	return ops, nil
}

// sqliteOperation reads the detail in one read transaction, so that the
// steps and events agree with the operation (a WAL snapshot).
func sqliteOperation(ctx context.Context, db *sql.DB, id string, maxEvents int) (det OperationDetail, ok bool, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return OperationDetail{}, false, sqliteSagaError(err)
	}
	defer func() {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) && err == nil {
			err = fmt.Errorf("end read: %w", rerr)
		}
	}()
	det.ReadAt = sqliteClock()
	var input sql.NullString
	det.Operation, err = sqliteScanOperation(tx.QueryRowContext(ctx, sqliteOperationSQL, id), &input)
	if errors.Is(err, sql.ErrNoRows) {
		return OperationDetail{}, false, nil
	}
	if err != nil {
		return OperationDetail{}, false, sqliteSagaError(err)
	}
	if input.Valid {
		det.Operation.Input = []byte(input.String)
	}
	if det.Operation.Steps, err = sqliteSteps(ctx, tx, id); err != nil {
		return OperationDetail{}, false, sqliteSagaError(err)
	}
	if det.Events, det.EventsOmitted, err = sqliteEvents(ctx, tx, id, maxEvents); err != nil {
		return OperationDetail{}, false, sqliteSagaError(err)
	}
	if det.Findings, err = sqliteFindings(ctx, tx, id); err != nil {
		return OperationDetail{}, false, sqliteSagaError(err)
	}
	return det, true, nil
}

func sqliteSteps(ctx context.Context, tx *sql.Tx, id string) ([]saga.StepRecord, error) {
	rows, err := tx.QueryContext(ctx, sqliteStepsSQL, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []saga.StepRecord
	for rows.Next() {
		var (
			st                        saga.StepRecord
			kind, status, class, comp string
			result                    sql.NullString
			compensable               int64
			started, finished         sql.NullInt64
			updated                   int64
		)
		err := rows.Scan(&st.Name, &st.Seq, &kind, &st.System, &status, &st.Key, &st.ExternalID, &result,
			&st.Attempts, &st.MaxAttempts, &st.Verifications, &st.LastError, &class, &compensable, &st.CompSeq,
			&st.CompKey, &comp, &st.CompAttempts, &st.CompMaxAttempts, &st.CompError, &st.Generation,
			&started, &finished, &updated)
		if err != nil {
			return nil, err
		}
		st.Kind, st.Status, st.LastErrorClass, st.CompStatus = saga.Kind(kind), saga.StepStatus(status), saga.Class(class), saga.CompStatus(comp)
		if result.Valid {
			st.Result = []byte(result.String)
		}
		st.Compensable = compensable != 0
		st.StartedAt, st.FinishedAt = microsPtr(started), microsPtr(finished)
		st.UpdatedAt = micros(updated)
		out = append(out, st)
	}
	return out, rows.Err()
}

// sqliteEvents returns the latest max events of an operation, oldest
// first, and how many earlier ones it left out.
func sqliteEvents(ctx context.Context, tx *sql.Tx, id string, max int) ([]saga.Event, int64, error) {
	rows, err := tx.QueryContext(ctx, sqliteEventsSQL, id, max+1)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var evs []saga.Event
	for rows.Next() {
		var (
			e  saga.Event
			at int64
		)
		if err := rows.Scan(&e.ID, &e.OperationID, &e.Step, &e.Action, &e.From, &e.To, &e.Actor, &e.Message, &e.Attempt, &at); err != nil {
			return nil, 0, err
		}
		e.At = micros(at)
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var omitted int64
	if len(evs) > max {
		evs = evs[:max]
		if err := tx.QueryRowContext(ctx, sqliteEventsBeforeSQL, id, evs[len(evs)-1].ID).Scan(&omitted); err != nil {
			return nil, 0, err
		}
	}
	reverseEvents(evs)
	return evs, omitted, nil
}

func sqliteFindings(ctx context.Context, tx *sql.Tx, id string) ([]saga.Finding, error) {
	rows, err := tx.QueryContext(ctx, sqliteFindingsSQL, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []saga.Finding
	for rows.Next() {
		var (
			f        saga.Finding
			detected int64
			resolved sql.NullInt64
		)
		if err := rows.Scan(&f.ID, &f.OperationID, &f.Step, &f.Kind, &f.ExternalID, &f.Detail, &detected, &resolved); err != nil {
			return nil, err
		}
		f.DetectedAt = micros(detected)
		f.ResolvedAt = microsPtr(resolved)
		out = append(out, f)
	}
	return out, rows.Err()
}

// sqliteOperationOverview counts exactly: an embedded database holds few
// enough operations for one pass over the status index.
func sqliteOperationOverview(ctx context.Context, db sqliteExecutor) (OperationOverview, error) {
	now := sqliteClock()
	rows, err := db.QueryContext(ctx, sqliteOperationCountsSQL)
	if err != nil {
		return OperationOverview{}, sqliteSagaError(err)
	}
	defer rows.Close()
	found := make(map[saga.Status]OperationCount, len(saga.Statuses))
	for rows.Next() {
		var (
			status string
			count  int64
			oldest int64
		)
		if err := rows.Scan(&status, &count, &oldest); err != nil {
			return OperationOverview{}, sqliteSagaError(err)
		}
		found[saga.Status(status)] = OperationCount{Status: saga.Status(status), Count: count, Exact: true, Oldest: micros(oldest)}
	}
	if err := rows.Err(); err != nil {
		return OperationOverview{}, sqliteSagaError(err)
	}
	o := OperationOverview{AsOf: now}
	for _, s := range saga.Statuses {
		c, ok := found[s]
		if !ok {
			c = OperationCount{Status: s, Exact: true}
		}
		o.Counts = append(o.Counts, c)
	}
	return o, nil
}

// sqliteScanOperation scans one row of sqliteOpColumns, then extra (the
// detail's input). It returns sql.ErrNoRows unwrapped.
func sqliteScanOperation(row scanner, extra ...any) (saga.Operation, error) {
	var (
		op               saga.Operation
		status           string
		created, updated int64
		finished         sql.NullInt64
	)
	dest := append([]any{&op.ID, &op.Type, &status, &op.CorrelationID, &op.CurrentStep, &op.LastError,
		&op.ReviewReason, &op.Resolution, &op.Version, &created, &updated, &finished}, extra...)
	if err := row.Scan(dest...); err != nil {
		return saga.Operation{}, err
	}
	op.Status = saga.Status(status)
	if !slices.Contains(saga.Statuses, op.Status) {
		return saga.Operation{}, fmt.Errorf("operation %q has unknown status %q", op.ID, status)
	}
	op.CreatedAt = micros(created)
	op.UpdatedAt = micros(updated)
	op.FinishedAt = microsPtr(finished)
	return op, nil
}

func microsPtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := micros(v.Int64)
	return &t
}

// sqliteSagaError maps "no such table" on a saga table to errNoSagaTables.
func sqliteSagaError(err error) error {
	var serr *modernc.Error
	if errors.As(err, &serr) && serr.Code() == sqlite3.SQLITE_ERROR &&
		strings.Contains(serr.Error(), "no such table: unstuck_saga_") {
		return fmt.Errorf("%w: %w", errNoSagaTables, err)
	}
	return sqliteMapError(err)
}
