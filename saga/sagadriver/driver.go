package sagadriver

import (
	"context"
	"errors"
	"time"
)

// Errors a driver returns, matched with errors.Is. Package saga re-exports
// them under the same names.
var (
	// ErrNotFound is returned for an operation (or step) that does not exist.
	ErrNotFound = errors.New("saga: not found")
	// ErrStale is returned for a write whose expected version is not the
	// operation's current one: it changed since it was read, and nothing
	// was applied.
	ErrStale = errors.New("saga: operation changed since it was read")
	// ErrExists is returned for an operation ID that is taken.
	ErrExists = errors.New("saga: operation already exists")
)

// Driver is the seam between the engine and a database, in the spirit of
// River's riverdriver: packages saga/sagapgx (PostgreSQL on pgx, TTx =
// pgx.Tx) and saga/sagasqlite (SQLite on database/sql, TTx = *sql.Tx)
// implement it over the same database as the River client, so that the
// records and River's jobs commit in one transaction. Drivers hold no
// policy: every transition is decided by the engine (package saga), the
// only caller of the write methods.
//
// Every method but WithinTx, Migrate and those of [Admin] runs on the
// transaction it is given and neither commits nor rolls it back.
type Driver[TTx any] interface {
	// Admin is the read contract of consoles and tools, on the driver's
	// own pool.
	Admin

	// Migrate creates or upgrades the tables of the "saga" migration line.
	// It is idempotent and safe to run concurrently.
	Migrate(ctx context.Context) error
	// WithinTx begins a transaction, calls fn, and commits if fn returns
	// nil; otherwise, or if fn panics, it rolls back and returns fn's
	// error. On PostgreSQL the transaction is READ COMMITTED.
	WithinTx(ctx context.Context, fn func(ctx context.Context, tx TTx) error) error
	// Now reads the database's clock in tx, truncated to microseconds:
	// statement_timestamp() on PostgreSQL; on SQLite, which has no clock
	// of its own, the process clock. Every time the engine records
	// (operations, steps, events, findings) comes from it, so processes
	// whose clocks disagree still agree on the records.
	Now(ctx context.Context, tx TTx) (time.Time, error)

	// InsertOperation inserts op and its steps. It returns ErrExists if
	// the ID is taken.
	InsertOperation(ctx context.Context, tx TTx, op *Operation) error
	// GetOperation reads an operation with its steps in order, or returns
	// ErrNotFound. With forUpdate the operation's row stays locked until
	// tx ends (SQLite locks the whole database on the first write anyway).
	GetOperation(ctx context.Context, tx TTx, id string, forUpdate bool) (Operation, error)
	// UpdateOperation writes op and all its steps if the stored version is
	// op.Version, and sets op.Version to the next version; otherwise it
	// returns ErrStale and writes nothing.
	UpdateOperation(ctx context.Context, tx TTx, op *Operation) error
	// InsertEvents appends events to the history.
	InsertEvents(ctx context.Context, tx TTx, events []Event) error
	// ListEvents returns an operation's history in order.
	ListEvents(ctx context.Context, tx TTx, operationID string) ([]Event, error)
	// ListOperations returns operations matching p, oldest update first.
	ListOperations(ctx context.Context, tx TTx, p ListParams) ([]Operation, error)
	// InsertFinding records f, with its Fingerprint and Supersedes, unless
	// an open finding of the same kind for the same step exists; it
	// reports whether it inserted and sets f.ID.
	InsertFinding(ctx context.Context, tx TTx, f *Finding) (bool, error)
	// ListFindings returns the findings of an operation ("" for all),
	// only the open ones if open is set, in order of detection.
	ListFindings(ctx context.Context, tx TTx, operationID string, open bool) ([]Finding, error)
	// ResolveFindings closes the open findings of an operation at at,
	// recording by as who resolved (accepted) them.
	ResolveFindings(ctx context.Context, tx TTx, operationID string, at time.Time, by string) (int, error)
	// Stats counts operations per status with the oldest update per status,
	// steps whose compensation failed, and open findings.
	Stats(ctx context.Context, tx TTx) (Stats, error)
}

// ListParams selects operations for [Driver]'s ListOperations.
type ListParams struct {
	// Statuses, when not empty, keeps operations in one of them.
	Statuses []Status
	// UpdatedBefore, when not zero, keeps operations not updated since.
	UpdatedBefore time.Time
	// FinishedAfter, when not zero, keeps operations finished after it.
	FinishedAfter time.Time
	// Limit caps the result; 0 means 100.
	Limit int
}

// Stats is what the metrics report (SPEC G10).
type Stats struct {
	// Operations counts operations per status.
	Operations map[Status]int
	// OldestUpdate is the oldest UpdatedAt per status that has operations.
	OldestUpdate map[Status]time.Time
	// FailedCompensations counts steps in compensation_failed.
	FailedCompensations int
	// OpenFindings counts reconciliation findings not yet resolved.
	OpenFindings int
	// OldestOpenFinding is when the oldest open finding was detected;
	// zero when none is open.
	OldestOpenFinding time.Time
}

// Importer loads records in bulk. It is for benchmarks and imports only:
// it inserts operations with their steps, and events and findings, as
// given, bypassing the step machine, so nothing checks that they are a
// state the machine could reach. The engine and the console never call
// it. saga/sagapgx and saga/sagasqlite implement it.
type Importer interface {
	// ImportOperations inserts ops (with their steps), events and findings
	// in one transaction, keeping the IDs, versions, times and statuses
	// given (event and finding IDs are assigned). It returns an error
	// matching ErrExists if an operation ID is taken, and then inserts
	// nothing.
	ImportOperations(ctx context.Context, ops []Operation, events []Event, findings []Finding) error
}
