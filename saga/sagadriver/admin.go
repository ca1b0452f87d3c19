package sagadriver

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Admin is the read contract of a driver for consoles, search and bulk
// tools: everything they read of the operations, so that no other package
// reads the driver's tables. Its methods run on the driver's own pool, each
// in a read-only transaction of its own, and never take the caller's
// transaction (see the package documentation for why).
type Admin interface {
	// PageOperations returns one page of the operations f selects, most
	// recently updated first (ties by ID, highest first), or least
	// recently first (ties by ID, lowest first) when f.Order is
	// OrderOldest, paged by keyset
	// on (UpdatedAt, ID), never by OFFSET. The operations carry neither
	// Steps nor Input. It returns a *[FieldError] for an invalid filter
	// (see [OperationFilter.Check]).
	PageOperations(ctx context.Context, f OperationFilter) (OperationPage, error)
	// ReadOperation returns the operation id with its steps, its latest
	// maxEvents events (DefaultMaxEvents when <= 0) and every finding, read
	// in one snapshot, or an error matching [ErrNotFound].
	ReadOperation(ctx context.Context, id string, maxEvents int) (OperationDetail, error)
	// CountOperations counts operations per status, with the oldest
	// UpdatedAt of each. A count is exact up to exactUpTo
	// (DefaultCountCap when <= 0); beyond it a driver may estimate from the
	// database's statistics and says so with Exact false. Drivers that
	// count cheaply may always count exactly.
	CountOperations(ctx context.Context, exactUpTo int) (OperationCounts, error)
	// ReviewRequired returns up to limit operations in review_required
	// (DefaultLimit when <= 0, at most MaxLimit), the longest waiting first
	// (UpdatedAt, then ID, ascending), without Steps and Input.
	ReviewRequired(ctx context.Context, limit int) ([]Operation, error)
	// EachOperation calls fn with every operation f selects, in batches of
	// at most batchSize (DefaultLimit when <= 0, at most MaxLimit), in
	// order of ID (whatever f.Order), without Steps and Input. It pages by keyset on the ID,
	// which never changes, so that under concurrent updates no operation
	// comes twice and none is skipped that matched f throughout. f.After
	// must be empty and f.Limit is ignored. It stops at the first error of
	// fn and returns it.
	EachOperation(ctx context.Context, f OperationFilter, batchSize int, fn func([]Operation) error) error
	// CountFiltered counts the operations f selects (f.After, f.Order and
	// f.Limit are ignored) exactly up to upTo (DefaultCountCap when <= 0,
	// at most MaxCountCap) and stops there: above it the result is upTo
	// with Exact false, "at least upTo". A list says how long it is with
	// it at any table size. An invalid f is a *[FieldError].
	CountFiltered(ctx context.Context, f OperationFilter, upTo int) (FilteredCount, error)
}

// FilteredCount is what [Admin.CountFiltered] returns: N operations, or
// at least N when Exact is false.
type FilteredCount struct {
	N     int64
	Exact bool
}

// MaxCountCap bounds the upTo of [Admin.CountFiltered].
const MaxCountCap = 100_000

// Page sizes of the lists.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// DefaultCountCap is the exactUpTo of [Admin.CountOperations] when it is
// not given.
const DefaultCountCap = 1000

// DefaultMaxEvents is the maxEvents of [Admin.ReadOperation] when it is
// not given.
const DefaultMaxEvents = 1000

// ClampLimit returns n as a page size: DefaultLimit when n <= 0, at most
// MaxLimit.
func ClampLimit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// Errors of the admin contract's arguments, matched with errors.Is.
var (
	// ErrInvalid: an argument was refused before the database was asked.
	// The error is a *[FieldError] naming the field.
	ErrInvalid = errors.New("saga: invalid argument")
	// ErrInvalidCursor: OperationFilter.After is not a cursor a driver
	// made. Such errors also match ErrInvalid.
	ErrInvalidCursor = errors.New("saga: invalid cursor")
)

// FieldError is an argument refused by the driver: Field names it as the
// caller knows it ("status", "after", …) and Reason says why. It matches
// [ErrInvalid], and [ErrInvalidCursor] when it is about a cursor.
type FieldError struct {
	Field  string
	Reason string
	cursor bool
}

func (e *FieldError) Error() string {
	return "saga: invalid " + e.Field + ": " + e.Reason
}

// Unwrap lets errors.Is match ErrInvalid, and ErrInvalidCursor for a cursor.
func (e *FieldError) Unwrap() []error {
	if e.cursor {
		return []error{ErrInvalid, ErrInvalidCursor}
	}
	return []error{ErrInvalid}
}

// OperationFilter selects operations for [Admin.PageOperations] and
// [Admin.EachOperation]. Every non-zero field narrows the selection;
// string fields match exactly.
type OperationFilter struct {
	// Status keeps operations in this status; "" keeps every status.
	Status Status
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
	// Order is the list's order: OrderNewest (or "") lists the most
	// recently updated first, OrderOldest the least recently updated
	// first (the longest waiting, for anything stuck).
	Order Order
	// After is OperationPage.Next of the previous page; "" asks for the
	// first page. It is a position (UpdatedAt, ID) in one order: under
	// another filter it still pages correctly from that position, but a
	// cursor of the other order is refused (field "after").
	After string
	// Limit is the page size: DefaultLimit when <= 0, at most MaxLimit.
	Limit int
}

// Order is the order of the operation list, by UpdatedAt then ID.
type Order string

// The orders of [OperationFilter.Order]; "" is OrderNewest.
const (
	OrderNewest Order = "newest"
	OrderOldest Order = "oldest"
)

// Valid reports whether o is "" or one of the orders.
func (o Order) Valid() bool {
	return o == "" || o == OrderNewest || o == OrderOldest
}

// Oldest reports whether o lists the least recently updated first.
func (o Order) Oldest() bool { return o == OrderOldest }

// Reversed is the other order: the list read backward (a Previous page).
func (o Order) Reversed() Order {
	if o.Oldest() {
		return OrderNewest
	}
	return OrderOldest
}

// OperationQuery is an [OperationFilter] checked by
// [OperationFilter.Check], for drivers: Order is OrderNewest or
// OrderOldest, Limit is clamped and the cursor decoded (its position is
// after the page in list order: (updated_at, id) < (AfterUpdatedAt,
// AfterID) newest first, > oldest first).
type OperationQuery struct {
	OperationFilter
	// HasAfter tells whether AfterUpdatedAt and AfterID hold a position.
	HasAfter       bool
	AfterUpdatedAt time.Time
	AfterID        string
}

// Check validates f, clamps its Limit and decodes its cursor. It returns a
// *[FieldError] for an unknown status or order, a cursor no driver made,
// or a cursor of the other order. Drivers call it first.
func (f OperationFilter) Check() (OperationQuery, error) {
	q := OperationQuery{OperationFilter: f}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return q, &FieldError{Field: "status", Reason: fmt.Sprintf("%q is not an operation status", f.Status)}
	}
	if !f.Order.Valid() {
		return q, &FieldError{Field: "order", Reason: fmt.Sprintf("%q is not an order (newest or oldest)", f.Order)}
	}
	if f.Order == "" {
		q.Order = OrderNewest
	}
	q.Limit = ClampLimit(f.Limit)
	if f.After != "" {
		c, err := decodeCursor(f.After)
		if err != nil {
			return q, err
		}
		if c.order != q.Order {
			return q, &FieldError{Field: "after", Reason: "a cursor of the " + string(c.order) + "-first list, not the " + string(q.Order) + "-first one", cursor: true}
		}
		q.HasAfter, q.AfterUpdatedAt, q.AfterID = true, time.UnixMicro(c.updatedAt).UTC(), c.id
	}
	return q, nil
}

// OperationPage is one page of [Admin.PageOperations].
type OperationPage struct {
	// Operations in the filter's order, most recently updated first (ties
	// by ID, highest first) or the reverse for OrderOldest, without their
	// Steps and Input.
	Operations []Operation
	// Next is the OperationFilter.After of the following page, "" when
	// this page is the last.
	Next string
}

// NewOperationPage returns the page of q from ops, which a driver read with
// one row more than q.Limit: the extra row only says that a next page
// exists.
func NewOperationPage(q OperationQuery, ops []Operation) OperationPage {
	page := OperationPage{Operations: ops}
	if len(ops) > q.Limit {
		page.Operations = ops[:q.Limit]
		page.Next = CursorOrder(page.Operations[q.Limit-1], q.Order)
	}
	return page
}

// cursor is a keyset position in the operation list: the last operation
// of a page, in the list's order (updated_at DESC, id DESC, or ASC for
// OrderOldest).
type cursor struct {
	updatedAt int64 // Unix microseconds
	id        string
	order     Order
}

// cursorVersion is the first byte of an encoded operation cursor of the
// newest-first list, cursorVersionOldest of the oldest-first one. They
// differ from the console's key cursors (1 and 3), so a cursor of one list
// is refused by the other.
const (
	cursorVersion       = 2
	cursorVersionOldest = 4
)

// maxCursorID bounds the operation ID a cursor may carry.
const maxCursorID = 512

// Cursor returns the position just after op in the newest-first list:
// CursorOrder(op, OrderNewest).
func Cursor(op Operation) string {
	return CursorOrder(op, OrderNewest)
}

// CursorOrder returns the position just after op in the list of order o,
// as OperationFilter.After takes it: base64url without padding of a
// version byte (which carries the order), UpdatedAt (Unix µs) as a
// big-endian int64, then the ID's bytes.
func CursorOrder(op Operation, o Order) string {
	b := make([]byte, 9, 9+len(op.ID))
	b[0] = cursorVersion
	if o.Oldest() {
		b[0] = cursorVersionOldest
	}
	binary.BigEndian.PutUint64(b[1:9], uint64(op.UpdatedAt.UnixMicro()))
	b = append(b, op.ID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor parses what Cursor made, and returns a *FieldError matching
// ErrInvalidCursor for anything else.
func decodeCursor(s string) (cursor, error) {
	bad := func(reason string) (cursor, error) {
		return cursor{}, &FieldError{Field: "after", Reason: reason, cursor: true}
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) < 10 || len(b) > 9+maxCursorID || (b[0] != cursorVersion && b[0] != cursorVersionOldest) || !utf8.Valid(b[9:]) {
		return bad("not an operation cursor")
	}
	o := OrderNewest
	if b[0] == cursorVersionOldest {
		o = OrderOldest
	}
	return cursor{updatedAt: int64(binary.BigEndian.Uint64(b[1:9])), id: string(b[9:]), order: o}, nil
}

// OperationDetail is one operation with everything a console shows of it,
// read in one snapshot by [Admin.ReadOperation].
type OperationDetail struct {
	// Operation has its Input and its Steps, in definition order.
	Operation Operation
	// Events is the operation's history, oldest first: the latest ones,
	// at most the maxEvents asked for.
	Events []Event
	// EventsOmitted counts the earlier events left out of Events.
	EventsOmitted int64
	// Findings are the reconciliation findings, open or resolved, in order
	// of detection.
	Findings []Finding
	// ReadAt is the read's clock (the database's on PostgreSQL, the
	// process's on SQLite).
	ReadAt time.Time
}

// OperationCount is the number of operations in one status.
type OperationCount struct {
	Status Status
	// Count is exact when Exact is true, and otherwise an estimate from the
	// database's statistics as of OperationCounts.AsOf (or, without
	// statistics, the capped count: a lower bound).
	Count int64
	Exact bool
	// Oldest is the least UpdatedAt among the operations in this status:
	// how long the oldest has waited. Zero when there are none.
	Oldest time.Time
}

// OperationCounts is what [Admin.CountOperations] returns.
type OperationCounts struct {
	// Counts has one entry per status, in the order of Statuses.
	Counts []OperationCount
	// AsOf is when the counts were true: the read's clock, or the time of
	// the statistics when a count is estimated.
	AsOf time.Time
}

// Count returns the entry of status s.
func (o OperationCounts) Count(s Status) OperationCount {
	for _, c := range o.Counts {
		if c.Status == s {
			return c
		}
	}
	return OperationCount{Status: s, Exact: true}
}
