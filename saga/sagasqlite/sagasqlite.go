package sagasqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
	"github.com/unstuckhq/unstuck/saga/internal/sqlstore"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

var (
	_ sagadriver.Driver[*sql.Tx] = (*Driver)(nil)
	_ sagadriver.Importer        = (*Driver)(nil)
)

// Driver is a [sagadriver.Driver] on a SQLite database. It is safe for
// concurrent use; it never closes the handle. Its [sagadriver.Admin] reads
// (PageOperations, ReadOperation, CountOperations, ReviewRequired,
// EachOperation) are described in the package documentation.
type Driver struct {
	db    *sql.DB
	store sqlstore.Store
	// admin is sagadriver.Admin, on store, each read in a transaction of
	// read (the package documentation says how).
	admin
}

// admin names the embedded sqlstore.Admin, whose methods are the
// driver's: the admin reads are the same on every SQL database but for
// their read transaction.
type admin = sqlstore.Admin

// New returns a driver on db, whose tables must be created with
// [Driver.Migrate] before use. See the package documentation for the
// connection settings.
func New(db *sql.DB) *Driver {
	d := &Driver{db: db, store: sqlstore.Store{D: sqlstore.Dialect{
		// ?NNN is SQLite's numbered parameter: $1 becomes ?1.
		Rebind: func(q string) string { return strings.ReplaceAll(q, "$", "?") },
		Time:   func(t time.Time) any { return t.UnixMicro() },
		JSON: func(b []byte) any {
			if b == nil {
				return nil
			}
			return string(b)
		},
		IsUniqueViolation: func(err error) bool {
			var serr *modernc.Error
			return errors.As(err, &serr) && (serr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || serr.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
		},
	}}}
	d.admin = sqlstore.Admin{Store: d.store, Read: d.read}
	return d
}

// read runs fn in a read-only transaction on the handle: one snapshot (in
// WAL mode) for every statement of an admin read.
func (d *Driver) read(ctx context.Context, fn func(q sqlstore.Querier) error) (err error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sagasqlite: begin: %w", err)
	}
	defer func() {
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("sagasqlite: end read: %w", rerr))
		}
	}()
	return fn(querier{tx})
}

// Migrate applies the migrations of the "saga" line that the
// unstuck_migration table does not list, each in its own BEGIN IMMEDIATE
// transaction with its bookkeeping row (the table idem/idemsqlite uses too).
func (d *Driver) Migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migration/saga")
	if err != nil {
		return fmt.Errorf("sagasqlite: migrate: %w", err)
	}
	if err := migratesqlite.Migrate(ctx, d.db, "saga", fsys); err != nil {
		return fmt.Errorf("sagasqlite: migrate: %w", err)
	}
	return nil
}

// WithinTx implements [sagadriver.Driver]. COMMIT and ROLLBACK run without
// ctx's cancellation.
func (d *Driver) WithinTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	// database/sql rolls a transaction back when its ctx is cancelled;
	// the statements still see ctx, the transaction's end does not.
	tx, err := d.db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return fmt.Errorf("sagasqlite: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("sagasqlite: rollback: %w", rerr))
			}
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sagasqlite: commit: %w", err)
	}
	return nil
}

// querier runs the shared SQL on a database/sql transaction.
type querier struct{ tx *sql.Tx }

func (q querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q querier) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, func(), error) {
	rows, err := q.tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	return rows, func() { _ = rows.Close() }, nil
}

// Now implements [sagadriver.Driver]: the process clock, which is SQLite's.
func (d *Driver) Now(ctx context.Context, tx *sql.Tx) (time.Time, error) {
	return d.store.Now(ctx, querier{tx}, "")
}

// InsertOperation implements [sagadriver.Driver].
func (d *Driver) InsertOperation(ctx context.Context, tx *sql.Tx, op *sagadriver.Operation) error {
	return d.store.InsertOperation(ctx, querier{tx}, op)
}

// GetOperation implements [sagadriver.Driver]. forUpdate takes no lock of its
// own: SQLite serialises writers on the whole database.
func (d *Driver) GetOperation(ctx context.Context, tx *sql.Tx, id string, forUpdate bool) (sagadriver.Operation, error) {
	return d.store.GetOperation(ctx, querier{tx}, id, forUpdate)
}

// UpdateOperation implements [sagadriver.Driver].
func (d *Driver) UpdateOperation(ctx context.Context, tx *sql.Tx, op *sagadriver.Operation) error {
	return d.store.UpdateOperation(ctx, querier{tx}, op)
}

// InsertEvents implements [sagadriver.Driver].
func (d *Driver) InsertEvents(ctx context.Context, tx *sql.Tx, events []sagadriver.Event) error {
	return d.store.InsertEvents(ctx, querier{tx}, events)
}

// ListEvents implements [sagadriver.Driver].
func (d *Driver) ListEvents(ctx context.Context, tx *sql.Tx, operationID string) ([]sagadriver.Event, error) {
	return d.store.ListEvents(ctx, querier{tx}, operationID)
}

// ListOperations implements [sagadriver.Driver].
func (d *Driver) ListOperations(ctx context.Context, tx *sql.Tx, p sagadriver.ListParams) ([]sagadriver.Operation, error) {
	return d.store.ListOperations(ctx, querier{tx}, p)
}

// InsertFinding implements [sagadriver.Driver].
func (d *Driver) InsertFinding(ctx context.Context, tx *sql.Tx, f *sagadriver.Finding) (bool, error) {
	return d.store.InsertFinding(ctx, querier{tx}, f)
}

// ListFindings implements [sagadriver.Driver].
func (d *Driver) ListFindings(ctx context.Context, tx *sql.Tx, operationID string, open bool) ([]sagadriver.Finding, error) {
	return d.store.ListFindings(ctx, querier{tx}, operationID, open)
}

// ResolveFindings implements [sagadriver.Driver].
func (d *Driver) ResolveFindings(ctx context.Context, tx *sql.Tx, operationID string, at time.Time, by string) (int, error) {
	return d.store.ResolveFindings(ctx, querier{tx}, operationID, at, by)
}

// Stats implements [sagadriver.Driver].
func (d *Driver) Stats(ctx context.Context, tx *sql.Tx) (sagadriver.Stats, error) {
	return d.store.Stats(ctx, querier{tx})
}

// ImportOperations implements [sagadriver.Importer] in one transaction.
// It is for benchmarks and imports: it inserts the records as given,
// bypassing the step machine.
func (d *Driver) ImportOperations(ctx context.Context, ops []sagadriver.Operation, events []sagadriver.Event, findings []sagadriver.Finding) error {
	return d.WithinTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return d.store.Import(ctx, querier{tx}, ops, events, findings)
	})
}
