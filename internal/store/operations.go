package store

// The read model of the saga engine's records (unstuck_saga_operation,
// unstuck_saga_step, unstuck_saga_event, unstuck_saga_finding), which the
// console never writes: every change goes through saga.Runner. Lists,
// counts and detail follow the keys' read model (keys.go): keyset pages on
// (updated_at, id), capped counts with estimates, one set of SQL per
// dialect.
//
// The saga tables are created by the saga driver's Migrate (saga/sagapgx or
// saga/sagasqlite). A database migrated without them is not an error for
// the reads: lists and counts come back empty, the overview says the
// operations are unavailable, and a detail is not found.

import (
	"context"
	"embed"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/unstuckhq/unstuck/internal/migrate"
	"github.com/unstuckhq/unstuck/saga"
)

// OperationFilter selects operations for [DB.ListOperations] (SPEC CON-K2).
// Every non-zero field narrows the list; string fields match exactly.
type OperationFilter struct {
	// Status keeps operations in this status; "" keeps every status.
	Status saga.Status
	// Type keeps operations of this Definition type.
	Type string
	// CorrelationID keeps operations started with this correlation ID.
	CorrelationID string
	// ExternalID keeps operations one of whose steps recorded this
	// external ID (the effect's identifier in the external system).
	ExternalID string
	// From and To bound UpdatedAt: From <= UpdatedAt < To. A zero time
	// leaves that side open. Times are compared to the microsecond.
	From time.Time
	To   time.Time
	// After is OperationPage.Next of the previous page; "" asks for the
	// first page. Like KeyFilter.After it is only a position
	// (UpdatedAt, ID).
	After string
	// Limit is the page size: DefaultLimit when <= 0, at most MaxLimit.
	Limit int
}

// OperationPage is one page of [DB.ListOperations].
type OperationPage struct {
	// Operations, most recently updated first (ties by ID, highest first),
	// without their Steps and Input: the list shows neither.
	Operations []saga.Operation
	// Next is the OperationFilter.After of the following page, "" when this
	// page is the last.
	Next string
}

// opQuery is an OperationFilter checked and decoded.
type opQuery struct {
	OperationFilter
	after *opCursor
}

// check validates f and decodes its cursor. It returns a *FieldError.
func (f OperationFilter) check() (opQuery, error) {
	q := opQuery{OperationFilter: f}
	if f.Status != "" && !slices.Contains(saga.Statuses, f.Status) {
		return q, &FieldError{Field: "status", Reason: fmt.Sprintf("%q is not an operation status", f.Status)}
	}
	q.Limit = clampLimit(f.Limit)
	if f.After != "" {
		c, err := decodeOpCursor(f.After)
		if err != nil {
			return q, err
		}
		q.after = &c
	}
	return q, nil
}

// opCursor is a keyset position in the operation list: the last operation
// of a page, in the list's order (updated_at DESC, id DESC).
type opCursor struct {
	updatedAt int64 // Unix microseconds
	id        string
}

// opCursorVersion is the first byte of an encoded operation cursor. It
// differs from the keys' cursorVersion, so a cursor of one list is refused
// by the other.
const opCursorVersion = 2

// maxCursorID bounds the operation ID a cursor may carry.
const maxCursorID = 512

// encode returns the cursor as base64url without padding: a version byte,
// updated_at (Unix µs) as a big-endian int64, then the ID's bytes.
func (c opCursor) encode() string {
	b := make([]byte, 9, 9+len(c.id))
	b[0] = opCursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.updatedAt))
	b = append(b, c.id...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func opCursorOf(op saga.Operation) opCursor {
	return opCursor{updatedAt: op.UpdatedAt.UnixMicro(), id: op.ID}
}

// decodeOpCursor parses what encode made, and returns a *FieldError
// matching ErrInvalidCursor for anything else.
func decodeOpCursor(s string) (opCursor, error) {
	bad := func(reason string) (opCursor, error) {
		return opCursor{}, &FieldError{Field: "after", Reason: reason, cursor: true}
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) < 10 || len(b) > 9+maxCursorID || b[0] != opCursorVersion || !utf8.Valid(b[9:]) {
		return bad("not an operation cursor of this console")
	}
	return opCursor{updatedAt: int64(binary.BigEndian.Uint64(b[1:9])), id: string(b[9:])}, nil
}

func (c opCursor) time() time.Time { return time.UnixMicro(c.updatedAt).UTC() }

// ListOperations returns one page of the operations that f selects, most
// recently updated first, paged by keyset on (updated_at, id), never by
// OFFSET. It returns a *[FieldError] for an invalid filter, matching
// [ErrInvalidCursor] too when f.After is not a cursor from
// OperationPage.Next. Without the saga tables the page is empty.
func (d *DB) ListOperations(ctx context.Context, f OperationFilter) (OperationPage, error) {
	q, err := f.check()
	if err != nil {
		return OperationPage{}, err
	}
	var ops []saga.Operation
	switch d.dialect {
	case DialectPostgres:
		ops, err = pgListOperations(ctx, d.pool, q)
	default:
		ops, err = sqliteListOperations(ctx, d.sqlite, q)
	}
	if errors.Is(err, errNoSagaTables) {
		return OperationPage{}, nil
	}
	if err != nil {
		return OperationPage{}, fmt.Errorf("store: list operations: %w", err)
	}
	page := OperationPage{Operations: ops}
	if len(ops) > q.Limit {
		page.Operations = ops[:q.Limit]
		page.Next = opCursorOf(page.Operations[q.Limit-1]).encode()
	}
	return page, nil
}

// MaxEvents is how many events of one operation [DB.Operation] returns:
// the latest ones.
const MaxEvents = 1000

// OperationDetail is one operation with everything the console shows of it
// (SPEC CON-K3), read in one snapshot.
type OperationDetail struct {
	// Operation has its Input and its Steps, in definition order.
	Operation saga.Operation
	// Events is the operation's history, oldest first: at most MaxEvents,
	// the latest.
	Events []saga.Event
	// EventsOmitted counts the earlier events left out of Events.
	EventsOmitted int64
	// Findings are the reconciliation findings, open or resolved, in order
	// of detection.
	Findings []saga.Finding
	// ReadAt is the read's clock (the database's on PostgreSQL, the
	// process's on SQLite).
	ReadAt time.Time
}

// Operation reads the operation with the engine's ID id, with its steps,
// events and findings; ok is false when there is none (or no saga tables).
func (d *DB) Operation(ctx context.Context, id string) (OperationDetail, bool, error) {
	var (
		det OperationDetail
		ok  bool
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		det, ok, err = pgOperation(ctx, d.pool, id, MaxEvents)
	default:
		det, ok, err = sqliteOperation(ctx, d.sqlite, id, MaxEvents)
	}
	if errors.Is(err, errNoSagaTables) {
		return OperationDetail{}, false, nil
	}
	if err != nil {
		return OperationDetail{}, false, fmt.Errorf("store: operation %q: %w", id, err)
	}
	return det, ok, nil
}

// OperationCount is the number of operations in one status.
type OperationCount struct {
	Status saga.Status
	// Count is exact when Exact is true, and otherwise an estimate from the
	// database's statistics as of OperationOverview.AsOf.
	Count int64
	Exact bool
	// Oldest is the least UpdatedAt among the operations in this status:
	// how long the oldest has waited. Zero when there are none.
	Oldest time.Time
}

// OperationOverview is the operations' part of the overview (SPEC CON-K1).
type OperationOverview struct {
	// Available is false when the database has no saga tables: the
	// console was migrated without the saga engine. Counts are then all
	// zero.
	Available bool
	// Counts has one entry per status, in the order of saga.Statuses.
	Counts []OperationCount
	// AsOf is when the counts were true, as in KeyOverview.
	AsOf time.Time
}

// Count returns the entry of status s.
func (o OperationOverview) Count(s saga.Status) OperationCount {
	for _, c := range o.Counts {
		if c.Status == s {
			return c
		}
	}
	return OperationCount{Status: s, Exact: true}
}

// OperationOverview counts operations per status as KeyOverview counts
// records: on PostgreSQL exactly up to a cap by an index-only scan, beyond
// it estimated from the statistics of the last ANALYZE (Exact false); on
// SQLite exactly. Oldest per status is one index probe.
func (d *DB) OperationOverview(ctx context.Context) (OperationOverview, error) {
	var (
		o   OperationOverview
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		o, err = pgOperationOverview(ctx, d.pool, d.countCap)
	default:
		o, err = sqliteOperationOverview(ctx, d.sqlite)
	}
	if errors.Is(err, errNoSagaTables) {
		o = OperationOverview{AsOf: time.Now().UTC()}
		for _, s := range saga.Statuses {
			o.Counts = append(o.Counts, OperationCount{Status: s, Exact: true})
		}
		return o, nil
	}
	if err != nil {
		return OperationOverview{}, fmt.Errorf("store: operation overview: %w", err)
	}
	o.Available = true
	return o, nil
}

// ReviewRequired returns up to limit operations in review_required, the
// ones a human must decide (SPEC G7), the longest waiting first
// (updated_at, then id, ascending), without Steps and Input. limit is
// DefaultLimit when <= 0 and at most MaxLimit.
func (d *DB) ReviewRequired(ctx context.Context, limit int) ([]saga.Operation, error) {
	limit = clampLimit(limit)
	var (
		ops []saga.Operation
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		ops, err = pgReviewRequired(ctx, d.pool, limit)
	default:
		ops, err = sqliteReviewRequired(ctx, d.sqlite, limit)
	}
	if errors.Is(err, errNoSagaTables) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: review required: %w", err)
	}
	return ops, nil
}

// errNoSagaTables is what the dialect functions return when a saga table
// does not exist; the public methods turn it into empty results.
var errNoSagaTables = errors.New("saga tables not found")

// operationsMigrations holds the "console_operations" migration line of
// each dialect: the read model's indexes on the saga tables.
//
//go:embed migration/operations/postgres/*.sql migration/operations/sqlite/*.sql
var operationsMigrations embed.FS

// operationsMigrationLine is that line's name in unstuck_migration.
const operationsMigrationLine = "console_operations"

// MigrateOperations applies the "console_operations" migration line: the
// indexes the operation pages need on the saga engine's tables, with the
// same bookkeeping and lock as Migrate. It is idempotent and safe to call
// concurrently. It must run after the saga driver's Migrate
// (sagapgx.Driver.Migrate or sagasqlite.Driver.Migrate): when
// unstuck_saga_operation does not exist it returns an error saying so and
// changes nothing.
func (d *DB) MigrateOperations(ctx context.Context) error {
	if err := d.migrateOperations(ctx); err != nil {
		return fmt.Errorf("store: migrate operations: %w", err)
	}
	return nil
}

func (d *DB) migrateOperations(ctx context.Context) error {
	fsys, err := fs.Sub(operationsMigrations, "migration/operations/"+d.dialect)
	if err != nil {
		return err
	}
	if migrate.Checking(ctx) {
		// A schema check: the migration line alone.
		return d.migrateLine(ctx, operationsMigrationLine, fsys)
	}
	var exists bool
	switch d.dialect {
	case DialectPostgres:
		err = d.pool.QueryRow(ctx, `SELECT to_regclass('unstuck_saga_operation') IS NOT NULL`).Scan(&exists)
	default:
		err = d.sqlite.QueryRowContext(ctx, `SELECT EXISTS (
    SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'unstuck_saga_operation')`).Scan(&exists)
	}
	if err != nil {
		return fmt.Errorf("look for the saga tables: %w", err)
	}
	if !exists {
		return errors.New("table unstuck_saga_operation not found: run the saga driver's migration first")
	}
	return d.migrateLine(ctx, operationsMigrationLine, fsys)
}

// operations adds the conditions of q, each written so that an index
// serves it (see the migration line console_operations).
func (w *where) operations(q opQuery) {
	if q.Status != "" {
		w.add("status = " + w.arg(string(q.Status)))
	}
	if q.Type != "" {
		w.add("type = " + w.arg(q.Type))
	}
	if q.CorrelationID != "" {
		w.add("correlation_id = " + w.arg(q.CorrelationID) + " AND correlation_id <> ''")
	}
	if q.ExternalID != "" {
		w.add("id IN (SELECT s.operation_id FROM unstuck_saga_step s WHERE s.external_id = " +
			w.arg(q.ExternalID) + " AND s.external_id <> '')")
	}
	if !q.From.IsZero() {
		w.add("updated_at >= " + w.arg(w.timeArg(q.From)))
	}
	if !q.To.IsZero() {
		w.add("updated_at < " + w.arg(w.timeArg(q.To)))
	}
	if q.after != nil {
		w.add("(updated_at, id) < (" + w.arg(w.timeArg(q.after.time())) + ", " + w.arg(q.after.id) + ")")
	}
}

// reverseEvents puts events read newest first back in order, in place.
func reverseEvents(evs []saga.Event) { slices.Reverse(evs) }
