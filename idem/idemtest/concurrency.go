package idemtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Figures of the concurrency scenarios (SPEC IDEM-S3; reliability-anchors
// 7a scenarios 1, 2 and 4).
const (
	RaceGoroutines      = 64
	RaceKeys            = 200
	RaceKeysPerRound    = 8
	MixedGoroutines     = 32
	MixedKeys           = 20
	TakeoverRepetitions = 100
)

type raceValue struct {
	Key   string   `json:"key"`
	Seq   int64    `json:"seq"`
	Parts []string `json:"parts"`
}

func runConcurrency(t *testing.T, newStore func(t *testing.T) idemdriver.Store) {
	t.Run("S3SameKeyRaceRunsEachKeyOnce", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// 64 callers queue for one key at once: on a loaded machine (a
		// single-writer store under the race detector, beside the rest of
		// the suite) the last may wait minutes, far past the default store
		// timeout (5 s), which is not what this test is about (each key
		// runs once).
		e := newEngine(t, s, idem.Config{StoreTimeout: 5 * time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()

		var executions [RaceKeys]atomic.Int32
		var seq atomic.Int64
		var firsts [RaceKeys]atomic.Pointer[raceValue]
		var inProgress, replays, wins atomic.Int32

		for round := 0; round < RaceKeys; round += RaceKeysPerRound {
			startGun := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, RaceGoroutines*RaceKeysPerRound)
			for k := round; k < round+RaceKeysPerRound; k++ {
				key := fmt.Sprintf("race-key-%04d", k)
				for range RaceGoroutines {
					wg.Go(func() {
						<-startGun
						res, err := idem.Run(ctx, e, key, "tenant:race", func(context.Context) (raceValue, error) {
							executions[k].Add(1)
							time.Sleep(time.Millisecond) // widen the window for a second owner
							return raceValue{Key: key, Seq: seq.Add(1), Parts: []string{"a", key}}, nil
						}, &idem.RunOpts{Fingerprint: "payload-1"})
						switch {
						case errors.Is(err, idem.ErrInProgress):
							inProgress.Add(1)
						case err != nil:
							errs <- fmt.Errorf("%s: %w", key, err)
						default:
							v := res.Value
							if res.Replayed {
								replays.Add(1)
							} else {
								wins.Add(1)
							}
							if !firsts[k].CompareAndSwap(nil, &v) {
								if got := firsts[k].Load(); got.Seq != v.Seq || got.Key != v.Key || len(got.Parts) != 2 {
									errs <- fmt.Errorf("%s: two different values %+v and %+v", key, *got, v)
								}
							}
						}
					})
				}
			}
			close(startGun)
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		}

		total := 0
		for k := range RaceKeys {
			n := int(executions[k].Load())
			require.Equal(t, 1, n, "key %d ran %d times", k, n)
			total += n
		}
		require.Equal(t, RaceKeys, total)
		require.EqualValues(t, RaceKeys, wins.Load(), "exactly one fresh result per key")
		require.EqualValues(t, RaceKeys*RaceGoroutines, inProgress.Load()+replays.Load()+wins.Load())
		t.Logf("S3: %d goroutines x %d keys: %d executions, %d replays, %d in-progress answers",
			RaceGoroutines, RaceKeys, total, replays.Load(), inProgress.Load())

		// Nothing is stuck: every record is completed and replays its value.
		for k := range RaceKeys {
			key := fmt.Sprintf("race-key-%04d", k)
			rec, ok, err := s.Get(ctx, idemdriver.Ident{Scope: "tenant:race", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("tenant:race", idem.DefaultOperation, key)})
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, idemdriver.StatusCompleted, rec.Status, key)
			res, err := idem.Run(ctx, e, key, "tenant:race", func(context.Context) (raceValue, error) { return raceValue{}, errors.New("must not run") }, &idem.RunOpts{Fingerprint: "payload-1"})
			require.NoError(t, err)
			require.True(t, res.Replayed)
			require.Equal(t, *firsts[k].Load(), res.Value)
		}
	})

	t.Run("S3MixedPayloadRaceRejectsTheOtherVariant", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		e := newEngine(t, s, idem.Config{})
		ctx := ctxT(t)
		for k := range MixedKeys {
			key := fmt.Sprintf("mixed-%02d", k)
			var executions atomic.Int32
			var winner atomic.Value
			type answer struct {
				variant string
				err     error
				res     idem.Result[string]
			}
			answers := make(chan answer, MixedGoroutines)
			startGun := make(chan struct{})
			var wg sync.WaitGroup
			for g := range MixedGoroutines {
				variant := []string{"A", "B"}[g%2]
				wg.Go(func() {
					<-startGun
					res, err := idem.Run(ctx, e, key, "tenant:mixed", func(context.Context) (string, error) {
						executions.Add(1)
						winner.Store(variant)
						time.Sleep(time.Millisecond)
						return "made by " + variant, nil
					}, &idem.RunOpts{Fingerprint: "variant-" + variant})
					answers <- answer{variant, err, res}
				})
			}
			close(startGun)
			wg.Wait()
			close(answers)
			require.EqualValues(t, 1, executions.Load(), "%s: exactly one execution", key)
			won := winner.Load().(string)
			for a := range answers {
				if a.variant != won {
					require.ErrorIs(t, a.err, idem.ErrKeyReused, "%s: the other variant is always reused", key)
					continue
				}
				if a.err != nil {
					require.ErrorIs(t, a.err, idem.ErrInProgress, key)
					continue
				}
				require.Equal(t, "made by "+won, a.res.Value)
			}
			rec, ok, err := s.Get(ctx, idemdriver.Ident{Scope: "tenant:mixed", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("tenant:mixed", idem.DefaultOperation, key)})
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "variant-"+won, rec.Fingerprint, "the stored fingerprint is the winner's")
		}
	})

	t.Run("S1FencedTakeoverRepeated", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		clock := NewClock(start)
		// The successor re-runs a key whose lease ended (RecoverByRerunning).
		e := newEngine(t, s, idem.Config{Now: clock.Now, DefaultRecovery: idem.RecoverByRerunning()})
		ctx := ctxT(t)
		rng := rand.New(rand.NewPCG(7, 11))
		const lease = 10 * time.Second
		lastFence := int64(0)
		takeovers, refusals := 0, 0
		for i := range TakeoverRepetitions {
			key := fmt.Sprintf("takeover-%03d", i)
			entered, release := make(chan idem.RunInfo), make(chan struct{})
			zombie := make(chan error, 1)
			go func() {
				_, err := idem.Run(ctx, e, key, "tenant:fence", func(ctx context.Context) (string, error) {
					info, _ := idem.RunInfoFrom(ctx)
					entered <- info
					<-release
					return "zombie", nil
				}, &idem.RunOpts{Lease: lease})
				zombie <- err
			}()
			first := <-entered
			require.Greater(t, first.Fence, lastFence, "fences strictly increase")

			// Pause the first owner for lease ±20 %, then a successor tries.
			pause := time.Duration(float64(lease) * (0.8 + 0.4*rng.Float64())).Truncate(time.Millisecond)
			clock.Advance(pause)
			var successorFence int64
			res, err := idem.Run(ctx, e, key, "tenant:fence", func(ctx context.Context) (string, error) {
				info, _ := idem.RunInfoFrom(ctx)
				successorFence = info.Fence
				return "successor", nil
			}, &idem.RunOpts{Lease: lease})
			close(release)
			zerr := <-zombie

			if pause >= lease {
				takeovers++
				require.NoError(t, err, "%s: pause %s ends the lease", key, pause)
				require.Equal(t, "successor", res.Value)
				require.Greater(t, successorFence, first.Fence)
				require.ErrorIs(t, zerr, idemdriver.ErrFenced, "%s: the zombie cannot complete", key)
				lastFence = successorFence
			} else {
				refusals++
				require.ErrorIs(t, err, idem.ErrInProgress, "%s: pause %s leaves the lease live", key, pause)
				require.NoError(t, zerr)
				lastFence = first.Fence
			}
			after, err := idem.Run(ctx, e, key, "tenant:fence", func(context.Context) (string, error) { return "late", nil }, nil)
			require.NoError(t, err)
			require.True(t, after.Replayed)
			if pause >= lease {
				require.Equal(t, "successor", after.Value, "the record holds the successor's result")
			} else {
				require.Equal(t, "zombie", after.Value)
			}
		}
		require.Positive(t, takeovers)
		require.Positive(t, refusals)
		t.Logf("S1: %d repetitions: %d takeovers (zombie fenced), %d refused while live", TakeoverRepetitions, takeovers, refusals)
	})

	// raceOnCrashedKey has RaceGoroutines callers, under recovery, race for
	// a key whose owner reserved it and crashed; it returns how many ran the
	// callback.
	raceOnCrashedKey := func(t *testing.T, recovery idem.Recovery) (e *idem.Engine, s idemdriver.Store, id idemdriver.Ident, runs int32) {
		t.Helper()
		s = newStore(t)
		clock := NewClock(start)
		e = newEngine(t, s, idem.Config{Now: clock.Now, DefaultRecovery: recovery})
		ctx := ctxT(t)
		id = idemdriver.Ident{Scope: "tenant:t", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("tenant:t", idem.DefaultOperation, "crashed")}
		_, created, err := s.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "crashed", Lease: time.Second, TTL: time.Hour, Now: clock.Now()})
		require.NoError(t, err)
		require.True(t, created)
		clock.Advance(2 * time.Second)
		var ran atomic.Int32
		var wg sync.WaitGroup
		startGun := make(chan struct{})
		for range RaceGoroutines {
			wg.Go(func() {
				<-startGun
				_, err := idem.Run(ctx, e, "crashed", "tenant:t", func(context.Context) (int, error) {
					ran.Add(1)
					time.Sleep(time.Millisecond)
					return 1, nil
				}, &idem.RunOpts{Lease: time.Minute})
				if err != nil && !errors.Is(err, idem.ErrInProgress) {
					t.Errorf("unexpected error: %v", err)
				}
			})
		}
		close(startGun)
		wg.Wait()
		return e, s, id, ran.Load()
	}

	t.Run("ConcurrentTakeoverHasOneWinner", func(t *testing.T) {
		t.Parallel()
		_, _, _, runs := raceOnCrashedKey(t, idem.RecoverByRerunning())
		require.EqualValues(t, 1, runs, "exactly one successor takes the crashed owner's key over")
	})

	t.Run("ConcurrentEscalationHasOneWinner", func(t *testing.T) {
		t.Parallel()
		e, s, id, runs := raceOnCrashedKey(t, idem.RecoverByEscalating())
		require.Zero(t, runs, "R8: by default nothing runs again")
		require.Equal(t, int64(1), e.Counters().AbandonedEscalated, "exactly one successor escalates the crashed owner's key")
		rec, ok, err := s.Get(ctxT(t), id)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusPending, rec.Status)
	})
}
