package idemtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// AdminHarness is one store under [RunAdmin]: fresh, empty, migrated
// tables that no other test touches.
type AdminHarness struct {
	// Store writes the records the reads are checked on, through the
	// primitives the engine uses.
	Store idemdriver.Store
	// Admin reads them; usually the same value as Store.
	Admin idemdriver.Admin
	// Seeder, if not nil, is checked too: seeded records read back as
	// given, and the engine's next fence is above every seeded one.
	Seeder idemdriver.Seeder
	// SetCaps sets the caps under which KeyOverview counts exactly (per
	// status, and stuck records); nil for a store that always counts
	// exactly. With it, Analyze must refresh the statistics estimates
	// come from.
	SetCaps func(count, stuck int)
	Analyze func(ctx context.Context) error
}

// RunAdmin runs the conformance suite of [idemdriver.Admin] (and
// [idemdriver.Seeder] when the harness has one) against the harnesses
// newHarness makes, one per subtest; subtests run in parallel. Records are
// stamped a day before the wall clock, since the admin reads judge leases
// by the store's own clock.
func RunAdmin(t *testing.T, newHarness func(t *testing.T) AdminHarness) {
	t.Helper()
	run := func(name string, fn func(t *testing.T, h adminBundle)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, adminBundle{AdminHarness: newHarness(t), base: time.Now().Add(-24 * time.Hour).Truncate(time.Second).UTC()})
		})
	}
	run("Filters", testAdminFilters)
	run("FieldErrors", testAdminFieldErrors)
	run("Paging", testAdminPaging)
	run("BadCursor", testAdminBadCursor)
	run("KeyByID", testAdminKeyByID)
	run("TraceID", testAdminTraceID)
	run("Overview", testAdminOverview)
	run("OverviewCaps", testAdminOverviewCaps)
	run("NeedsAttention", testAdminNeedsAttention)
	run("EachKey", testAdminEachKey)
	run("EachKeyConcurrentWrites", testAdminEachKeyConcurrent)
	run("Seed", testAdminSeed)
}

type adminBundle struct {
	AdminHarness
	// base is a day ago, to the second: records stamped near it are long
	// past any one-minute lease, by any store's clock.
	base time.Time
}

func (b adminBundle) at(minutes int) time.Time {
	return b.base.Add(time.Duration(minutes) * time.Minute)
}

// recordOpts describes a record for adminBundle.record; zero fields get
// defaults.
type recordOpts struct {
	Scope     string            // "acme"
	Operation string            // "charge"
	Key       string            // random
	Status    idemdriver.Status // completed
	At        time.Time         // base: created and updated then
	Lease     time.Duration     // a minute
	// CorrelationID and ExternalRef are attached while processing.
	CorrelationID string
	ExternalRef   string
}

// record creates a record through the store's primitives, every write
// stamped o.At, and returns it as the store reads it.
func (b adminBundle) record(t *testing.T, o recordOpts) idemdriver.Record {
	t.Helper()
	o.Scope = cmp.Or(o.Scope, "acme")
	o.Operation = cmp.Or(o.Operation, "charge")
	o.Key = cmp.Or(o.Key, rand.Text())
	o.Status = cmp.Or(o.Status, idemdriver.StatusCompleted)
	if o.At.IsZero() {
		o.At = b.base
	}
	o.Lease = cmp.Or(o.Lease, time.Minute)
	ctx := t.Context()
	id := idemdriver.Ident{Scope: o.Scope, Operation: o.Operation, KeyDigest: idem.Digest(o.Scope, o.Operation, o.Key)}
	rec, created, err := b.Store.Reserve(ctx, idemdriver.ReserveParams{
		Ident: id, KeyHash: idem.KeyHash(o.Key), Fingerprint: "fp", Owner: rand.Text(), Lease: o.Lease, TTL: 72 * time.Hour, Now: o.At})
	require.NoError(t, err)
	require.True(t, created, "record created")
	if o.CorrelationID != "" || o.ExternalRef != "" {
		require.NoError(t, b.Store.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{
			CorrelationID: o.CorrelationID, ExternalRef: o.ExternalRef, ResourceIDs: []string{"order-1"}, Now: o.At}))
	}
	if o.Status != idemdriver.StatusProcessing {
		c := idemdriver.Completion{Status: o.Status, Now: o.At}
		switch o.Status {
		case idemdriver.StatusCompleted, idemdriver.StatusFailed:
			c.Result, c.ResponseCode = []byte(`{"ok":true}`), 201
		default:
			c.LastError = "provider timed out"
		}
		require.NoError(t, b.Store.Complete(ctx, id, rec.Owner, c))
	}
	rec, ok, err := b.Store.Get(ctx, id)
	require.NoError(t, err)
	require.True(t, ok, "record found")
	return rec
}

// recordIDs returns the IDs of recs, in order.
func recordIDs(recs []idemdriver.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// listOrder sorts recs as ListKeys returns them.
func listOrder(recs []idemdriver.Record) {
	slices.SortFunc(recs, func(x, y idemdriver.Record) int {
		return cmp.Or(y.UpdatedAt.Compare(x.UpdatedAt), cmp.Compare(y.ID, x.ID))
	})
}

func testAdminFilters(t *testing.T, b adminBundle) {
	r1 := b.record(t, recordOpts{At: b.at(1)})
	r2 := b.record(t, recordOpts{Operation: "refund", Status: idemdriver.StatusFailed, At: b.at(2)})
	r3 := b.record(t, recordOpts{Scope: "globex", Key: "k3", Status: idemdriver.StatusPending, At: b.at(3),
		CorrelationID: "corr-1", ExternalRef: "ext-1"})
	r4 := b.record(t, recordOpts{Scope: "globex", Operation: "refund", Status: idemdriver.StatusUnavailable, At: b.at(4)})
	r5 := b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: b.at(5)}) // past its lease
	r6 := b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: time.Now().UTC(), Lease: time.Hour})
	r7 := b.record(t, recordOpts{Scope: "globex", At: b.at(7), CorrelationID: "corr-1"})
	// The same raw key in two scopes and operations: the key hash finds both
	// (SPEC K11), the digest only its own.
	r8 := b.record(t, recordOpts{Scope: "initech", Operation: "payout", Key: "k3", At: b.at(8)})
	for _, r := range []idemdriver.Record{r1, r3, r8} {
		require.Len(t, r.KeyHash, 64, "Reserve stores the key hash")
	}
	require.Equal(t, r3.KeyHash, r8.KeyHash, "one raw key, one hash")
	require.NotEqual(t, r1.KeyHash, r3.KeyHash)

	for _, tc := range []struct {
		name string
		f    idemdriver.KeyFilter
		want []idemdriver.Record
	}{
		{"all", idemdriver.KeyFilter{}, []idemdriver.Record{r6, r8, r7, r5, r4, r3, r2, r1}},
		{"status completed", idemdriver.KeyFilter{Status: idemdriver.StatusCompleted}, []idemdriver.Record{r8, r7, r1}},
		{"status processing", idemdriver.KeyFilter{Status: idemdriver.StatusProcessing}, []idemdriver.Record{r6, r5}},
		{"stuck", idemdriver.KeyFilter{Stuck: true}, []idemdriver.Record{r5}},
		{"stuck processing", idemdriver.KeyFilter{Stuck: true, Status: idemdriver.StatusProcessing}, []idemdriver.Record{r5}},
		{"scope", idemdriver.KeyFilter{Scope: "globex"}, []idemdriver.Record{r7, r4, r3}},
		{"operation", idemdriver.KeyFilter{Operation: "refund"}, []idemdriver.Record{r4, r2}},
		{"scope and operation", idemdriver.KeyFilter{Scope: "acme", Operation: "charge"}, []idemdriver.Record{r6, r5, r1}},
		{"status and scope", idemdriver.KeyFilter{Status: idemdriver.StatusPending, Scope: "acme"}, nil},
		{"stuck and scope", idemdriver.KeyFilter{Stuck: true, Scope: "globex"}, nil},
		{"correlation", idemdriver.KeyFilter{CorrelationID: "corr-1"}, []idemdriver.Record{r7, r3}},
		{"external ref", idemdriver.KeyFilter{ExternalRef: "ext-1"}, []idemdriver.Record{r3}},
		{"key digest", idemdriver.KeyFilter{Scope: "globex", Operation: "charge", KeyDigest: idem.Digest("globex", "charge", "k3")},
			[]idemdriver.Record{r3}},
		{"key digest in another scope", idemdriver.KeyFilter{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("globex", "charge", "k3")},
			nil},
		// A digest alone, or its short form from a log line (SPEC K11).
		{"key digest alone", idemdriver.KeyFilter{KeyDigest: idem.Digest("initech", "payout", "k3")}, []idemdriver.Record{r8}},
		{"short key ID", idemdriver.KeyFilter{KeyDigest: idem.SafeKeyID(idem.Digest("globex", "charge", "k3"))}, []idemdriver.Record{r3}},
		{"digest prefix of 20", idemdriver.KeyFilter{KeyDigest: idem.Digest("globex", "charge", "k3")[:20]}, []idemdriver.Record{r3}},
		{"short key ID of no record", idemdriver.KeyFilter{KeyDigest: idem.SafeKeyID(idem.Digest("globex", "charge", "nobody"))}, nil},
		{"skip operation prefix", idemdriver.KeyFilter{SkipOperationPrefix: "ref"}, []idemdriver.Record{r6, r8, r7, r5, r3, r1}},
		{"skip operation prefix that is whole", idemdriver.KeyFilter{SkipOperationPrefix: "payout", Scope: "initech"}, nil},
		{"from and to", idemdriver.KeyFilter{From: b.at(2), To: b.at(4)}, []idemdriver.Record{r3, r2}},
		{"key hash in every scope", idemdriver.KeyFilter{KeyHash: idem.KeyHash("k3")}, []idemdriver.Record{r8, r3}},
		{"key hash and scope", idemdriver.KeyFilter{KeyHash: idem.KeyHash("k3"), Scope: "initech"}, []idemdriver.Record{r8}},
		{"key hash of no key", idemdriver.KeyFilter{KeyHash: idem.KeyHash("nobody")}, nil},
		{"from", idemdriver.KeyFilter{From: b.at(4)}, []idemdriver.Record{r6, r8, r7, r5, r4}},
		{"to", idemdriver.KeyFilter{To: b.at(2)}, []idemdriver.Record{r1}},
		{"limit", idemdriver.KeyFilter{Limit: 2}, []idemdriver.Record{r6, r8}},
	} {
		page, err := b.Admin.ListKeys(t.Context(), tc.f)
		require.NoError(t, err, tc.name)
		require.Equal(t, recordIDs(tc.want), recordIDs(page.Records), tc.name)
		if tc.name != "limit" {
			require.Empty(t, page.Next, tc.name)
		}
		// CountKeys counts what the list selects, whatever its limit.
		want := int64(len(tc.want))
		if tc.name == "limit" {
			want = 8
		}
		n, err := b.Admin.CountKeys(t.Context(), tc.f, 0)
		require.NoError(t, err, "count: %s", tc.name)
		require.Equal(t, idemdriver.KeyCount{N: want, Exact: true}, n, "count: %s", tc.name)
	}
	// Counted up to a cap: exact at the cap, "at least" beyond it; a
	// cursor is ignored.
	for _, tc := range []struct {
		upTo int
		want idemdriver.KeyCount
	}{{8, idemdriver.KeyCount{N: 8, Exact: true}}, {7, idemdriver.KeyCount{N: 7}}, {1, idemdriver.KeyCount{N: 1}}} {
		n, err := b.Admin.CountKeys(t.Context(), idemdriver.KeyFilter{After: "not even a cursor"}, tc.upTo)
		require.NoError(t, err)
		require.Equal(t, tc.want, n, "count up to %d", tc.upTo)
	}
	n, err := b.Admin.CountKeys(t.Context(), idemdriver.KeyFilter{Stuck: true, Scope: "acme"}, 0)
	require.NoError(t, err)
	require.Equal(t, idemdriver.KeyCount{N: 1, Exact: true}, n, "stuck, by the store's clock")
	// A count whose deadline has passed fails with an error matching
	// context.DeadlineExceeded: the console's list shows its rows as a
	// lower bound on that error and no other.
	ended, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err = b.Admin.CountKeys(ended, idemdriver.KeyFilter{}, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a count past its deadline")

	// Records read as the store's Get reads them, stamped with the query's
	// clock.
	page, err := b.Admin.ListKeys(t.Context(), idemdriver.KeyFilter{ExternalRef: "ext-1"})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	got := page.Records[0]
	require.WithinDuration(t, time.Now(), got.ReadAt, 5*time.Second, "ReadAt is the query's clock")
	require.Equal(t, time.UTC, got.ReadAt.Location())
	got.ReadAt = r3.ReadAt
	require.Equal(t, r3, got)
	require.Equal(t, []string{"order-1"}, got.ResourceIDs)
}

func testAdminFieldErrors(t *testing.T, b adminBundle) {
	digest := idem.Digest("globex", "charge", "k3")
	for _, tc := range []struct {
		name  string
		f     idemdriver.KeyFilter
		field string
	}{
		{"unknown status", idemdriver.KeyFilter{Status: "stuck"}, "status"},
		{"stuck but completed", idemdriver.KeyFilter{Stuck: true, Status: idemdriver.StatusCompleted}, "stuck"},
		{"digest too short", idemdriver.KeyFilter{KeyDigest: digest[:idemdriver.ShortDigestLen-1]}, "key_digest"},
		{"digest too long", idemdriver.KeyFilter{KeyDigest: digest + "0"}, "key_digest"},
		{"digest in upper case", idemdriver.KeyFilter{KeyDigest: strings.ToUpper(digest)}, "key_digest"},
		{"digest not hex", idemdriver.KeyFilter{KeyDigest: "yourkey-123456789"}, "key_digest"},
		{"skip prefix too long", idemdriver.KeyFilter{SkipOperationPrefix: strings.Repeat("x", 256)}, "skip_operation_prefix"},
		{"bad cursor", idemdriver.KeyFilter{After: "!!!"}, "after"},
		{"unknown order", idemdriver.KeyFilter{Order: "sideways"}, "order"},
		{"newest cursor oldest first", idemdriver.KeyFilter{Order: idemdriver.OrderOldest,
			After: idemdriver.EncodeCursor(idemdriver.Record{ID: 1, UpdatedAt: b.base}, idemdriver.OrderNewest)}, "after"},
		{"oldest cursor newest first", idemdriver.KeyFilter{
			After: idemdriver.EncodeCursor(idemdriver.Record{ID: 1, UpdatedAt: b.base}, idemdriver.OrderOldest)}, "after"},
		{"key hash not a hash", idemdriver.KeyFilter{KeyHash: "yourkey-123"}, "key_hash"},
		{"key hash in upper case", idemdriver.KeyFilter{KeyHash: strings.ToUpper(idem.KeyHash("k"))}, "key_hash"},
	} {
		_, err := b.Admin.ListKeys(t.Context(), tc.f)
		require.ErrorIs(t, err, idemdriver.ErrInvalidFilter, tc.name)
		var fe *idemdriver.FieldError
		require.ErrorAs(t, err, &fe, tc.name)
		require.Equal(t, tc.field, fe.Field, tc.name)
		require.Equal(t, tc.field == "after", errors.Is(err, idemdriver.ErrInvalidCursor), tc.name)

		err = b.Admin.EachKey(t.Context(), tc.f, 10, func([]idemdriver.Record) error { return nil })
		require.ErrorAs(t, err, &fe, "EachKey: %s", tc.name)
		require.Equal(t, tc.field, fe.Field, "EachKey: %s", tc.name)

		if tc.field != "after" { // CountKeys ignores the cursor
			_, err = b.Admin.CountKeys(t.Context(), tc.f, 0)
			require.ErrorAs(t, err, &fe, "CountKeys: %s", tc.name)
			require.Equal(t, tc.field, fe.Field, "CountKeys: %s", tc.name)
		}
	}
}

func testAdminPaging(t *testing.T, b adminBundle) {
	// 120 records in groups of 7 sharing one updated_at, so that pages end
	// inside groups of ties, and 10 of them failed.
	var all []idemdriver.Record
	for i := range 120 {
		status := idemdriver.StatusCompleted
		if i%12 == 5 {
			status = idemdriver.StatusFailed
		}
		all = append(all, b.record(t, recordOpts{Status: status, At: b.base.Add(time.Duration(i/7) * time.Second)}))
	}
	listOrder(all)
	var failed []idemdriver.Record
	for _, r := range all {
		if r.Status == idemdriver.StatusFailed {
			failed = append(failed, r)
		}
	}
	require.Len(t, failed, 10)
	oldest, oldestFailed := slices.Clone(all), slices.Clone(failed)
	slices.Reverse(oldest)
	slices.Reverse(oldestFailed)

	// walk pages through the whole list and returns the pages' IDs.
	walk := func(f idemdriver.KeyFilter) [][]int64 {
		var pages [][]int64
		for {
			page, err := b.Admin.ListKeys(t.Context(), f)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page.Records), idemdriver.ClampLimit(f.Limit))
			pages = append(pages, recordIDs(page.Records))
			if page.Next == "" {
				return pages
			}
			require.Len(t, page.Records, idemdriver.ClampLimit(f.Limit), "only the last page is short")
			f.After = page.Next
			require.Less(t, len(pages), 500, "paging ends")
		}
	}
	for _, tc := range []struct {
		f     idemdriver.KeyFilter
		want  []idemdriver.Record
		pages int
	}{
		{idemdriver.KeyFilter{Limit: 25}, all, 5},
		{idemdriver.KeyFilter{Limit: 40}, all, 3}, // an exact multiple: no empty last page
		{idemdriver.KeyFilter{Limit: 7}, all, 18},
		{idemdriver.KeyFilter{Limit: 1}, all, 120},
		{idemdriver.KeyFilter{}, all, 3},
		{idemdriver.KeyFilter{Limit: 1000}, all, 1},
		{idemdriver.KeyFilter{Limit: 3, Status: idemdriver.StatusFailed}, failed, 4},
		{idemdriver.KeyFilter{Limit: 4, Operation: "charge", Scope: "acme"}, all, 30},
		{idemdriver.KeyFilter{Limit: 4, Order: idemdriver.OrderNewest}, all, 30},
		// Oldest first: the reverse, paging through the same ties.
		{idemdriver.KeyFilter{Limit: 25, Order: idemdriver.OrderOldest}, oldest, 5},
		{idemdriver.KeyFilter{Limit: 7, Order: idemdriver.OrderOldest}, oldest, 18},
		{idemdriver.KeyFilter{Limit: 1, Order: idemdriver.OrderOldest}, oldest, 120},
		{idemdriver.KeyFilter{Limit: 3, Order: idemdriver.OrderOldest, Status: idemdriver.StatusFailed}, oldestFailed, 4},
	} {
		pages := walk(tc.f)
		require.Len(t, pages, tc.pages, "%+v", tc.f)
		require.Equal(t, recordIDs(tc.want), slices.Concat(pages...), "%+v: every record once, in order", tc.f)
		require.Equal(t, pages, walk(tc.f), "%+v: paging again gives the same pages", tc.f)
	}
	var each []int64
	require.NoError(t, b.Admin.EachKey(t.Context(), idemdriver.KeyFilter{Order: idemdriver.OrderOldest}, 9, func(recs []idemdriver.Record) error {
		each = append(each, recordIDs(recs)...)
		return nil
	}))
	require.Equal(t, recordIDs(oldest), each, "EachKey in the filter's order")
}

func testAdminBadCursor(t *testing.T, b adminBundle) {
	enc := base64.RawURLEncoding.EncodeToString
	r := b.record(t, recordOpts{})
	good := idemdriver.EncodeCursor(idemdriver.Record{ID: 42, UpdatedAt: b.base}, idemdriver.OrderNewest)
	at, id, order, err := idemdriver.DecodeCursor(good)
	require.NoError(t, err)
	require.Equal(t, idemdriver.OrderNewest, order)
	require.Equal(t, b.base, at)
	require.Equal(t, int64(42), id)

	raw, err := base64.RawURLEncoding.DecodeString(good)
	require.NoError(t, err)
	wrongVersion := slices.Clone(raw)
	wrongVersion[0] = 2
	zeroID, err := base64.RawURLEncoding.DecodeString(idemdriver.EncodeCursor(idemdriver.Record{UpdatedAt: b.base}, idemdriver.OrderNewest))
	require.NoError(t, err)
	for _, bad := range []string{
		"!!!", good + "=", good[:len(good)-2], enc([]byte("hello")), enc(wrongVersion), enc(zeroID),
		"MjAyNC0wMS0wMXwx", // base64 of "2024-01-01|1"
	} {
		_, err := b.Admin.ListKeys(t.Context(), idemdriver.KeyFilter{After: bad})
		require.ErrorIs(t, err, idemdriver.ErrInvalidCursor, "%q", bad)
		require.ErrorIs(t, err, idemdriver.ErrInvalidFilter, "%q", bad)
		var fe *idemdriver.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "after", fe.Field)
	}
	// A position no record holds, just after r in this order; IDs are
	// the store's (any positive numbers, e.g. derived from a clock).
	position := idemdriver.EncodeCursor(idemdriver.Record{ID: r.ID + 1, UpdatedAt: b.base}, idemdriver.OrderNewest)
	page, err := b.Admin.ListKeys(t.Context(), idemdriver.KeyFilter{After: position})
	require.NoError(t, err, "a well-formed cursor is only a position")
	require.Equal(t, []int64{r.ID}, recordIDs(page.Records), "before (base, r.ID+1)")
	page, err = b.Admin.ListKeys(t.Context(), idemdriver.KeyFilter{After: idemdriver.EncodeCursor(r, idemdriver.OrderNewest)})
	require.NoError(t, err)
	require.Empty(t, page.Records, "nothing after the only record")
}

func testAdminKeyByID(t *testing.T, b adminBundle) {
	pending := b.record(t, recordOpts{Status: idemdriver.StatusPending, CorrelationID: "c", ExternalRef: "e"})
	processing := b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: time.Now().UTC(), Lease: time.Hour})
	completed := b.record(t, recordOpts{})
	for _, want := range []idemdriver.Record{pending, processing, completed} {
		got, ok, err := b.Admin.KeyByID(t.Context(), want.ID)
		require.NoError(t, err)
		require.True(t, ok, "record %d", want.ID)
		require.WithinDuration(t, time.Now(), got.ReadAt, 5*time.Second)
		require.Equal(t, want.LeaseLive(), got.LeaseLive(), "lease judged alike")
		got.ReadAt = want.ReadAt
		require.Equal(t, want, got)
	}
	_, ok, err := b.Admin.KeyByID(t.Context(), completed.ID+1000)
	require.NoError(t, err)
	require.False(t, ok, "unknown id")
}

// testAdminTraceID: the trace ID given to Reserve is stored with the
// record and read back by KeyByID, and a takeover replaces it with its
// own: the trace of the call that created or last took over the record.
func testAdminTraceID(t *testing.T, b adminBundle) {
	ctx := t.Context()
	const first, second = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	id := idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", rand.Text())}
	for _, lean := range []bool{false, true} {
		id.KeyDigest = idem.Digest("acme", "charge", rand.Text())
		rec, created, err := b.Store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: rand.Text(),
			Lease: time.Minute, TTL: time.Hour, Now: b.at(0), TraceID: first, Lean: lean})
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, first, rec.TraceID, "the created record is whole (lean %v)", lean)
		got, ok, err := b.Admin.KeyByID(ctx, rec.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, first, got.TraceID, "stored (lean %v)", lean)

		taken, err := b.Store.Takeover(ctx, idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: rand.Text(),
			Lease: time.Minute, Now: b.at(5), TraceID: second, Fresh: lean, Fingerprint: "fp", TTL: time.Hour})
		require.NoError(t, err)
		require.Equal(t, second, taken.TraceID, "the takeover's trace (fresh %v)", lean)
		got, _, err = b.Admin.KeyByID(ctx, rec.ID)
		require.NoError(t, err)
		require.Equal(t, second, got.TraceID)
	}
	untraced := b.record(t, recordOpts{})
	require.Empty(t, untraced.TraceID, "no trace: empty")
}

func testAdminOverview(t *testing.T, b adminBundle) {
	o, err := b.Admin.KeyOverview(t.Context())
	require.NoError(t, err)
	require.Len(t, o.Counts, len(idemdriver.Statuses))
	for i, c := range o.Counts {
		require.Equal(t, idemdriver.StatusCount{Status: idemdriver.Statuses[i], Exact: true}, c, "empty")
	}
	require.Zero(t, o.StuckProcessing)
	require.True(t, o.StuckExact)

	b.record(t, recordOpts{At: b.at(10)})
	b.record(t, recordOpts{At: b.at(1)})
	b.record(t, recordOpts{At: b.at(30)})
	b.record(t, recordOpts{Status: idemdriver.StatusPending, At: b.at(5)})
	b.record(t, recordOpts{Status: idemdriver.StatusPending, At: b.at(2)})
	b.record(t, recordOpts{Status: idemdriver.StatusUnavailable, At: b.at(7)})
	b.record(t, recordOpts{Status: idemdriver.StatusFailed, At: b.at(8)})
	b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: b.at(3)})
	b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: b.at(4)})
	live := b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: time.Now().UTC(), Lease: time.Hour})

	o, err = b.Admin.KeyOverview(t.Context())
	require.NoError(t, err)
	require.Equal(t, []idemdriver.StatusCount{
		{Status: idemdriver.StatusProcessing, Count: 3, Exact: true, Oldest: b.at(3)},
		{Status: idemdriver.StatusPending, Count: 2, Exact: true, Oldest: b.at(2)},
		{Status: idemdriver.StatusUnavailable, Count: 1, Exact: true, Oldest: b.at(7)},
		{Status: idemdriver.StatusFailed, Count: 1, Exact: true, Oldest: b.at(8)},
		{Status: idemdriver.StatusCompleted, Count: 3, Exact: true, Oldest: b.at(1)},
	}, o.Counts)
	require.Equal(t, int64(2), o.StuckProcessing, "the live lease is not stuck")
	require.True(t, o.StuckExact)
	require.WithinDuration(t, time.Now(), o.AsOf, 5*time.Second, "exact counts are as of now")
	require.Equal(t, int64(3), o.Count(idemdriver.StatusCompleted).Count)
	require.True(t, live.LeaseLive())
}

func testAdminOverviewCaps(t *testing.T, b adminBundle) {
	for range 12 {
		b.record(t, recordOpts{})
	}
	for range 3 {
		b.record(t, recordOpts{Status: idemdriver.StatusPending})
	}
	for range 7 {
		b.record(t, recordOpts{Status: idemdriver.StatusProcessing})
	}
	if b.SetCaps == nil {
		// A store without caps counts everything exactly.
		o, err := b.Admin.KeyOverview(t.Context())
		require.NoError(t, err)
		require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusCompleted, Count: 12, Exact: true, Oldest: b.base},
			o.Count(idemdriver.StatusCompleted))
		require.Equal(t, int64(7), o.StuckProcessing)
		require.True(t, o.StuckExact)
		return
	}
	b.SetCaps(5, 0)
	defer b.SetCaps(0, 0)

	// Before any statistics, the capped count stands: a lower bound, not
	// exact.
	o, err := b.Admin.KeyOverview(t.Context())
	require.NoError(t, err)
	require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusCompleted, Count: 6, Exact: false, Oldest: b.base},
		o.Count(idemdriver.StatusCompleted))
	require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusPending, Count: 3, Exact: true, Oldest: b.base},
		o.Count(idemdriver.StatusPending))
	// More stuck records than the status cap are still counted exactly
	// (a capped count would say 1,000 while 49,585 were stuck)...
	require.Equal(t, int64(7), o.StuckProcessing)
	require.True(t, o.StuckExact, "the stuck count has a cap of its own")
	require.WithinDuration(t, time.Now(), o.AsOf, 5*time.Second)
	// ...and above the stuck cap the count is a lower bound that says so.
	b.SetCaps(5, 4)
	o, err = b.Admin.KeyOverview(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(4), o.StuckProcessing)
	require.False(t, o.StuckExact, "more stuck than the stuck cap")
	b.SetCaps(5, 0)

	before := time.Now()
	require.NoError(t, b.Analyze(t.Context()))
	after := time.Now()
	o, err = b.Admin.KeyOverview(t.Context())
	require.NoError(t, err)
	require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusCompleted, Count: 12, Exact: false, Oldest: b.base},
		o.Count(idemdriver.StatusCompleted), "estimated from statistics of the whole (small) table")
	require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusProcessing, Count: 7, Exact: false, Oldest: b.base},
		o.Count(idemdriver.StatusProcessing))
	require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusPending, Count: 3, Exact: true, Oldest: b.base},
		o.Count(idemdriver.StatusPending))
	require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusFailed, Exact: true}, o.Count(idemdriver.StatusFailed))
	require.WithinRange(t, o.AsOf, before.Add(-2*time.Second), after.Add(2*time.Second),
		"estimates are as of the statistics")
}

func testAdminNeedsAttention(t *testing.T, b adminBundle) {
	pendingLate := b.record(t, recordOpts{Status: idemdriver.StatusPending, At: b.at(5)})
	unavailable := b.record(t, recordOpts{Status: idemdriver.StatusUnavailable, At: b.at(1)})
	b.record(t, recordOpts{At: b.at(0)})
	b.record(t, recordOpts{Status: idemdriver.StatusFailed, At: b.at(0)})
	stuck := b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: b.at(3)})
	b.record(t, recordOpts{Status: idemdriver.StatusProcessing, At: time.Now().UTC(), Lease: time.Hour})
	pendingTied := b.record(t, recordOpts{Status: idemdriver.StatusPending, At: b.at(1)})

	got, err := b.Admin.NeedsAttention(t.Context(), 0)
	require.NoError(t, err)
	require.Equal(t, recordIDs([]idemdriver.Record{unavailable, pendingTied, stuck, pendingLate}), recordIDs(got),
		"oldest first, ties by id")
	require.WithinDuration(t, time.Now(), got[0].ReadAt, 5*time.Second)

	got, err = b.Admin.NeedsAttention(t.Context(), 2)
	require.NoError(t, err)
	require.Equal(t, recordIDs([]idemdriver.Record{unavailable, pendingTied}), recordIDs(got))
}

func testAdminEachKey(t *testing.T, b adminBundle) {
	var failed []idemdriver.Record
	for i := range 45 {
		status := idemdriver.StatusCompleted
		if i%3 == 0 {
			status = idemdriver.StatusFailed
		}
		r := b.record(t, recordOpts{Status: status, At: b.base.Add(time.Duration(i/4) * time.Second)})
		if status == idemdriver.StatusFailed {
			failed = append(failed, r)
		}
	}
	listOrder(failed)
	var (
		got     []int64
		batches int
	)
	err := b.Admin.EachKey(t.Context(), idemdriver.KeyFilter{Status: idemdriver.StatusFailed, Limit: 1}, 4,
		func(recs []idemdriver.Record) error {
			batches++
			require.NotEmpty(t, recs, "no empty batch")
			require.LessOrEqual(t, len(recs), 4)
			got = append(got, recordIDs(recs)...)
			return nil
		})
	require.NoError(t, err)
	require.Equal(t, recordIDs(failed), got, "every match once, in list order; Limit ignored")
	require.Equal(t, 4, batches, "15 in batches of 4")

	// From a cursor, and stopped by fn.
	stop := errors.New("stop")
	got = nil
	err = b.Admin.EachKey(t.Context(), idemdriver.KeyFilter{Status: idemdriver.StatusFailed, After: idemdriver.EncodeCursor(failed[5], idemdriver.OrderNewest)}, 3,
		func(recs []idemdriver.Record) error {
			got = append(got, recordIDs(recs)...)
			return stop
		})
	require.ErrorIs(t, err, stop)
	require.Equal(t, recordIDs(failed[6:9]), got, "the first batch after the cursor")

	err = b.Admin.EachKey(t.Context(), idemdriver.KeyFilter{Scope: "nobody"}, 0, func([]idemdriver.Record) error {
		t.Error("fn called with no match")
		return nil
	})
	require.NoError(t, err)
}

// testAdminEachKeyConcurrent: records written while an iteration runs
// (annotated, so moved to the head of the list, or newly reserved) are
// never passed twice, and every record that matched throughout and did not
// change is passed exactly once.
func testAdminEachKeyConcurrent(t *testing.T, b adminBundle) {
	type owned struct {
		rec   idemdriver.Record
		owner idemdriver.Owner
	}
	var recs []owned
	for i := range 60 {
		id := idemdriver.Ident{Scope: "iter", Operation: "run", KeyDigest: idem.Digest("iter", "run", rand.Text())}
		rec, created, err := b.Store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: rand.Text(),
			Lease: 48 * time.Hour, TTL: 72 * time.Hour, Now: b.base.Add(time.Duration(i/3) * time.Second)})
		require.NoError(t, err)
		require.True(t, created)
		recs = append(recs, owned{rec: rec, owner: rec.Owner})
	}
	byID := map[int64]owned{}
	for _, r := range recs {
		byID[r.rec.ID] = r
	}
	touched := map[int64]bool{}
	seen := map[int64]int{}
	calls := 0
	err := b.Admin.EachKey(t.Context(), idemdriver.KeyFilter{Scope: "iter"}, 5, func(batch []idemdriver.Record) error {
		calls++
		for _, r := range batch {
			seen[r.ID]++
		}
		// Write two records not passed yet, and reserve a new one: all
		// three move ahead of the iteration's position.
		n := 0
		for _, r := range recs {
			if n == 2 {
				break
			}
			if seen[r.rec.ID] > 0 || touched[r.rec.ID] {
				continue
			}
			require.NoError(t, b.Store.Annotate(t.Context(), r.rec.Ident, r.owner,
				idemdriver.Annotation{CorrelationID: "moved", Now: time.Now().UTC()}))
			touched[r.rec.ID] = true
			n++
		}
		id := idemdriver.Ident{Scope: "iter", Operation: "run", KeyDigest: idem.Digest("iter", "run", rand.Text())}
		_, created, err := b.Store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: rand.Text(),
			Lease: time.Hour, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, created)
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, touched)
	for id, n := range seen {
		require.Equal(t, 1, n, "record %d passed once", id)
		if _, ok := byID[id]; !ok {
			t.Errorf("record %d, reserved during the iteration ahead of it, was passed", id)
		}
	}
	for _, r := range recs {
		if !touched[r.rec.ID] {
			require.Equal(t, 1, seen[r.rec.ID], "unchanged record %d passed once", r.rec.ID)
		}
	}
	require.Greater(t, calls, 5)
}

func testAdminSeed(t *testing.T, b adminBundle) {
	if b.Seeder == nil {
		t.Skip("the store has no Seeder")
	}
	digest := func(s string) string { return idem.Digest("seed", "import", s) }
	lease := b.at(1)
	want := []idemdriver.Record{
		{Ident: idemdriver.Ident{Scope: "seed", Operation: "import", KeyDigest: digest("a")}, Fingerprint: "fp-a",
			Status: idemdriver.StatusCompleted, Result: []byte("result"), ResponseCode: 201, CorrelationID: "c-a",
			ExternalRef: "e-a", ResourceIDs: []string{"r1", "r2"}, Owner: idemdriver.Owner{Token: "tok-a", Fence: 1000},
			Attempts: 2, Version: 3, CreatedAt: b.at(0), UpdatedAt: b.at(2), ExpiresAt: b.at(60 * 24)},
		{Ident: idemdriver.Ident{Scope: "seed", Operation: "import", KeyDigest: digest("b")},
			Status: idemdriver.StatusProcessing, Owner: idemdriver.Owner{Token: "tok-b", Fence: 7}, LeaseExpiresAt: lease,
			Attempts: 1, Version: 1, CreatedAt: b.at(0), UpdatedAt: b.at(0), ExpiresAt: b.at(60 * 24)},
		{Ident: idemdriver.Ident{Scope: "seed", Operation: "import", KeyDigest: digest("c")},
			Status: idemdriver.StatusPending, LastError: "timed out", Owner: idemdriver.Owner{Fence: 8},
			Attempts: 1, Version: 2, CreatedAt: b.at(0), UpdatedAt: b.at(1), ExpiresAt: b.at(60 * 24)},
	}
	require.NoError(t, b.Seeder.SeedRecords(t.Context(), want))
	require.NoError(t, b.Seeder.SeedRecords(t.Context(), nil), "nothing to seed")

	page, err := b.Admin.ListKeys(t.Context(), idemdriver.KeyFilter{Scope: "seed"})
	require.NoError(t, err)
	require.Len(t, page.Records, 3)
	for i, got := range page.Records {
		w := want[[]int{0, 2, 1}[i]] // newest first
		require.Positive(t, got.ID)
		w.ID, w.ReadAt = got.ID, got.ReadAt
		require.Equal(t, w, got)
	}
	stuck, err := b.Admin.ListKeys(t.Context(), idemdriver.KeyFilter{Stuck: true})
	require.NoError(t, err)
	require.Equal(t, []int64{page.Records[2].ID}, recordIDs(stuck.Records), "a seeded lease is judged as any")

	err = b.Seeder.SeedRecords(t.Context(), want[:1])
	require.Error(t, err, "an ident seeded twice")

	// The engine's next fence is above every seeded one.
	id := idemdriver.Ident{Scope: "seed", Operation: "import", KeyDigest: digest("d")}
	rec, created, err := b.Store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.True(t, created)
	require.Greater(t, rec.Fence, int64(1000))
}
