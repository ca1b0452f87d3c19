package store

// The PostgreSQL half of the operations read model. Tables are the saga
// driver's (saga/sagapgx), in the pool's search_path; times are
// timestamptz written by the engine's clock, JSON is jsonb read as text.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/unstuckhq/unstuck/saga"
)

// pgOpColumns are the operation's columns in pgScanOperation's order,
// without the input, which only the detail reads.
const pgOpColumns = `id, type, status, correlation_id, current_step, last_error, review_reason, resolution,
    version, created_at, updated_at, finished_at`

// pgOperationListSQL returns the list query of q and its arguments: newest
// change first, keyset on (updated_at, id), one row more than the page.
func pgOperationListSQL(q opQuery) (string, []any) {
	w := where{
		placeholder: dollar,
		timeArg:     func(t time.Time) any { return t },
		now:         func(*where) string { return "statement_timestamp()" },
	}
	w.operations(q)
	sql := `SELECT ` + pgOpColumns + `
FROM unstuck_saga_operation
` + w.sql() + `
ORDER BY updated_at DESC, id DESC
LIMIT ` + w.arg(q.Limit+1)
	return sql, w.args
}

// pgReviewRequiredSQL takes $1 the limit: the head of the (status,
// updated_at, id) index.
const pgReviewRequiredSQL = `SELECT ` + pgOpColumns + `
FROM unstuck_saga_operation
WHERE status = 'review_required'
ORDER BY updated_at, id
LIMIT $1`

// $1 id.
const pgOperationSQL = `SELECT ` + pgOpColumns + `, input::text, statement_timestamp()
FROM unstuck_saga_operation
WHERE id = $1`

// $1 operation id. The primary key (operation_id, name) finds them.
const pgStepsSQL = `SELECT name, seq, kind, system, status, idempotency_key, external_id, result::text,
    attempts, max_attempts, verifications, last_error, last_error_class, compensable, comp_seq, comp_key,
    comp_status, comp_attempts, comp_max_attempts, comp_error, generation, started_at, finished_at, updated_at
FROM unstuck_saga_step
WHERE operation_id = $1
ORDER BY seq`

// $1 operation id, $2 how many: the latest first.
const pgEventsSQL = `SELECT id, operation_id, step, action, from_status, to_status, actor, message, attempt, at
FROM unstuck_saga_event
WHERE operation_id = $1
ORDER BY id DESC
LIMIT $2`

// $1 operation id, $2 the least event id returned.
const pgEventsBeforeSQL = `SELECT count(*) FROM unstuck_saga_event WHERE operation_id = $1 AND id < $2`

// $1 operation id.
const pgFindingsSQL = `SELECT id, operation_id, step, kind, external_id, detail, detected_at, resolved_at
FROM unstuck_saga_finding
WHERE operation_id = $1
ORDER BY id`

// pgOperationCountsSQL counts, for each status of $1 in that order, its
// operations up to $2 (an index-only scan of the (status, updated_at, id)
// index that stops there) and its least updated_at, with the clock.
const pgOperationCountsSQL = `SELECT s.status,
    (SELECT count(*) FROM (SELECT 1 FROM unstuck_saga_operation o WHERE o.status = s.status LIMIT $2) c),
    (SELECT min(o.updated_at) FROM unstuck_saga_operation o WHERE o.status = s.status),
    statement_timestamp()
FROM unnest($1::text[]) WITH ORDINALITY AS s(status, n)
ORDER BY s.n`

// pgOperationStatsSQL is pgStatusStatsSQL for unstuck_saga_operation.
const pgOperationStatsSQL = `SELECT c.reltuples::float8,
    greatest(st.last_analyze, st.last_autoanalyze),
    s.most_common_vals::text::text[],
    s.most_common_freqs::float8[]
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
    AND s.attname = 'status' AND NOT s.inherited
WHERE c.oid = 'unstuck_saga_operation'::regclass`

func pgListOperations(ctx context.Context, db pgExecutor, q opQuery) ([]saga.Operation, error) {
	sql, args := pgOperationListSQL(q)
	return pgQueryOperations(ctx, db, sql, args...)
}

func pgReviewRequired(ctx context.Context, db pgExecutor, limit int) ([]saga.Operation, error) {
	return pgQueryOperations(ctx, db, pgReviewRequiredSQL, limit)
}

func pgQueryOperations(ctx context.Context, db pgExecutor, sql string, args ...any) ([]saga.Operation, error) {
	rows, err := db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...) // planned per call, as pgQueryRecords
	if err != nil {
		return nil, pgSagaError(err)
	}
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (saga.Operation, error) { return pgScanOperation(row) })
	if err != nil {
		return nil, pgSagaError(err)
	}
	return ops, nil
}

// pgBeginner begins transactions: *pgxpool.Pool and *pgx.Conn satisfy it.
type pgBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// pgOperation reads the detail in one REPEATABLE READ, read-only
// transaction, so that the steps and events agree with the operation.
func pgOperation(ctx context.Context, pool pgBeginner, id string, maxEvents int) (OperationDetail, bool, error) {
	var (
		det OperationDetail
		ok  bool
	)
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var (
			err   error
			input *string
		)
		det.Operation, err = pgScanOperation(tx.QueryRow(ctx, pgOperationSQL, id), &input, &det.ReadAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		det.ReadAt = det.ReadAt.UTC()
		if input != nil {
			det.Operation.Input = []byte(*input)
		}
		if det.Operation.Steps, err = pgSteps(ctx, tx, id); err != nil {
			return err
		}
		if det.Events, det.EventsOmitted, err = pgEvents(ctx, tx, id, maxEvents); err != nil {
			return err
		}
		det.Findings, err = pgFindings(ctx, tx, id)
		return err
	})
	if err != nil {
		return OperationDetail{}, false, pgSagaError(err)
	}
	return det, ok, nil
}

func pgSteps(ctx context.Context, tx pgx.Tx, id string) ([]saga.StepRecord, error) {
	rows, err := tx.Query(ctx, pgStepsSQL, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (saga.StepRecord, error) {
		var (
			st                        saga.StepRecord
			kind, status, class, comp string
			result                    *string
			startedAt, finishedAt     *time.Time
		)
		err := row.Scan(&st.Name, &st.Seq, &kind, &st.System, &status, &st.Key, &st.ExternalID, &result,
			&st.Attempts, &st.MaxAttempts, &st.Verifications, &st.LastError, &class, &st.Compensable, &st.CompSeq,
			&st.CompKey, &comp, &st.CompAttempts, &st.CompMaxAttempts, &st.CompError, &st.Generation,
			&startedAt, &finishedAt, &st.UpdatedAt)
		if err != nil {
			return saga.StepRecord{}, err
		}
		st.Kind, st.Status, st.LastErrorClass, st.CompStatus = saga.Kind(kind), saga.StepStatus(status), saga.Class(class), saga.CompStatus(comp)
		if result != nil {
			st.Result = []byte(*result)
		}
		st.StartedAt, st.FinishedAt = utcPtr(startedAt), utcPtr(finishedAt)
		st.UpdatedAt = st.UpdatedAt.UTC()
		return st, nil
	})
}

// pgEvents returns the latest max events of an operation, oldest first,
// and how many earlier ones it left out.
func pgEvents(ctx context.Context, tx pgx.Tx, id string, max int) ([]saga.Event, int64, error) {
	rows, err := tx.Query(ctx, pgEventsSQL, id, max+1)
	if err != nil {
		return nil, 0, err
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (saga.Event, error) {
		var e saga.Event
		err := row.Scan(&e.ID, &e.OperationID, &e.Step, &e.Action, &e.From, &e.To, &e.Actor, &e.Message, &e.Attempt, &e.At)
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, 0, err
	}
	var omitted int64
	if len(evs) > max {
		evs = evs[:max]
		if err := tx.QueryRow(ctx, pgEventsBeforeSQL, id, evs[len(evs)-1].ID).Scan(&omitted); err != nil {
			return nil, 0, err
		}
	}
	reverseEvents(evs)
	return evs, omitted, nil
}

func pgFindings(ctx context.Context, tx pgx.Tx, id string) ([]saga.Finding, error) {
	rows, err := tx.Query(ctx, pgFindingsSQL, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (saga.Finding, error) {
		var (
			f        saga.Finding
			resolved *time.Time
		)
		err := row.Scan(&f.ID, &f.OperationID, &f.Step, &f.Kind, &f.ExternalID, &f.Detail, &f.DetectedAt, &resolved)
		f.DetectedAt = f.DetectedAt.UTC()
		f.ResolvedAt = utcPtr(resolved)
		return f, err
	})
}

func pgOperationOverview(ctx context.Context, db pgExecutor, countCap int) (OperationOverview, error) {
	statuses := make([]string, len(saga.Statuses))
	for i, s := range saga.Statuses {
		statuses[i] = string(s)
	}
	rows, err := db.Query(ctx, pgOperationCountsSQL, statuses, countCap+1)
	if err != nil {
		return OperationOverview{}, pgSagaError(err)
	}
	var (
		o      OperationOverview
		now    time.Time
		capped bool
	)
	for rows.Next() {
		var (
			c      OperationCount
			status string
			oldest *time.Time
		)
		if err := rows.Scan(&status, &c.Count, &oldest, &now); err != nil {
			rows.Close()
			return OperationOverview{}, pgSagaError(err)
		}
		c.Status = saga.Status(status)
		c.Exact = c.Count <= int64(countCap)
		capped = capped || !c.Exact
		if oldest != nil {
			c.Oldest = oldest.UTC()
		}
		o.Counts = append(o.Counts, c)
	}
	if err := rows.Err(); err != nil {
		return OperationOverview{}, pgSagaError(err)
	}
	o.AsOf = now.UTC()
	if !capped {
		return o, nil
	}
	var (
		reltuples float64
		analyzed  *time.Time
		vals      []string
		freqs     []float64
	)
	if err := db.QueryRow(ctx, pgOperationStatsSQL).Scan(&reltuples, &analyzed, &vals, &freqs); err != nil {
		return OperationOverview{}, pgSagaError(err)
	}
	estimated := false
	for i, c := range o.Counts {
		if c.Exact {
			continue
		}
		k := slices.Index(vals, string(c.Status))
		if reltuples < 0 || k < 0 || k >= len(freqs) {
			continue // no statistics: keep the capped count, a lower bound
		}
		o.Counts[i].Count = max(int64(math.Round(reltuples*freqs[k])), c.Count)
		estimated = true
	}
	if estimated && analyzed != nil {
		o.AsOf = analyzed.UTC()
	}
	return o, nil
}

// pgScanOperation scans one row of pgOpColumns, then extra (the detail's
// input and clock). Times are UTC.
func pgScanOperation(row pgx.Row, extra ...any) (saga.Operation, error) {
	var (
		op       saga.Operation
		status   string
		finished *time.Time
	)
	dest := append([]any{&op.ID, &op.Type, &status, &op.CorrelationID, &op.CurrentStep, &op.LastError,
		&op.ReviewReason, &op.Resolution, &op.Version, &op.CreatedAt, &op.UpdatedAt, &finished}, extra...)
	if err := row.Scan(dest...); err != nil {
		return saga.Operation{}, err
	}
	op.Status = saga.Status(status)
	if !slices.Contains(saga.Statuses, op.Status) {
		return saga.Operation{}, fmt.Errorf("operation %q has unknown status %q", op.ID, status)
	}
	op.CreatedAt = op.CreatedAt.UTC()
	op.UpdatedAt = op.UpdatedAt.UTC()
	op.FinishedAt = utcPtr(finished)
	return op, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// pgSagaError maps undefined_table to errNoSagaTables (every query of the
// read model reads saga tables only) and anything else as pgMapError does.
func pgSagaError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return fmt.Errorf("%w: %w", errNoSagaTables, err)
	}
	return pgMapError(err)
}
