package idemdriver

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Admin is the read contract of a store for operators and their tools (the
// console, search, bulk decisions): lists with filters and keyset pages,
// counts per status, look-ups by ID or digest, and iteration over every
// record a filter selects. It never writes; every change of a record goes
// through the engine. Its calls read outside any transaction, on the
// store's own pool or handle, and are safe for concurrent use.
//
// Every implementation validates a [KeyFilter] with [KeyFilter.Check], so
// that a filter is refused the same way, naming the same field, whatever
// the database. The conformance suite is idemtest.RunAdmin.
type Admin interface {
	// ListKeys returns one page of the records that f selects, most
	// recently updated first (ties by ID, highest first), or least
	// recently first (ties by ID, lowest first) when f.Order is
	// OrderOldest, paged by keyset on (UpdatedAt, ID), never by offset: a page costs the same at any
	// depth. Each record's ReadAt is the query's clock. An invalid f is a
	// *[FieldError]. Records updated while a caller pages move to the head
	// of the list: paging never shows a record twice or skips one that did
	// not change.
	ListKeys(ctx context.Context, f KeyFilter) (KeyPage, error)
	// KeyByID reads the record with the store's surrogate ID; ok is false
	// when there is none (never created, swept or forgotten).
	KeyByID(ctx context.Context, id int64) (rec Record, ok bool, err error)
	// KeyOverview counts records per status without counting the whole
	// table when that would be slow: a count may be an estimate, flagged
	// by StatusCount.Exact, and the stuck count a lower bound, flagged by
	// KeyOverview.StuckExact.
	KeyOverview(ctx context.Context) (KeyOverview, error)
	// NeedsAttention returns up to limit records a human should look at
	// first: pending, unavailable, and processing past its lease, the
	// longest unchanged first (UpdatedAt, then ID, ascending). limit is
	// DefaultLimit when <= 0 and at most MaxLimit.
	NeedsAttention(ctx context.Context, limit int) ([]Record, error)
	// EachKey calls fn with every record that f selects, in ListKeys's
	// order, batch records at a time (DefaultLimit when <= 0, at most
	// MaxLimit; f.Limit is ignored), starting after f.After if set. It
	// pages by keyset, so no record is passed twice, and a record that
	// matches f from the start to the end of the iteration and is not
	// changed is passed once; a record changed meanwhile may be missed
	// (it moved ahead of the position). It stops at the first error of
	// fn, which it returns unwrapped, or of the store.
	EachKey(ctx context.Context, f KeyFilter, batch int, fn func([]Record) error) error
	// CountKeys counts the records that f selects (f.After, f.Order and
	// f.Limit are ignored) exactly up to upTo (DefaultCountUpTo when <= 0,
	// at most MaxCountUpTo) and stops there: above it the result is upTo
	// with Exact false, "at least upTo". It stops at upTo+1 matches, so
	// that a list can say how long it is at any table size; but where no
	// index covers every condition of f (a tenant and a rare status, say)
	// it reads past the records that fail the rest to find them, as many
	// as the table holds. Bound it with a deadline on ctx: the count then
	// fails with an error matching [context.DeadlineExceeded], and a SQL
	// store that can ends the statement in the database at that deadline
	// too (PostgreSQL: statement_timeout). An invalid f is a *[FieldError].
	CountKeys(ctx context.Context, f KeyFilter, upTo int) (KeyCount, error)
}

// KeyCount is what [Admin.CountKeys] returns: N records, or at least N
// when Exact is false.
type KeyCount struct {
	N     int64
	Exact bool
}

// Bounds of [Admin.CountKeys]'s upTo.
const (
	DefaultCountUpTo = 1000
	MaxCountUpTo     = 100_000
)

// CappedCount is the KeyCount of n records counted up to upTo+1: exact
// when n <= upTo, else "at least upTo".
func CappedCount(n int64, upTo int) KeyCount {
	if n > int64(upTo) {
		return KeyCount{N: int64(upTo)}
	}
	return KeyCount{N: n, Exact: true}
}

// ClampCountUpTo returns n as CountKeys's upTo: DefaultCountUpTo when
// n <= 0, at most MaxCountUpTo.
func ClampCountUpTo(n int) int {
	if n <= 0 {
		return DefaultCountUpTo
	}
	return min(n, MaxCountUpTo)
}

// Seeder loads records as they are, for benchmarks and imports. It
// bypasses the lease protocol, the engine and its checks: a seeded record
// keeps the status, owner, fence and times it was given (ID, ReadAt are
// ignored; the store assigns IDs). A record's ident must not exist yet.
// It is not part of [Store]; the drivers shipped with unstuck implement it.
type Seeder interface {
	// SeedRecords inserts recs in one or a few statements and makes the
	// store's fence counter higher than every fence seeded, so that the
	// engine's next fence still increases.
	SeedRecords(ctx context.Context, recs []Record) error
}

// Page sizes of [Admin.ListKeys], [Admin.NeedsAttention] and
// [Admin.EachKey].
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Errors of [Admin] calls for an argument refused before the database is
// asked, matched with errors.Is; the error is a *[FieldError].
var (
	// ErrInvalidFilter: a KeyFilter field is invalid.
	ErrInvalidFilter = errors.New("idem: invalid filter")
	// ErrInvalidCursor: KeyFilter.After is not a cursor from KeyPage.Next.
	// Such errors also match ErrInvalidFilter.
	ErrInvalidCursor = errors.New("idem: invalid cursor")
)

// ErrInvalidArgument: a [Store] primitive refused an argument its database
// cannot hold (a scope, operation or key digest its columns or checks
// refuse). The error is a *[FieldError] naming the field as the
// application knows it ("scope", "operation", "key"); the engine reports
// it to its caller as an idem.ValidationError matching idem.ErrInvalidKey,
// so a driver never needs to import the engine.
var ErrInvalidArgument = errors.New("idem: invalid argument")

// FieldError is the one error a driver returns for an invalid field: Field
// names it as a form, a query or the application would ("scope", "key",
// "status", "after") and Reason says why.
//
// A store primitive that refuses an argument returns one built as
// &FieldError{Field: …, Reason: …}; it matches [ErrInvalidArgument]. A
// filter refused by [KeyFilter.Check] (and so by every [Admin] read)
// matches [ErrInvalidFilter] instead, and also [ErrInvalidCursor] when it
// is about the cursor.
type FieldError struct {
	Field  string
	Reason string
	filter bool // set by KeyFilter.Check: a filter field, not a store argument
}

func (e *FieldError) Error() string {
	return "idem: invalid " + e.Field + ": " + e.Reason
}

// Unwrap lets errors.Is match ErrInvalidArgument for a store argument, and
// ErrInvalidFilter (with ErrInvalidCursor for the cursor) for a filter.
func (e *FieldError) Unwrap() []error {
	switch {
	case !e.filter:
		return []error{ErrInvalidArgument}
	case e.Field == "after":
		return []error{ErrInvalidFilter, ErrInvalidCursor}
	}
	return []error{ErrInvalidFilter}
}

// filterError is the *FieldError of an invalid filter field.
func filterError(field, reason string) *FieldError {
	return &FieldError{Field: field, Reason: reason, filter: true}
}

// KeyFilter selects records for [Admin.ListKeys] and [Admin.EachKey].
// Every non-zero field narrows the selection; string fields match exactly.
type KeyFilter struct {
	// Status keeps records in this status; "" keeps every status.
	Status Status
	// Stuck keeps processing records whose lease had ended when the list
	// was read, by the store's clock: their owner is presumably gone.
	// Status must then be "" or processing.
	Stuck bool
	// Scope (the tenant or principal, e.g. "user:api:42") and Operation
	// (the route or operation name) match exactly; there is no prefix
	// search.
	Scope     string
	Operation string
	// CorrelationID and ExternalRef match the references a running owner
	// attached (idem.Annotate).
	CorrelationID string
	ExternalRef   string
	// KeyDigest is idem.Digest(scope, operation, raw key), or a prefix of
	// it of at least ShortDigestLen hex digits (idem.SafeKeyID, the short
	// key ID that logs show): it keeps the records whose digest starts
	// with it, in any scope and operation (the digest binds both), from an
	// index on the digest's first ShortDigestLen digits.
	KeyDigest string
	// KeyHash is idem.KeyHash(raw key): the raw key's look-up in every
	// scope and operation (answered by an index of its own). Records
	// reserved before the store kept the hash are not found by it.
	KeyHash string
	// SkipOperationPrefix leaves out the records whose Operation starts
	// with it: the console leaves out its own decision records
	// ("console …") from the lists of customers' keys. "" leaves out none.
	SkipOperationPrefix string
	// From and To bound UpdatedAt: From <= UpdatedAt < To. A zero time
	// leaves that side open. Times are compared to the microsecond.
	From time.Time
	To   time.Time
	// Order is the list's order: OrderNewest (or "") lists the most
	// recently updated first, OrderOldest the least recently updated
	// first (the longest unchanged, for anything stuck).
	Order Order
	// After is KeyPage.Next of the previous page; "" asks for the first
	// page. A cursor is a position (UpdatedAt, ID) in one order: under
	// another filter it still pages correctly from that position, but a
	// cursor of the other order is refused (field "after").
	After string
	// Limit is the page size: DefaultLimit when <= 0, at most MaxLimit.
	Limit int
}

// Order is the order of a key list, by UpdatedAt then ID.
type Order string

// The orders of [KeyFilter.Order]; "" is OrderNewest.
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

// KeyPage is one page of [Admin.ListKeys].
type KeyPage struct {
	// Records in the filter's order: most recently updated first (ties by
	// ID, highest first), or the reverse for OrderOldest.
	Records []Record
	// Next is the KeyFilter.After of the following page, "" when this page
	// is the last.
	Next string
}

// KeyQuery is a [KeyFilter] checked by [KeyFilter.Check]: what a driver
// turns into its query. Its Status is processing when Stuck is set, its
// Order is OrderNewest or OrderOldest, and its Limit is in [1, MaxLimit].
type KeyQuery struct {
	KeyFilter
	// AfterSet tells whether After decoded to a position, which is then
	// AfterUpdatedAt (to the microsecond, UTC) and AfterID: the query
	// returns only records after it in list order, (updated_at, id) <
	// (AfterUpdatedAt, AfterID) newest first, > oldest first.
	AfterSet       bool
	AfterUpdatedAt time.Time
	AfterID        int64
}

// Check validates f, clamps its limit and decodes its cursor. It returns a
// *[FieldError] naming the first invalid field.
func (f KeyFilter) Check() (KeyQuery, error) {
	q := KeyQuery{KeyFilter: f}
	if f.Status != "" && !f.Status.Valid() {
		return q, filterError("status", fmt.Sprintf("%q is not a status", f.Status))
	}
	if f.Stuck {
		if f.Status != "" && f.Status != StatusProcessing {
			return q, filterError("stuck", "only processing records can be past their lease")
		}
		q.Status = StatusProcessing
	}
	if f.KeyDigest != "" && (len(f.KeyDigest) < ShortDigestLen || !isHex(f.KeyDigest, 64)) {
		return q, filterError("key_digest", fmt.Sprintf("not a key digest or a prefix of one (%d to 64 lowercase hex digits)", ShortDigestLen))
	}
	if len(f.SkipOperationPrefix) > 255 {
		return q, filterError("skip_operation_prefix", "longer than an operation (255 bytes)")
	}
	if f.KeyHash != "" && (len(f.KeyHash) != 64 || !isHex(f.KeyHash, 64)) {
		return q, filterError("key_hash", "not a key hash (64 lowercase hex digits)")
	}
	if !f.Order.Valid() {
		return q, filterError("order", fmt.Sprintf("%q is not an order (newest or oldest)", f.Order))
	}
	if f.Order == "" {
		q.Order = OrderNewest
	}
	q.Limit = ClampLimit(f.Limit)
	if f.After != "" {
		at, id, order, err := DecodeCursor(f.After)
		if err != nil {
			return q, err
		}
		if order != q.Order {
			return q, filterError("after", "a cursor of the "+string(order)+"-first list, not the "+string(q.Order)+"-first one")
		}
		q.AfterSet, q.AfterUpdatedAt, q.AfterID = true, at, id
	}
	return q, nil
}

// ShortDigestLen is the length of the shortest [KeyFilter.KeyDigest]
// prefix, that of idem.SafeKeyID: 12 hex digits, 48 bits.
const ShortDigestLen = 12

// isHex reports whether s is at most max lowercase hex digits.
func isHex(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ClampLimit returns n as a page size: DefaultLimit when n <= 0, at most
// MaxLimit.
func ClampLimit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// cursorVersion is the first byte of an encoded cursor, so that the format
// can change without old cursors being misread; cursorVersionOldest marks
// a position in the oldest-first list. Operation cursors (sagadriver) use
// 2 and 4, so that a cursor of one list is refused by the other.
const (
	cursorVersion       = 1
	cursorVersionOldest = 3
)

// EncodeCursor returns the position of rec in the list of order o as
// a KeyPage.Next: base64url without padding of a version byte (which
// carries the order), then UpdatedAt (Unix µs) and ID as big-endian int64.
func EncodeCursor(rec Record, o Order) string {
	var b [17]byte
	b[0] = cursorVersion
	if o.Oldest() {
		b[0] = cursorVersionOldest
	}
	binary.BigEndian.PutUint64(b[1:9], uint64(rec.UpdatedAt.UnixMicro()))
	binary.BigEndian.PutUint64(b[9:], uint64(rec.ID))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// DecodeCursor parses what EncodeCursor made into the position
// (UpdatedAt, UTC, and ID) and its list's order, and returns a
// *[FieldError] for field "after", matching [ErrInvalidCursor], for
// anything else.
func DecodeCursor(s string) (updatedAt time.Time, id int64, o Order, err error) {
	bad := func(reason string) (time.Time, int64, Order, error) {
		return time.Time{}, 0, "", filterError("after", reason)
	}
	b, derr := base64.RawURLEncoding.DecodeString(s)
	if derr != nil {
		return bad("not base64url")
	}
	if len(b) != 17 || (b[0] != cursorVersion && b[0] != cursorVersionOldest) {
		return bad("not a cursor of this store")
	}
	us := int64(binary.BigEndian.Uint64(b[1:9]))
	id = int64(binary.BigEndian.Uint64(b[9:]))
	if id <= 0 {
		return bad("not a cursor of this store")
	}
	o = OrderNewest
	if b[0] == cursorVersionOldest {
		o = OrderOldest
	}
	return time.UnixMicro(us).UTC(), id, o, nil
}

// StatusCount is the number of records in one status.
type StatusCount struct {
	Status Status
	// Count is exact when Exact is true, and otherwise an estimate from the
	// database's statistics as of KeyOverview.AsOf (or, without
	// statistics, the capped exact count: a lower bound).
	Count int64
	Exact bool
	// Oldest is the least UpdatedAt among the records in this status: how
	// long the oldest has waited. Zero when there are none.
	Oldest time.Time
}

// KeyOverview is what [Admin.KeyOverview] returns.
type KeyOverview struct {
	// Counts has one entry per status, in the order of Statuses.
	Counts []StatusCount
	// StuckProcessing counts processing records past their lease. When
	// StuckExact is false there are more than it says: it is a lower
	// bound (a cap), never an estimate.
	StuckProcessing int64
	StuckExact      bool
	// AsOf is when the counts were true: the time of the read when every
	// count is exact, else when the statistics behind the estimates were
	// last gathered.
	AsOf time.Time
}

// Count returns the entry of status s (zero and exact when absent).
func (o KeyOverview) Count(s Status) StatusCount {
	for _, c := range o.Counts {
		if c.Status == s {
			return c
		}
	}
	return StatusCount{Status: s, Exact: true}
}

// EachKey implements [Admin.EachKey] on top of list, a driver's ListKeys:
// it pages with the cursor of each batch's last record. A driver whose
// list is ListKeys may use it as its EachKey.
func EachKey(ctx context.Context, list func(context.Context, KeyFilter) (KeyPage, error), f KeyFilter, batch int,
	fn func([]Record) error) error {
	f.Limit = ClampLimit(batch)
	if _, err := f.Check(); err != nil {
		return err
	}
	for {
		page, err := list(ctx, f)
		if err != nil {
			return err
		}
		if len(page.Records) > 0 {
			if err := fn(page.Records); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		f.After = page.Next
	}
}
