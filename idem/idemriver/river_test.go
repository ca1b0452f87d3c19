package idemriver

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

const testScope = "provider:test"

// webhookArgs is a delivered webhook: its event id is the idempotency key.
type webhookArgs struct {
	EventID string `json:"event_id"`
	Amount  int    `json:"amount"`
}

func (webhookArgs) Kind() string { return "idemriver_test_webhook" }

func (a webhookArgs) IdempotencyKey() (string, string) { return a.EventID, testScope }

// plainArgs do not implement Keyed; a key comes through InsertOpts.
type plainArgs struct {
	N int `json:"n"`
}

func (plainArgs) Kind() string { return "idemriver_test_plain" }

// funcWorker runs work; the tests count calls and effects in it.
type funcWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	work func(ctx context.Context, job *river.Job[T]) error
}

func (w *funcWorker[T]) Work(ctx context.Context, job *river.Job[T]) error { return w.work(ctx, job) }

// fastRetry retries a failed job after 100ms, well inside River's
// scheduler interval, so the job is made available again at once.
type fastRetry struct{}

func (fastRetry) NextRetry(*rivertype.JobRow) time.Time {
	return time.Now().Add(100 * time.Millisecond)
}

// testBundle is one running River client with the middleware installed,
// on one database, behind functions that hide the transaction type.
type testBundle struct {
	store     idemdriver.Store
	engine    *idem.Engine
	insert    func(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	jobGet    func(ctx context.Context, id int64) (*rivertype.JobRow, error)
	subscribe func(kinds ...river.EventKind) (<-chan *river.Event, func())
}

type backend struct {
	name  string
	setup func(t *testing.T, workers *river.Workers) *testBundle
}

var backends = []backend{
	{name: "PostgreSQL", setup: func(t *testing.T, workers *river.Workers) *testBundle {
		t.Helper()
		pool := pgtest.Schema(t) // River's tables go in the schema, through the search_path
		store := idempgx.New(pool)
		require.NoError(t, store.Migrate(t.Context()))
		return startClient(t, riverpgxv5.New(pool), store, workers)
	}},
	{name: "SQLite", setup: func(t *testing.T, workers *river.Workers) *testBundle {
		t.Helper()
		db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "river.db"))
		require.NoError(t, err)
		// riversqlite's advice: one connection, shared here by River and the
		// idem store, so that neither waits on the other's write lock.
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		store := idemsqlite.New(db)
		require.NoError(t, store.Migrate(t.Context()))
		return startClient(t, riversqlite.New(db), store, workers)
	}},
}

// forEachBackend runs test as a parallel subtest on every database.
func forEachBackend(t *testing.T, test func(t *testing.T, setup func(*testing.T, *river.Workers) *testBundle)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.setup)
		})
	}
}

// startClient migrates River's tables, builds the engine and the middleware
// (release-after 1s) and starts a client that polls fast.
func startClient[TTx any](t *testing.T, driver riverdriver.Driver[TTx], store idemdriver.Store, workers *river.Workers) *testBundle {
	t.Helper()
	ctx := t.Context()
	migrator, err := rivermigrate.New(driver, nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)

	engine, err := idem.New(store, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	mw, err := New(engine, Config{ReleaseAfter: time.Second})
	require.NoError(t, err)

	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Middleware:        []rivertype.Middleware{mw},
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		RetryPolicy:       fastRetry{},
		TestOnly:          true,
		Workers:           workers,
	})
	require.NoError(t, err)
	// Start and Stop get contexts of their own: t.Context is cancelled
	// before cleanups run.
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(ctx))
	})
	return &testBundle{store: store, engine: engine, insert: client.Insert, jobGet: client.JobGet, subscribe: client.Subscribe}
}

// waitJob polls job id until done says so, and fails t after 15s.
func waitJob(t *testing.T, b *testBundle, id int64, what string, done func(*rivertype.JobRow) bool) *rivertype.JobRow {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		job, err := b.jobGet(t.Context(), id)
		require.NoError(t, err)
		if done(job) {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: %s: not reached in 15s; state %s, attempt %d, errors %v", id, what, job.State, job.Attempt, job.Errors)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func inState(s rivertype.JobState) func(*rivertype.JobRow) bool {
	return func(j *rivertype.JobRow) bool { return j.State == s }
}

func insert(t *testing.T, b *testBundle, args river.JobArgs, opts *river.InsertOpts) int64 {
	t.Helper()
	res, err := b.insert(t.Context(), args, opts)
	require.NoError(t, err)
	require.False(t, res.UniqueSkippedAsDuplicate)
	return res.Job.ID
}

// TestJ1DuplicateDeliveryRunsOnce: a webhook delivered twice is two jobs;
// the worker's effect happens once and both jobs complete. A job without a
// key runs every time.
func TestJ1DuplicateDeliveryRunsOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, setup func(*testing.T, *river.Workers) *testBundle) {
		var hooks, plain atomic.Int32
		workers := river.NewWorkers()
		river.AddWorker(workers, &funcWorker[webhookArgs]{work: func(context.Context, *river.Job[webhookArgs]) error {
			hooks.Add(1)
			return nil
		}})
		river.AddWorker(workers, &funcWorker[plainArgs]{work: func(context.Context, *river.Job[plainArgs]) error {
			plain.Add(1)
			return nil
		}})
		b := setup(t, workers)

		args := webhookArgs{EventID: "evt_1", Amount: 500}
		first := insert(t, b, args, nil)
		second := insert(t, b, args, nil)
		for _, id := range []int64{first, second} {
			job := waitJob(t, b, id, "completed", inState(rivertype.JobStateCompleted))
			var md map[string]any
			require.NoError(t, json.Unmarshal(job.Metadata, &md))
			require.Equal(t, "evt_1", md[MetadataKey], "the insert middleware put the key in the metadata")
			require.Equal(t, testScope, md[MetadataScope])
		}
		require.Equal(t, int32(1), hooks.Load(), "the effect ran once for two deliveries")

		op := Operation(webhookArgs{}.Kind())
		rec, ok, err := b.store.Get(t.Context(), idemdriver.Ident{Scope: testScope, Operation: op, KeyDigest: idem.Digest(testScope, op, "evt_1")})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)

		// Keys put in the metadata with InsertOpts work the same way.
		opts, err := InsertOpts(&river.InsertOpts{Tags: []string{"manual"}}, "cmd-7", testScope)
		require.NoError(t, err)
		a := insert(t, b, plainArgs{N: 7}, opts)
		c := insert(t, b, plainArgs{N: 7}, opts)
		// Jobs without a key run untouched, every time.
		d := insert(t, b, plainArgs{N: 8}, nil)
		e := insert(t, b, plainArgs{N: 8}, nil)
		for _, id := range []int64{a, c, d, e} {
			waitJob(t, b, id, "completed", inState(rivertype.JobStateCompleted))
		}
		require.Equal(t, int32(3), plain.Load(), "keyed: once; unkeyed: twice")
	})
}

// TestJ3DuplicateWhileRunningIsSnoozed: a second job delivered while the
// first holds the key is snoozed, and completes without running once the
// first has completed.
func TestJ3DuplicateWhileRunningIsSnoozed(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, setup func(*testing.T, *river.Workers) *testBundle) {
		var calls atomic.Int32
		started := make(chan int64, 2)
		release := make(chan struct{})
		workers := river.NewWorkers()
		river.AddWorker(workers, &funcWorker[webhookArgs]{work: func(ctx context.Context, job *river.Job[webhookArgs]) error {
			calls.Add(1)
			started <- job.ID
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
		b := setup(t, workers)
		// Registered after the client's Stop, so it runs first: a failed
		// test must not leave the worker blocking Stop.
		var releaseOnce sync.Once
		unblock := func() { releaseOnce.Do(func() { close(release) }) }
		t.Cleanup(unblock)
		events, cancel := b.subscribe(river.EventKindJobSnoozed)
		defer cancel()

		args := webhookArgs{EventID: "evt_2", Amount: 1}
		first := insert(t, b, args, nil)
		select {
		case id := <-started:
			require.Equal(t, first, id)
		case <-time.After(10 * time.Second):
			t.Fatal("the first job did not start")
		}
		second := insert(t, b, args, nil)

	wait:
		for {
			select {
			case ev := <-events:
				if ev.Job.ID == second {
					require.Equal(t, rivertype.JobStateAvailable, ev.Job.State, "a 1s snooze is within the scheduler interval")
					break wait
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the duplicate was not snoozed")
			}
		}
		unblock()

		waitJob(t, b, first, "completed", inState(rivertype.JobStateCompleted))
		job := waitJob(t, b, second, "completed", inState(rivertype.JobStateCompleted))
		require.Equal(t, int32(1), calls.Load(), "the duplicate never ran the worker")
		require.Equal(t, 1, job.Attempt, "a snooze does not count as an attempt")
		require.Empty(t, job.Errors)
		var md struct {
			Snoozes int `json:"snoozes"`
		}
		require.NoError(t, json.Unmarshal(job.Metadata, &md))
		require.GreaterOrEqual(t, md.Snoozes, 1)
	})
}

// TestJ1WorkerErrorReleasesKey: a failing worker releases the key; River's
// retry runs it again, and once it succeeded a duplicate does not run.
func TestJ1WorkerErrorReleasesKey(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, setup func(*testing.T, *river.Workers) *testBundle) {
		var calls, effects atomic.Int32
		workers := river.NewWorkers()
		river.AddWorker(workers, &funcWorker[webhookArgs]{work: func(context.Context, *river.Job[webhookArgs]) error {
			if calls.Add(1) == 1 {
				return errors.New("provider answered 503")
			}
			effects.Add(1)
			return nil
		}})
		b := setup(t, workers)

		args := webhookArgs{EventID: "evt_3", Amount: 2}
		id := insert(t, b, args, nil)
		job := waitJob(t, b, id, "completed", inState(rivertype.JobStateCompleted))
		require.Equal(t, 2, job.Attempt)
		require.Len(t, job.Errors, 1)
		require.Contains(t, job.Errors[0].Error, "provider answered 503")

		dup := insert(t, b, args, nil)
		waitJob(t, b, dup, "completed", inState(rivertype.JobStateCompleted))
		require.Equal(t, int32(2), calls.Load())
		require.Equal(t, int32(1), effects.Load())
	})
}

// TestJ4UnavailableFailsEveryDelivery: a key completed unavailable (the
// work ran, its completion was lost) fails every delivery with
// result-unavailable and never runs the worker.
func TestJ4UnavailableFailsEveryDelivery(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, setup func(*testing.T, *river.Workers) *testBundle) {
		var calls atomic.Int32
		workers := river.NewWorkers()
		river.AddWorker(workers, &funcWorker[webhookArgs]{work: func(context.Context, *river.Job[webhookArgs]) error {
			calls.Add(1)
			return nil
		}})
		b := setup(t, workers)

		// Force the record: reserve it as a first delivery would, then
		// complete it unavailable, as idem.Run does when completion fails.
		args := webhookArgs{EventID: "evt_4", Amount: 3}
		encoded, err := json.Marshal(args)
		require.NoError(t, err)
		fp, err := fingerprint(encoded)
		require.NoError(t, err)
		op := Operation(args.Kind())
		ident := idemdriver.Ident{Scope: testScope, Operation: op, KeyDigest: idem.Digest(testScope, op, args.EventID)}
		rec, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: ident, Fingerprint: fp, Owner: "lost-worker", Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, created)
		require.NoError(t, b.store.Complete(t.Context(), ident, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusUnavailable, LastError: "completion failed: connection reset"}))

		id := insert(t, b, args, &river.InsertOpts{MaxAttempts: 2})
		job := waitJob(t, b, id, "discarded", inState(rivertype.JobStateDiscarded))
		require.Len(t, job.Errors, 2, "every delivery failed")
		for _, e := range job.Errors {
			require.Contains(t, e.Error, idem.ErrResultUnavailable.Error())
			require.Contains(t, e.Error, idem.SafeKeyID(ident.KeyDigest), "the error names the safe key id")
			require.NotContains(t, e.Error, args.EventID, "never the raw key")
		}
		require.Zero(t, calls.Load(), "the worker never ran again")

		// The runbook's way out: forget the key, retry the job.
		existed, err := b.engine.ForgetOperation(t.Context(), args.EventID, testScope, op)
		require.NoError(t, err)
		require.True(t, existed)
		again := insert(t, b, args, nil)
		waitJob(t, b, again, "completed", inState(rivertype.JobStateCompleted))
		require.Equal(t, int32(1), calls.Load())
	})
}

// TestKeyReusedCancelsJob: the same key with other args is a key reuse;
// the job is cancelled and the worker does not run.
func TestKeyReusedCancelsJob(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, setup func(*testing.T, *river.Workers) *testBundle) {
		var mu sync.Mutex
		var amounts []int
		workers := river.NewWorkers()
		river.AddWorker(workers, &funcWorker[webhookArgs]{work: func(_ context.Context, job *river.Job[webhookArgs]) error {
			mu.Lock()
			defer mu.Unlock()
			amounts = append(amounts, job.Args.Amount)
			return nil
		}})
		b := setup(t, workers)

		first := insert(t, b, webhookArgs{EventID: "evt_5", Amount: 10}, nil)
		waitJob(t, b, first, "completed", inState(rivertype.JobStateCompleted))
		second := insert(t, b, webhookArgs{EventID: "evt_5", Amount: 99}, nil)
		job := waitJob(t, b, second, "cancelled", inState(rivertype.JobStateCancelled))
		require.Len(t, job.Errors, 1)
		require.Contains(t, job.Errors[0].Error, idem.ErrKeyReused.Error())
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []int{10}, amounts)
	})
}
