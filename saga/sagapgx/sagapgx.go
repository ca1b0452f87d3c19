package sagapgx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/migrate/migratepgx"
	"github.com/unstuckhq/unstuck/saga/internal/sqlstore"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

var (
	_ sagadriver.Driver[pgx.Tx] = (*Driver)(nil)
	_ sagadriver.Importer       = (*Driver)(nil)
)

// Driver is a [sagadriver.Driver] on a PostgreSQL pool. It is safe for
// concurrent use; it never closes the pool. Its [sagadriver.Admin] reads
// (PageOperations, ReadOperation, CountOperations, ReviewRequired,
// EachOperation) are described in the package documentation.
type Driver struct {
	pool  *pgxpool.Pool
	store sqlstore.Store
	// admin is sagadriver.Admin, on store, each read in a transaction of
	// read (the package documentation says how).
	admin
}

// admin names the embedded sqlstore.Admin, whose methods are the
// driver's: the admin reads are the same on every SQL database but for
// their read transaction.
type admin = sqlstore.Admin

// New returns a driver on pool, whose tables must be created with
// [Driver.Migrate] before use.
func New(pool *pgxpool.Pool) *Driver {
	d := &Driver{pool: pool, store: sqlstore.Store{D: sqlstore.Dialect{
		Time:      func(t time.Time) any { return t.UTC() },
		JSON:      jsonArg,
		ForUpdate: " FOR UPDATE",
		IsUniqueViolation: func(err error) bool {
			var pgErr *pgconn.PgError
			return errors.As(err, &pgErr) && pgErr.Code == "23505"
		},
		NowSQL:     `SELECT statement_timestamp()`,
		Statistics: statistics,
	}}}
	d.admin = sqlstore.Admin{Store: d.store, Read: d.read, ReadOne: d.readOne}
	return d
}

// statisticsSQL reads what the planner knows of unstuck_saga_operation:
// its row count, when it was last analyzed, and the most common statuses
// with their frequencies.
const statisticsSQL = `SELECT c.reltuples::float8,
    greatest(st.last_analyze, st.last_autoanalyze),
    s.most_common_vals::text::text[],
    s.most_common_freqs::float8[]
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
    AND s.attname = 'status' AND NOT s.inherited
WHERE c.oid = 'unstuck_saga_operation'::regclass`

func statistics(ctx context.Context, q sqlstore.Querier) (sqlstore.Statistics, error) {
	var st sqlstore.Statistics
	rows, done, err := q.Query(ctx, statisticsSQL)
	if err != nil {
		return st, err
	}
	defer done()
	if !rows.Next() {
		return st, errors.Join(errors.New("no statistics row"), rows.Err())
	}
	return st, errors.Join(rows.Scan(&st.Rows, &st.Analyzed, &st.Values, &st.Freqs), rows.Err())
}

// read runs fn in a read-only REPEATABLE READ transaction on the pool: one
// snapshot for every statement of an admin read. Its statements are
// planned per call (an unnamed statement): the lists' filters are skewed
// (a status of a few rows beside one of millions), which a cached generic
// plan would serve badly.
func (d *Driver) read(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	err := pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return fn(querier{tx: tx, exec: true})
	})
	if err != nil {
		return fmt.Errorf("sagapgx: %w", err)
	}
	return nil
}

// jsonArg passes raw JSON as text, which PostgreSQL casts to jsonb.
func jsonArg(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// Migrate applies the migrations of the "saga" line that the
// unstuck_migration table does not list, in one transaction under the
// advisory lock that the idem driver (idem/idempgx) also takes, so that
// concurrent migrations of every line wait for each other.
func (d *Driver) Migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migration/saga")
	if err != nil {
		return fmt.Errorf("sagapgx: migrate: %w", err)
	}
	if err := migratepgx.Migrate(ctx, d.pool, "saga", fsys); err != nil {
		return fmt.Errorf("sagapgx: migrate: %w", err)
	}
	return nil
}

// WithinTx implements [sagadriver.Driver]: a READ COMMITTED transaction on the
// pool. COMMIT and ROLLBACK run without ctx's cancellation.
func (d *Driver) WithinTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("sagapgx: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			if rerr := tx.Rollback(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) && !tx.Conn().IsClosed() {
				err = errors.Join(err, fmt.Errorf("sagapgx: rollback: %w", rerr))
			}
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("sagapgx: commit: %w", err)
	}
	return nil
}

// querier runs the shared SQL on a pgx transaction; with exec, every
// readOne runs fn's one statement on the pool, outside a transaction (a
// statement sees one snapshot), planned per call like read's.
func (d *Driver) readOne(ctx context.Context, fn func(q sqlstore.Querier) error) error {
	if err := fn(querier{tx: d.pool, exec: true}); err != nil {
		return fmt.Errorf("sagapgx: %w", err)
	}
	return nil
}

// pgxQuerier is what a querier sends statements on: a transaction, or the
// pool for one statement of its own.
type pgxQuerier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// querier is a sqlstore.Querier on tx. With exec, each statement is
// planned for its arguments (an unnamed statement whose description pgx
// caches, so the values come back in binary).
type querier struct {
	tx   pgxQuerier
	exec bool
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, func(), error) {
	if q.exec {
		args = append([]any{pgx.QueryExecModeCacheDescribe}, args...)
	}
	rows, err := q.tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, err
	}
	return rows, rows.Close, nil
}

// Now implements [sagadriver.Driver]: statement_timestamp(), the clock the idem
// driver's leases use too.
func (d *Driver) Now(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	return d.store.Now(ctx, querier{tx: tx}, `SELECT statement_timestamp()`)
}

// InsertOperation implements [sagadriver.Driver].
func (d *Driver) InsertOperation(ctx context.Context, tx pgx.Tx, op *sagadriver.Operation) error {
	return d.store.InsertOperation(ctx, querier{tx: tx}, op)
}

// GetOperation implements [sagadriver.Driver]; forUpdate takes a row lock.
func (d *Driver) GetOperation(ctx context.Context, tx pgx.Tx, id string, forUpdate bool) (sagadriver.Operation, error) {
	return d.store.GetOperation(ctx, querier{tx: tx}, id, forUpdate)
}

// UpdateOperation implements [sagadriver.Driver].
func (d *Driver) UpdateOperation(ctx context.Context, tx pgx.Tx, op *sagadriver.Operation) error {
	return d.store.UpdateOperation(ctx, querier{tx: tx}, op)
}

// InsertEvents implements [sagadriver.Driver].
func (d *Driver) InsertEvents(ctx context.Context, tx pgx.Tx, events []sagadriver.Event) error {
	return d.store.InsertEvents(ctx, querier{tx: tx}, events)
}

// ListEvents implements [sagadriver.Driver].
func (d *Driver) ListEvents(ctx context.Context, tx pgx.Tx, operationID string) ([]sagadriver.Event, error) {
	return d.store.ListEvents(ctx, querier{tx: tx}, operationID)
}

// ListOperations implements [sagadriver.Driver].
func (d *Driver) ListOperations(ctx context.Context, tx pgx.Tx, p sagadriver.ListParams) ([]sagadriver.Operation, error) {
	return d.store.ListOperations(ctx, querier{tx: tx}, p)
}

// InsertFinding implements [sagadriver.Driver].
func (d *Driver) InsertFinding(ctx context.Context, tx pgx.Tx, f *sagadriver.Finding) (bool, error) {
	return d.store.InsertFinding(ctx, querier{tx: tx}, f)
}

// ListFindings implements [sagadriver.Driver].
func (d *Driver) ListFindings(ctx context.Context, tx pgx.Tx, operationID string, open bool) ([]sagadriver.Finding, error) {
	return d.store.ListFindings(ctx, querier{tx: tx}, operationID, open)
}

// ResolveFindings implements [sagadriver.Driver].
func (d *Driver) ResolveFindings(ctx context.Context, tx pgx.Tx, operationID string, at time.Time, by string) (int, error) {
	return d.store.ResolveFindings(ctx, querier{tx: tx}, operationID, at, by)
}

// Stats implements [sagadriver.Driver].
func (d *Driver) Stats(ctx context.Context, tx pgx.Tx) (sagadriver.Stats, error) {
	return d.store.Stats(ctx, querier{tx: tx})
}

// ImportOperations implements [sagadriver.Importer] with COPY, in one
// transaction. It is for benchmarks and imports: it inserts the records as
// given, bypassing the step machine.
func (d *Driver) ImportOperations(ctx context.Context, ops []sagadriver.Operation, events []sagadriver.Event, findings []sagadriver.Finding) error {
	var opRows, stepRows, eventRows, findingRows [][]any
	for _, op := range ops {
		opRows = append(opRows, []any{op.ID, op.Type, string(op.Status), op.CorrelationID, jsonArg(op.Input), op.CurrentStep,
			op.LastError, op.ReviewReason, op.Resolution, op.Version, op.CreatedAt, op.UpdatedAt, op.FinishedAt, max(op.DefinitionVersion, 1)})
		for _, st := range op.Steps {
			stepRows = append(stepRows, []any{op.ID, st.Name, st.Seq, string(st.Kind), st.System, string(st.Status), st.Key,
				st.ExternalID, jsonArg(st.Result), st.Attempts, st.MaxAttempts, st.Verifications, st.LastError,
				string(st.LastErrorClass), st.Compensable, st.CompSeq, st.CompKey, string(st.CompStatus), st.CompAttempts,
				st.CompMaxAttempts, st.CompError, st.Generation, st.StartedAt, st.FinishedAt, st.UpdatedAt, st.Unkeyed, st.Verifiable})
		}
	}
	for _, e := range events {
		eventRows = append(eventRows, []any{e.OperationID, e.Step, e.Action, e.From, e.To, e.Actor, e.Message, e.Attempt, e.At})
	}
	for _, f := range findings {
		var supersedes *int64
		if f.Supersedes != 0 {
			supersedes = &f.Supersedes
		}
		findingRows = append(findingRows, []any{f.OperationID, f.Step, f.Kind, f.ExternalID, f.Detail, f.DetectedAt, f.ResolvedAt,
			f.ResolvedBy, f.Fingerprint, supersedes})
	}
	return d.WithinTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for _, c := range []struct {
			table string
			cols  []string
			rows  [][]any
		}{
			{"unstuck_saga_operation", []string{"id", "type", "status", "correlation_id", "input", "current_step", "last_error",
				"review_reason", "resolution", "version", "created_at", "updated_at", "finished_at", "definition_version"}, opRows},
			{"unstuck_saga_step", []string{"operation_id", "name", "seq", "kind", "system", "status", "idempotency_key", "external_id",
				"result", "attempts", "max_attempts", "verifications", "last_error", "last_error_class", "compensable", "comp_seq",
				"comp_key", "comp_status", "comp_attempts", "comp_max_attempts", "comp_error", "generation", "started_at",
				"finished_at", "updated_at", "unkeyed", "verifiable"}, stepRows},
			{"unstuck_saga_event", []string{"operation_id", "step", "action", "from_status", "to_status", "actor", "message",
				"attempt", "at"}, eventRows},
			{"unstuck_saga_finding", []string{"operation_id", "step", "kind", "external_id", "detail", "detected_at", "resolved_at",
				"resolved_by", "fingerprint", "supersedes"}, findingRows},
		} {
			if len(c.rows) == 0 {
				continue
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "23505" {
					return fmt.Errorf("sagapgx: import: %w: %s", sagadriver.ErrExists, pgErr.Detail)
				}
				return fmt.Errorf("sagapgx: import %s: %w", c.table, err)
			}
		}
		return nil
	})
}

// Tables are the tables the driver owns, referenced tables first, for
// tools that manage storage (sizes, VACUUM, bulk loads): nothing but the
// driver reads or writes them.
func Tables() []string {
	return []string{"unstuck_saga_operation", "unstuck_saga_step", "unstuck_saga_event", "unstuck_saga_finding"}
}
