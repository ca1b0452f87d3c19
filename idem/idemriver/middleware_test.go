package idemriver

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

func newEngine(t *testing.T) *idem.Engine {
	t.Helper()
	e, err := idem.New(newStore(t), idem.Config{DisableSealing: true})
	require.NoError(t, err)
	return e
}

// slowWorker has a timeout of its own, which only WorkerTimeoutOf can
// tell the middleware.
type slowWorker struct {
	river.WorkerDefaults[webhookArgs]
}

func (slowWorker) Work(context.Context, *river.Job[webhookArgs]) error { return nil }

func (slowWorker) Timeout(job *river.Job[webhookArgs]) time.Duration {
	if job.Args.Amount < 0 {
		return -1
	}
	return time.Duration(job.Args.Amount) * time.Minute
}

func TestJ2NewValidatesOptions(t *testing.T) {
	t.Parallel()
	engine := newEngine(t)

	_, err := New(nil, Config{})
	require.ErrorContains(t, err, "nil engine")

	bad := map[string]Config{
		"lease below LockSeconds":      {Lease: 59 * time.Second},
		"lease above a day":            {Lease: 25 * time.Hour},
		"lease negative":               {Lease: -time.Second},
		"release-after negative":       {ReleaseAfter: -time.Second},
		"release-after under a second": {ReleaseAfter: 500 * time.Millisecond},
		"release-after above a day":    {ReleaseAfter: 25 * time.Hour},
		"default timeout below -1":     {DefaultTimeout: -2 * time.Second},
		"ttl too short":                {TTL: time.Second},
		"ttl too long":                 {TTL: 31 * 24 * time.Hour},
		"nil worker":                   {WorkerTimeouts: []WorkerTimeout{WorkerTimeoutOf[webhookArgs](nil)}},
		"zero worker timeout":          {WorkerTimeouts: []WorkerTimeout{{}}},
		"worker timeout registered twice": {WorkerTimeouts: []WorkerTimeout{
			WorkerTimeoutOf[webhookArgs](slowWorker{}), WorkerTimeoutOf[webhookArgs](slowWorker{})}},
	}
	for name, cfg := range bad {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mw, err := New(engine, cfg)
			require.Error(t, err)
			require.Nil(t, mw)
		})
	}

	mw, err := New(engine, Config{Lease: MinLease, ReleaseAfter: time.Second, DefaultTimeout: -1, TTL: time.Hour, WorkerTimeouts: []WorkerTimeout{WorkerTimeoutOf[webhookArgs](slowWorker{})}})
	require.NoError(t, err)
	require.Equal(t, MinLease, mw.lease)
	mw, err = New(engine, Config{})
	require.NoError(t, err)
	require.Equal(t, DefaultReleaseAfter, mw.releaseAfter)
	require.Equal(t, idem.DefaultTTL, mw.ttl)
	_, err = New(engine, Config{DefaultTimeout: 0, Lease: MaxLease})
	require.NoError(t, err)
}

func TestJ2LeaseOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                     string
		explicit, worker, client time.Duration
		want                     time.Duration
	}{
		{"explicit wins", 5 * time.Minute, 30 * time.Minute, time.Hour, 5 * time.Minute},
		{"worker timeout", 0, 30 * time.Minute, time.Hour, 30 * time.Minute},
		{"client timeout", 0, 0, 2 * time.Hour, 2 * time.Hour},
		{"River's default", 0, 0, 0, time.Minute},
		{"short worker timeout raised to LockSeconds", 0, 5 * time.Second, time.Hour, MinLease},
		{"short client timeout raised to LockSeconds", 0, 0, time.Second, MinLease},
		{"long worker timeout cut to a day", 0, 48 * time.Hour, 0, MaxLease},
		{"long client timeout cut to a day", 0, 0, 72 * time.Hour, MaxLease},
		{"worker without timeout", 0, -1, time.Minute, MaxLease},
		{"client without timeout", 0, 0, -1, MaxLease},
		{"worker timeout beats a client without one", 0, 10 * time.Minute, -1, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, leaseOf(tt.explicit, tt.worker, tt.client))
		})
	}
}

func TestJ2LeaseForUsesWorkerTimeout(t *testing.T) {
	t.Parallel()
	engine := newEngine(t)
	job := func(args webhookArgs, kind string) *rivertype.JobRow {
		encoded, err := json.Marshal(args)
		require.NoError(t, err)
		return &rivertype.JobRow{Kind: kind, EncodedArgs: encoded}
	}
	kind := webhookArgs{}.Kind()

	mw, err := New(engine, Config{DefaultTimeout: 2 * time.Minute, WorkerTimeouts: []WorkerTimeout{WorkerTimeoutOf[webhookArgs](slowWorker{})}})
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, mw.leaseFor(job(webhookArgs{Amount: 30}, kind)), "Timeout(job) sees the args")
	require.Equal(t, MaxLease, mw.leaseFor(job(webhookArgs{Amount: -1}, kind)), "no timeout")
	require.Equal(t, 2*time.Minute, mw.leaseFor(job(webhookArgs{Amount: 0}, kind)), "worker default: the client's")
	require.Equal(t, 2*time.Minute, mw.leaseFor(job(webhookArgs{}, "other_kind")), "unregistered kind: the client's")
	require.Equal(t, 2*time.Minute, mw.leaseFor(&rivertype.JobRow{Kind: kind, EncodedArgs: []byte("{")}), "undecodable args: the client's")

	mw, err = New(engine, Config{Lease: 10 * time.Minute, WorkerTimeouts: []WorkerTimeout{WorkerTimeoutOf[webhookArgs](slowWorker{})}})
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, mw.leaseFor(job(webhookArgs{Amount: 30}, kind)), "explicit lease wins")
}

func TestFingerprintIsCanonical(t *testing.T) {
	t.Parallel()
	a, err := fingerprint([]byte(`{"event_id":"e","amount":1,"nested":{"y":2,"x":1.50}}`))
	require.NoError(t, err)
	b, err := fingerprint([]byte(`{"amount": 1, "nested": {"x": 1.50, "y": 2}, "event_id": "e"}`))
	require.NoError(t, err)
	require.Equal(t, a, b, "key order and spaces do not matter (jsonb reorders)")
	require.Len(t, a, 64)

	c, err := fingerprint([]byte(`{"event_id":"e","amount":2,"nested":{"y":2,"x":1.50}}`))
	require.NoError(t, err)
	require.NotEqual(t, a, c)
	big, err := fingerprint([]byte(`{"n":12345678901234567891}`))
	require.NoError(t, err)
	big2, err := fingerprint([]byte(`{"n":12345678901234567892}`))
	require.NoError(t, err)
	require.NotEqual(t, big, big2, "numbers keep their digits")

	_, err = fingerprint([]byte(`{`))
	require.Error(t, err)
	_, err = fingerprint([]byte(`{} {}`))
	require.Error(t, err)
}

func TestKeyMetadata(t *testing.T) {
	t.Parallel()
	opts, err := InsertOpts(&river.InsertOpts{Metadata: []byte(`{"tenant":"t1"}`), Queue: "q"}, "k-1", "s")
	require.NoError(t, err)
	require.Equal(t, "q", opts.Queue)
	require.JSONEq(t, `{"tenant":"t1","idempotency_key":"k-1","idempotency_scope":"s"}`, string(opts.Metadata))
	key, scope, ok, err := keyFrom(opts.Metadata)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "k-1", key)
	require.Equal(t, "s", scope)

	opts, err = InsertOpts(nil, "k-2", "s")
	require.NoError(t, err)
	require.JSONEq(t, `{"idempotency_key":"k-2","idempotency_scope":"s"}`, string(opts.Metadata))

	for name, kv := range map[string][2]string{
		"empty key":   {"", "s"},
		"empty scope": {"k", ""},
		"long key":    {string(make([]byte, 256)), "s"},
		"long scope":  {"k", string(make([]byte, 256))},
	} {
		_, err := InsertOpts(nil, kv[0], kv[1])
		require.ErrorIs(t, err, idem.ErrInvalidKey, name)
	}
	_, err = InsertOpts(&river.InsertOpts{Metadata: []byte(`[1]`)}, "k", "s")
	require.Error(t, err)

	for _, md := range []string{``, `{}`, `{"snoozes":3}`, `null`} {
		_, _, ok, err := keyFrom([]byte(md))
		require.NoError(t, err, md)
		require.False(t, ok, md)
	}
	for _, md := range []string{`{"idempotency_key":1,"idempotency_scope":"s"}`, `{"idempotency_key":"k"}`, `{"idempotency_key":"k","idempotency_scope":7}`, `[`} {
		_, _, _, err := keyFrom([]byte(md))
		require.ErrorIs(t, err, idem.ErrInvalidKey, md)
	}
}

type badScopeArgs struct{}

func (badScopeArgs) Kind() string                     { return "idemriver_test_bad_scope" }
func (badScopeArgs) IdempotencyKey() (string, string) { return "k", "" }

func TestInsertManyValidatesKeys(t *testing.T) {
	t.Parallel()
	mw, err := New(newEngine(t), Config{})
	require.NoError(t, err)
	innerCalled := false
	inner := func(context.Context) ([]*rivertype.JobInsertResult, error) { innerCalled = true; return nil, nil }

	params := []*rivertype.JobInsertParams{
		{Args: webhookArgs{EventID: "evt"}, Kind: webhookArgs{}.Kind(), Metadata: []byte(`{"a":1}`)},
		{Args: plainArgs{}, Kind: plainArgs{}.Kind(), Metadata: []byte(`{}`)},
		{Args: webhookArgs{}, Kind: webhookArgs{}.Kind(), Metadata: []byte(`{}`)}, // empty key: no key
	}
	_, err = mw.InsertMany(t.Context(), params, inner)
	require.NoError(t, err)
	require.True(t, innerCalled)
	require.JSONEq(t, `{"a":1,"idempotency_key":"evt","idempotency_scope":"provider:test"}`, string(params[0].Metadata))
	require.JSONEq(t, `{}`, string(params[1].Metadata))
	require.JSONEq(t, `{}`, string(params[2].Metadata))

	for name, p := range map[string]*rivertype.JobInsertParams{
		"keyed args without scope": {Args: badScopeArgs{}, Kind: badScopeArgs{}.Kind(), Metadata: []byte(`{}`)},
		"bad key in metadata":      {Args: plainArgs{}, Kind: plainArgs{}.Kind(), Metadata: []byte(`{"idempotency_key":""}`)},
		"kind too long":            {Args: plainArgs{}, Kind: string(make([]byte, 250)), Metadata: []byte(`{"idempotency_key":"k","idempotency_scope":"s"}`)},
	} {
		innerCalled = false
		_, err := mw.InsertMany(t.Context(), []*rivertype.JobInsertParams{p}, inner)
		require.ErrorIs(t, err, idem.ErrInvalidKey, name)
		require.False(t, innerCalled, name)
	}
}

// TestWorkWithoutKeyRunsUntouched: no key, no store call, the inner error
// passes through as is.
func TestWorkWithoutKeyRunsUntouched(t *testing.T) {
	t.Parallel()
	mw, err := New(newEngine(t), Config{})
	require.NoError(t, err)
	want := river.JobSnooze(time.Minute)
	err = mw.Work(t.Context(), &rivertype.JobRow{Kind: "k", Metadata: []byte(`{}`), EncodedArgs: []byte(`{}`)},
		func(context.Context) error { return want })
	require.Same(t, want, err)

	// A malformed key cancels the job without running it.
	ran := false
	err = mw.Work(t.Context(), &rivertype.JobRow{Kind: "k", Metadata: []byte(`{"idempotency_key":"k"}`), EncodedArgs: []byte(`{}`)},
		func(context.Context) error { ran = true; return nil })
	var cancelErr *river.JobCancelError
	require.ErrorAs(t, err, &cancelErr)
	require.ErrorIs(t, err, idem.ErrInvalidKey)
	require.False(t, ran)
}

// TestWorkerContextEndsWithLease: the worker's context ends no later than
// the lease, so a duplicate cannot take the key over while it still runs.
func TestWorkerContextEndsWithLease(t *testing.T) {
	t.Parallel()
	mw, err := New(newEngine(t), Config{Lease: 2 * time.Minute})
	require.NoError(t, err)
	opts, err := InsertOpts(nil, "k", "s")
	require.NoError(t, err)
	before := time.Now()
	var deadline time.Time
	err = mw.Work(t.Context(), &rivertype.JobRow{ID: 1, Kind: "k", Metadata: opts.Metadata, EncodedArgs: []byte(`{}`)},
		func(ctx context.Context) error {
			var ok bool
			deadline, ok = ctx.Deadline()
			require.True(t, ok)
			return nil
		})
	require.NoError(t, err)
	require.WithinRange(t, deadline, before.Add(2*time.Minute-time.Second), time.Now().Add(2*time.Minute))

	// The duplicate after completion does not run.
	err = mw.Work(t.Context(), &rivertype.JobRow{ID: 2, Kind: "k", Metadata: opts.Metadata, EncodedArgs: []byte(`{}`)},
		func(context.Context) error { t.Fatal("ran twice"); return nil })
	require.NoError(t, err)
}

// outageStore fails every Complete while down is set.
type outageStore struct {
	idemdriver.Store
	down atomic.Bool
}

func (s *outageStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if s.down.Load() {
		return errors.New("connection reset")
	}
	return s.Store.Complete(ctx, id, o, c)
}

func newStore(t *testing.T) idemdriver.Store {
	t.Helper()
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	store := idemsqlite.New(db)
	require.NoError(t, store.Migrate(t.Context()))
	return store
}

// SPEC J1: a worker that succeeded but whose completion
// could not be written completes its job (River must not run it again);
// the completion is written in the background and a duplicate snoozes,
// then completes without running.
func TestJ1UnrecordedCompletionCompletesTheJob(t *testing.T) {
	t.Parallel()
	store := &outageStore{Store: newStore(t)}
	engine, err := idem.New(store, idem.Config{DisableSealing: true})
	require.NoError(t, err)
	mw, err := New(engine, Config{})
	require.NoError(t, err)
	opts, err := InsertOpts(nil, "k", "s")
	require.NoError(t, err)
	runs := 0
	work := func(context.Context) error { runs++; return nil }
	job := func(id int64) *rivertype.JobRow {
		return &rivertype.JobRow{ID: id, Kind: "k", Metadata: opts.Metadata, EncodedArgs: []byte(`{}`)}
	}

	store.down.Store(true)
	require.NoError(t, mw.Work(t.Context(), job(1), work), "the work is done: the job completes")
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, mw.Work(t.Context(), job(2), work), &snooze, "a duplicate during the outage snoozes")
	store.down.Store(false)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(t, engine.Shutdown(ctx))
	require.NoError(t, mw.Work(t.Context(), job(3), work))
	require.Equal(t, 1, runs, "the worker ran once")
}

// SPEC J1, R8: a delivery that finds its key abandoned follows the
// middleware's recovery: escalated (snooze) by default, run again with
// RecoverByRerunning.
func TestJ1AbandonedKeyFollowsTheRecovery(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	clock := time.Now()
	engine, err := idem.New(store, idem.Config{DisableSealing: true, Now: func() time.Time { return clock }})
	require.NoError(t, err)
	opts, err := InsertOpts(nil, "k", "s")
	require.NoError(t, err)
	op := Operation("k")
	fp, err := fingerprint([]byte(`{}`))
	require.NoError(t, err)
	abandon := func(key string) {
		id := idemdriver.Ident{Scope: "s", Operation: op, KeyDigest: idem.Digest("s", op, key)}
		_, created, err := store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Fingerprint: fp, Owner: "crashed", Lease: time.Minute, TTL: time.Hour, Now: clock})
		require.NoError(t, err)
		require.True(t, created)
	}
	abandon("k")
	clock = clock.Add(2 * time.Minute)
	runs := 0
	work := func(context.Context) error { runs++; return nil }

	escalating, err := New(engine, Config{})
	require.NoError(t, err)
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, escalating.Work(t.Context(), &rivertype.JobRow{ID: 1, Kind: "k", Metadata: opts.Metadata, EncodedArgs: []byte(`{}`)}, work), &snooze)
	require.Zero(t, runs, "escalated: the worker does not run again")

	opts2, err := InsertOpts(nil, "k2", "s")
	require.NoError(t, err)
	abandon("k2")
	clock = clock.Add(2 * time.Minute)
	rerunning, err := New(engine, Config{Recovery: new(idem.RecoverByRerunning())})
	require.NoError(t, err)
	require.NoError(t, rerunning.Work(t.Context(), &rivertype.JobRow{ID: 2, Kind: "k", Metadata: opts2.Metadata, EncodedArgs: []byte(`{}`)}, work))
	require.Equal(t, 1, runs)
}
