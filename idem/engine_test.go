package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// countingStore passes every call to a real store and counts them.
type countingStore struct {
	idemdriver.Store
	calls atomic.Int32
}

func (c *countingStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	c.calls.Add(1)
	return c.Store.Reserve(ctx, p)
}

func (c *countingStore) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	c.calls.Add(1)
	return c.Store.Delete(ctx, id)
}

func newSQLiteStore(t *testing.T) (idemdriver.Store, func() error) {
	t.Helper()
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	s := idemsqlite.New(db)
	require.NoError(t, s.Migrate(context.Background()))
	return s, db.Close
}

func TestNewRefusesMissingSecret(t *testing.T) {
	t.Parallel()
	s, _ := newSQLiteStore(t)
	_, err := idem.New(s, idem.Config{})
	require.ErrorContains(t, err, "no secret")
	_, err = idem.New(s, idem.Config{Secret: []byte("too short")})
	require.ErrorContains(t, err, "at least 32")
	_, err = idem.New(s, idem.Config{Secret: idemtest.Secret, DisableSealing: true})
	require.Error(t, err)
	_, err = idem.New(nil, idem.Config{DisableSealing: true})
	require.Error(t, err)
	_, err = idem.New(s, idem.Config{DisableSealing: true, MaxResultBytes: -1})
	require.ErrorContains(t, err, "max result bytes")
	_, err = idem.New(s, idem.Config{DisableSealing: true, StoreTimeout: -time.Second})
	require.ErrorContains(t, err, "store timeout")
	_, err = idem.New(s, idem.Config{DisableSealing: true, PendingRetryAfter: time.Millisecond})
	require.ErrorContains(t, err, "pending retry-after")
	_, err = idem.New(s, idem.Config{DisableSealing: true, RecordingWindow: time.Second})
	require.ErrorContains(t, err, "recording window")
	e, err := idem.New(s, idem.Config{DisableSealing: true})
	require.NoError(t, err)
	require.NotNil(t, e)
}

func TestValidationComesBeforeTheStore(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	s := &countingStore{Store: inner}
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	for _, call := range []func() error{
		func() error { _, err := idem.Run(ctx, e, "", "s", fn, nil); return err },
		func() error { _, err := idem.Run(ctx, e, "k", "", fn, nil); return err },
		func() error { _, err := idem.Run(ctx, e, "k", "s", fn, &idem.RunOpts{TTL: time.Second}); return err },
		func() error {
			_, err := idem.Run(ctx, e, "k", "s", fn, &idem.RunOpts{Lease: 48 * time.Hour})
			return err
		},
		func() error { _, err := e.Forget(ctx, "k", ""); return err },
	} {
		var ve *idem.ValidationError
		require.ErrorAs(t, call(), &ve)
	}
	require.Zero(t, s.calls.Load(), "R2: no store call for invalid input")
}

// refusingStore passes every call to a real store, except that it
// refuses every scope as a database whose columns cannot hold it would.
type refusingStore struct{ idemdriver.Store }

func (refusingStore) refuse() error {
	return fmt.Errorf("driver: reserve: %w", &idemdriver.FieldError{Field: "scope", Reason: "refused by the database"})
}

func (s refusingStore) Reserve(context.Context, idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	return idemdriver.Record{}, false, s.refuse()
}

func (s refusingStore) Delete(context.Context, idemdriver.Ident) (bool, error) {
	return false, s.refuse()
}

// TestStoreFieldErrorIsAValidationError: a driver refuses an argument with
// the contract's FieldError; the application still sees a
// *ValidationError matching ErrInvalidKey, with the driver's error in it.
func TestStoreFieldErrorIsAValidationError(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	e, err := idem.New(refusingStore{inner}, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	_, runErr := idem.Run(t.Context(), e, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
	_, forgetErr := e.Forget(t.Context(), "k", "s")
	for _, err := range []error{runErr, forgetErr} {
		require.ErrorIs(t, err, idem.ErrInvalidKey)
		require.NotErrorIs(t, err, idem.ErrInvalidOption)
		var ve *idem.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, "scope", ve.Field)
		require.Equal(t, "refused by the database", ve.Reason)
		var fe *idemdriver.FieldError
		require.ErrorAs(t, err, &fe, "the driver's error stays in the chain")
		require.ErrorIs(t, err, idemdriver.ErrInvalidArgument)
	}
}

func TestUnreachableStoreIsAnErrorNeverACompletion(t *testing.T) {
	t.Parallel()
	s, closeDB := newSQLiteStore(t)
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	require.NoError(t, closeDB())
	ran := false
	res, err := idem.Run(context.Background(), e, "k", "s", func(context.Context) (int, error) { ran = true; return 1, nil }, nil)
	require.Error(t, err)
	require.False(t, errors.Is(err, idem.ErrInProgress))
	require.False(t, ran, "nothing runs without a reservation")
	require.False(t, res.Replayed)
	_, err = e.Forget(context.Background(), "k", "s")
	require.Error(t, err)
}

// outageStore passes every call to a real store, except that Complete
// (or Release) fails while down is set, like a database that restarted or
// dropped the connection at commit. Extend keeps working: the statement
// cut is on the completion only.
type outageStore struct {
	idemdriver.Store
	down          atomic.Bool
	failedWrites  atomic.Int32
	extends       atomic.Int32
	downForExtend bool
}

func (f *outageStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if f.down.Load() {
		f.failedWrites.Add(1)
		return errors.New("connection reset")
	}
	return f.Store.Complete(ctx, id, o, c)
}

func (f *outageStore) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	if f.down.Load() {
		f.failedWrites.Add(1)
		return errors.New("connection reset")
	}
	return f.Store.Release(ctx, id, o)
}

func (f *outageStore) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	f.extends.Add(1)
	if f.downForExtend && f.down.Load() {
		return time.Time{}, errors.New("connection reset")
	}
	return f.Store.Extend(ctx, id, o, lease, now)
}

// newOutageEngine returns an engine over a SQLite store whose outcome
// writes fail while the returned store's down is set.
func newOutageEngine(t *testing.T) (*outageStore, *idem.Engine) {
	t.Helper()
	inner, _ := newSQLiteStore(t)
	s := &outageStore{Store: inner}
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	return s, e
}

func waitRecorded(t *testing.T, e *idem.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e.Shutdown(ctx), "every background recording ends")
}

// SPEC R6: a completion that cannot be written is never
// turned into a re-run. Run returns ErrOutcomeUnrecorded with the value;
// a repeat during the outage is in progress (the lease is kept alive past
// its end), then replays the same value; the callback ran once.
func TestR6UnrecordedCompletionIsRecordedLateNeverRerun(t *testing.T) {
	t.Parallel()
	s, e := newOutageEngine(t)
	inner := s.Store
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(context.Context) (string, error) { runs.Add(1); return fmt.Sprintf("ch_%d", runs.Load()), nil }

	s.down.Store(true)
	res, err := idem.Run(ctx, e, "k", "s", fn, &idem.RunOpts{Lease: time.Second})
	require.ErrorIs(t, err, idem.ErrOutcomeUnrecorded)
	require.ErrorContains(t, err, "connection reset", "the store's error is wrapped too")
	require.Equal(t, "ch_1", res.Value, "the effect is real: its value is returned")

	// The outage outlasts the one-second lease: the recorder extends it.
	time.Sleep(1500 * time.Millisecond)
	_, err = idem.Run(ctx, e, "k", "s", fn, &idem.RunOpts{Lease: time.Second, Recovery: new(idem.RecoverByRerunning())})
	require.ErrorIs(t, err, idem.ErrInProgress, "a repeat during the outage waits, even one that may re-run abandoned keys")
	rec, ok, err := inner.Get(ctx, idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, "k")})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, idemdriver.StatusProcessing, rec.Status)
	require.True(t, rec.LeaseLive(), "the lease was extended while the outcome could not be written")
	require.Positive(t, s.extends.Load())
	require.Positive(t, s.failedWrites.Load())

	s.down.Store(false)
	waitRecorded(t, e)
	again, err := idem.Run(ctx, e, "k", "s", fn, nil)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, "ch_1", again.Value, "the stored value is the first run's")
	require.Equal(t, int32(1), runs.Load(), "the callback ran exactly once")
	require.Equal(t, idem.Counters{OutcomesUnrecorded: 1, OutcomesRecordedLate: 1}, e.Counters())
}

// SPEC R4, R6: a failed callback whose release cannot be written keeps the
// key until the release is written late; then the key runs again.
func TestR6UnrecordedReleaseIsWrittenLate(t *testing.T) {
	t.Parallel()
	s, e := newOutageEngine(t)
	ctx := context.Background()
	boom := errors.New("provider refused")
	s.down.Store(true)
	_, err := idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 0, boom }, nil)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, idem.ErrOutcomeUnrecorded)
	_, err = idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 2, nil }, nil)
	require.ErrorIs(t, err, idem.ErrInProgress)
	s.down.Store(false)
	waitRecorded(t, e)
	res, err := idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 3, nil }, nil)
	require.NoError(t, err)
	require.Equal(t, 3, res.Value)
}

// A recording whose store never comes back gives up at the end of its
// window (here cut short by Shutdown), logs and counts it.
func TestShutdownReportsUnrecordedOutcomes(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	s := &outageStore{Store: inner, downForExtend: true}
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	s.down.Store(true)
	_, err = idem.Run(context.Background(), e, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
	require.ErrorIs(t, err, idem.ErrOutcomeUnrecorded)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = e.Shutdown(ctx)
	require.ErrorContains(t, err, "1 outcome(s) left unrecorded")
	// The recording counts itself given up, then leaves the in-flight set.
	require.Eventually(t, func() bool {
		c := e.Counters()
		return c.OutcomesGivenUp == 1 && c.RecordingsInFlight == 0
	}, 10*time.Second, 10*time.Millisecond)
}

func ExampleRun() {
	dir, err := os.MkdirTemp("", "example-run")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := idemsqlite.Open(filepath.Join(dir, "idem.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	store := idemsqlite.New(db)
	if err := store.Migrate(context.Background()); err != nil {
		panic(err)
	}
	engine, err := idem.New(store, idem.Config{Secret: []byte("an application secret of 32 bytes!")})
	if err != nil {
		panic(err)
	}
	charge := func(ctx context.Context) (string, error) { return "ch_123", nil }
	key := fmt.Sprintf("order-%d", time.Now().UnixNano())
	first, _ := idem.Run(context.Background(), engine, key, "tenant:42", charge, nil)
	again, _ := idem.Run(context.Background(), engine, key, "tenant:42", charge, nil)
	fmt.Println(first.Value, first.Replayed)
	fmt.Println(again.Value, again.Replayed)
	// Output:
	// ch_123 false
	// ch_123 true
}

// A key an operator confirmed as happened has no result to
// replay. That is an expected state: a repeat logs it at Info, never as a
// result that cannot be opened (which reads like a wrong secret).
func TestConfirmedKeyRepeatLogsNoStoredResultAtInfo(t *testing.T) {
	t.Parallel()
	s, _ := newSQLiteStore(t)
	var logs bytes.Buffer
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 0, idem.Uncertain(nil) }, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	id := idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, "k")}
	rec, ok, err := s.Get(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = e.Settle(ctx, s, rec, idem.OperatorConfirmHappened, "ext-1", "checked with the provider")
	require.NoError(t, err)

	logs.Reset()
	_, err = idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
	require.ErrorIs(t, err, idem.ErrResultUnavailable)
	require.NotContains(t, logs.String(), "level=WARN")
	require.NotContains(t, logs.String(), "unknown format")
	require.Contains(t, logs.String(), "level=INFO")
	require.Contains(t, logs.String(), "no stored result: confirmed by an operator")
}

// lostAckStore writes the first Complete, then reports a failure, like a
// connection cut after the server committed but before the answer came.
type lostAckStore struct {
	idemdriver.Store
	cut atomic.Bool
}

func (s *lostAckStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if err := s.Store.Complete(ctx, id, o, c); err != nil || !s.cut.CompareAndSwap(false, true) {
		return err
	}
	return errors.New("connection reset after commit")
}

// SPEC R6: when the first write did commit but its answer was lost, the
// background retry is fenced (the record is no longer processing); it reads
// the record, finds its own outcome there and counts it recorded, not lost.
func TestR6LostAnswerOfACommittedCompletionCountsAsRecorded(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	e, err := idem.New(&lostAckStore{Store: inner}, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	res, err := idem.Run(context.Background(), e, "k", "s", func(context.Context) (int, error) { return 7, nil }, nil)
	require.ErrorIs(t, err, idem.ErrOutcomeUnrecorded)
	require.Equal(t, 7, res.Value)
	waitRecorded(t, e)
	require.Equal(t, idem.Counters{OutcomesUnrecorded: 1, OutcomesRecordedLate: 1}, e.Counters())
	again, err := idem.Run(context.Background(), e, "k", "s", func(context.Context) (int, error) { return 8, nil }, nil)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, 7, again.Value)
}

// lostAnswerStore commits Reserve on the real store, then answers with an
// error while lose is set: the reply was lost after the server committed.
type lostAnswerStore struct {
	idemdriver.Store
	lose atomic.Bool
}

func (f *lostAnswerStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	rec, created, err := f.Store.Reserve(ctx, p)
	if err == nil && f.lose.Load() {
		return idemdriver.Record{}, false, errors.New("read: connection reset by peer")
	}
	return rec, created, err
}

// Found by cmd/faults under a blackhole: a reservation that
// committed but whose answer was lost never ran the callback; it must not
// sit processing until its lease ends and then be escalated as abandoned
// (pending for an operator although nothing happened). The engine releases
// it in the background, and the next request runs.
func TestR6ReservationWithLostAnswerIsDisowned(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	s := &lostAnswerStore{Store: inner}
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	ctx := context.Background()
	ran := 0
	fn := func(context.Context) (string, error) { ran++; return "ok", nil }

	s.lose.Store(true)
	_, err = idem.Run(ctx, e, "k", "s", fn, &idem.RunOpts{Lease: time.Hour})
	require.ErrorContains(t, err, "connection reset")
	require.Zero(t, ran)
	s.lose.Store(false)
	waitRecorded(t, e)

	id := idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, "k")}
	_, ok, err := inner.Get(ctx, id)
	require.NoError(t, err)
	require.False(t, ok, "the orphaned reservation was released")
	res, err := idem.Run(ctx, e, "k", "s", fn, &idem.RunOpts{Lease: time.Hour})
	require.NoError(t, err, "the next request runs at once, not after an hour's lease")
	require.Equal(t, "ok", res.Value)
	require.Equal(t, 1, ran)
}

// phaseStore records the deadline of every Reserve and Takeover and the
// owner tokens asked for. Embedding the interface hides LocalStore, so the
// engine bounds its calls with context deadlines.
type phaseStore struct {
	idemdriver.Store
	deadlines []time.Time
	tokens    []string
}

func (s *phaseStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	d, _ := ctx.Deadline()
	s.deadlines, s.tokens = append(s.deadlines, d), append(s.tokens, p.Owner)
	return s.Store.Reserve(ctx, p)
}

func (s *phaseStore) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	d, _ := ctx.Deadline()
	s.deadlines, s.tokens = append(s.deadlines, d), append(s.tokens, p.NewOwner)
	return s.Store.Takeover(ctx, p)
}

// Config.StoreTimeout's contract: the reservation phase — Reserve,
// then Takeover of an abandoned record — runs under one deadline, at most
// the store timeout after the phase began, instead of a timer per call.
// Owner tokens are 128 random bits, hex-encoded, fresh for every run.
func TestStoreTimeoutIsOneDeadlinePerReservationPhase(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	id := idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, "k")}
	_, created, err := inner.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "crashed", Lease: idem.MinLease, TTL: idem.DefaultTTL, Now: t0})
	require.NoError(t, err)
	require.True(t, created)

	s := &phaseStore{Store: inner}
	const bound = time.Minute
	e, err := idem.New(s, idem.Config{DisableSealing: true, StoreTimeout: bound, DefaultRecovery: idem.RecoverByRerunning()})
	require.NoError(t, err)
	began := time.Now()
	res, err := idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Value)
	require.Len(t, s.deadlines, 2, "a Reserve, then a Takeover of the abandoned record")
	require.False(t, s.deadlines[0].IsZero())
	require.Equal(t, s.deadlines[0], s.deadlines[1], "one deadline for the whole reservation phase")
	require.False(t, s.deadlines[0].After(time.Now().Add(bound)), "at most the store timeout")
	require.True(t, s.deadlines[0].After(began), "set when the phase began")

	_, err = idem.Run(ctx, e, "k2", "s", func(context.Context) (int, error) { return 2, nil }, nil)
	require.NoError(t, err)
	require.Len(t, s.tokens, 3)
	require.Equal(t, s.tokens[0], s.tokens[1], "the takeover asks for the reservation's token")
	require.NotEqual(t, s.tokens[0], s.tokens[2])
	for _, tok := range s.tokens {
		require.Regexp(t, `^[0-9a-f]{32}$`, tok)
	}
}

// lostTakeoverStore commits Takeover on the real store, then answers with
// an error: the reply was lost after the server committed.
type lostTakeoverStore struct{ idemdriver.Store }

func (f *lostTakeoverStore) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	if _, err := f.Store.Takeover(ctx, p); err != nil {
		return idemdriver.Record{}, err
	}
	return idemdriver.Record{}, errors.New("read: connection reset by peer")
}

// The other side of TestR6ReservationWithLostAnswerIsDisowned: a takeover
// of an abandoned record whose answer was lost is NOT released — releasing
// deletes the record, and the next request would run an effect the dead
// owner may already have had. The record stays with the lost taker until
// its lease ends, and then its recovery applies again.
func TestR8LostTakeoverOfAnAbandonedRecordKeepsIt(t *testing.T) {
	t.Parallel()
	inner, _ := newSQLiteStore(t)
	ctx := context.Background()
	id := idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, "k")}
	_, created, err := inner.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "crashed", Lease: idem.MinLease, TTL: idem.DefaultTTL, Now: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.True(t, created)

	e, err := idem.New(&lostTakeoverStore{inner}, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	ran := false
	_, err = idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { ran = true; return 1, nil }, nil)
	require.ErrorContains(t, err, "connection reset")
	require.False(t, ran)
	waitRecorded(t, e)

	rec, ok, err := inner.Get(ctx, id)
	require.NoError(t, err)
	require.True(t, ok, "the abandoned record is kept, never released")
	require.Equal(t, idemdriver.StatusProcessing, rec.Status)
	require.NotEqual(t, "crashed", rec.Owner.Token, "the lost takeover fenced the dead owner out")
}

// sweepCounter answers Sweep calls from a count of expired records and
// notes when each call came and its limit.
type sweepCounter struct {
	idemdriver.Store
	left   int
	limits []int
	times  []time.Time
}

func (s *sweepCounter) Sweep(_ context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	s.limits = append(s.limits, p.Limit)
	s.times = append(s.times, time.Now())
	n := min(s.left, p.Limit)
	s.left -= n
	return idemdriver.SweepResult{Deleted: n}, nil
}

// TestSweepPacesItsBatches: Sweep works in batches of Config.SweepBatch
// and waits Config.SweepPause after each full one (SPEC M6: retention that
// leaves the applications room), by default DefaultSweepBatch and
// DefaultSweepPause, back to back for a negative pause; a context that
// ends in a pause stops it with what it did so far.
func TestSweepPacesItsBatches(t *testing.T) {
	t.Parallel()
	base, _ := newSQLiteStore(t)
	store := &sweepCounter{Store: base, left: 5}
	e, err := idem.New(store, idem.Config{DisableSealing: true, SweepBatch: 2, SweepPause: 50 * time.Millisecond})
	require.NoError(t, err)
	r, err := e.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, idemdriver.SweepResult{Deleted: 5}, r)
	require.Equal(t, []int{2, 2, 2}, store.limits, "batches of SweepBatch until one is not full")
	for i := 1; i < len(store.times); i++ {
		require.GreaterOrEqual(t, store.times[i].Sub(store.times[i-1]), 50*time.Millisecond, "the pause between batches %d and %d", i, i+1)
	}

	// The default: batches of DefaultSweepBatch, DefaultSweepPause apart.
	store = &sweepCounter{Store: base, left: 250}
	e, err = idem.New(store, idem.Config{DisableSealing: true})
	require.NoError(t, err)
	r, err = e.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 250, r.Deleted)
	require.Equal(t, []int{idem.DefaultSweepBatch, idem.DefaultSweepBatch, idem.DefaultSweepBatch}, store.limits)
	for i := 1; i < len(store.times); i++ {
		require.GreaterOrEqual(t, store.times[i].Sub(store.times[i-1]), idem.DefaultSweepPause)
	}

	// A negative pause: back to back.
	store = &sweepCounter{Store: base, left: 250}
	e, err = idem.New(store, idem.Config{DisableSealing: true, SweepPause: -1})
	require.NoError(t, err)
	r, err = e.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 250, r.Deleted)
	require.Less(t, store.times[2].Sub(store.times[0]), 2*idem.DefaultSweepPause, "no pause between the batches (with them: at least twice the pause)")

	store = &sweepCounter{Store: base, left: 100}
	e, err = idem.New(store, idem.Config{DisableSealing: true, SweepBatch: 10, SweepPause: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	r, err = e.Sweep(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, idemdriver.SweepResult{Deleted: 10}, r, "what it did before the context ended in the pause")

	_, err = idem.New(base, idem.Config{DisableSealing: true, SweepBatch: -1})
	require.ErrorContains(t, err, "must not be negative")
}
