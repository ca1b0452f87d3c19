package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Page sizes of List and History.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Filter selects entries for [Trail.List] and [Trail.Export]. Every
// non-zero field narrows the selection; string fields match exactly, each
// with an index in seq order.
type Filter struct {
	Actor      string
	Action     string
	TargetKind string
	// TargetID needs TargetKind too, so that the (target_kind, target_id,
	// seq) index answers it.
	TargetID string
	// RequestID keeps the entries of one request (Entry.RequestID).
	RequestID string
	Outcome   string
	// From and To bound At: From <= At < To. A zero time leaves that side
	// open. Times are compared to the microsecond.
	From time.Time
	To   time.Time
	// After is the next cursor of the previous page: the list continues
	// with entries whose seq is below it. 0 starts at the newest entry.
	After int64
	// Limit is the page size: DefaultLimit when <= 0, at most MaxLimit.
	// Export ignores it.
	Limit int
}

// check validates f. It returns a *fielderr.Error.
func (f Filter) check() error {
	switch {
	case f.After < 0:
		return invalid("after", "a cursor is a positive seq")
	case f.TargetID != "" && f.TargetKind == "":
		return invalid("target_id", "a target ID needs its target kind")
	case !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From):
		return invalid("to", "must be after from")
	}
	return nil
}

// List returns one page of the entries f selects, newest (highest seq)
// first, and next, the Filter.After of the following page, 0 when this
// page is the last. Pages are keyset on seq, so a page costs the same at
// any depth, and entries appended meanwhile never shift a later page.
// Listing is not recorded: the caller appends an OutcomeRead entry where
// a read must be audited.
func (t *Trail) List(ctx context.Context, f Filter) (entries []Entry, next int64, err error) {
	if err := f.check(); err != nil {
		return nil, 0, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	entries, next, err = t.page(ctx, f, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: list: %w", err)
	}
	return entries, next, nil
}

// History returns the newest entries about one target, newest first, at
// most limit of them (DefaultLimit when <= 0, at most MaxLimit): the audit
// history an item's page shows.
func (t *Trail) History(ctx context.Context, targetKind, targetID string, limit int) ([]Entry, error) {
	if targetKind == "" {
		return nil, invalid("target_kind", "required")
	}
	if targetID == "" {
		return nil, invalid("target_id", "required")
	}
	entries, _, err := t.List(ctx, Filter{TargetKind: targetKind, TargetID: targetID, Limit: limit})
	return entries, err
}

// page reads up to limit entries of f after f.After, and the cursor of the
// next page.
func (t *Trail) page(ctx context.Context, f Filter, limit int) ([]Entry, int64, error) {
	query, args := t.listSQL(f, limit+1)
	entries := make([]Entry, 0, min(limit+1, 64))
	if err := t.each(ctx, query, args, func(e *Entry) error {
		entries = append(entries, *e)
		return nil
	}); err != nil {
		return nil, 0, err
	}
	if len(entries) <= limit {
		return entries, 0, nil
	}
	entries = entries[:limit]
	return entries, entries[limit-1].Seq, nil
}

// listSQL builds the query of one page: f's conditions, seq descending,
// limit rows. Values are always parameters.
func (t *Trail) listSQL(f Filter, limit int) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" "+t.placeholder(len(args)))
	}
	if f.Actor != "" {
		add("actor =", f.Actor)
	}
	if f.Action != "" {
		add("action =", f.Action)
	}
	if f.TargetKind != "" {
		add("target_kind =", f.TargetKind)
	}
	if f.TargetID != "" {
		add("target_id =", f.TargetID)
	}
	if f.RequestID != "" {
		add("request_id =", f.RequestID)
	}
	if f.Outcome != "" {
		add("outcome =", f.Outcome)
	}
	if !f.From.IsZero() {
		add("at >=", t.timeArg(f.From))
	}
	if !f.To.IsZero() {
		add("at <", t.timeArg(f.To))
	}
	if f.After > 0 {
		add("seq <", f.After)
	}
	var b strings.Builder
	b.WriteString("SELECT " + columns + " FROM unstuck_audit_entry")
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	args = append(args, limit)
	b.WriteString(" ORDER BY seq DESC LIMIT " + t.placeholder(len(args)))
	return b.String(), args
}

// placeholder returns the dialect's n-th parameter marker.
func (t *Trail) placeholder(n int) string {
	if t.dialect == DialectPostgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// timeArg is a time as the dialect stores it: timestamptz on PostgreSQL,
// Unix microseconds on SQLite.
func (t *Trail) timeArg(at time.Time) any {
	at = time.UnixMicro(at.UnixMicro()).UTC()
	if t.dialect == DialectPostgres {
		return at
	}
	return at.UnixMicro()
}

// each runs a query of the trail's columns and calls fn with each entry,
// in the query's order. The *Entry is reused between calls, but the
// slices and strings it holds are not: fn may keep a copy of the struct.
func (t *Trail) each(ctx context.Context, query string, args []any, fn func(*Entry) error) error {
	if t.dialect == DialectPostgres {
		return t.pgEach(ctx, query, args, fn)
	}
	return t.sqliteEach(ctx, query, args, fn)
}
