package idemtest

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

type order struct {
	ID      string            `json:"id"`
	Amount  float64           `json:"amount"`
	Tags    []string          `json:"tags"`
	Meta    map[string]any    `json:"meta"`
	Created time.Time         `json:"created"`
	Labels  map[string]string `json:"labels,omitempty"`
}

func runEngine(t *testing.T, newStore func(t *testing.T) idemdriver.Store) {
	type bundle struct {
		store  idemdriver.Store
		engine *idem.Engine
		clock  *Clock
	}
	setup := func(t *testing.T, cfg idem.Config) bundle {
		t.Helper()
		s := newStore(t)
		c := NewClock(start)
		cfg.Now = c.Now
		return bundle{store: s, clock: c, engine: newEngine(t, s, cfg)}
	}
	get := func(t *testing.T, b bundle, key, scope string) (idemdriver.Record, bool) {
		t.Helper()
		rec, ok, err := b.store.Get(ctxT(t), idemdriver.Ident{Scope: scope, Operation: idem.DefaultOperation, KeyDigest: idem.Digest(scope, idem.DefaultOperation, key)})
		require.NoError(t, err)
		return rec, ok
	}

	t.Run("R1ReplayIsTheSameJSONRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		runs := 0
		fn := func(ctx context.Context) (order, error) {
			runs++
			return order{ID: "o-1", Amount: 12.5, Tags: []string{"a"}, Meta: map[string]any{"n": 1, "nested": map[string]any{"x": true}},
				Created: time.Date(2026, 1, 2, 3, 4, 5, 6789, time.FixedZone("x", 3600))}, nil
		}
		first, err := idem.Run(ctx, b.engine, "key-1", "tenant:1", fn, nil)
		require.NoError(t, err)
		require.False(t, first.Replayed)
		require.True(t, start.Equal(first.FirstSeenAt), "first seen: got %s", first.FirstSeenAt)
		// The first result is already the JSON round trip: numbers in any are float64.
		require.Equal(t, float64(1), first.Value.Meta["n"])

		b.clock.Advance(time.Minute)
		again, err := idem.Run(ctx, b.engine, "key-1", "tenant:1", fn, nil)
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, first.Value, again.Value)
		require.True(t, first.FirstSeenAt.Equal(again.FirstSeenAt))
		require.Equal(t, 1, runs, "the callback ran once")

		rec, ok := get(t, b, "key-1", "tenant:1")
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)
		require.NotContains(t, string(rec.Result), "o-1", "H14: the stored result is sealed")
		require.Equal(t, idem.KeyHash("key-1"), rec.KeyHash, "K11: the raw key's look-up hash is stored")
	})

	t.Run("R2InvalidArgumentsNameTheField", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		long := string(make([]byte, 256))
		cases := []struct {
			field      string
			key, scope string
			opts       *idem.RunOpts
		}{
			{"key", "", "s", nil},
			{"key", long, "s", nil},
			{"scope", "k", "", nil},
			{"scope", "k", long, nil},
			{"ttl", "k", "s", &idem.RunOpts{TTL: 59 * time.Second}},
			{"ttl", "k", "s", &idem.RunOpts{TTL: 2592001 * time.Second}},
			{"ttl", "k", "s", &idem.RunOpts{TTL: -time.Hour}},
			{"lease", "k", "s", &idem.RunOpts{Lease: -time.Second}},
			{"lease", "k", "s", &idem.RunOpts{Lease: 86401 * time.Second}},
			{"operation", "k", "s", &idem.RunOpts{Operation: long}},
			{"fingerprint", "k", "s", &idem.RunOpts{Fingerprint: long}},
		}
		for _, c := range cases {
			ran := false
			_, err := idem.Run(ctx, b.engine, c.key, c.scope, func(context.Context) (int, error) { ran = true; return 1, nil }, c.opts)
			want := idem.ErrInvalidKey
			if c.field == "ttl" || c.field == "lease" {
				want = idem.ErrInvalidOption // a bad option is not a bad key
			}
			require.ErrorIs(t, err, want, c.field)
			var ve *idem.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, c.field, ve.Field)
			require.False(t, ran)
		}
		// Bounds are inclusive.
		_, err := idem.Run(ctx, b.engine, string(make([]byte, 255)), "s", func(context.Context) (int, error) { return 1, nil },
			&idem.RunOpts{TTL: 60 * time.Second, Lease: 86400 * time.Second})
		require.NoError(t, err)
	})

	t.Run("R3OtherFingerprintIsReused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		_, err := idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { return 1, nil }, &idem.RunOpts{Fingerprint: "a"})
		require.NoError(t, err)
		ran := false
		_, err = idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { ran = true; return 2, nil }, &idem.RunOpts{Fingerprint: "b"})
		require.ErrorIs(t, err, idem.ErrKeyReused)
		require.False(t, ran)
		rec, _ := get(t, b, "k", "s")
		require.Equal(t, "a", rec.Fingerprint, "nothing changed")
	})

	t.Run("R4ErrorReleasesTheKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		boom := errors.New("boom")
		_, err := idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { return 0, boom }, nil)
		require.ErrorIs(t, err, boom)
		_, ok := get(t, b, "k", "s")
		require.False(t, ok, "released")
		res, err := idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { return 7, nil }, nil)
		require.NoError(t, err)
		require.False(t, res.Replayed)
		require.Equal(t, 7, res.Value)
	})

	t.Run("R4ErrorAfterCancelStillReleases", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx, cancel := context.WithCancel(ctxT(t))
		_, err := idem.Run(ctx, b.engine, "k", "s", func(ctx context.Context) (int, error) { cancel(); return 0, ctx.Err() }, nil)
		require.ErrorIs(t, err, context.Canceled)
		_, ok := get(t, b, "k", "s")
		require.False(t, ok, "released although the caller's context was done")
	})

	t.Run("R4PanicReleasesAndIsReraised", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		require.PanicsWithValue(t, "kaboom", func() {
			_, _ = idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { panic("kaboom") }, nil)
		})
		_, ok := get(t, b, "k", "s")
		require.False(t, ok, "released before the panic went on")
	})

	t.Run("R5UnstorableResultCompletesUnavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{MaxResultBytes: 64})
		ctx := ctxT(t)
		cases := map[string]func(context.Context) (any, error){
			"nan":     func(context.Context) (any, error) { return math.NaN(), nil },
			"inf":     func(context.Context) (any, error) { return math.Inf(1), nil },
			"channel": func(context.Context) (any, error) { return make(chan int), nil },
			"toolarge": func(context.Context) (any, error) {
				return string(make([]byte, 100)), nil
			},
		}
		for name, fn := range cases {
			runs := 0
			counted := func(ctx context.Context) (any, error) { runs++; return fn(ctx) }
			_, err := idem.Run(ctx, b.engine, name, "s", counted, nil)
			require.ErrorIs(t, err, idem.ErrResultNotStorable, name)
			rec, ok := get(t, b, name, "s")
			require.True(t, ok)
			require.Equal(t, idemdriver.StatusUnavailable, rec.Status, name)
			require.NotEmpty(t, rec.LastError)
			_, err = idem.Run(ctx, b.engine, name, "s", counted, nil)
			require.ErrorIs(t, err, idem.ErrResultUnavailable, name)
			require.Equal(t, 1, runs, "%s: never run again", name)
		}
	})

	t.Run("M4UncertainLeavesPendingWithReference", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{PendingRetryAfter: 45 * time.Second})
		ctx := ctxT(t)
		timeout := errors.New("provider timed out")
		runs := 0
		fn := func(ctx context.Context) (int, error) {
			runs++
			info, ok := idem.RunInfoFrom(ctx)
			require.True(t, ok)
			require.Positive(t, info.Fence)
			require.NoError(t, idem.Annotate(ctx, idem.Annotation{CorrelationID: "corr-9", ExternalRef: "prov_123", ResourceIDs: []string{"payment:9"}}))
			return 0, idem.Uncertain(timeout)
		}
		_, err := idem.Run(ctx, b.engine, "k", "s", fn, nil)
		require.ErrorIs(t, err, idem.ErrUncertain)
		require.ErrorIs(t, err, timeout)
		rec, ok := get(t, b, "k", "s")
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusPending, rec.Status)
		require.Equal(t, "prov_123", rec.ExternalRef)
		require.Equal(t, "corr-9", rec.CorrelationID)
		require.Equal(t, []string{"payment:9"}, rec.ResourceIDs)
		require.Contains(t, rec.LastError, "provider timed out")

		b.clock.Advance(72 * time.Hour) // pending outlives its TTL
		_, err = idem.Run(ctx, b.engine, "k", "s", fn, nil)
		var pr *idem.PendingReviewError
		require.ErrorAs(t, err, &pr, "K21: pending waits for an operator or a reconciliation")
		require.ErrorIs(t, err, idem.ErrPendingReview)
		require.Equal(t, 45*time.Second, pr.RetryAfter)
		var ip *idem.InProgressError
		require.ErrorAs(t, err, &ip, "still an in-progress error for callers written before K21")
		require.ErrorIs(t, err, idem.ErrInProgress)
		require.Equal(t, 45*time.Second, ip.RetryAfter)
		require.Equal(t, idemdriver.StatusPending, ip.Status)
		require.Equal(t, 1, runs)
		n, err := b.engine.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "sweep never removes a pending record")

		existed, err := b.engine.Forget(ctx, "k", "s")
		require.NoError(t, err)
		require.True(t, existed)
		_, err = idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { runs++; return 1, nil }, nil)
		require.NoError(t, err)
		require.Equal(t, 2, runs)
	})

	t.Run("AnnotateOutsideRun", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, idem.Annotate(context.Background(), idem.Annotation{ExternalRef: "x"}), idem.ErrNotInRun)
	})

	t.Run("R7ForgetSaysWhetherTheKeyExisted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		_, err := idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
		require.NoError(t, err)
		existed, err := b.engine.Forget(ctx, "k", "s")
		require.NoError(t, err)
		require.True(t, existed)
		existed, err = b.engine.Forget(ctx, "k", "s")
		require.NoError(t, err)
		require.False(t, existed)
		_, err = b.engine.Forget(ctx, "", "s")
		require.ErrorIs(t, err, idem.ErrInvalidKey)
	})

	t.Run("R8InProgressUntilLeaseEndsThenTakeover", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		entered, release := make(chan idem.RunInfo), make(chan struct{})
		firstErr := make(chan error, 1)
		go func() {
			_, err := idem.Run(ctx, b.engine, "k", "s", func(ctx context.Context) (string, error) {
				info, _ := idem.RunInfoFrom(ctx)
				entered <- info
				<-release
				return "zombie", nil
			}, &idem.RunOpts{Lease: 30 * time.Second})
			firstErr <- err
		}()
		first := <-entered

		b.clock.Advance(12 * time.Second)
		_, err := idem.Run(ctx, b.engine, "k", "s", func(context.Context) (string, error) { return "no", nil }, nil)
		var ip *idem.InProgressError
		require.ErrorAs(t, err, &ip)
		require.Equal(t, 18*time.Second, ip.RetryAfter, "H9: the rest of the lease")

		b.clock.Advance(18 * time.Second)
		res, err := idem.Run(ctx, b.engine, "k", "s", func(ctx context.Context) (string, error) {
			info, _ := idem.RunInfoFrom(ctx)
			require.Greater(t, info.Fence, first.Fence)
			require.Equal(t, 2, info.Attempt)
			return "successor", nil
		}, &idem.RunOpts{Recovery: new(idem.RecoverByRerunning())})
		require.NoError(t, err)
		require.Equal(t, "successor", res.Value)
		require.True(t, start.Equal(res.FirstSeenAt), "first seen kept across takeover")

		close(release)
		require.ErrorIs(t, <-firstErr, idemdriver.ErrFenced, "the zombie cannot complete")
		res, err = idem.Run(ctx, b.engine, "k", "s", func(context.Context) (string, error) { return "again", nil }, nil)
		require.NoError(t, err)
		require.True(t, res.Replayed)
		require.Equal(t, "successor", res.Value)
	})

	t.Run("M6SweepNeverRemovesLiveLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		entered, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := idem.Run(ctx, b.engine, "long", "s", func(context.Context) (int, error) {
				close(entered)
				<-release
				return 1, nil
			}, &idem.RunOpts{TTL: time.Minute, Lease: time.Hour})
			done <- err
		}()
		<-entered
		b.clock.Advance(30 * time.Minute) // far past the TTL, inside the lease
		n, err := b.engine.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
		rec, ok := get(t, b, "long", "s")
		require.True(t, ok)
		require.True(t, rec.LeaseLive())
		close(release)
		require.NoError(t, <-done)

		_, err = idem.Run(ctx, b.engine, "short", "s", func(context.Context) (int, error) { return 1, nil }, &idem.RunOpts{TTL: time.Minute, Lease: time.Second})
		require.NoError(t, err)
		b.clock.Advance(31 * time.Minute) // both now past TTL and lease
		n, err = b.engine.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, idemdriver.SweepResult{Deleted: 2}, n)
	})

	t.Run("M6SweepEscalatesAnAbandonedRecordAndCountsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		id := idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, "k")}
		_, _, err := b.store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "crashed", Lease: time.Minute, TTL: time.Minute, Now: b.clock.Now()})
		require.NoError(t, err)
		b.clock.Advance(2 * time.Hour)
		n, err := b.engine.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, idemdriver.SweepResult{Escalated: 1}, n)
		require.Equal(t, int64(1), b.engine.Counters().AbandonedEscalated)
		ran := false
		_, err = idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { ran = true; return 1, nil },
			&idem.RunOpts{Recovery: new(idem.RecoverByRerunning())})
		require.ErrorIs(t, err, idem.ErrPendingReview, "the escalated key waits for an operator, whatever the recovery")
		require.False(t, ran)
	})

	t.Run("R8AbandonedKeyFollowsItsRecovery", func(t *testing.T) {
		t.Parallel()
		const key, scope = "k", "s"
		id := idemdriver.Ident{Scope: scope, Operation: idem.DefaultOperation, KeyDigest: idem.Digest(scope, idem.DefaultOperation, key)}
		// abandon reserves the key for an owner that then crashes, and
		// moves the clock past its lease.
		abandon := func(t *testing.T, b bundle) (leaseEnd time.Time, fence int64) {
			t.Helper()
			rec, created, err := b.store.Reserve(ctxT(t), idemdriver.ReserveParams{Ident: id, Owner: "crashed", Lease: 30 * time.Second, TTL: time.Hour, Now: b.clock.Now()})
			require.NoError(t, err)
			require.True(t, created)
			require.NoError(t, b.store.Annotate(ctxT(t), id, rec.Owner, idemdriver.Annotation{ExternalRef: "sent-ref", Now: b.clock.Now()}))
			b.clock.Advance(31 * time.Second)
			return rec.LeaseExpiresAt, rec.Fence
		}
		type call struct {
			runs int
			fn   func(context.Context) (string, error)
		}
		newCall := func() *call {
			c := &call{}
			c.fn = func(context.Context) (string, error) { c.runs++; return "ran", nil }
			return c
		}
		verifier := func(v idem.Verification, err error, seen *idem.Abandoned) idem.Recovery {
			return idem.RecoverByVerifying(idem.VerifierFunc(func(_ context.Context, a idem.Abandoned) (idem.Verification, error) {
				*seen = a
				return v, err
			}))
		}
		requireEscalated := func(t *testing.T, b bundle, c *call, err error, leaseEnd time.Time, how string) {
			t.Helper()
			require.ErrorIs(t, err, idem.ErrPendingReview)
			require.Zero(t, c.runs, "nothing runs")
			rec, ok := get(t, b, key, scope)
			require.True(t, ok)
			require.Equal(t, idemdriver.StatusPending, rec.Status)
			require.Equal(t, idemdriver.AbandonedReason(leaseEnd, how), rec.LastError)
			require.Equal(t, int64(1), b.engine.Counters().AbandonedEscalated)
			_, err = idem.Run(ctxT(t), b.engine, key, scope, c.fn, &idem.RunOpts{Recovery: new(idem.RecoverByRerunning())})
			require.ErrorIs(t, err, idem.ErrPendingReview, "repeats wait for an operator")
			require.Zero(t, c.runs)
		}

		t.Run("EscalateIsTheDefault", func(t *testing.T) {
			t.Parallel()
			b := setup(t, idem.Config{})
			leaseEnd, _ := abandon(t, b)
			c := newCall()
			_, err := idem.Run(ctxT(t), b.engine, key, scope, c.fn, nil)
			requireEscalated(t, b, c, err, leaseEnd, "escalate")
			rec, _ := get(t, b, key, scope)
			require.Equal(t, "sent-ref", rec.ExternalRef, "what the owner attached stays for the operator")
		})

		t.Run("EngineDefaultRecovery", func(t *testing.T) {
			t.Parallel()
			b := setup(t, idem.Config{DefaultRecovery: idem.RecoverByRerunning()})
			abandon(t, b)
			c := newCall()
			res, err := idem.Run(ctxT(t), b.engine, key, scope, c.fn, nil)
			require.NoError(t, err)
			require.Equal(t, "ran", res.Value)
			require.Equal(t, 1, c.runs)
		})

		t.Run("RerunTakesOverWithAHigherFence", func(t *testing.T) {
			t.Parallel()
			b := setup(t, idem.Config{})
			_, fence := abandon(t, b)
			var info idem.RunInfo
			res, err := idem.Run(ctxT(t), b.engine, key, scope, func(ctx context.Context) (string, error) {
				info, _ = idem.RunInfoFrom(ctx)
				return "again", nil
			}, &idem.RunOpts{Recovery: new(idem.RecoverByRerunning())})
			require.NoError(t, err)
			require.Equal(t, "again", res.Value)
			require.Greater(t, info.Fence, fence)
			require.Equal(t, 2, info.Attempt)
		})

		t.Run("VerifyHappenedCompletesWithoutRunning", func(t *testing.T) {
			t.Parallel()
			b := setup(t, idem.Config{})
			leaseEnd, fence := abandon(t, b)
			c := newCall()
			var seen idem.Abandoned
			rcv := verifier(idem.Verification{Verdict: idem.VerdictHappened, ExternalRef: "prov_42"}, nil, &seen)
			_, err := idem.Run(ctxT(t), b.engine, key, scope, c.fn, &idem.RunOpts{Recovery: new(rcv)})
			require.ErrorIs(t, err, idem.ErrResultUnavailable, "the effect happened; there is no value to replay")
			require.Zero(t, c.runs)
			require.Equal(t, id.KeyDigest, seen.KeyDigest)
			require.Equal(t, "sent-ref", seen.ExternalRef)
			require.Greater(t, seen.Fence, fence, "the verifier runs as the new owner")
			require.True(t, leaseEnd.Equal(seen.LeaseEndedAt))
			rec, _ := get(t, b, key, scope)
			require.Equal(t, idemdriver.StatusCompleted, rec.Status)
			require.Equal(t, "prov_42", rec.ExternalRef)
			require.NotEmpty(t, rec.LastError)
			_, err = idem.Run(ctxT(t), b.engine, key, scope, c.fn, &idem.RunOpts{Recovery: new(rcv)})
			require.ErrorIs(t, err, idem.ErrResultUnavailable)
			require.Zero(t, c.runs, "never run again")
		})

		t.Run("VerifyNotHappenedRunsAsTheNewOwner", func(t *testing.T) {
			t.Parallel()
			b := setup(t, idem.Config{})
			abandon(t, b)
			c := newCall()
			var seen idem.Abandoned
			res, err := idem.Run(ctxT(t), b.engine, key, scope, c.fn,
				&idem.RunOpts{Recovery: new(verifier(idem.Verification{Verdict: idem.VerdictNotHappened}, nil, &seen))})
			require.NoError(t, err)
			require.Equal(t, "ran", res.Value)
			require.Equal(t, 1, c.runs)
			res, err = idem.Run(ctxT(t), b.engine, key, scope, c.fn, nil)
			require.NoError(t, err)
			require.True(t, res.Replayed)
		})

		t.Run("VerifyUnknownEscalates", func(t *testing.T) {
			t.Parallel()
			b := setup(t, idem.Config{})
			leaseEnd, _ := abandon(t, b)
			c := newCall()
			var seen idem.Abandoned
			_, err := idem.Run(ctxT(t), b.engine, key, scope, c.fn,
				&idem.RunOpts{Recovery: new(verifier(idem.Verification{Verdict: idem.VerdictUnknown}, nil, &seen))})
			requireEscalated(t, b, c, err, leaseEnd, "verify: unknown")
		})

		t.Run("VerifierErrorEscalates", func(t *testing.T) {
			t.Parallel()
			b := setup(t, idem.Config{})
			leaseEnd, _ := abandon(t, b)
			c := newCall()
			var seen idem.Abandoned
			_, err := idem.Run(ctxT(t), b.engine, key, scope, c.fn,
				&idem.RunOpts{Recovery: new(verifier(idem.Verification{Verdict: idem.VerdictHappened}, errors.New("provider down"), &seen))})
			requireEscalated(t, b, c, err, leaseEnd, "verify: the verifier failed")
		})
	})

	t.Run("M6ExpiredKeyRunsAgainAsNewIntent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		_, err := idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { return 1, nil }, &idem.RunOpts{TTL: time.Minute, Fingerprint: "a"})
		require.NoError(t, err)
		b.clock.Advance(2 * time.Minute)
		res, err := idem.Run(ctx, b.engine, "k", "s", func(context.Context) (int, error) { return 2, nil }, &idem.RunOpts{Fingerprint: "b"})
		require.NoError(t, err)
		require.False(t, res.Replayed)
		require.Equal(t, 2, res.Value)
		require.True(t, start.Add(2*time.Minute).Equal(res.FirstSeenAt))
	})

	t.Run("H14SealedResultCannotBeMovedFlippedOrPlanted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		_, err := idem.Run(ctx, b.engine, "source", "s", func(context.Context) (string, error) { return "secret-value", nil }, nil)
		require.NoError(t, err)
		src, _ := get(t, b, "source", "s")

		plant := func(key string, blob []byte) {
			t.Helper()
			id := idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, key)}
			rec, created, err := b.store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "planter", Lease: time.Minute, TTL: time.Hour, Now: b.clock.Now()})
			require.NoError(t, err)
			require.True(t, created)
			require.NoError(t, b.store.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: blob, Now: b.clock.Now()}))
		}
		flipped := append([]byte(nil), src.Result...)
		flipped[len(flipped)-3] ^= 0x01
		plant("moved", src.Result)
		plant("flipped", flipped)
		plant("plain", append([]byte("UP\x01"), `"forged"`...))
		plant("garbage", []byte("not an envelope"))
		plant("empty", nil)
		for _, key := range []string{"moved", "flipped", "plain", "garbage", "empty"} {
			ran := false
			_, err := idem.Run(ctx, b.engine, key, "s", func(context.Context) (string, error) { ran = true; return "x", nil }, nil)
			require.ErrorIs(t, err, idem.ErrResultUnavailable, key)
			require.False(t, ran, "%s: never re-run", key)
		}
		// The original still replays.
		res, err := idem.Run(ctx, b.engine, "source", "s", func(context.Context) (string, error) { return "x", nil }, nil)
		require.NoError(t, err)
		require.Equal(t, "secret-value", res.Value)
	})

	t.Run("H14RotationOpensOldResultsAndSealsWithTheNewSecret", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := ctxT(t)
		oldSecret := []byte("old-secret-old-secret-old-secret")
		newSecret := []byte("new-secret-new-secret-new-secret")
		before, err := idem.New(s, idem.Config{Secret: oldSecret})
		require.NoError(t, err)
		_, err = idem.Run(ctx, before, "k", "s", func(context.Context) (int, error) { return 42, nil }, nil)
		require.NoError(t, err)

		rotated, err := idem.New(s, idem.Config{Secret: newSecret, PreviousSecrets: [][]byte{oldSecret}})
		require.NoError(t, err)
		res, err := idem.Run(ctx, rotated, "k", "s", func(context.Context) (int, error) { return 0, nil }, nil)
		require.NoError(t, err)
		require.Equal(t, 42, res.Value)
		_, err = idem.Run(ctx, rotated, "k2", "s", func(context.Context) (int, error) { return 43, nil }, nil)
		require.NoError(t, err)

		newOnly, err := idem.New(s, idem.Config{Secret: newSecret})
		require.NoError(t, err)
		_, err = idem.Run(ctx, newOnly, "k", "s", func(context.Context) (int, error) { return 0, nil }, nil)
		require.ErrorIs(t, err, idem.ErrResultUnavailable, "without the previous secret: unavailable, never a guess")
		res, err = idem.Run(ctx, newOnly, "k2", "s", func(context.Context) (int, error) { return 0, nil }, nil)
		require.NoError(t, err)
		require.Equal(t, 43, res.Value, "new results are sealed with the current secret")
	})

	t.Run("ScopesKeepKeysApart", func(t *testing.T) {
		t.Parallel()
		b := setup(t, idem.Config{})
		ctx := ctxT(t)
		a, err := idem.Run(ctx, b.engine, "same", "user:a", func(context.Context) (string, error) { return "a", nil }, nil)
		require.NoError(t, err)
		bb, err := idem.Run(ctx, b.engine, "same", "user:b", func(context.Context) (string, error) { return "b", nil }, nil)
		require.NoError(t, err)
		require.False(t, bb.Replayed)
		require.Equal(t, "a", a.Value)
		require.Equal(t, "b", bb.Value)
	})

	t.Run("CountsOneExecutionAcrossEngines", func(t *testing.T) {
		t.Parallel()
		// Two engines (two processes) over one store share the records.
		s := newStore(t)
		ctx := ctxT(t)
		e1, e2 := newEngine(t, s, idem.Config{}), newEngine(t, s, idem.Config{})
		var runs atomic.Int32
		fn := func(context.Context) (int, error) { runs.Add(1); return 5, nil }
		_, err := idem.Run(ctx, e1, "k", "s", fn, nil)
		require.NoError(t, err)
		res, err := idem.Run(ctx, e2, "k", "s", fn, nil)
		require.NoError(t, err)
		require.True(t, res.Replayed)
		require.EqualValues(t, 1, runs.Load())
	})
}
