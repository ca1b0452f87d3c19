package idemtest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

func runPrimitives(t *testing.T, newStore func(t *testing.T) idemdriver.Store) {
	type bundle struct {
		store idemdriver.Store
		now   time.Time
	}
	setup := func(t *testing.T) bundle {
		t.Helper()
		return bundle{store: newStore(t), now: start}
	}
	reserve := func(t *testing.T, b bundle, id idemdriver.Ident, owner string) idemdriver.Record {
		t.Helper()
		rec, created, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: owner,
			Lease: time.Minute, TTL: time.Hour, Now: b.now})
		require.NoError(t, err)
		require.True(t, created, "reserve of a new ident must create")
		return rec
	}
	get := func(t *testing.T, b bundle, id idemdriver.Ident) idemdriver.Record {
		t.Helper()
		rec, ok, err := b.store.Get(ctxT(t), id)
		require.NoError(t, err)
		require.True(t, ok, "record %s must exist", id.KeyDigest)
		return rec
	}

	t.Run("ReserveCreatesProcessingRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "owner-a")
		require.NotZero(t, rec.ID)
		require.Equal(t, id, rec.Ident)
		require.Equal(t, "fp", rec.Fingerprint)
		require.Equal(t, idemdriver.StatusProcessing, rec.Status)
		require.Equal(t, "owner-a", rec.Token)
		require.Positive(t, rec.Fence)
		require.Equal(t, 1, rec.Attempts)
		require.Positive(t, rec.Version)
		require.True(t, b.now.Equal(rec.CreatedAt), "created_at: got %s, want %s (the Now override)", rec.CreatedAt, b.now)
		require.True(t, b.now.Equal(rec.ReadAt), "read_at: got %s, want %s", rec.ReadAt, b.now)
		require.True(t, b.now.Add(time.Minute).Equal(rec.LeaseExpiresAt), "lease: got %s", rec.LeaseExpiresAt)
		require.True(t, b.now.Add(time.Hour).Equal(rec.ExpiresAt), "expires_at: got %s", rec.ExpiresAt)
		require.True(t, rec.LeaseLive())
		require.Nil(t, rec.Result)
		require.Equal(t, rec.ID, get(t, b, id).ID)
	})

	t.Run("ReserveExistingReturnsItUnchanged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		first := reserve(t, b, id, "owner-a")
		again, created, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: id, Fingerprint: "other", Owner: "owner-b",
			Lease: time.Hour, TTL: 2 * time.Hour, Now: b.now.Add(time.Second)})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, "owner-a", again.Token)
		require.Equal(t, first.Fence, again.Fence)
		require.Equal(t, "fp", again.Fingerprint)
		require.Equal(t, first.Version, again.Version)
		require.True(t, b.now.Add(time.Second).Equal(again.ReadAt), "read_at must be the reading call's clock")
	})

	t.Run("LeanReserveCreatesAWholeRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec, created, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: id, KeyHash: strings.Repeat("c", 64), Fingerprint: "fp",
			Owner: "owner-a", Lease: time.Minute, TTL: time.Hour, Now: b.now, Lean: true})
		require.NoError(t, err)
		require.True(t, created)
		stored := get(t, b, id)
		stored.ReadAt = rec.ReadAt // Get reads by the store's clock, not by Now
		require.Equal(t, stored, rec, "a record that Reserve creates is whole, Lean or not")
		require.True(t, b.now.Equal(rec.ReadAt))
	})

	t.Run("LeanReserveOfExistingReturnsItsLeanFields", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// One record in every state a repeat can meet, with the fields
		// outside the lean set filled in, so that none leaks into another.
		blob := []byte{0, 1, 2, 0xff, 'x'}
		states := map[string]func(id idemdriver.Ident, o idemdriver.Owner){
			"processing": func(idemdriver.Ident, idemdriver.Owner) {},
			"completed": func(id idemdriver.Ident, o idemdriver.Owner) {
				require.NoError(t, b.store.Complete(ctxT(t), id, o, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: blob, ResponseCode: 201, Now: b.now.Add(time.Second)}))
			},
			"failed": func(id idemdriver.Ident, o idemdriver.Owner) {
				require.NoError(t, b.store.Complete(ctxT(t), id, o, idemdriver.Completion{Status: idemdriver.StatusFailed, Result: []byte{}, ResponseCode: 422, Now: b.now.Add(time.Second)}))
			},
			"pending": func(id idemdriver.Ident, o idemdriver.Owner) {
				require.NoError(t, b.store.Complete(ctxT(t), id, o, idemdriver.Completion{Status: idemdriver.StatusPending, LastError: "timeout", Now: b.now.Add(time.Second)}))
			},
			"unavailable": func(id idemdriver.Ident, o idemdriver.Owner) {
				require.NoError(t, b.store.Complete(ctxT(t), id, o, idemdriver.Completion{Status: idemdriver.StatusUnavailable, LastError: "too big", Now: b.now.Add(time.Second)}))
			},
			"taken over": func(id idemdriver.Ident, o idemdriver.Owner) {
				_, err := b.store.Takeover(ctxT(t), idemdriver.TakeoverParams{Ident: id, Seen: o, NewOwner: "owner-2", Lease: time.Minute, Now: b.now.Add(2 * time.Minute)})
				require.NoError(t, err)
			},
		}
		for name, to := range states {
			id := ident("lean-" + name)
			rec, created, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: id, KeyHash: strings.Repeat("d", 64), Fingerprint: "fp-" + name,
				Owner: "owner-1", Lease: time.Minute, TTL: time.Hour, Now: b.now})
			require.NoError(t, err)
			require.True(t, created)
			require.NoError(t, b.store.Annotate(ctxT(t), id, rec.Owner, idemdriver.Annotation{CorrelationID: "corr", ExternalRef: "ext", ResourceIDs: []string{"r1"}, Now: b.now}))
			to(id, rec.Owner)
			want := get(t, b, id)
			at := b.now.Add(3 * time.Minute)
			got, created, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: id, Fingerprint: "other", Owner: "owner-3",
				Lease: time.Minute, TTL: time.Hour, Now: at, Lean: true})
			require.NoError(t, err, name)
			require.False(t, created, name)
			require.Equal(t, want.ID, got.ID, name)
			require.Equal(t, want.Ident, got.Ident, name)
			require.Equal(t, want.Fingerprint, got.Fingerprint, name)
			require.Equal(t, want.Status, got.Status, name)
			require.Equal(t, want.Result, got.Result, name)
			require.Equal(t, want.Owner, got.Owner, name)
			require.True(t, want.LeaseExpiresAt.Equal(got.LeaseExpiresAt), "%s: lease %s, want %s", name, got.LeaseExpiresAt, want.LeaseExpiresAt)
			require.True(t, want.CreatedAt.Equal(got.CreatedAt), "%s: created_at %s, want %s", name, got.CreatedAt, want.CreatedAt)
			require.True(t, want.ExpiresAt.Equal(got.ExpiresAt), "%s: expires_at %s, want %s", name, got.ExpiresAt, want.ExpiresAt)
			require.True(t, at.Equal(got.ReadAt), "%s: read_at %s, want the call's clock %s", name, got.ReadAt, at)
			after := get(t, b, id)
			after.ReadAt = want.ReadAt
			require.Equal(t, want, after, "%s: a lean Reserve of an existing record changes nothing", name)
		}
	})

	t.Run("ReserveKeepsRecordAtLeastAsLongAsLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec, _, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: ident("a"), Owner: "o", Lease: 2 * time.Hour, TTL: time.Minute, Now: b.now})
		require.NoError(t, err)
		require.False(t, rec.ExpiresAt.Before(rec.LeaseExpiresAt), "M6: expires_at %s before lease end %s", rec.ExpiresAt, rec.LeaseExpiresAt)
	})

	t.Run("EmptyScopeIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		id.Scope = ""
		_, _, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: time.Hour, Now: b.now})
		require.Error(t, err, "a record with an empty scope must be impossible")
	})

	t.Run("SameKeyOtherScopeOrOperationIsAnotherRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := ident("a")
		other := a
		other.Scope = "tenant:b"
		op := a
		op.Operation = "other"
		r1 := reserve(t, b, a, "o1")
		r2 := reserve(t, b, other, "o2")
		r3 := reserve(t, b, op, "o3")
		require.NotEqual(t, r1.ID, r2.ID)
		require.NotEqual(t, r1.ID, r3.ID)
	})

	t.Run("GetMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, ok, err := b.store.Get(ctxT(t), ident("missing"))
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("CompleteByOwner", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		blob := []byte{0, 1, 2, 0xff, 'x'}
		require.NoError(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: blob, ResponseCode: 201, Now: b.now.Add(time.Second)}))
		got := get(t, b, id)
		require.Equal(t, idemdriver.StatusCompleted, got.Status)
		require.Equal(t, blob, got.Result)
		require.Equal(t, 201, got.ResponseCode)
		require.True(t, got.LeaseExpiresAt.IsZero(), "a completed record holds no lease")
		require.Greater(t, got.Version, rec.Version)
		require.True(t, b.now.Add(time.Second).Equal(got.UpdatedAt))
		require.Equal(t, rec.Fence, got.Fence)
	})

	t.Run("CompleteEveryTerminalAndPendingStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, st := range []idemdriver.Status{idemdriver.StatusCompleted, idemdriver.StatusFailed, idemdriver.StatusPending, idemdriver.StatusUnavailable} {
			id := ident(string(st))
			rec := reserve(t, b, id, "o")
			require.NoError(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: st, LastError: "why " + string(st), Now: b.now}))
			got := get(t, b, id)
			require.Equal(t, st, got.Status)
			require.Equal(t, "why "+string(st), got.LastError)
		}
	})

	t.Run("CompleteByStaleOwnerIsFencedAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		for name, o := range map[string]idemdriver.Owner{
			"token": {Token: "zombie", Fence: rec.Fence},
			"fence": {Token: rec.Token, Fence: rec.Fence - 1},
		} {
			err := b.store.Complete(ctxT(t), id, o, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("x"), Now: b.now})
			require.ErrorIs(t, err, idemdriver.ErrFenced, "stale %s", name)
		}
		got := get(t, b, id)
		require.Equal(t, idemdriver.StatusProcessing, got.Status)
		require.Equal(t, rec.Version, got.Version)
		require.Nil(t, got.Result)
	})

	t.Run("CompleteTwiceIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		require.NoError(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("first"), Now: b.now}))
		err := b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("second"), Now: b.now})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		require.Equal(t, []byte("first"), get(t, b, id).Result)
	})

	t.Run("CompleteByRecordID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id, other := ident("a"), ident("b")
		rec := reserve(t, b, id, "o")
		otherRec := reserve(t, b, other, "o")
		// The record's own ID: completed, as by the ident.
		require.NoError(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("by id"), Now: b.now, RecordID: rec.ID}))
		got := get(t, b, id)
		require.Equal(t, idemdriver.StatusCompleted, got.Status)
		require.Equal(t, []byte("by id"), got.Result)
		// Another record's ID, with the ident and owner of a processing
		// record: whatever the store makes of it, no other record changes.
		third := ident("c")
		thirdRec := reserve(t, b, third, "o")
		err := b.store.Complete(ctxT(t), third, thirdRec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("x"), Now: b.now, RecordID: otherRec.ID})
		if err != nil {
			require.ErrorIs(t, err, idemdriver.ErrFenced)
		}
		gotOther := get(t, b, other)
		require.Equal(t, idemdriver.StatusProcessing, gotOther.Status, "a wrong RecordID changed another record")
		require.Nil(t, gotOther.Result)
		require.Equal(t, otherRec.Version, gotOther.Version)
	})

	t.Run("CompleteMissingIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := b.store.Complete(ctxT(t), ident("missing"), idemdriver.Owner{Token: "o", Fence: 1}, idemdriver.Completion{Status: idemdriver.StatusCompleted, Now: b.now})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
	})

	t.Run("AnnotateByOwner", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		require.NoError(t, b.store.Annotate(ctxT(t), id, rec.Owner, idemdriver.Annotation{CorrelationID: "corr-1", ExternalRef: "pay_1", ResourceIDs: []string{"order:1"}, Now: b.now}))
		require.NoError(t, b.store.Annotate(ctxT(t), id, rec.Owner, idemdriver.Annotation{ResourceIDs: []string{"invoice:9"}, Now: b.now}))
		got := get(t, b, id)
		require.Equal(t, "corr-1", got.CorrelationID, "an empty field leaves the value unchanged")
		require.Equal(t, "pay_1", got.ExternalRef)
		require.Equal(t, []string{"order:1", "invoice:9"}, got.ResourceIDs)
		require.Greater(t, got.Version, rec.Version)
		require.Equal(t, idemdriver.StatusProcessing, got.Status)

		err := b.store.Annotate(ctxT(t), id, idemdriver.Owner{Token: "zombie", Fence: rec.Fence}, idemdriver.Annotation{ExternalRef: "forged", Now: b.now})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		require.Equal(t, "pay_1", get(t, b, id).ExternalRef)
	})

	t.Run("ReleaseByOwnerDeletes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		require.ErrorIs(t, b.store.Release(ctxT(t), id, idemdriver.Owner{Token: "zombie", Fence: rec.Fence}), idemdriver.ErrFenced)
		get(t, b, id)
		require.NoError(t, b.store.Release(ctxT(t), id, rec.Owner))
		_, ok, err := b.store.Get(ctxT(t), id)
		require.NoError(t, err)
		require.False(t, ok)
		require.ErrorIs(t, b.store.Release(ctxT(t), id, rec.Owner), idemdriver.ErrFenced, "a second release finds nothing")
	})

	t.Run("ReleaseOfCompletedIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		require.NoError(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r"), Now: b.now}))
		require.ErrorIs(t, b.store.Release(ctxT(t), id, rec.Owner), idemdriver.ErrFenced)
		require.Equal(t, idemdriver.StatusCompleted, get(t, b, id).Status)
	})

	t.Run("TakeoverOfLiveLeaseIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		_, err := b.store.Takeover(ctxT(t), idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: b.now.Add(59 * time.Second)})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "a live lease is never taken over")
		got := get(t, b, id)
		require.Equal(t, rec.Owner, got.Owner)
		require.Equal(t, rec.Version, got.Version)
	})

	t.Run("TakeoverAfterLeaseBumpsFenceAndKeepsFirstSeen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		later := b.now.Add(time.Minute)
		taken, err := b.store.Takeover(ctxT(t), idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: 2 * time.Minute, Now: later})
		require.NoError(t, err)
		require.Equal(t, "b", taken.Token)
		require.Greater(t, taken.Fence, rec.Fence, "the fence strictly increases on takeover")
		require.Equal(t, 2, taken.Attempts)
		require.Equal(t, idemdriver.StatusProcessing, taken.Status)
		require.True(t, rec.CreatedAt.Equal(taken.CreatedAt), "first seen is kept")
		require.True(t, later.Add(2*time.Minute).Equal(taken.LeaseExpiresAt))
		require.Equal(t, "fp", taken.Fingerprint)
		require.Greater(t, taken.Version, rec.Version)

		// The old owner is fenced out of every write.
		require.ErrorIs(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Now: later}), idemdriver.ErrFenced)
		require.ErrorIs(t, b.store.Release(ctxT(t), id, rec.Owner), idemdriver.ErrFenced)
		require.ErrorIs(t, b.store.Annotate(ctxT(t), id, rec.Owner, idemdriver.Annotation{ExternalRef: "x", Now: later}), idemdriver.ErrFenced)
		// A second takeover from the same stale view loses.
		_, err = b.store.Takeover(ctxT(t), idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "c", Lease: time.Minute, Now: later.Add(time.Hour)})
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		require.NoError(t, b.store.Complete(ctxT(t), id, taken.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("b"), Now: later}))
	})

	t.Run("TakeoverOfPendingIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		require.NoError(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusPending, Now: b.now}))
		_, err := b.store.Takeover(ctxT(t), idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "b", Lease: time.Minute, Now: b.now.Add(48 * time.Hour)})
		require.ErrorIs(t, err, idemdriver.ErrFenced, "M4: only an operator or reconciliation ends a pending record")
	})

	t.Run("FreshTakeoverRestartsTheRecord", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		rec := reserve(t, b, id, "o")
		require.NoError(t, b.store.Annotate(ctxT(t), id, rec.Owner, idemdriver.Annotation{CorrelationID: "c", ExternalRef: "e", ResourceIDs: []string{"r"}, Now: b.now}))
		require.NoError(t, b.store.Complete(ctxT(t), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("old"), ResponseCode: 200, Now: b.now}))
		later := b.now.Add(2 * time.Hour)
		got, err := b.store.Takeover(ctxT(t), idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "n", Lease: time.Minute,
			Fresh: true, Fingerprint: "fp2", TTL: 3 * time.Hour, Now: later})
		require.NoError(t, err)
		require.Equal(t, idemdriver.StatusProcessing, got.Status)
		require.Equal(t, "fp2", got.Fingerprint)
		require.Equal(t, 1, got.Attempts)
		require.True(t, later.Equal(got.CreatedAt))
		require.True(t, later.Add(3*time.Hour).Equal(got.ExpiresAt))
		require.Nil(t, got.Result)
		require.Zero(t, got.ResponseCode)
		require.Empty(t, got.CorrelationID)
		require.Empty(t, got.ExternalRef)
		require.Empty(t, got.ResourceIDs)
		require.Greater(t, got.Fence, rec.Fence)
	})

	t.Run("DeleteReportsExistence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := ident("a")
		reserve(t, b, id, "o")
		existed, err := b.store.Delete(ctxT(t), id)
		require.NoError(t, err)
		require.True(t, existed)
		existed, err = b.store.Delete(ctxT(t), id)
		require.NoError(t, err)
		require.False(t, existed)
	})

	t.Run("FencesNeverRepeat", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seen := map[int64]bool{}
		last := int64(0)
		note := func(f int64) {
			require.False(t, seen[f], "fence %d handed out twice", f)
			require.Greater(t, f, last, "fences strictly increase")
			seen[f], last = true, f
		}
		id := ident("a")
		for i := range 5 {
			rec := reserve(t, b, id, "o")
			note(rec.Fence)
			note(reserve(t, b, ident("other"+string(rune('a'+i))), "o").Fence)
			taken, err := b.store.Takeover(ctxT(t), idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "t", Lease: time.Minute, Now: b.now.Add(time.Hour)})
			require.NoError(t, err)
			note(taken.Fence)
			_, err = b.store.Delete(ctxT(t), id) // forget, then the key is used again
			require.NoError(t, err)
		}
	})

	t.Run("SweepNeverRemovesLiveLeaseOrPending", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		mk := func(name string, lease, ttl time.Duration) (idemdriver.Ident, idemdriver.Record) {
			id := ident(name)
			rec, created, err := b.store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: name, Lease: lease, TTL: ttl, Now: b.now})
			require.NoError(t, err)
			require.True(t, created)
			return id, rec
		}
		done, r := mk("done", time.Minute, time.Hour)
		require.NoError(t, b.store.Complete(ctx, done, r.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r"), Now: b.now}))
		pending, r := mk("pending", time.Minute, time.Hour)
		require.NoError(t, b.store.Complete(ctx, pending, r.Owner, idemdriver.Completion{Status: idemdriver.StatusPending, Now: b.now}))
		fresh, r := mk("fresh", time.Minute, 10*time.Hour)
		require.NoError(t, b.store.Complete(ctx, fresh, r.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r"), Now: b.now}))
		live, _ := mk("live", 3*time.Hour, time.Hour) // lease longer than TTL
		dead, _ := mk("dead", time.Minute, time.Hour) // crashed owner, retention over

		n, err := b.store.Sweep(ctx, idemdriver.SweepParams{Now: b.now.Add(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, idemdriver.SweepResult{Deleted: 1, Escalated: 1}, n, "the finished record goes, the abandoned one is escalated")
		for id, want := range map[idemdriver.Ident]bool{done: false, dead: true, pending: true, fresh: true, live: true} {
			_, ok, err := b.store.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, want, ok, "after sweep, %s exists", id.Scope)
		}
		// Once its lease ends, the long lease is abandoned too: escalated,
		// never deleted; pending records are never swept.
		n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Now: b.now.Add(4 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, idemdriver.SweepResult{Escalated: 1}, n)
		n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Now: b.now.Add(400 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, idemdriver.SweepResult{Deleted: 1}, n, "only the fresh record, finished, goes at last")
	})

	t.Run("SweepHonoursLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		for i := range 5 {
			id := ident(string(rune('a' + i)))
			rec := reserve(t, b, id, "o")
			require.NoError(t, b.store.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Now: b.now}))
		}
		for i := range 2 {
			reserve(t, b, ident(string(rune('v'+i))), "dead")
		}
		n, err := b.store.Sweep(ctx, idemdriver.SweepParams{Limit: 2, Now: b.now.Add(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, 2, n.Deleted+n.Escalated)
		n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Limit: 4, Now: b.now.Add(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, 4, n.Deleted+n.Escalated)
		n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Now: b.now.Add(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, 1, n.Deleted+n.Escalated)
	})

	t.Run("M6SweepEscalatesAbandonedRecordNeverDeletesIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		id := ident("dead")
		dead := reserve(t, b, id, "dead-owner") // lease 1 min, TTL 1 h, owner crashed
		n, err := b.store.Sweep(ctx, idemdriver.SweepParams{Now: b.now.Add(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, idemdriver.SweepResult{Escalated: 1}, n)
		rec := get(t, b, id)
		require.Equal(t, idemdriver.StatusPending, rec.Status)
		require.Equal(t, idemdriver.AbandonedReason(b.now.Add(time.Minute), "sweep"), rec.LastError, "never an empty reason")
		require.Greater(t, rec.Version, dead.Version)
		require.True(t, rec.LeaseExpiresAt.IsZero())
		require.ErrorIs(t, b.store.Complete(ctx, id, dead.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Now: b.now.Add(2 * time.Hour)}), idemdriver.ErrFenced,
			"the old owner is fenced out")
		n, err = b.store.Sweep(ctx, idemdriver.SweepParams{Now: b.now.Add(100 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, idemdriver.SweepResult{}, n, "the escalated record is pending: kept for an operator")
		require.Equal(t, idemdriver.StatusPending, get(t, b, id).Status)
	})

	t.Run("ExtendMovesTheLeaseForTheOwnerOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := ctxT(t)
		id := ident("a")
		rec := reserve(t, b, id, "owner-a") // lease ends at now + 1 min
		until, err := b.store.Extend(ctx, id, rec.Owner, 5*time.Minute, b.now.Add(30*time.Second))
		require.NoError(t, err)
		require.True(t, b.now.Add(5*time.Minute+30*time.Second).Equal(until), "lease: got %s", until)
		got := get(t, b, id)
		require.True(t, until.Equal(got.LeaseExpiresAt))
		require.Greater(t, got.Version, rec.Version)
		// Never shortened; works after the lease ended if nobody took over.
		until, err = b.store.Extend(ctx, id, rec.Owner, time.Second, b.now.Add(time.Minute))
		require.NoError(t, err)
		require.True(t, b.now.Add(5*time.Minute+30*time.Second).Equal(until), "a shorter extension keeps the lease: got %s", until)
		until, err = b.store.Extend(ctx, id, rec.Owner, 2*time.Hour, b.now.Add(10*time.Minute))
		require.NoError(t, err)
		require.True(t, b.now.Add(10*time.Minute+2*time.Hour).Equal(until))
		require.False(t, get(t, b, id).ExpiresAt.Before(until), "retention covers the lease")

		_, err = b.store.Extend(ctx, id, idemdriver.Owner{Token: "other", Fence: rec.Fence}, time.Hour, b.now)
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		_, err = b.store.Extend(ctx, id, idemdriver.Owner{Token: rec.Token, Fence: rec.Fence + 1}, time.Hour, b.now)
		require.ErrorIs(t, err, idemdriver.ErrFenced)
		require.NoError(t, b.store.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r"), Now: b.now}))
		_, err = b.store.Extend(ctx, id, rec.Owner, time.Hour, b.now)
		require.ErrorIs(t, err, idemdriver.ErrFenced, "a completed record has no lease to extend")
		_, err = b.store.Extend(ctx, ident("none"), rec.Owner, time.Hour, b.now)
		require.ErrorIs(t, err, idemdriver.ErrFenced)
	})

	t.Run("StoreClockJudgesLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Without a Now override the store uses its own clock: ReadAt is
		// close to the real time, and a one-second lease is live right away.
		rec, _, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: ident("a"), Owner: "o", Lease: time.Hour, TTL: time.Hour})
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), rec.ReadAt, time.Minute)
		require.True(t, rec.LeaseLive())
	})
}
