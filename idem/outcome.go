package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Backoff of background recordings: capped exponential with jitter.
const (
	recordFirstPause = 50 * time.Millisecond
	recordMaxPause   = 2 * time.Second
)

// lateRecordings tracks the outcomes the engine writes in the background
// and counts what became of them.
type lateRecordings struct {
	inFlight     atomic.Int64
	unrecorded   atomic.Int64
	recordedLate atomic.Int64
	givenUp      atomic.Int64
	escalated    atomic.Int64

	stopOnce sync.Once
	stop     chan struct{} // closed when Shutdown's context ends
}

func newLateRecordings() lateRecordings {
	return lateRecordings{stop: make(chan struct{})}
}

// Counters are the engine's counts since it was built (SPEC M5: no key or
// payload in them). Safe to read at any time.
type Counters struct {
	// OutcomesUnrecorded counts outcomes whose first write failed and went
	// to a background recording ([ErrOutcomeUnrecorded]).
	OutcomesUnrecorded int64
	// OutcomesRecordedLate counts background recordings that succeeded.
	OutcomesRecordedLate int64
	// OutcomesGivenUp counts background recordings that ended without
	// success: the window ended, the lease was taken over, or the engine
	// shut down. Each was logged at Error level with the safe key id.
	OutcomesGivenUp int64
	// AbandonedEscalated counts abandoned records made pending for an
	// operator, by a successor's recovery or by Sweep.
	AbandonedEscalated int64
	// RecordingsInFlight is how many background recordings are running.
	RecordingsInFlight int64
}

// Counters returns the engine's counters.
func (e *Engine) Counters() Counters {
	return Counters{
		OutcomesUnrecorded:   e.late.unrecorded.Load(),
		OutcomesRecordedLate: e.late.recordedLate.Load(),
		OutcomesGivenUp:      e.late.givenUp.Load(),
		AbandonedEscalated:   e.late.escalated.Load(),
		RecordingsInFlight:   e.late.inFlight.Load(),
	}
}

// Shutdown waits for the background recordings in flight to end. When ctx
// ends first, it stops them and returns an error saying how many outcomes
// were left unrecorded; their records stay processing until their lease
// ends, and then their recovery applies. Call it after the HTTP server and
// the job workers have stopped. The engine stays usable, but once a
// Shutdown's context has ended, later background recordings give up at
// once (counted and logged).
func (e *Engine) Shutdown(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for e.late.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			n := e.late.inFlight.Load()
			e.late.stopOnce.Do(func() { close(e.late.stop) })
			if n == 0 {
				return nil
			}
			return fmt.Errorf("idem: shutdown: %d outcome(s) left unrecorded: %w", n, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// outcomeWrite is the final write of an owner: a completion, or the
// release of the key after the callback failed.
type outcomeWrite struct {
	release bool
	c       idemdriver.Completion
}

// writeOutcome writes w for st under ctx detached from the caller's
// cancellation and bounded by the store timeout. When the write fails for
// any reason but ErrFenced, outside a transaction, w goes to a background
// recording and the error matches ErrOutcomeUnrecorded and the store's
// error. Inside a transaction ([idemdriver.TxStore.WithinTx]) the error is returned
// as it is: the whole transaction fails together.
func (e *Engine) writeOutcome(ctx context.Context, st *runState, w outcomeWrite) error {
	err := e.tryWrite(e.boundDetached(ctx, &st.bound), st, w)
	if err == nil || errors.Is(err, idemdriver.ErrFenced) || st.inTx {
		return err
	}
	e.late.unrecorded.Add(1)
	e.late.inFlight.Add(1)
	window := e.recordWindow
	if window == 0 {
		window = max(2*st.lease, MinRecordingWindow)
	}
	go e.recordLate(st, w, window)
	op := "complete"
	if w.release {
		op = "release"
	}
	return fmt.Errorf("%w: %s: %w", ErrOutcomeUnrecorded, op, err)
}

// tryWrite makes one attempt at w under ctx, which boundDetached made.
func (e *Engine) tryWrite(ctx context.Context, st *runState, w outcomeWrite) error {
	if w.release {
		return st.store.Release(ctx, st.id, st.owner)
	}
	c := w.c
	c.Now, c.RecordID = e.now(), st.rec.ID
	return st.store.Complete(ctx, st.id, st.owner, c)
}

// recordLate retries w with capped exponential backoff until it succeeds,
// is fenced out, the window ends or Shutdown stops it, and extends the
// lease before it ends while the write keeps failing, so that no successor
// takes the key over while this process still knows the outcome.
func (e *Engine) recordLate(st *runState, w outcomeWrite, window time.Duration) {
	defer e.late.inFlight.Add(-1)
	log := st.logger()
	giveUpAt := time.Now().Add(window)
	leaseEnd := st.leaseEnd
	pause := recordFirstPause
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-e.late.stop:
			t.Stop()
			e.late.givenUp.Add(1)
			log.Error("idem: outcome left unrecorded at shutdown; the record stays processing until its lease ends, then its recovery applies",
				"attempts", attempt-1)
			return
		case <-t.C:
		}
		pause = min(2*pause, recordMaxPause)
		err := e.tryWrite(e.boundDetached(context.Background(), nil), st, w)
		if err == nil {
			e.late.recordedLate.Add(1)
			log.Info("idem: outcome recorded late", "attempts", attempt)
			return
		}
		if errors.Is(err, idemdriver.ErrFenced) {
			e.fencedLate(st, w, log, attempt)
			return
		}
		if time.Now().After(giveUpAt) {
			e.late.givenUp.Add(1)
			log.Error("idem: outcome could not be recorded; giving up, the record stays processing until its lease ends, then its recovery applies",
				"attempts", attempt, "window", window.String(), "error", err.Error())
			return
		}
		if time.Until(leaseEnd) < st.lease/2 {
			t0 := time.Now()
			ctx, cancel := e.bound(context.Background())
			_, xerr := st.store.Extend(ctx, st.id, st.owner, st.lease, e.now())
			cancel()
			switch {
			case xerr == nil:
				leaseEnd = t0.Add(st.lease)
			case errors.Is(xerr, idemdriver.ErrFenced):
				e.fencedLate(st, w, log, attempt)
				return
			}
		}
	}
}

// fencedLate handles a background write refused with ErrFenced. An
// earlier attempt whose answer was lost may have written it: the record
// then holds this owner's outcome (or, for a release, is gone), which is a
// success. Otherwise another owner took the key over or it was forgotten.
func (e *Engine) fencedLate(st *runState, w outcomeWrite, log *slog.Logger, attempt int) {
	ctx, cancel := e.bound(context.Background())
	rec, ok, err := st.store.Get(ctx, st.id)
	cancel()
	if err == nil && (w.release && !ok || !w.release && ok && rec.Owner == st.owner && rec.Status == w.c.Status) {
		e.late.recordedLate.Add(1)
		log.Info("idem: outcome recorded late (an earlier attempt had written it)", "attempts", attempt)
		return
	}
	e.late.givenUp.Add(1)
	log.Error("idem: outcome not recorded: fenced out, the lease was taken over or the key forgotten before the store came back",
		"attempts", attempt)
}

// disown undoes, in the background, a reservation or restart by token
// whose answer was lost (a timeout, a dropped connection): the store may
// have committed it, and then the record would sit processing under an
// owner that never runs the callback, and be escalated as abandoned when
// its lease ends although nothing ran. It reads the record until the store
// answers, within [MinRecordingWindow], and releases it if token still
// owns it; a record of another owner, or none, is left alone. Shutdown
// waits for it like for a late outcome.
func (e *Engine) disown(s idemdriver.Store, id idemdriver.Ident, token string) {
	e.late.inFlight.Add(1)
	go func() {
		defer e.late.inFlight.Add(-1)
		giveUpAt := time.Now().Add(MinRecordingWindow)
		pause := recordFirstPause
		for {
			t := time.NewTimer(pause/2 + rand.N(pause/2+1))
			select {
			case <-e.late.stop:
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(2*pause, recordMaxPause)
			ctx, cancel := e.bound(context.Background())
			rec, ok, err := s.Get(ctx, id)
			if err == nil && ok && rec.Status == idemdriver.StatusProcessing && rec.Owner.Token == token {
				err = s.Release(ctx, id, rec.Owner)
				if err == nil {
					e.log.Info("idem: a reservation whose answer was lost was released; the callback never ran",
						"key_id", SafeKeyID(id.KeyDigest), "operation", id.Operation)
				}
			}
			cancel()
			if err == nil || errors.Is(err, idemdriver.ErrFenced) || time.Now().After(giveUpAt) {
				return
			}
		}
	}()
}
