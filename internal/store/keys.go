package store

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Page sizes of ListKeys and NeedsAttention.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// KeyFilter selects idempotency records for [DB.ListKeys] (SPEC CON-K2).
// Every non-zero field narrows the list; string fields match exactly.
type KeyFilter struct {
	// Status keeps records in this status; "" keeps every status.
	Status idemdriver.Status
	// Stuck keeps processing records whose lease had ended when the list was
	// read (by the database's clock on PostgreSQL, the process clock on
	// SQLite): their owner is presumably gone. Status must then be "" or
	// processing.
	Stuck bool
	// Scope (the tenant or principal, e.g. "user:api:42") and Operation (the
	// route or operation name) match exactly; there is no prefix search.
	Scope     string
	Operation string
	// CorrelationID and ExternalRef match the references a running owner
	// attached (idem.Annotate).
	CorrelationID string
	ExternalRef   string
	// KeyDigest is idem.Digest(scope, operation, raw key): a raw-key
	// look-up. It needs Scope and Operation too, so that it is answered by
	// the unique index on the three.
	KeyDigest string
	// From and To bound UpdatedAt: From <= UpdatedAt < To. A zero time
	// leaves that side open. Times are compared to the microsecond.
	From time.Time
	To   time.Time
	// After is KeyPage.Next of the previous page; "" asks for the first
	// page. A cursor is only a position (UpdatedAt, ID): under another
	// filter it still pages correctly from that position.
	After string
	// Limit is the page size: DefaultLimit when <= 0, at most MaxLimit.
	Limit int
}

// KeyPage is one page of [DB.ListKeys].
type KeyPage struct {
	// Records, most recently updated first (ties by ID, highest first).
	Records []idemdriver.Record
	// Next is the KeyFilter.After of the following page, "" when this page
	// is the last.
	Next string
}

// keyQuery is a KeyFilter checked and decoded.
type keyQuery struct {
	KeyFilter
	after *cursor
}

// check validates f and decodes its cursor. It returns a *FieldError.
func (f KeyFilter) check() (keyQuery, error) {
	q := keyQuery{KeyFilter: f}
	if f.Status != "" && !f.Status.Valid() {
		return q, &FieldError{Field: "status", Reason: fmt.Sprintf("%q is not a status", f.Status)}
	}
	if f.Stuck {
		if f.Status != "" && f.Status != idemdriver.StatusProcessing {
			return q, &FieldError{Field: "stuck", Reason: "only processing records can be past their lease"}
		}
		q.Status = idemdriver.StatusProcessing
	}
	if f.KeyDigest != "" && (f.Scope == "" || f.Operation == "") {
		return q, &FieldError{Field: "key_digest", Reason: "a key look-up needs the scope and the operation too"}
	}
	q.Limit = clampLimit(f.Limit)
	if f.After != "" {
		c, err := decodeCursor(f.After)
		if err != nil {
			return q, err
		}
		q.after = &c
	}
	return q, nil
}

func clampLimit(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// cursor is a keyset position: the last record of a page, in the list's
// order (updated_at DESC, id DESC).
type cursor struct {
	updatedAt int64 // Unix microseconds
	id        int64
}

// cursorVersion is the first byte of an encoded cursor, so that the format
// can change without old cursors being misread.
const cursorVersion = 1

// encode returns the cursor as base64url without padding: a version byte,
// then updated_at (Unix µs) and id as big-endian int64.
func (c cursor) encode() string {
	var b [17]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.updatedAt))
	binary.BigEndian.PutUint64(b[9:], uint64(c.id))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func cursorOf(r idemdriver.Record) cursor {
	return cursor{updatedAt: r.UpdatedAt.UnixMicro(), id: r.ID}
}

// decodeCursor parses what encode made, and returns a *FieldError matching
// ErrInvalidCursor for anything else.
func decodeCursor(s string) (cursor, error) {
	bad := func(reason string) (cursor, error) {
		return cursor{}, &FieldError{Field: "after", Reason: reason, cursor: true}
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) != 17 || b[0] != cursorVersion {
		return bad("not a cursor of this console")
	}
	c := cursor{
		updatedAt: int64(binary.BigEndian.Uint64(b[1:9])),
		id:        int64(binary.BigEndian.Uint64(b[9:])),
	}
	if c.id <= 0 {
		return bad("not a cursor of this console")
	}
	return c, nil
}

func (c cursor) time() time.Time { return time.UnixMicro(c.updatedAt).UTC() }

// ListKeys returns one page of the records that f selects, most recently
// updated first, paged by keyset on (updated_at, id), never by OFFSET: a
// page costs the same however deep. Each record's ReadAt is the query's
// clock. It returns a *[FieldError] for an invalid filter, matching
// [ErrInvalidCursor] too when f.After is not a cursor from KeyPage.Next.
//
// Records updated while an operator pages move to the head of the list:
// paging never shows a record twice or skips one that did not change.
func (d *DB) ListKeys(ctx context.Context, f KeyFilter) (KeyPage, error) {
	q, err := f.check()
	if err != nil {
		return KeyPage{}, err
	}
	var recs []idemdriver.Record
	switch d.dialect {
	case DialectPostgres:
		recs, err = pgListKeys(ctx, d.pool, q)
	default:
		recs, err = sqliteListKeys(ctx, d.sqlite, q)
	}
	if err != nil {
		return KeyPage{}, fmt.Errorf("store: list keys: %w", err)
	}
	// One more row than the page was read to learn whether another follows.
	page := KeyPage{Records: recs}
	if len(recs) > q.Limit {
		page.Records = recs[:q.Limit]
		page.Next = cursorOf(page.Records[q.Limit-1]).encode()
	}
	return page, nil
}

// Key reads the record with the store's surrogate id; ok is false when
// there is none (never created, swept or forgotten).
func (d *DB) Key(ctx context.Context, id int64) (idemdriver.Record, bool, error) {
	var (
		rec idemdriver.Record
		ok  bool
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		rec, ok, err = pgKey(ctx, d.pool, id)
	default:
		rec, ok, err = sqliteKey(ctx, d.sqlite, id)
	}
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("store: key %d: %w", id, err)
	}
	return rec, ok, nil
}

// StatusCount is the number of records in one status.
type StatusCount struct {
	Status idemdriver.Status
	// Count is exact when Exact is true, and otherwise an estimate from the
	// database's statistics as of KeyOverview.AsOf (PostgreSQL, many
	// records only); the console shows it as approximate.
	Count int64
	Exact bool
	// Oldest is the least UpdatedAt among the records in this status: how
	// long the oldest has waited. Zero when there are none.
	Oldest time.Time
}

// KeyOverview is the head of the console's overview (SPEC CON-K1).
type KeyOverview struct {
	// Counts has one entry per status, in the order of idemdriver.Statuses.
	Counts []StatusCount
	// StuckProcessing counts processing records past their lease, exactly
	// up to a cap of 10,000 (PostgreSQL; SQLite counts them all). When
	// StuckExact is false there are more than it says: it is a lower bound,
	// never an estimate, and the console shows it as "≥ N".
	StuckProcessing int64
	StuckExact      bool
	// AsOf is when the counts were true: the time of the read when every
	// count is exact, else when the statistics behind the estimates were
	// last gathered (the table's last ANALYZE).
	AsOf time.Time
}

// Count returns the entry of status s.
func (o KeyOverview) Count(s idemdriver.Status) StatusCount {
	for _, c := range o.Counts {
		if c.Status == s {
			return c
		}
	}
	return StatusCount{Status: s, Exact: true}
}

// KeyOverview counts records per status without ever counting the whole
// table: on PostgreSQL, each status is counted exactly up to a cap of
// 1,000 by an index-only scan; a status with more records gets an
// estimate, the table's row estimate (reltuples) times the status's
// frequency in pg_stats, with Exact false and AsOf the last ANALYZE. On
// SQLite, embedded and small, every count is exact. Oldest per status is
// one index probe; the stuck count reads the partial index of processing
// records, up to 10,000 entries (see StuckProcessing).
func (d *DB) KeyOverview(ctx context.Context) (KeyOverview, error) {
	var (
		o   KeyOverview
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		o, err = pgKeyOverview(ctx, d.pool, d.countCap, d.stuckCap)
	default:
		o, err = sqliteKeyOverview(ctx, d.sqlite)
	}
	if err != nil {
		return KeyOverview{}, fmt.Errorf("store: key overview: %w", err)
	}
	return o, nil
}

// NeedsAttention returns up to limit records a human should look at first
// (SPEC CON-K1): pending, unavailable, and processing past its lease, the
// longest unchanged first (updated_at, then id, ascending). limit is
// DefaultLimit when <= 0 and at most MaxLimit.
func (d *DB) NeedsAttention(ctx context.Context, limit int) ([]idemdriver.Record, error) {
	limit = clampLimit(limit)
	var (
		recs []idemdriver.Record
		err  error
	)
	switch d.dialect {
	case DialectPostgres:
		recs, err = pgNeedsAttention(ctx, d.pool, limit)
	default:
		recs, err = sqliteNeedsAttention(ctx, d.sqlite, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("store: needs attention: %w", err)
	}
	return recs, nil
}

// where builds the WHERE clause of a list from a keyQuery, for either
// dialect: the only dynamic SQL of the package. Column names are fixed;
// every value is a bound argument.
type where struct {
	conds []string
	args  []any
	// placeholder returns the SQL of the n-th argument (from 1).
	placeholder func(n int) string
	// timeArg encodes a time the way the dialect stores it.
	timeArg func(time.Time) any
	// now returns the SQL of the clock that judges leases, binding it as an
	// argument if need be.
	now func(w *where) string
}

func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return w.placeholder(len(w.args))
}

func (w *where) add(cond string) { w.conds = append(w.conds, cond) }

// keys adds the conditions of q. Each condition is written so that an
// index serves it: the partial indexes on correlation_id and external_ref
// are only usable when the query repeats their predicate.
func (w *where) keys(q keyQuery) {
	if q.Status != "" {
		w.add("status = " + w.arg(string(q.Status)))
	}
	if q.Stuck {
		w.add("lease_expires_at <= " + w.now(w))
	}
	if q.Scope != "" {
		w.add("scope = " + w.arg(q.Scope))
	}
	if q.Operation != "" {
		w.add("operation = " + w.arg(q.Operation))
	}
	if q.KeyDigest != "" {
		w.add("key_digest = " + w.arg(q.KeyDigest))
	}
	if q.CorrelationID != "" {
		w.add("correlation_id = " + w.arg(q.CorrelationID) + " AND correlation_id <> ''")
	}
	if q.ExternalRef != "" {
		w.add("external_ref = " + w.arg(q.ExternalRef) + " AND external_ref <> ''")
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

// sql returns the clause, "" when there is no condition.
func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(w.conds, "\n  AND ")
}

func dollar(n int) string   { return "$" + strconv.Itoa(n) }
func question(n int) string { return "?" + strconv.Itoa(n) }
