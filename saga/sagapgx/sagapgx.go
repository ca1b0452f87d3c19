// Package sagapgx is the PostgreSQL driver of package saga on pgx v5: a
// [saga.Driver] over a [pgxpool.Pool], for a River client built with
// riverpgxv5 on the same pool, so that the operation records and River's
// jobs commit in one transaction.
//
//	driver := sagapgx.New(pool)
//	if err := driver.Migrate(ctx); err != nil { … }
//	runner, err := saga.NewRunner(driver, saga.Config{Definitions: defs})
//
// The tables (unstuck_saga_operation, unstuck_saga_step, unstuck_saga_event,
// unstuck_saga_finding) live in the first schema of the pool's search_path,
// as River's do with riverpgxv5. Times are the database's clock
// (statement_timestamp(), read once per transaction), stored as
// timestamptz.
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

	"github.com/unstuckhq/unstuck/internal/migrate"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/internal/sqlstore"
)

var _ saga.Driver[pgx.Tx] = (*Driver)(nil)

// Driver is a [saga.Driver] on a PostgreSQL pool. It is safe for
// concurrent use; it never closes the pool.
type Driver struct {
	pool  *pgxpool.Pool
	store sqlstore.Store
}

// New returns a driver on pool, whose tables must be created with
// [Driver.Migrate] before use.
func New(pool *pgxpool.Pool) *Driver {
	return &Driver{pool: pool, store: sqlstore.Store{D: sqlstore.Dialect{
		Time:      func(t time.Time) any { return t.UTC() },
		JSON:      jsonArg,
		ForUpdate: " FOR UPDATE",
		IsUniqueViolation: func(err error) bool {
			var pgErr *pgconn.PgError
			return errors.As(err, &pgErr) && pgErr.Code == "23505"
		},
	}}}
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
	if err := migrate.Postgres(ctx, d.pool, "saga", fsys); err != nil {
		return fmt.Errorf("sagapgx: migrate: %w", err)
	}
	return nil
}

// WithinTx implements [saga.Driver]: a READ COMMITTED transaction on the
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

// querier runs the shared SQL on a pgx transaction.
type querier struct{ tx pgx.Tx }

func (q querier) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q querier) Query(ctx context.Context, sql string, args ...any) (sqlstore.Rows, func(), error) {
	rows, err := q.tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, err
	}
	return rows, rows.Close, nil
}

// Now implements [saga.Driver]: statement_timestamp(), the clock the idem
// driver's leases use too.
func (d *Driver) Now(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	return d.store.Now(ctx, querier{tx}, `SELECT statement_timestamp()`)
}

// InsertOperation implements [saga.Driver].
func (d *Driver) InsertOperation(ctx context.Context, tx pgx.Tx, op *saga.Operation) error {
	return d.store.InsertOperation(ctx, querier{tx}, op)
}

// GetOperation implements [saga.Driver]; forUpdate takes a row lock.
func (d *Driver) GetOperation(ctx context.Context, tx pgx.Tx, id string, forUpdate bool) (saga.Operation, error) {
	return d.store.GetOperation(ctx, querier{tx}, id, forUpdate)
}

// UpdateOperation implements [saga.Driver].
func (d *Driver) UpdateOperation(ctx context.Context, tx pgx.Tx, op *saga.Operation) error {
	return d.store.UpdateOperation(ctx, querier{tx}, op)
}

// InsertEvents implements [saga.Driver].
func (d *Driver) InsertEvents(ctx context.Context, tx pgx.Tx, events []saga.Event) error {
	return d.store.InsertEvents(ctx, querier{tx}, events)
}

// ListEvents implements [saga.Driver].
func (d *Driver) ListEvents(ctx context.Context, tx pgx.Tx, operationID string) ([]saga.Event, error) {
	return d.store.ListEvents(ctx, querier{tx}, operationID)
}

// ListOperations implements [saga.Driver].
func (d *Driver) ListOperations(ctx context.Context, tx pgx.Tx, p saga.ListParams) ([]saga.Operation, error) {
	return d.store.ListOperations(ctx, querier{tx}, p)
}

// InsertFinding implements [saga.Driver].
func (d *Driver) InsertFinding(ctx context.Context, tx pgx.Tx, f *saga.Finding) (bool, error) {
	return d.store.InsertFinding(ctx, querier{tx}, f)
}

// ListFindings implements [saga.Driver].
func (d *Driver) ListFindings(ctx context.Context, tx pgx.Tx, operationID string, open bool) ([]saga.Finding, error) {
	return d.store.ListFindings(ctx, querier{tx}, operationID, open)
}

// ResolveFindings implements [saga.Driver].
func (d *Driver) ResolveFindings(ctx context.Context, tx pgx.Tx, operationID string, at time.Time, by string) (int, error) {
	return d.store.ResolveFindings(ctx, querier{tx}, operationID, at, by)
}

// Stats implements [saga.Driver].
func (d *Driver) Stats(ctx context.Context, tx pgx.Tx) (saga.Stats, error) {
	return d.store.Stats(ctx, querier{tx})
}
