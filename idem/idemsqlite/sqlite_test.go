package idemsqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// t0 is far from the real clock, so a store that ignored Now would judge
// every lease below as long expired.
var t0 = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

type testBundle struct {
	path  string
	db    *sql.DB
	store *idemsqlite.Store
}

// setup returns a migrated store on a fresh database file.
func setup(t *testing.T) *testBundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "unstuck.db")
	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	store := idemsqlite.New(db)
	require.NoError(t, store.Migrate(t.Context()))
	return &testBundle{path: path, db: db, store: store}
}

func ident(key string) idemdriver.Ident {
	return idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", key)}
}

func reserve(t *testing.T, b *testBundle, id idemdriver.Ident, owner string, now time.Time) idemdriver.Record {
	t.Helper()
	rec, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: id, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour, Now: now,
	})
	require.NoError(t, err)
	require.True(t, created, "created")
	return rec
}

func get(t *testing.T, b *testBundle, id idemdriver.Ident) idemdriver.Record {
	t.Helper()
	rec, ok, err := b.store.Get(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok, "record found")
	return rec
}

// requireSame compares two reads of one record, ignoring when they were read.
func requireSame(t *testing.T, want, got idemdriver.Record) {
	t.Helper()
	want.ReadAt, got.ReadAt = time.Time{}, time.Time{}
	require.Equal(t, want, got)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	idemtest.Run(t, func(t *testing.T) idemdriver.Store {
		return setup(t).store
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("TwiceIsANoOp", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := reserve(t, b, ident("k"), "a", t0)
		require.NoError(t, b.store.Migrate(t.Context()))

		var line, name string
		var version, appliedAt int64
		rows, err := b.db.QueryContext(t.Context(), `SELECT line, version, name, applied_at FROM unstuck_migration`)
		require.NoError(t, err)
		defer rows.Close()
		var n int
		for rows.Next() {
			require.NoError(t, rows.Scan(&line, &version, &name, &appliedAt))
			n++
		}
		require.NoError(t, rows.Err())
		ups, err := filepath.Glob("migration/idem/*.up.sql")
		require.NoError(t, err)
		require.Equal(t, len(ups), n, "bookkeeping rows: one per migration")
		require.Equal(t, "idem", line)
		require.Equal(t, int64(len(ups)), version, "the last row read")
		require.Equal(t, "sweep_index", name)
		require.InDelta(t, time.Now().UnixMicro(), appliedAt, float64(time.Minute.Microseconds()), "applied_at in microseconds")

		// The data and the fence counter survive.
		requireSame(t, first, get(t, b, ident("k")))
		second := reserve(t, b, ident("other"), "a", t0)
		require.Greater(t, second.Fence, first.Fence)
	})

	t.Run("ConcurrentHandles", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "unstuck.db")
		const handles = 4
		errs := make([]error, handles)
		var wg sync.WaitGroup
		for i := range handles {
			db, err := idemsqlite.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, db.Close()) })
			wg.Go(func() { errs[i] = idemsqlite.New(db).Migrate(t.Context()) })
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "handle %d", i)
		}

		db, err := idemsqlite.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		var n, fences int
		require.NoError(t, db.QueryRowContext(t.Context(), `SELECT count(*) FROM unstuck_migration`).Scan(&n))
		ups, err := filepath.Glob("migration/idem/*.up.sql")
		require.NoError(t, err)
		require.Equal(t, len(ups), n, "bookkeeping rows: one per migration")
		require.NoError(t, db.QueryRowContext(t.Context(), `SELECT count(*) FROM unstuck_idem_fence`).Scan(&fences))
		require.Equal(t, 1, fences, "fence rows")
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()

	t.Run("Pragmas", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Pragmas are per connection: check a second one as well.
		b.db.SetMaxIdleConns(2)
		c1, err := b.db.Conn(t.Context())
		require.NoError(t, err)
		defer c1.Close()
		c2, err := b.db.Conn(t.Context())
		require.NoError(t, err)
		defer c2.Close()
		for _, c := range []*sql.Conn{c1, c2} {
			var busy, fk, syncMode int
			var journal string
			require.NoError(t, c.QueryRowContext(t.Context(), `PRAGMA busy_timeout`).Scan(&busy))
			require.NoError(t, c.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&journal))
			require.NoError(t, c.QueryRowContext(t.Context(), `PRAGMA foreign_keys`).Scan(&fk))
			require.NoError(t, c.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&syncMode))
			require.Equal(t, 10000, busy, "busy_timeout")
			require.Equal(t, "wal", journal, "journal_mode")
			require.Equal(t, 1, fk, "foreign_keys")
			require.Equal(t, 1, syncMode, "synchronous NORMAL")
		}
	})

	t.Run("PathWithURICharacters", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "a?b#c%20d e")
		require.NoError(t, os.Mkdir(dir, 0o755))
		path := filepath.Join(dir, "x.db")
		db, err := idemsqlite.Open(path)
		require.NoError(t, err)
		require.NoError(t, idemsqlite.New(db).Migrate(t.Context()))
		require.NoError(t, db.Close())
		_, err = os.Stat(path)
		require.NoError(t, err, "database file created at the given path")
	})

	t.Run("BadPath", func(t *testing.T) {
		t.Parallel()
		_, err := idemsqlite.Open(filepath.Join(t.TempDir(), "missing", "dir", "x.db"))
		require.Error(t, err)
	})
}

func TestSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	insert := func(scope any) error {
		_, err := b.db.ExecContext(t.Context(), `INSERT INTO unstuck_idem_record
			(scope, operation, key_digest, status, fence, lease_expires_at, created_at, updated_at, expires_at)
			VALUES (?, 'op', ?, 'processing', 1, 0, 0, 0, 0)`, scope, strings.Repeat("a", 64))
		return err
	}
	require.Error(t, insert(nil), "NULL scope")
	require.Error(t, insert(""), "empty scope")
	require.Error(t, insert(strings.Repeat("é", 128)), "scope of 256 bytes")
	require.NoError(t, insert(strings.Repeat("s", 255)), "scope of 255 bytes")

	_, err := b.db.ExecContext(t.Context(), `INSERT INTO unstuck_idem_record
		(scope, operation, key_digest, status, fence, created_at, updated_at, expires_at)
		VALUES ('s', 'op', ?, 'processing', 1, 0, 0, 0)`, strings.Repeat("b", 64))
	require.Error(t, err, "processing without a lease")

	_, _, err = b.store.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: idemdriver.Ident{Scope: "", Operation: "op", KeyDigest: strings.Repeat("c", 64)}, Owner: "a", Lease: time.Minute,
	})
	require.Error(t, err, "reserve with an empty scope")
}

func TestReserve(t *testing.T) {
	t.Parallel()

	t.Run("NewAndExisting", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
			Ident: id, Fingerprint: "fp", Owner: "a", Lease: time.Minute, TTL: 24 * time.Hour, Now: t0,
		})
		require.NoError(t, err)
		require.True(t, created)
		require.Positive(t, rec.ID)
		require.Equal(t, id, rec.Ident)
		require.Equal(t, "fp", rec.Fingerprint)
		require.Equal(t, idemdriver.StatusProcessing, rec.Status)
		require.Equal(t, idemdriver.Owner{Token: "a", Fence: rec.Fence}, rec.Owner)
		require.Positive(t, rec.Fence)
		require.Equal(t, t0.Add(time.Minute), rec.LeaseExpiresAt)
		require.Equal(t, t0, rec.CreatedAt)
		require.Equal(t, t0, rec.UpdatedAt)
		require.Equal(t, t0.Add(24*time.Hour), rec.ExpiresAt)
		require.Equal(t, t0, rec.ReadAt)
		require.Equal(t, 1, rec.Attempts)
		require.Equal(t, int64(1), rec.Version)
		require.Nil(t, rec.Result)
		require.Empty(t, rec.ResourceIDs)
		require.True(t, rec.LeaseLive())

		again, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
			Ident: id, Fingerprint: "other", Owner: "b", Lease: time.Hour, TTL: time.Hour, Now: t0.Add(time.Second),
		})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, t0.Add(time.Second), again.ReadAt)
		requireSame(t, rec, again)
	})

	t.Run("RetentionCoversLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec, _, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
			Ident: ident("k"), Owner: "a", Lease: time.Hour, TTL: time.Minute, Now: t0,
		})
		require.NoError(t, err)
		require.Equal(t, t0.Add(time.Hour), rec.ExpiresAt)
	})

	t.Run("TruncatesToMicroseconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := t0.Add(1234567 * time.Nanosecond)
		rec, _, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
			Ident: ident("k"), Owner: "a", Lease: time.Minute, Now: now,
		})
		require.NoError(t, err)
		require.Equal(t, t0.Add(1234*time.Microsecond), rec.CreatedAt)
		require.Equal(t, rec.CreatedAt, rec.ReadAt)
		requireSame(t, rec, get(t, b, ident("k")))
	})

	t.Run("ConcurrentOneWinner", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other, err := idemsqlite.Open(b.path)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, other.Close()) })
		stores := []*idemsqlite.Store{b.store, idemsqlite.New(other)}

		const n = 16
		recs := make([]idemdriver.Record, n)
		created := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				recs[i], created[i], errs[i] = stores[i%2].Reserve(t.Context(), idemdriver.ReserveParams{
					Ident: ident("k"), Owner: string(rune('a' + i)), Lease: time.Minute, Now: t0,
				})
			})
		}
		wg.Wait()
		winners := 0
		for i := range n {
			require.NoError(t, errs[i], "reserve %d", i)
			if created[i] {
				winners++
			}
			require.Equal(t, recs[0].ID, recs[i].ID)
			require.Equal(t, recs[0].Owner, recs[i].Owner)
		}
		require.Equal(t, 1, winners, "records created")
	})
}

func TestFence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := ident("k")

	first := reserve(t, b, id, "a", t0)
	existed, err := b.store.Delete(t.Context(), id)
	require.NoError(t, err)
	require.True(t, existed)
	existed, err = b.store.Delete(t.Context(), id)
	require.NoError(t, err)
	require.False(t, existed, "deleted twice")

	second := reserve(t, b, id, "a", t0)
	require.Greater(t, second.Fence, first.Fence, "fence after delete and reserve")

	other := reserve(t, b, ident("other"), "x", t0)
	require.Greater(t, other.Fence, second.Fence, "fence of another record")

	prev := second
	for i := range 3 {
		now := t0.Add(time.Duration(i+1) * time.Hour)
		next, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: id, Seen: prev.Owner, NewOwner: "b", Lease: time.Minute, Now: now,
		})
		require.NoError(t, err, "takeover %d", i)
		require.Greater(t, next.Fence, max(prev.Fence, other.Fence), "takeover %d", i)
		require.Equal(t, prev.Attempts+1, next.Attempts)
		require.Equal(t, prev.Version+1, next.Version)
		require.Equal(t, "b", next.Token)
		require.Equal(t, now.Add(time.Minute), next.LeaseExpiresAt)
		require.Equal(t, now, next.UpdatedAt)
		require.Equal(t, prev.CreatedAt, next.CreatedAt)
		require.Equal(t, prev.ExpiresAt, next.ExpiresAt)
		prev = next
	}
}

func TestTakeover(t *testing.T) {
	t.Parallel()

	t.Run("LiveLeaseIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)

		_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: t0.Add(59 * time.Second),
		})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		requireSame(t, rec, get(t, b, id))

		// The refused takeover consumed no fence.
		taken, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: t0.Add(time.Minute),
		})
		require.NoError(t, err, "takeover when the lease ends")
		require.Equal(t, rec.Fence+1, taken.Fence)
	})

	t.Run("StaleSeenIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)
		later := t0.Add(time.Hour)
		for _, seen := range []idemdriver.Owner{
			{Token: "a", Fence: rec.Fence + 1},
			{Token: "z", Fence: rec.Fence},
		} {
			_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
				Ident: id, Seen: seen, NewOwner: "b", Lease: time.Minute, Now: later,
			})
			require.ErrorIs(t, err, idemdriver.ErrFenced, "seen %+v", seen)
		}
		_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: ident("missing"), Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: later,
		})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "missing record")
		requireSame(t, rec, get(t, b, id))
	})

	t.Run("PendingIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)
		require.NoError(t, b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{
			Status: idemdriver.StatusPending, LastError: "provider timed out", Now: t0,
		}))
		pending := get(t, b, id)
		_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: t0.Add(24 * time.Hour),
		})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		requireSame(t, pending, get(t, b, id))
	})

	t.Run("Fresh", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)
		require.NoError(t, b.store.Annotate(t.Context(), id, rec.Owner, idemdriver.Annotation{
			CorrelationID: "corr", ExternalRef: "ext", ResourceIDs: []string{"r1"}, Now: t0,
		}))
		require.NoError(t, b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{
			Status: idemdriver.StatusCompleted, Result: []byte("sealed"), ResponseCode: 201, LastError: "x", Now: t0,
		}))
		done := get(t, b, id)

		now := t0.Add(48 * time.Hour)
		fresh, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: id, Seen: done.Owner, NewOwner: "b", Lease: time.Minute,
			Fresh: true, Fingerprint: "fp2", TTL: time.Hour, Now: now,
		})
		require.NoError(t, err)
		require.Equal(t, idemdriver.Record{
			ID:             done.ID,
			Ident:          id,
			Fingerprint:    "fp2",
			Status:         idemdriver.StatusProcessing,
			Owner:          idemdriver.Owner{Token: "b", Fence: fresh.Fence},
			LeaseExpiresAt: now.Add(time.Minute),
			Attempts:       1,
			Version:        done.Version + 1,
			CreatedAt:      now,
			UpdatedAt:      now,
			ExpiresAt:      now.Add(time.Hour),
			ReadAt:         now,
		}, fresh)
		require.Greater(t, fresh.Fence, done.Fence)
		requireSame(t, fresh, get(t, b, id))
	})
}

func TestComplete(t *testing.T) {
	t.Parallel()

	t.Run("Owner", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)
		result := []byte("sealed")
		require.NoError(t, b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{
			Status: idemdriver.StatusCompleted, Result: result, ResponseCode: 201, Now: t0.Add(time.Second),
		}))
		result[0] = 'X' // the store keeps its own copy

		got := get(t, b, id)
		require.Equal(t, idemdriver.StatusCompleted, got.Status)
		require.Equal(t, []byte("sealed"), got.Result)
		require.Equal(t, 201, got.ResponseCode)
		require.True(t, got.LeaseExpiresAt.IsZero(), "no lease once completed")
		require.Equal(t, rec.Version+1, got.Version)
		require.Equal(t, t0.Add(time.Second), got.UpdatedAt)
		require.Equal(t, rec.Owner, got.Owner)

		// Each read returns its own bytes.
		got.Result[0] = 'Y'
		require.Equal(t, []byte("sealed"), get(t, b, id).Result)

		err := b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusFailed, Now: t0})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "complete twice")
	})

	t.Run("EmptyResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)
		require.NoError(t, b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{
			Status: idemdriver.StatusCompleted, Result: []byte{}, Now: t0,
		}))
		got := get(t, b, id)
		require.NotNil(t, got.Result)
		require.Empty(t, got.Result)
	})

	t.Run("StaleOwnerIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)
		taken, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
			Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: t0.Add(time.Hour),
		})
		require.NoError(t, err)

		err = b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{
			Status: idemdriver.StatusCompleted, Result: []byte("stale"), Now: t0.Add(time.Hour),
		})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "complete")
		err = b.store.Annotate(t.Context(), id, rec.Owner, idemdriver.Annotation{CorrelationID: "c", Now: t0.Add(time.Hour)})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "annotate")
		err = b.store.Release(t.Context(), id, rec.Owner)
		require.ErrorIs(t, err, idemdriver.ErrFenced, "release")
		// Same token, stale fence.
		err = b.store.Complete(t.Context(), id, idemdriver.Owner{Token: "b", Fence: rec.Fence}, idemdriver.Completion{
			Status: idemdriver.StatusCompleted, Now: t0.Add(time.Hour),
		})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "complete with the new token and the old fence")
		requireSame(t, taken, get(t, b, id))
	})

	t.Run("RefusesNonFinalStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("k")
		rec := reserve(t, b, id, "a", t0)
		for _, status := range []idemdriver.Status{idemdriver.StatusProcessing, "", "done"} {
			err := b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{Status: status, Now: t0})
			require.Error(t, err, "status %q", status)
			require.NotErrorIs(t, err, idemdriver.ErrFenced, "status %q", status)
		}
		requireSame(t, rec, get(t, b, id))
	})
}

func TestAnnotate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := ident("k")
	rec := reserve(t, b, id, "a", t0)
	tricky := []string{`{"x":1}`, `"quoted"`, "", "r1"}
	steps := []idemdriver.Annotation{
		{CorrelationID: "corr", ResourceIDs: []string{"r1", "r2"}},
		{ExternalRef: "ext"},
		{CorrelationID: "corr2", ResourceIDs: tricky},
	}
	for i, a := range steps {
		a.Now = t0.Add(time.Duration(i+1) * time.Second)
		require.NoError(t, b.store.Annotate(t.Context(), id, rec.Owner, a), "step %d", i)
	}
	got := get(t, b, id)
	require.Equal(t, "corr2", got.CorrelationID)
	require.Equal(t, "ext", got.ExternalRef)
	require.Equal(t, append([]string{"r1", "r2"}, tricky...), got.ResourceIDs)
	require.Equal(t, rec.Version+3, got.Version)
	require.Equal(t, t0.Add(3*time.Second), got.UpdatedAt)
	require.Equal(t, idemdriver.StatusProcessing, got.Status)
	require.Equal(t, rec.LeaseExpiresAt, got.LeaseExpiresAt)
}

func TestRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := ident("k")
	rec := reserve(t, b, id, "a", t0)
	require.NoError(t, b.store.Release(t.Context(), id, rec.Owner))
	_, ok, err := b.store.Get(t.Context(), id)
	require.NoError(t, err)
	require.False(t, ok, "released record is gone")
	require.ErrorIs(t, b.store.Release(t.Context(), id, rec.Owner), idemdriver.ErrFenced, "release twice")

	// A completed record is not released.
	rec = reserve(t, b, id, "a", t0)
	require.NoError(t, b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Now: t0}))
	require.ErrorIs(t, b.store.Release(t.Context(), id, rec.Owner), idemdriver.ErrFenced, "release completed")
	get(t, b, id)
}

func TestNowOverride(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := ident("k")
	rec := reserve(t, b, id, "a", t0) // lease of one minute from t0, in 2001

	_, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
		Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: t0.Add(time.Minute - time.Microsecond),
	})
	require.ErrorIs(t, err, idemdriver.ErrFenced, "lease judged by Now, not by the real clock")

	taken, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
		Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: t0.Add(time.Minute),
	})
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Minute), taken.ReadAt)
	require.True(t, taken.LeaseLive())

	// Without Now, the real clock is used: the 2001 lease has long ended.
	again, err := b.store.Takeover(t.Context(), idemdriver.TakeoverParams{
		Ident: id, Seen: taken.Owner, NewOwner: "c", Lease: time.Minute,
	})
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), again.ReadAt, time.Minute)
	require.WithinDuration(t, time.Now(), again.UpdatedAt, time.Minute)
	require.Equal(t, time.UTC, again.ReadAt.Location())
}

func TestSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	now := t0.Add(10 * time.Hour)
	complete := func(id idemdriver.Ident, o idemdriver.Owner, status idemdriver.Status) {
		t.Helper()
		require.NoError(t, b.store.Complete(ctx, id, o, idemdriver.Completion{Status: status, Now: t0}))
	}

	// Retention ended (t0 + 1h), completed: deleted.
	expired := reserve(t, b, ident("expired"), "a", t0)
	complete(expired.Ident, expired.Owner, idemdriver.StatusCompleted)
	// Retention ended, failed and unavailable: deleted.
	failed := reserve(t, b, ident("failed"), "a", t0)
	complete(failed.Ident, failed.Owner, idemdriver.StatusFailed)
	unavailable := reserve(t, b, ident("unavailable"), "a", t0)
	complete(unavailable.Ident, unavailable.Owner, idemdriver.StatusUnavailable)
	// Processing, lease and retention ended: abandoned, escalated to
	// pending, never deleted.
	abandoned := reserve(t, b, ident("abandoned"), "a", t0)

	// Pending whatever the time: kept.
	pending := reserve(t, b, ident("pending"), "a", t0)
	complete(pending.Ident, pending.Owner, idemdriver.StatusPending)
	// Retention not ended: kept.
	recent := reserve(t, b, ident("recent"), "a", now.Add(-time.Minute))
	complete(recent.Ident, recent.Owner, idemdriver.StatusCompleted)
	// Retention ended, but a live lease from a takeover: kept.
	live := reserve(t, b, ident("live"), "a", t0)
	live, err := b.store.Takeover(ctx, idemdriver.TakeoverParams{
		Ident: live.Ident, Seen: live.Owner, NewOwner: "b", Lease: time.Hour, Now: now.Add(-time.Minute),
	})
	require.NoError(t, err)
	require.True(t, live.ExpiresAt.Before(now), "retention of the live record has ended")

	n, err := b.store.Sweep(ctx, idemdriver.SweepParams{Limit: 3, Now: now})
	require.NoError(t, err)
	require.Equal(t, idemdriver.SweepResult{Deleted: 2, Escalated: 1}, n, "limited; the abandoned record first")
	n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Now: now})
	require.NoError(t, err)
	require.Equal(t, idemdriver.SweepResult{Deleted: 1}, n, "the rest")
	n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Now: now})
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to sweep")
	esc := get(t, b, abandoned.Ident)
	require.Equal(t, idemdriver.StatusPending, esc.Status)
	require.Equal(t, idemdriver.AbandonedReason(abandoned.LeaseExpiresAt, "sweep"), esc.LastError)
	require.Empty(t, esc.Token, "the crashed owner is fenced out")

	for _, gone := range []idemdriver.Record{expired, failed, unavailable} {
		_, ok, err := b.store.Get(ctx, gone.Ident)
		require.NoError(t, err)
		require.False(t, ok, "%s swept", gone.Ident.KeyDigest)
	}
	get(t, b, pending.Ident)
	get(t, b, recent.Ident)
	requireSame(t, live, get(t, b, live.Ident))

	// Once its lease ends, the taken-over record is abandoned too, and the
	// recent one goes; pending never.
	n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Now: now.Add(100 * 24 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, idemdriver.SweepResult{Deleted: 1, Escalated: 1}, n)
	get(t, b, pending.Ident)
}

func TestGetMissing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reserve(t, b, ident("present"), "a", t0)
	rec, ok, err := b.store.Get(t.Context(), ident("missing"))
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, idemdriver.Record{}, rec)
}

func TestCorruptRow(t *testing.T) {
	t.Parallel()
	for _, resourceIDs := range []string{"not json", "null", "[1, 2]", `{"a": "b"}`, ""} {
		t.Run(resourceIDs, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			id := ident("k")
			rec := reserve(t, b, id, "a", t0)
			_, err := b.db.ExecContext(t.Context(),
				`UPDATE unstuck_idem_record SET resource_ids = ? WHERE id = ?`, resourceIDs, rec.ID)
			require.NoError(t, err)

			got, ok, err := b.store.Get(t.Context(), id)
			require.Error(t, err)
			require.False(t, ok)
			require.Equal(t, idemdriver.Record{}, got)

			_, _, err = b.store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Owner: "b", Lease: time.Minute, Now: t0})
			require.Error(t, err, "reserve over a corrupt row")
		})
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := b.store.Reserve(ctx, idemdriver.ReserveParams{Ident: ident("k"), Owner: "a", Lease: time.Minute, Now: t0})
	require.ErrorIs(t, err, context.Canceled)

	// Nothing was written, and the pool still works.
	_, ok, err := b.store.Get(t.Context(), ident("k"))
	require.NoError(t, err)
	require.False(t, ok)
	reserve(t, b, ident("k"), "a", t0)
}

func TestWriteLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := idemsqlite.Open(b.path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	holder, err := other.Conn(t.Context())
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.ExecContext(t.Context(), "BEGIN IMMEDIATE")
	require.NoError(t, err)

	// The writer waits for the lock under busy_timeout until ctx ends.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err = b.store.Reserve(ctx, idemdriver.ReserveParams{Ident: ident("k"), Owner: "a", Lease: time.Minute, Now: t0})
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "gave up when ctx ended")
	// Reads go on meanwhile (WAL).
	_, ok, err := b.store.Get(t.Context(), ident("k"))
	require.NoError(t, err)
	require.False(t, ok)

	_, err = holder.ExecContext(t.Context(), "ROLLBACK")
	require.NoError(t, err)

	// No connection of the pool was left inside a transaction: writes on
	// every one of them go through, and another handle sees them.
	for i := range 20 {
		id := ident(string(rune('a' + i)))
		reserve(t, b, id, "a", t0)
		existed, err := idemsqlite.New(other).Delete(t.Context(), id)
		require.NoError(t, err)
		require.True(t, existed, "record %d committed", i)
	}
}

// TestWriterWaitEndsAtCallDeadline: the engine sets no context
// deadline on this store's calls (it is an idemdriver.LocalStore), so the store
// itself ends a wait for its writer at the engine's store timeout, passed
// as idemdriver.CallDeadline, well before the caller's own deadline.
func TestWriterWaitEndsAtCallDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e, err := idem.New(b.store, idem.Config{DisableSealing: true, StoreTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	outer, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// WithinTx holds the store's writer while fn runs.
	err = b.store.WithinTx(t.Context(), func(context.Context, idemdriver.Store) error {
		_, err := idem.Run(outer, e, "waits-for-the-writer", "tenant", func(context.Context) (int, error) { return 1, nil }, nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, outer.Err(), "the call waited for the caller's deadline, not the store timeout")
		return nil
	})
	require.NoError(t, err)
}
