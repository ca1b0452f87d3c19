package idempgx

import (
	"context"
	"crypto/rand"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	idemtest.Run(t, func(t *testing.T) idemdriver.Store {
		pool := pgtest.Schema(t)
		s := New(pool)
		require.NoError(t, s.Migrate(t.Context()))
		return s
	})
}

// t0 is a fixed clock for tests that pass Now; PostgreSQL keeps
// microseconds, so it has none finer.
var t0 = time.Date(2001, 2, 3, 4, 5, 6, 789012000, time.UTC)

type testBundle struct {
	pool  *pgxpool.Pool
	store *Store
}

// setup returns a migrated store on a schema of its own.
func setup(t *testing.T) testBundle {
	t.Helper()
	pool := pgtest.Schema(t)
	s := New(pool)
	require.NoError(t, s.Migrate(t.Context()))
	return testBundle{pool: pool, store: s}
}

// newIdent returns an ident with a random key.
func newIdent() idemdriver.Ident {
	return idemdriver.Ident{Scope: "tenant-1", Operation: "run", KeyDigest: idem.Digest("tenant-1", "run", rand.Text())}
}

// reserveOpts is a ReserveParams factory: zero fields get defaults.
type reserveOpts struct {
	ident idemdriver.Ident
	lease time.Duration
	ttl   time.Duration
	now   time.Time
}

// reserve creates a processing record and fails t unless it was created.
func (b testBundle) reserve(t *testing.T, o reserveOpts) idemdriver.Record {
	t.Helper()
	if o.ident == (idemdriver.Ident{}) {
		o.ident = newIdent()
	}
	if o.lease == 0 {
		o.lease = time.Minute
	}
	if o.ttl == 0 {
		o.ttl = time.Hour
	}
	rec, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: o.ident, Fingerprint: "fp", Owner: rand.Text(), Lease: o.lease, TTL: o.ttl, Now: o.now})
	require.NoError(t, err)
	require.True(t, created)
	return rec
}

// lastFence is the fence sequence's last value: a write that takes a
// fence moves it.
func (b testBundle) lastFence(t *testing.T) int64 {
	t.Helper()
	var v int64
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT last_value FROM unstuck_idem_fence_seq`).Scan(&v))
	return v
}

// get reads a record that must exist, without its ReadAt, so that two reads
// compare equal when nothing changed.
func (b testBundle) get(t *testing.T, id idemdriver.Ident) idemdriver.Record {
	t.Helper()
	rec, ok, err := b.store.Get(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok, "record %v missing", id)
	rec.ReadAt = time.Time{}
	return rec
}

func (b testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

func TestMigrateTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.store.Migrate(t.Context()))

	rows, err := b.pool.Query(t.Context(), "SELECT line, version, name FROM unstuck_migration")
	require.NoError(t, err)
	type row struct {
		Line    string
		Version int32
		Name    string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Equal(t, []row{{"idem", 1, "records"}, {"idem", 2, "admin_indexes"}, {"idem", 3, "key_hash"}, {"idem", 4, "short_digest"}, {"idem", 5, "trace_id"}, {"idem", 6, "sweep_index"}}, got)

	b.reserve(t, reserveOpts{})
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	pool := pgtest.Schema(t)
	s := New(pool)

	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { errs <- s.Migrate(t.Context()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM unstuck_migration").Scan(&n))
	ups, err := fs.Glob(idemMigrations, "migration/idem/*.up.sql")
	require.NoError(t, err)
	require.Equal(t, len(ups), n, "one row per migration of the idem line")
}

func TestMigrationDownUndoesUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	downs, err := fs.Glob(idemMigrations, "migration/idem/*.down.sql")
	require.NoError(t, err)
	slices.Sort(downs)
	slices.Reverse(downs) // newest first, as a rollback runs them
	for _, name := range downs {
		down, err := idemMigrations.ReadFile(name)
		require.NoError(t, err)
		b.exec(t, string(down))
	}
	b.exec(t, "DELETE FROM unstuck_migration WHERE line = 'idem'")

	var table, seq *string
	require.NoError(t, b.pool.QueryRow(t.Context(),
		"SELECT to_regclass('unstuck_idem_record')::text, to_regclass('unstuck_idem_fence_seq')::text").Scan(&table, &seq))
	require.Nil(t, table)
	require.Nil(t, seq)

	require.NoError(t, b.store.Migrate(t.Context()))
	b.reserve(t, reserveOpts{})
}

func TestSchemaRefusesEmptyScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	insert := `INSERT INTO unstuck_idem_record (scope, operation, key_digest, status, fence, lease_expires_at, created_at, updated_at, expires_at)
		VALUES ($1, 'run', repeat('a', 64), 'processing', 1, now(), now(), now(), now())`

	for _, tc := range []struct {
		name  string
		scope any
		code  string
	}{
		{"NULL", nil, "23502"},
		{"empty", "", "23514"},
		{"over 255 bytes", strings.Repeat("é", 128), "23514"},
	} {
		_, err := b.pool.Exec(t.Context(), insert, tc.scope)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, tc.name)
		require.Equal(t, tc.code, pgErr.Code, tc.name)
	}

	_, _, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: idemdriver.Ident{Operation: "run", KeyDigest: strings.Repeat("a", 64)}, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.ErrorIs(t, err, idemdriver.ErrInvalidArgument)
	require.NotErrorIs(t, err, idemdriver.ErrInvalidFilter)
	var verr *idemdriver.FieldError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "scope", verr.Field)

	_, _, err = b.store.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: idemdriver.Ident{Scope: "s", Operation: "run", KeyDigest: "short"}, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "key", verr.Field)
}

func TestReserveCreatesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := newIdent()

	const callers = 8
	type result struct {
		rec     idemdriver.Record
		created bool
		err     error
	}
	results := make(chan result, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			rec, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
				Ident: id, Owner: rand.Text(), Lease: time.Minute, TTL: time.Hour})
			results <- result{rec, created, err}
		})
	}
	wg.Wait()
	close(results)

	var created []idemdriver.Record
	var ids []int64
	for r := range results {
		require.NoError(t, r.err)
		if r.created {
			created = append(created, r.rec)
		}
		ids = append(ids, r.rec.ID)
	}
	require.Len(t, created, 1, "exactly one caller creates the record")
	for _, got := range ids {
		require.Equal(t, created[0].ID, got)
	}

	again, isNew, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: id, Fingerprint: "other", Owner: "late", Lease: time.Hour, TTL: 2 * time.Hour})
	require.NoError(t, err)
	require.False(t, isNew)
	again.ReadAt = time.Time{}
	require.Equal(t, b.get(t, id), again, "an existing record is returned unchanged")
	require.Equal(t, created[0].Token, again.Token)
}

// TestReserveReplayReadsFirst: a Reserve that meets an existing record
// writes nothing: it takes no fence from the sequence, whose
// nextval would write WAL, and leaves the record unchanged.
func TestReserveReplayReadsFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := newIdent()
	first := b.reserve(t, reserveOpts{ident: id})
	before := b.lastFence(t)
	for range 3 {
		rec, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
			Ident: id, Owner: rand.Text(), Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first.Owner, rec.Owner)
	}
	require.Equal(t, before, b.lastFence(t), "a replay burnt a fence")
	next := b.reserve(t, reserveOpts{})
	require.Equal(t, first.Fence+1, next.Fence, "the next reservation takes the next fence")
}

func TestReserveRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := newIdent()
	rec, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: id, Fingerprint: "fp", Owner: "owner-1", Lease: 30 * time.Second, TTL: time.Hour, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	require.Positive(t, rec.ID)
	require.Positive(t, rec.Fence)
	require.Equal(t, idemdriver.Record{
		ID: rec.ID, Ident: id, Fingerprint: "fp", Status: idemdriver.StatusProcessing,
		Owner:          idemdriver.Owner{Token: "owner-1", Fence: rec.Fence},
		LeaseExpiresAt: t0.Add(30 * time.Second),
		Attempts:       1, Version: 1,
		CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0.Add(time.Hour), ReadAt: t0,
	}, rec)
	rec.ReadAt = time.Time{}
	require.Equal(t, rec, b.get(t, id))

	// Retention is at least the lease.
	long := b.reserve(t, reserveOpts{lease: 3 * time.Hour, ttl: time.Hour, now: t0})
	require.Equal(t, t0.Add(3*time.Hour), long.ExpiresAt)
}

func TestFencesStrictlyIncrease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	id := newIdent()

	first := b.reserve(t, reserveOpts{ident: id, now: t0})
	existed, err := b.store.Delete(ctx, id)
	require.NoError(t, err)
	require.True(t, existed)
	second := b.reserve(t, reserveOpts{ident: id, now: t0})
	require.Greater(t, second.Fence, first.Fence, "reserve after delete")

	other := b.reserve(t, reserveOpts{now: t0})
	require.Greater(t, other.Fence, second.Fence, "another record")

	later := t0.Add(2 * time.Minute) // the one-minute lease has ended
	taken, err := b.store.Takeover(ctx, idemdriver.TakeoverParams{
		Ident: id, Seen: second.Owner, NewOwner: "owner-2", Lease: time.Minute, Now: later})
	require.NoError(t, err)
	require.Greater(t, taken.Fence, other.Fence, "takeover")
	require.Equal(t, 2, taken.Attempts)
	require.Equal(t, "owner-2", taken.Token)

	again, err := b.store.Takeover(ctx, idemdriver.TakeoverParams{
		Ident: id, Seen: taken.Owner, NewOwner: "owner-3", Lease: time.Minute, Now: later.Add(2 * time.Minute)})
	require.NoError(t, err)
	require.Greater(t, again.Fence, taken.Fence, "second takeover")
	require.Equal(t, 3, again.Attempts)
	require.Equal(t, taken.Version+1, again.Version)
}

func TestTakeoverOfLiveLeaseIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.reserve(t, reserveOpts{now: t0})
	before := b.get(t, rec.Ident)

	for _, fresh := range []bool{false, true} {
		_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: rec.Ident, Seen: rec.Owner, NewOwner: "thief", Lease: time.Minute,
			Fresh: fresh, TTL: time.Hour, Now: t0.Add(59 * time.Second)})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
	}
	require.Equal(t, before, b.get(t, rec.Ident), "nothing changed")

	// The database's clock too: the lease ends a minute from now.
	live := b.reserve(t, reserveOpts{})
	_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
		Ident: live.Ident, Seen: live.Owner, NewOwner: "thief", Lease: time.Minute})
	require.ErrorIs(t, err, idemdriver.ErrFenced)
}

func TestTakeoverNeedsTheSeenOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.reserve(t, reserveOpts{now: t0})
	before := b.get(t, rec.Ident)
	later := t0.Add(time.Hour)

	for _, seen := range []idemdriver.Owner{
		{Token: "someone else", Fence: rec.Fence},
		{Token: rec.Token, Fence: rec.Fence - 1},
	} {
		_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: rec.Ident, Seen: seen, NewOwner: "thief", Lease: time.Minute, Now: later})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
	}
	_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
		Ident: newIdent(), Seen: rec.Owner, NewOwner: "thief", Lease: time.Minute, Now: later})
	require.ErrorIs(t, err, idemdriver.ErrFenced, "no record")
	require.Equal(t, before, b.get(t, rec.Ident))
}

func TestTakeoverOfPendingIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.reserve(t, reserveOpts{now: t0})
	require.NoError(t, b.store.Complete(t.Context(), rec.Ident, rec.Owner,
		idemdriver.Completion{Status: idemdriver.StatusPending, LastError: "provider timed out", Now: t0}))
	before := b.get(t, rec.Ident)

	_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
		Ident: rec.Ident, Seen: rec.Owner, NewOwner: "thief", Lease: time.Minute, Fresh: true, TTL: time.Hour,
		Now: t0.Add(48 * time.Hour)})
	require.ErrorIs(t, err, idemdriver.ErrFenced)
	require.Equal(t, before, b.get(t, rec.Ident))
}

func TestFreshTakeoverRestartsTheRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	rec := b.reserve(t, reserveOpts{now: t0})
	require.NoError(t, b.store.Annotate(ctx, rec.Ident, rec.Owner, idemdriver.Annotation{
		CorrelationID: "corr", ExternalRef: "ext", ResourceIDs: []string{"r1"}, Now: t0}))
	require.NoError(t, b.store.Complete(ctx, rec.Ident, rec.Owner, idemdriver.Completion{
		Status: idemdriver.StatusCompleted, Result: []byte("sealed"), ResponseCode: 201, LastError: "x", Now: t0}))

	later := t0.Add(2 * time.Hour) // retention (1 h) has ended
	taken, err := b.store.Takeover(ctx, idemdriver.TakeoverParams{
		Ident: rec.Ident, Seen: rec.Owner, NewOwner: "owner-2", Lease: 10 * time.Second,
		Fresh: true, Fingerprint: "fp-2", TTL: 30 * time.Minute, Now: later})
	require.NoError(t, err)
	require.Greater(t, taken.Fence, rec.Fence)
	require.Equal(t, idemdriver.Record{
		ID: rec.ID, Ident: rec.Ident, Fingerprint: "fp-2", Status: idemdriver.StatusProcessing,
		Owner:          idemdriver.Owner{Token: "owner-2", Fence: taken.Fence},
		LeaseExpiresAt: later.Add(10 * time.Second),
		Attempts:       1, Version: rec.Version + 3,
		CreatedAt: later, UpdatedAt: later, ExpiresAt: later.Add(30 * time.Minute), ReadAt: later,
	}, taken)
}

func TestCompleteByStaleOwnerIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	rec := b.reserve(t, reserveOpts{now: t0})
	taken, err := b.store.Takeover(ctx, idemdriver.TakeoverParams{
		Ident: rec.Ident, Seen: rec.Owner, NewOwner: "owner-2", Lease: time.Minute, Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	before := b.get(t, rec.Ident)

	err = b.store.Complete(ctx, rec.Ident, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("late")})
	require.ErrorIs(t, err, idemdriver.ErrFenced)
	err = b.store.Annotate(ctx, rec.Ident, rec.Owner, idemdriver.Annotation{CorrelationID: "late"})
	require.ErrorIs(t, err, idemdriver.ErrFenced)
	err = b.store.Release(ctx, rec.Ident, rec.Owner)
	require.ErrorIs(t, err, idemdriver.ErrFenced)
	err = b.store.Complete(ctx, rec.Ident, idemdriver.Owner{Token: taken.Token, Fence: rec.Fence}, idemdriver.Completion{Status: idemdriver.StatusCompleted})
	require.ErrorIs(t, err, idemdriver.ErrFenced, "the new token with the old fence")
	require.Equal(t, before, b.get(t, rec.Ident), "nothing changed")

	// The new owner completes once; then the record is no longer processing.
	require.NoError(t, b.store.Complete(ctx, rec.Ident, taken.Owner, idemdriver.Completion{Status: idemdriver.StatusFailed, Result: []byte("4xx")}))
	err = b.store.Complete(ctx, rec.Ident, taken.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted})
	require.ErrorIs(t, err, idemdriver.ErrFenced)
	err = b.store.Release(ctx, rec.Ident, taken.Owner)
	require.ErrorIs(t, err, idemdriver.ErrFenced)
	got := b.get(t, rec.Ident)
	require.Equal(t, idemdriver.StatusFailed, got.Status)
	require.Equal(t, []byte("4xx"), got.Result)
	require.True(t, got.LeaseExpiresAt.IsZero())
}

func TestCompleteRefusesANonFinalStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.reserve(t, reserveOpts{now: t0})
	before := b.get(t, rec.Ident)
	for _, st := range []idemdriver.Status{idemdriver.StatusProcessing, "", "done"} {
		err := b.store.Complete(t.Context(), rec.Ident, rec.Owner, idemdriver.Completion{Status: st})
		require.Error(t, err, st)
		require.NotErrorIs(t, err, idemdriver.ErrFenced)
	}
	require.Equal(t, before, b.get(t, rec.Ident))
}

func TestCompleteWritesTheOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.reserve(t, reserveOpts{now: t0})
	result := []byte{0, 1, 2, 255}
	done := t0.Add(time.Second)
	require.NoError(t, b.store.Complete(t.Context(), rec.Ident, rec.Owner, idemdriver.Completion{
		Status: idemdriver.StatusCompleted, Result: result, ResponseCode: 200, Now: done}))
	result[0] = 9 // the store kept its own copy

	got, ok, err := b.store.Get(t.Context(), rec.Ident)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, idemdriver.StatusCompleted, got.Status)
	require.Equal(t, []byte{0, 1, 2, 255}, got.Result)
	require.Equal(t, 200, got.ResponseCode)
	require.True(t, got.LeaseExpiresAt.IsZero())
	require.Equal(t, done, got.UpdatedAt)
	require.Equal(t, t0, got.CreatedAt)
	require.Equal(t, rec.Version+1, got.Version)
	require.Equal(t, rec.Owner, got.Owner, "the owner stays, for a later fresh takeover")
	require.Equal(t, time.UTC, got.CreatedAt.Location())
}

func TestAnnotateMerges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	rec := b.reserve(t, reserveOpts{now: t0})
	require.NoError(t, b.store.Annotate(ctx, rec.Ident, rec.Owner, idemdriver.Annotation{
		CorrelationID: "corr-1", ExternalRef: "ext-1", ResourceIDs: []string{"a"}, Now: t0}))
	require.NoError(t, b.store.Annotate(ctx, rec.Ident, rec.Owner, idemdriver.Annotation{
		ExternalRef: "ext-2", ResourceIDs: []string{"b", "c"}, Now: t0.Add(time.Second)}))
	require.NoError(t, b.store.Annotate(ctx, rec.Ident, rec.Owner, idemdriver.Annotation{}))

	got := b.get(t, rec.Ident)
	require.Equal(t, "corr-1", got.CorrelationID)
	require.Equal(t, "ext-2", got.ExternalRef)
	require.Equal(t, []string{"a", "b", "c"}, got.ResourceIDs)
	require.Equal(t, rec.Version+3, got.Version)
	require.Equal(t, idemdriver.StatusProcessing, got.Status)
}

func TestReleaseDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.reserve(t, reserveOpts{})
	require.NoError(t, b.store.Release(t.Context(), rec.Ident, rec.Owner))
	_, ok, err := b.store.Get(t.Context(), rec.Ident)
	require.NoError(t, err)
	require.False(t, ok)
	require.ErrorIs(t, b.store.Release(t.Context(), rec.Ident, rec.Owner), idemdriver.ErrFenced)
}

func TestNowOverride(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	rec := b.reserve(t, reserveOpts{lease: time.Minute, ttl: time.Hour, now: t0})
	require.Equal(t, t0, rec.ReadAt)
	require.Equal(t, t0, rec.CreatedAt)
	require.Equal(t, t0.Add(time.Minute), rec.LeaseExpiresAt)
	require.Equal(t, t0.Add(time.Hour), rec.ExpiresAt)

	// By the database's clock (years after t0) the lease has ended; by the
	// given clock it has not.
	_, err := b.store.Takeover(ctx, idemdriver.TakeoverParams{
		Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o2", Lease: time.Minute, Now: t0.Add(30 * time.Second)})
	require.ErrorIs(t, err, idemdriver.ErrFenced)
	existing, created, err := b.store.Reserve(ctx, idemdriver.ReserveParams{
		Ident: rec.Ident, Owner: "o3", Lease: time.Minute, TTL: time.Hour, Now: t0.Add(30 * time.Second)})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, t0.Add(30*time.Second), existing.ReadAt)
	require.True(t, existing.LeaseLive())

	n, err := b.store.Sweep(ctx, idemdriver.SweepParams{Now: t0.Add(59 * time.Minute)})
	require.NoError(t, err)
	require.Zero(t, n, "retention not over by the given clock")
}

func TestReadAtIsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dbClock := func() time.Time {
		var now time.Time
		require.NoError(t, b.pool.QueryRow(t.Context(), "SELECT clock_timestamp()").Scan(&now))
		return now
	}

	before := dbClock()
	rec := b.reserve(t, reserveOpts{})
	after := dbClock()
	require.False(t, rec.ReadAt.Before(before), "ReadAt %s before the database's %s", rec.ReadAt, before)
	require.False(t, rec.ReadAt.After(after), "ReadAt %s after the database's %s", rec.ReadAt, after)
	require.Equal(t, rec.ReadAt, rec.CreatedAt, "one clock for the whole statement")
	require.Equal(t, rec.ReadAt.Add(time.Minute), rec.LeaseExpiresAt)
	require.Equal(t, time.UTC, rec.ReadAt.Location())

	before = dbClock()
	got, ok, err := b.store.Get(t.Context(), rec.Ident)
	after = dbClock()
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, got.ReadAt.Before(before))
	require.False(t, got.ReadAt.After(after))
	require.True(t, got.LeaseLive())
}

func TestSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	later := t0.Add(2 * time.Hour)

	completed := b.reserve(t, reserveOpts{now: t0})
	require.NoError(t, b.store.Complete(ctx, completed.Ident, completed.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Now: t0}))
	pending := b.reserve(t, reserveOpts{now: t0})
	require.NoError(t, b.store.Complete(ctx, pending.Ident, pending.Owner, idemdriver.Completion{Status: idemdriver.StatusPending, Now: t0}))
	abandoned := b.reserve(t, reserveOpts{now: t0}) // lease and retention over
	live := b.reserve(t, reserveOpts{now: t0})      // retention over, lease still running
	b.exec(t, "UPDATE unstuck_idem_record SET lease_expires_at = $1 WHERE key_digest = $2", later.Add(time.Minute), live.KeyDigest)
	young := b.reserve(t, reserveOpts{now: later.Add(-30 * time.Minute)})
	require.NoError(t, b.store.Complete(ctx, young.Ident, young.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Now: later}))

	n, err := b.store.Sweep(ctx, idemdriver.SweepParams{Now: later})
	require.NoError(t, err)
	require.Equal(t, idemdriver.SweepResult{Deleted: 1, Escalated: 1}, n)
	_, ok, err := b.store.Get(ctx, completed.Ident)
	require.NoError(t, err)
	require.False(t, ok, "expired completed record kept")
	esc, ok, err := b.store.Get(ctx, abandoned.Ident)
	require.NoError(t, err)
	require.True(t, ok, "an abandoned record is never deleted")
	require.Equal(t, idemdriver.StatusPending, esc.Status)
	require.Equal(t, idemdriver.AbandonedReason(abandoned.LeaseExpiresAt, "sweep"), esc.LastError)
	require.Empty(t, esc.Token, "the crashed owner is fenced out")
	for _, r := range []idemdriver.Record{pending, live, young} {
		_, ok, err := b.store.Get(ctx, r.Ident)
		require.NoError(t, err)
		require.True(t, ok, "record %s swept", r.KeyDigest)
	}

	// Limits, over deletions and escalations together.
	for range 3 {
		r := b.reserve(t, reserveOpts{now: t0})
		require.NoError(t, b.store.Complete(ctx, r.Ident, r.Owner, idemdriver.Completion{Status: idemdriver.StatusFailed, Now: t0}))
	}
	b.reserve(t, reserveOpts{now: t0})
	for _, want := range []int{2, 2, 0} {
		n, err := b.store.Sweep(ctx, idemdriver.SweepParams{Limit: 2, Now: later})
		require.NoError(t, err)
		require.Equal(t, want, n.Deleted+n.Escalated)
	}
}

func TestGetAndDeleteMissing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec, ok, err := b.store.Get(t.Context(), newIdent())
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, idemdriver.Record{}, rec)

	existed, err := b.store.Delete(t.Context(), newIdent())
	require.NoError(t, err)
	require.False(t, existed)
}

func TestCorruptRowIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad := b.reserve(t, reserveOpts{})
	b.exec(t, "ALTER TABLE unstuck_idem_record DROP CONSTRAINT unstuck_idem_record_status_check")
	b.exec(t, "UPDATE unstuck_idem_record SET status = 'bogus' WHERE id = $1", bad.ID)
	nulls := b.reserve(t, reserveOpts{})
	b.exec(t, "UPDATE unstuck_idem_record SET resource_ids = '{a,NULL}' WHERE id = $1", nulls.ID)

	for _, r := range []idemdriver.Record{bad, nulls} {
		_, ok, err := b.store.Get(t.Context(), r.Ident)
		require.Error(t, err)
		require.False(t, ok)
		_, _, err = b.store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: r.Ident, Owner: "o", Lease: time.Minute, TTL: time.Hour})
		require.Error(t, err)
	}
}

func TestMissingTableSaysMigrate(t *testing.T) {
	t.Parallel()
	s := New(pgtest.Schema(t))
	_, _, err := s.Get(t.Context(), newIdent())
	require.ErrorContains(t, err, "Migrate")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42P01", pgErr.Code)
}

func TestStatusListUsesItsIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO unstuck_idem_record (scope, operation, key_digest, status, fence, created_at, updated_at, expires_at)
		SELECT 's', 'run', md5(i::text) || md5(i::text),
			-- pending is rare, as in service: with one record in four
			-- pending, reading the (updated_at, id) index of migration 002
			-- and filtering is as cheap, and the planner may take it.
			CASE WHEN i % 40 = 0 THEN 'pending' ELSE (ARRAY['completed', 'failed', 'unavailable'])[i % 3 + 1] END,
			nextval('unstuck_idem_fence_seq'), now(), now() - i * interval '1 second', now()
		FROM generate_series(1, 2000) AS i`)
	b.exec(t, "ANALYZE unstuck_idem_record")

	var plan []string
	err := pgx.BeginFunc(t.Context(), b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off"); err != nil {
			return err
		}
		rows, err := tx.Query(t.Context(),
			"EXPLAIN SELECT "+recordColumns+" FROM unstuck_idem_record WHERE status = $1 ORDER BY updated_at, id LIMIT 50",
			"pending")
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	require.Contains(t, text, "unstuck_idem_record_status_idx", "plan:\n%s", text)
	require.NotContains(t, text, "Sort", "the index gives the order:\n%s", text)
}

// TestQueriesHoldNoTransaction checks that a store call leaves the pool's
// connections idle, outside any transaction.
func TestQueriesHoldNoTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.reserve(t, reserveOpts{})
	require.NoError(t, b.store.Complete(t.Context(), rec.Ident, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted}))
	conn, err := b.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus())
}

// TestErrorsAreWrapped checks the boundary: errors name the call and keep
// the driver's error for errors.As.
func TestErrorsAreWrapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := b.store.Reserve(ctx, idemdriver.ReserveParams{Ident: newIdent(), Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, strings.HasPrefix(err.Error(), "idempgx: reserve: "), err.Error())
	require.NotErrorIs(t, err, idemdriver.ErrFenced)
}
