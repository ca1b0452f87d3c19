package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/unstucktest/fakeworkspace"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

// engine is what the tests use of a *saga.Runner, whatever its
// transaction type.
type engine interface {
	Start(ctx context.Context, typ string, input any, opts *saga.StartOpts) (sagadriver.Operation, error)
	Get(ctx context.Context, id string) (sagadriver.Operation, error)
	Events(ctx context.Context, id string) ([]sagadriver.Event, error)
	Findings(ctx context.Context, id string, open bool) ([]sagadriver.Finding, error)
	RetryStep(ctx context.Context, p saga.ActionParams) (saga.Change, error)
	ConfirmStep(ctx context.Context, p saga.ConfirmParams) (saga.Change, error)
	StartCompensation(ctx context.Context, p saga.ActionParams) (saga.Change, error)
	Resolve(ctx context.Context, p saga.ActionParams, to sagadriver.Status) (saga.Change, error)
	Reconcile(ctx context.Context) ([]sagadriver.Finding, error)
	ClockSkew(ctx context.Context) (time.Duration, error)
	PlanRedrive(ctx context.Context, p saga.RedriveParams) (saga.RedrivePlan, error)
	Redrive(ctx context.Context, p saga.RedriveParams) (saga.Change, error)
}

// world is the outside of the saga: local accounts in a real table, the
// workspace provider, and a welcome mailer.
type world struct {
	provider *fakeworkspace.Provider
	exec     func(ctx context.Context, query string, args ...any) error
	count    func(ctx context.Context, query string, args ...any) int

	mu          sync.Mutex
	welcomes    map[string]int
	welcomeFail map[string]error
	block       map[string]chan struct{} // step → released when closed
}

func (w *world) welcomeCount(op string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.welcomes[op]
}

type signupInput struct {
	Email string `json:"email"`
}

func classifyWorkspace(err error) error {
	var werr *fakeworkspace.Error
	switch {
	case errors.As(err, &werr) && werr.Timeout():
		return saga.Uncertain(err)
	case errors.As(err, &werr) && werr.Status < 500:
		return saga.Permanent(err)
	}
	return err
}

func (w *world) definition() saga.Definition {
	fast := saga.RetryPolicy{MaxAttempts: 3, Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}
	return saga.Definition{Type: "signup", Steps: []saga.Step{
		{
			Name: "account", System: "local", Kind: sagadriver.Compensatable, Retry: fast, CompensationRetry: fast,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				var input signupInput
				if err := in.Decode(&input); err != nil {
					return saga.Result{}, saga.Permanent(err)
				}
				w.wait(ctx, "account")
				err := w.exec(ctx, `INSERT INTO test_account (key, email, active, disables) VALUES ($1, $2, 1, 0) ON CONFLICT (key) DO NOTHING`, in.Key, input.Email)
				return saga.Result{ExternalID: in.Key}, err
			},
			Compensate: func(ctx context.Context, in saga.StepInput) error {
				return w.exec(ctx, `UPDATE test_account SET active = 0, disables = disables + 1 WHERE key = $1 AND active = 1`, in.StepKey)
			},
		},
		{
			Name: "workspace", System: "workspace-provider", Kind: sagadriver.Pivot, Retry: fast, CompensationRetry: fast,
			VerifyAfter: 50 * time.Millisecond, MaxVerifications: 3, CompensateOnFailure: true, Timeout: 5 * time.Second,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				var input signupInput
				if err := in.Decode(&input); err != nil {
					return saga.Result{}, saga.Permanent(err)
				}
				w.wait(ctx, "workspace")
				ws, err := w.provider.Create(ctx, in.Key, input.Email)
				if err != nil {
					return saga.Result{}, classifyWorkspace(err)
				}
				return saga.Result{ExternalID: ws.ID}, nil
			},
			Verify: func(ctx context.Context, in saga.StepInput) (saga.Verification, error) {
				ws, ok, err := w.provider.Lookup(ctx, in.StepKey)
				switch {
				case err != nil:
					return saga.Verification{}, err
				case !ok:
					return saga.Verification{Outcome: saga.NotApplied}, nil
				}
				return saga.Verification{Outcome: saga.Applied, Result: saga.Result{ExternalID: ws.ID}}, nil
			},
			Compensate: func(ctx context.Context, in saga.StepInput) error {
				return classifyWorkspace(w.provider.Delete(ctx, in.StepKey))
			},
		},
		{
			Name: "welcome", System: "mailer", Kind: sagadriver.Retriable, Retry: fast,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				w.wait(ctx, "welcome")
				w.mu.Lock()
				defer w.mu.Unlock()
				if err := w.welcomeFail[in.OperationID]; err != nil {
					return saga.Result{}, err
				}
				w.welcomes[in.OperationID]++
				return saga.Result{}, nil
			},
		},
	}}
}

// wait blocks while step is blocked.
func (w *world) wait(ctx context.Context, step string) {
	w.mu.Lock()
	ch := w.block[step]
	w.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// bundle is one database with a running River client and runner.
type bundle struct {
	*world
	eng engine
	// metrics gathers the runner's Collector.
	metrics *prometheus.Registry
	insert  func(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	// restart stops the client (cancelling running jobs when hard) and
	// starts a new one on the same database.
	restart func(hard bool)
	// redefine stops the client and starts a new runner and client whose
	// config opts change (new definitions: a deployment of a new version).
	redefine func(opts ...func(*saga.Config))
	// console is a runner without definitions, as a console in its own
	// process has: its jobs are worked by eng's client.
	console engine
}

type backend struct {
	name string
	// setup starts a bundle; opts change the runner's config.
	setup func(t *testing.T, opts ...func(*saga.Config)) *bundle
}

var backends = []backend{
	{name: "PostgreSQL", setup: func(t *testing.T, opts ...func(*saga.Config)) *bundle {
		t.Helper()
		pool := pgtest.Schema(t)
		w := newWorld()
		w.exec = func(ctx context.Context, q string, args ...any) error {
			_, err := pool.Exec(ctx, q, args...)
			return err
		}
		w.count = func(ctx context.Context, q string, args ...any) int {
			var n int
			require.NoError(t, pool.QueryRow(ctx, q, args...).Scan(&n))
			return n
		}
		return start[pgx.Tx](t, w, sagapgx.New(pool), riverpgxv5.New(pool), opts...)
	}},
	{name: "SQLite", setup: func(t *testing.T, opts ...func(*saga.Config)) *bundle {
		t.Helper()
		db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "saga.db"))
		require.NoError(t, err)
		db.SetMaxOpenConns(1) // riversqlite's advice
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		w := newWorld()
		rebind := func(q string) string { return strings.ReplaceAll(q, "$", "?") }
		w.exec = func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, rebind(q), args...)
			return err
		}
		w.count = func(ctx context.Context, q string, args ...any) int {
			var n int
			require.NoError(t, db.QueryRowContext(ctx, rebind(q), args...).Scan(&n))
			return n
		}
		return start[*sql.Tx](t, w, sagasqlite.New(db), riversqlite.New(db), opts...)
	}},
}

func newWorld() *world {
	return &world{provider: fakeworkspace.New(), welcomes: map[string]int{}, welcomeFail: map[string]error{}, block: map[string]chan struct{}{}}
}

func start[TTx any](t *testing.T, w *world, d sagadriver.Driver[TTx], rd riverdriver.Driver[TTx], opts ...func(*saga.Config)) *bundle {
	t.Helper()
	ctx := t.Context()
	migrator, err := rivermigrate.New(rd, nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	require.NoError(t, d.Migrate(ctx))
	require.NoError(t, d.Migrate(ctx), "migrating twice changes nothing")
	require.NoError(t, w.exec(ctx, `CREATE TABLE test_account (key TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, active INTEGER NOT NULL, disables INTEGER NOT NULL)`))

	newRunner := func(opts []func(*saga.Config)) *saga.Runner[TTx] {
		cfg := saga.Config{Definitions: []saga.Definition{w.definition()}, StuckAfter: time.Hour, Logger: slog.New(slog.DiscardHandler)}
		for _, o := range opts {
			o(&cfg)
		}
		runner, err := saga.NewRunner(d, cfg)
		require.NoError(t, err)
		return runner
	}
	runner := newRunner(opts)
	newClient := func() *river.Client[TTx] {
		workers := river.NewWorkers()
		require.NoError(t, runner.AddWorkers(workers))
		client, err := river.NewClient(rd, &river.Config{
			FetchCooldown:     10 * time.Millisecond,
			FetchPollInterval: 50 * time.Millisecond,
			Queues:            map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 4}},
			TestOnly:          true,
			Workers:           workers,
		})
		require.NoError(t, err)
		return client
	}
	var mu sync.Mutex
	client := newClient()
	runner.SetClient(client)
	require.NoError(t, client.Start(context.Background()))
	stop := func(hard bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mu.Lock()
		c := client
		mu.Unlock()
		if hard {
			require.NoError(t, c.StopAndCancel(ctx))
		} else {
			require.NoError(t, c.Stop(ctx))
		}
	}
	t.Cleanup(func() {
		w.mu.Lock()
		for k, ch := range w.block {
			close(ch)
			delete(w.block, k)
		}
		w.mu.Unlock()
		stop(true)
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(saga.NewCollector(runner, 5*time.Second))
	bare, err := saga.NewRunner(d, saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	bare.SetClient(client)
	b := &bundle{world: w, eng: runner, metrics: reg, console: bare}
	b.insert = func(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
		mu.Lock()
		defer mu.Unlock()
		return client.Insert(ctx, args, opts)
	}
	b.restart = func(hard bool) {
		stop(hard)
		c := newClient()
		mu.Lock()
		client = c
		mu.Unlock()
		runner.SetClient(c)
		bare.SetClient(c)
		require.NoError(t, c.Start(context.Background()))
	}
	b.redefine = func(opts ...func(*saga.Config)) {
		runner = newRunner(opts)
		b.eng = runner
		b.restart(false)
	}
	return b
}

func forEachBackend(t *testing.T, test func(t *testing.T, b *bundle)) {
	t.Helper()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			test(t, be.setup(t))
		})
	}
}

// waitFor polls the operation until cond holds, failing after 20s.
func waitFor(t *testing.T, b *bundle, id string, what string, cond func(sagadriver.Operation) bool) sagadriver.Operation {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		op, err := b.eng.Get(t.Context(), id)
		require.NoError(t, err)
		if cond(op) {
			return op
		}
		if time.Now().After(deadline) {
			evs, _ := b.eng.Events(t.Context(), id)
			var hist []string
			for _, e := range evs {
				hist = append(hist, fmt.Sprintf("%s %s %s→%s %s", e.Step, e.Action, e.From, e.To, e.Message))
			}
			t.Fatalf("operation %s: %s not reached in 20s; status %s, last error %q\n%s", id, what, op.Status, op.LastError, strings.Join(hist, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitStatus(t *testing.T, b *bundle, id string, s sagadriver.Status) sagadriver.Operation {
	t.Helper()
	return waitFor(t, b, id, string(s), func(op sagadriver.Operation) bool { return op.Status == s })
}

func startSignup(t *testing.T, b *bundle, email string) string {
	t.Helper()
	id := fmt.Sprintf("op-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	op, err := b.eng.Start(t.Context(), "signup", signupInput{Email: email}, &saga.StartOpts{ID: id, CorrelationID: email})
	require.NoError(t, err)
	require.Equal(t, sagadriver.StatusPending, op.Status)
	return op.ID
}

func step(t *testing.T, op sagadriver.Operation, name string) sagadriver.StepRecord {
	t.Helper()
	st, ok := op.Step(name)
	require.True(t, ok, "step %s", name)
	return *st
}

// requireInvariants checks the business invariants of SPEC G11 for one
// signup: exactly one account row, at most one workspace at the provider,
// each compensation applied at most once.
func requireInvariants(t *testing.T, b *bundle, id string) {
	t.Helper()
	ctx := t.Context()
	require.Equal(t, 1, b.count(ctx, `SELECT COUNT(*) FROM test_account WHERE key = $1`, id+"/account"), "exactly one account")
	require.LessOrEqual(t, b.count(ctx, `SELECT MAX(disables) FROM test_account WHERE key = $1`, id+"/account"), 1, "account disabled at most once")
	_, effects, deletes := b.provider.Counts(id + "/workspace")
	require.LessOrEqual(t, effects, 1, "at most one workspace made")
	require.LessOrEqual(t, deletes, 1, "workspace deleted at most once")
}

func accountActive(t *testing.T, b *bundle, id string) bool {
	t.Helper()
	return b.count(t.Context(), `SELECT active FROM test_account WHERE key = $1`, id+"/account") == 1
}

func TestStartRunsEveryStepG4(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := startSignup(t, b, "happy@example.com")
		op := waitStatus(t, b, id, sagadriver.StatusCompleted)
		require.NotNil(t, op.FinishedAt)
		for _, st := range op.Steps {
			require.Equal(t, sagadriver.StepCompleted, st.Status, st.Name)
			require.Equal(t, 1, st.Attempts, st.Name)
			require.Equal(t, id+"/"+st.Name, st.Key)
		}
		ws := step(t, op, "workspace")
		require.NotEmpty(t, ws.ExternalID)
		require.Equal(t, 1, b.welcomeCount(id))
		requireInvariants(t, b, id)
		require.True(t, accountActive(t, b, id))

		evs, err := b.eng.Events(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, "started", evs[0].Action)
		require.Equal(t, string(sagadriver.StatusCompleted), evs[len(evs)-1].To)

		_, err = b.eng.Start(t.Context(), "signup", signupInput{Email: "x@example.com"}, &saga.StartOpts{ID: id})
		require.ErrorIs(t, err, saga.ErrExists)
		_, err = b.eng.Get(t.Context(), "nope")
		require.ErrorIs(t, err, saga.ErrNotFound)
	})
}

func TestF1TransientBeforeEffectRetriesWithSameKey(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f1-%d", time.Now().UnixNano())
		b.provider.Inject(id+"/workspace", fakeworkspace.ErrorBefore, fakeworkspace.ErrorBefore)
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f1@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusCompleted)
		require.Equal(t, 3, step(t, op, "workspace").Attempts)
		creates, effects, _ := b.provider.Counts(id + "/workspace")
		require.Equal(t, 3, creates)
		require.Equal(t, 1, effects)
		requireInvariants(t, b, id)
		evs, err := b.eng.Events(t.Context(), id)
		require.NoError(t, err)
		retrying := 0
		for _, e := range evs {
			if e.Action == "step_retrying" {
				retrying++
				require.Contains(t, e.Message, "unavailable")
			}
		}
		require.Equal(t, 2, retrying)
	})
}

func TestF1G7TransientExhaustedAtPivotCompensates(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f1x-%d", time.Now().UnixNano())
		b.provider.Inject(id+"/workspace", fakeworkspace.ErrorBefore, fakeworkspace.ErrorBefore, fakeworkspace.ErrorBefore)
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f1x@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusCompensated)
		ws := step(t, op, "workspace")
		require.Equal(t, 3, ws.Attempts)
		require.Contains(t, op.LastError, "retries_exhausted")
		require.False(t, accountActive(t, b, id))
		require.Equal(t, sagadriver.StepSkipped, step(t, op, "welcome").Status)
		requireInvariants(t, b, id)
	})
}

func TestF2TimeoutAfterEffectIsVerifiedNotRepeated(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f2-%d", time.Now().UnixNano())
		b.provider.Inject(id+"/workspace", fakeworkspace.TimeoutAfter)
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f2@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusCompleted)
		ws := step(t, op, "workspace")
		require.Equal(t, 1, ws.Attempts, "no second Do")
		require.Equal(t, 1, ws.Verifications)
		require.NotEmpty(t, ws.ExternalID, "verification recorded the workspace")
		creates, effects, _ := b.provider.Counts(id + "/workspace")
		require.Equal(t, 1, creates)
		require.Equal(t, 1, effects)
		require.Equal(t, 1, b.welcomeCount(id))
		requireInvariants(t, b, id)
	})
}

func TestF4F5DuplicateJobsChangeNothing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := startSignup(t, b, "f5@example.com")
		op := waitStatus(t, b, id, sagadriver.StatusCompleted)
		ws := step(t, op, "workspace")
		ref := saga.JobRef{OperationID: id, Step: "workspace", Generation: ws.Generation, Type: "signup"}
		// F5: the same job inserted again is skipped by River's uniqueness
		// while River keeps the first: proof that the first was completed
		// in the worker's transaction (JobCompleteTx).
		res, err := b.insert(t.Context(), saga.StepArgs{JobRef: ref}, &river.InsertOpts{Queue: saga.QueueDefault, UniqueOpts: river.UniqueOpts{ByArgs: true}})
		require.NoError(t, err)
		require.True(t, res.UniqueSkippedAsDuplicate)
		require.Equal(t, rivertype.JobStateCompleted, res.Job.State, "completed with the step's record")
		// F4/F5: delivered again anyway (no uniqueness, as after River's
		// retention deleted the first): the worker sees a terminal step and
		// does nothing.
		for _, args := range []river.JobArgs{saga.StepArgs{JobRef: ref}, saga.CompensateArgs{JobRef: ref}, saga.VerifyArgs{JobRef: ref}} {
			res, err = b.insert(t.Context(), args, &river.InsertOpts{Queue: saga.QueueDefault})
			require.NoError(t, err)
			require.False(t, res.UniqueSkippedAsDuplicate)
		}
		time.Sleep(500 * time.Millisecond)
		after, err := b.eng.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusCompleted, after.Status)
		creates, effects, deletes := b.provider.Counts(id + "/workspace")
		require.Equal(t, []int{1, 1, 0}, []int{creates, effects, deletes})
		require.Equal(t, 1, b.welcomeCount(id))
		requireInvariants(t, b, id)
	})
}

func TestF6PermanentAtPivotCompensatesInReverse(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f6-%d", time.Now().UnixNano())
		b.provider.Inject(id+"/workspace", fakeworkspace.ActivateRefused)
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f6@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusCompensated)
		require.Equal(t, sagadriver.StepCompensated, step(t, op, "account").Status)
		require.Equal(t, sagadriver.StepCompensated, step(t, op, "workspace").Status, "its partial effect was undone")
		require.Equal(t, sagadriver.StepSkipped, step(t, op, "welcome").Status)
		require.Empty(t, b.provider.Workspaces())
		require.False(t, accountActive(t, b, id))
		require.Zero(t, b.welcomeCount(id))
		requireInvariants(t, b, id)
		_, _, deletes := b.provider.Counts(id + "/workspace")
		require.Equal(t, 1, deletes)
		// Reverse order: the workspace was compensated before the account.
		evs, err := b.eng.Events(t.Context(), id)
		require.NoError(t, err)
		var order []string
		for _, e := range evs {
			if e.Action == "compensated" {
				order = append(order, e.Step)
			}
		}
		require.Equal(t, []string{"workspace", "account"}, order)
	})
}

func TestF7PermanentAtRetriableStepNeedsReview(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f7-%d", time.Now().UnixNano())
		b.mu.Lock()
		b.welcomeFail[id] = saga.Permanent(errors.New("mailbox does not exist"))
		b.mu.Unlock()
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f7@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusReviewRequired)
		require.Equal(t, "permanent_failure", op.ReviewReason)
		require.Contains(t, op.LastError, "mailbox does not exist")
		require.Equal(t, sagadriver.StepFailed, step(t, op, "welcome").Status)
		for _, st := range op.Steps {
			require.Equal(t, sagadriver.CompNone, st.CompStatus, "no compensation after the pivot")
		}
		require.True(t, accountActive(t, b, id))
		require.Len(t, b.provider.Workspaces(), 1)

		// G9: the operator fixes the mailbox and retries the step.
		b.mu.Lock()
		delete(b.welcomeFail, id)
		b.mu.Unlock()
		_, err = b.eng.RetryStep(t.Context(), saga.ActionParams{OperationID: id, Step: "welcome", Version: op.Version - 1, Actor: "ann"})
		require.ErrorIs(t, err, saga.ErrStale)
		_, err = b.eng.RetryStep(t.Context(), saga.ActionParams{OperationID: id, Step: "account", Version: op.Version, Actor: "ann"})
		var te *saga.TransitionError
		require.ErrorAs(t, err, &te, "a completed step cannot be retried")
		ch, err := b.eng.RetryStep(t.Context(), saga.ActionParams{OperationID: id, Step: "welcome", Version: op.Version, Actor: "ann", Note: "mailbox fixed"})
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusReviewRequired, ch.Before.Status)
		require.Equal(t, sagadriver.StatusRunning, ch.After.Status)
		waitStatus(t, b, id, sagadriver.StatusCompleted)
		require.Equal(t, 1, b.welcomeCount(id))
		requireInvariants(t, b, id)
	})
}

func TestF8CompensationFailureHaltsAndNeedsReview(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f8-%d", time.Now().UnixNano())
		key := id + "/workspace"
		b.provider.Inject(key, fakeworkspace.ActivateRefused)
		b.provider.InjectAlways(key, fakeworkspace.DeleteError)
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f8@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusReviewRequired)
		require.Equal(t, "compensation_failed", op.ReviewReason)
		ws := step(t, op, "workspace")
		require.Equal(t, sagadriver.StepCompensationFailed, ws.Status)
		require.Equal(t, sagadriver.CompFailed, ws.CompStatus)
		require.Equal(t, 3, ws.CompAttempts)
		require.Contains(t, ws.CompError, "could not delete")
		require.Contains(t, op.LastError, "workspace")
		acc := step(t, op, "account")
		require.Equal(t, sagadriver.CompPending, acc.CompStatus, "halted: the account is not compensated")
		require.True(t, accountActive(t, b, id))
		require.Len(t, b.provider.Workspaces(), 1, "the workspace is still there, visibly")

		// G10: the failed compensation and the review are measured.
		require.Equal(t, 1.0, gauge(t, b, "unstuck_saga_failed_compensations", ""))
		require.Equal(t, 1.0, gauge(t, b, "unstuck_saga_operations", "review_required"))
		require.Greater(t, gauge(t, b, "unstuck_saga_oldest_age_seconds", "review_required"), -1.0)

		// The operator has the provider fixed and retries the compensation.
		b.provider.InjectAlways(key, "")
		_, err = b.eng.RetryStep(t.Context(), saga.ActionParams{OperationID: id, Step: "workspace", Version: op.Version, Actor: "bob", Note: "provider fixed"})
		require.NoError(t, err)
		op = waitStatus(t, b, id, sagadriver.StatusCompensated)
		// The compensation succeeded on retry, so the
		// record no longer shows its old failure (the history keeps it).
		require.Empty(t, op.LastError, "last error of a compensated operation after a successful retry")
		require.Empty(t, b.provider.Workspaces())
		require.False(t, accountActive(t, b, id))
		require.Equal(t, 0.0, gauge(t, b, "unstuck_saga_failed_compensations", ""))
		require.Equal(t, 1.0, gauge(t, b, "unstuck_saga_operations", "compensated"))
		requireInvariants(t, b, id)

		// Running a compensation twice changes nothing.
		ref := saga.JobRef{OperationID: id, Step: "account", Generation: step(t, op, "account").Generation, Type: "signup"}
		_, err = b.insert(t.Context(), saga.CompensateArgs{JobRef: ref}, &river.InsertOpts{Queue: saga.QueueDefault})
		require.NoError(t, err)
		time.Sleep(300 * time.Millisecond)
		requireInvariants(t, b, id)
		require.Equal(t, 1, b.count(t.Context(), `SELECT disables FROM test_account WHERE key = $1`, id+"/account"))
	})
}

func TestF9NullCompensationSucceeds(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f9-%d", time.Now().UnixNano())
		b.provider.Inject(id+"/workspace", fakeworkspace.Refuse)
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f9@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusCompensated)
		ws := step(t, op, "workspace")
		require.Equal(t, sagadriver.StepCompensated, ws.Status, "compensated although nothing was made")
		require.Equal(t, 1, ws.CompAttempts)
		creates, effects, deletes := b.provider.Counts(id + "/workspace")
		require.Equal(t, []int{1, 0, 0}, []int{creates, effects, deletes})
		require.False(t, accountActive(t, b, id))
		requireInvariants(t, b, id)
	})
}

func TestF10ForwardAfterCompensationIsRefused(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		b.mu.Lock()
		release := make(chan struct{})
		b.block["account"] = release
		b.mu.Unlock()
		id := startSignup(t, b, "f10@example.com")
		op := waitFor(t, b, id, "account running", func(op sagadriver.Operation) bool {
			st, _ := op.Step("account")
			return st.Status == sagadriver.StepRunning
		})
		// The operator compensates while the account call is in flight. A
		// write of the running step may land between the read and the
		// decision (ErrStale); the operator then reloads and decides again,
		// as the console's 409 page makes them do. The step stays running
		// meanwhile: its call is blocked on release.
		_, err := b.eng.StartCompensation(t.Context(), saga.ActionParams{OperationID: id, Version: op.Version, Actor: "cy", Note: "fraud"})
		for tries := 0; errors.Is(err, saga.ErrStale) && tries < 5; tries++ {
			op, err = b.eng.Get(t.Context(), id)
			require.NoError(t, err)
			st, _ := op.Step("account")
			require.Equal(t, sagadriver.StepRunning, st.Status, "the account call is still in flight")
			_, err = b.eng.StartCompensation(t.Context(), saga.ActionParams{OperationID: id, Version: op.Version, Actor: "cy", Note: "fraud"})
		}
		require.NoError(t, err)
		b.mu.Lock()
		delete(b.block, "account")
		b.mu.Unlock()
		close(release)
		op = waitStatus(t, b, id, sagadriver.StatusCompensated)
		evs, err := b.eng.Events(t.Context(), id)
		require.NoError(t, err)
		// The compensation ran (null or not: the account call may have
		// landed before or after it) and the late answer was kept.
		actions := map[string]int{}
		for _, e := range evs {
			actions[e.Action]++
		}
		require.Equal(t, 1, actions["operator_compensate"])
		// The workspace step is never executed: its forward job, delivered
		// late, is refused.
		ref := saga.JobRef{OperationID: id, Step: "workspace", Generation: step(t, op, "workspace").Generation, Type: "signup"}
		_, err = b.insert(t.Context(), saga.StepArgs{JobRef: ref}, &river.InsertOpts{Queue: saga.QueueDefault})
		require.NoError(t, err)
		time.Sleep(300 * time.Millisecond)
		creates, _, _ := b.provider.Counts(id + "/workspace")
		require.Zero(t, creates)
		require.Equal(t, sagadriver.StepSkipped, step(t, op, "workspace").Status)
	})
}

func TestF11UncertainLoopIsCappedThenConfirmed(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("f11-%d", time.Now().UnixNano())
		key := id + "/workspace"
		b.provider.Inject(key, fakeworkspace.TimeoutAfter, fakeworkspace.LookupUnknown, fakeworkspace.LookupUnknown, fakeworkspace.LookupUnknown)
		_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: "f11@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusReviewRequired)
		require.Equal(t, "uncertain_unresolved", op.ReviewReason)
		ws := step(t, op, "workspace")
		require.Equal(t, sagadriver.StepUncertain, ws.Status)
		require.Equal(t, 3, ws.Verifications, "capped at MaxVerifications")
		creates, _, _ := b.provider.Counts(key)
		require.Equal(t, 1, creates, "never blindly repeated")

		// G9: the operator looks at the provider and confirms.
		found, ok, err := b.provider.Lookup(t.Context(), key)
		require.NoError(t, err)
		require.True(t, ok)
		_, err = b.eng.ConfirmStep(t.Context(), saga.ConfirmParams{ActionParams: saga.ActionParams{OperationID: id, Step: "workspace", Version: op.Version, Actor: "dee"},
			Happened: true, ExternalID: found.ID})
		var te *saga.TransitionError
		require.ErrorAs(t, err, &te, "a note is required")
		ch, err := b.eng.ConfirmStep(t.Context(), saga.ConfirmParams{ActionParams: saga.ActionParams{OperationID: id, Step: "workspace", Version: op.Version, Actor: "dee", Note: "seen in the provider console"},
			Happened: true, ExternalID: found.ID})
		require.NoError(t, err)
		require.Equal(t, sagadriver.StepUncertain, step(t, ch.Before, "workspace").Status)
		require.Equal(t, sagadriver.StepCompleted, step(t, ch.After, "workspace").Status)
		op = waitStatus(t, b, id, sagadriver.StatusCompleted)
		require.Equal(t, found.ID, step(t, op, "workspace").ExternalID)
		require.Equal(t, 1, b.welcomeCount(id))
		requireInvariants(t, b, id)
	})
}

func TestF12InterruptedWorkerReRunsIdempotently(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		b.mu.Lock()
		b.block["workspace"] = make(chan struct{})
		b.mu.Unlock()
		id := startSignup(t, b, "f12@example.com")
		waitFor(t, b, id, "workspace running", func(op sagadriver.Operation) bool {
			st, _ := op.Step("workspace")
			return st.Status == sagadriver.StepRunning
		})
		b.mu.Lock()
		delete(b.block, "workspace") // the next run is not blocked
		b.mu.Unlock()
		b.restart(true) // cancels the blocked call
		op := waitStatus(t, b, id, sagadriver.StatusCompleted)
		creates, effects, _ := b.provider.Counts(id + "/workspace")
		require.Equal(t, 1, effects)
		require.LessOrEqual(t, creates, 1, "the interrupted call never reached the provider")
		require.GreaterOrEqual(t, step(t, op, "workspace").Attempts, 2)
		requireInvariants(t, b, id)
	})
}

func TestF13ReconciliationOpensFindingsNeverFixesSilently(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		// Missing: we completed, the provider lost the workspace.
		done := startSignup(t, b, "f13a@example.com")
		waitStatus(t, b, done, sagadriver.StatusCompleted)
		// Orphan: we compensated, the provider has a workspace anyway.
		orphan := fmt.Sprintf("f13b-%d", time.Now().UnixNano())
		b.provider.Inject(orphan+"/workspace", fakeworkspace.Refuse)
		_, err := b.eng.Start(ctx, "signup", signupInput{Email: "f13b@example.com"}, &saga.StartOpts{ID: orphan})
		require.NoError(t, err)
		waitStatus(t, b, orphan, sagadriver.StatusCompensated)

		found, err := b.eng.Reconcile(ctx)
		require.NoError(t, err)
		require.Empty(t, found, "no drift, no finding")

		b.provider.Remove(done + "/workspace")
		ws := b.provider.Put(orphan+"/workspace", "f13b@example.com")
		found, err = b.eng.Reconcile(ctx)
		require.NoError(t, err)
		require.Len(t, found, 2)
		kinds := map[string]string{}
		for _, f := range found {
			kinds[f.OperationID] = f.Kind
		}
		require.Equal(t, sagadriver.FindingMissingExternal, kinds[done])
		require.Equal(t, sagadriver.FindingOrphanExternal, kinds[orphan])

		for _, id := range []string{done, orphan} {
			op, err := b.eng.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, sagadriver.StatusReviewRequired, op.Status, "raised, not fixed")
			require.Equal(t, "reconciliation_finding", op.ReviewReason)
		}
		op, err := b.eng.Get(ctx, orphan)
		require.NoError(t, err)
		require.Equal(t, sagadriver.StepCompensated, step(t, op, "workspace").Status, "the step is unchanged")
		require.Len(t, b.provider.Workspaces(), 1, "the orphan is not deleted silently")
		require.Equal(t, ws.ID, b.provider.Workspaces()[0].ID)

		found, err = b.eng.Reconcile(ctx)
		require.NoError(t, err)
		require.Empty(t, found, "an open finding is not opened twice")

		// The operator deletes the orphan by hand and resolves.
		b.provider.Remove(orphan + "/workspace")
		ch, err := b.eng.Resolve(ctx, saga.ActionParams{OperationID: orphan, Version: op.Version, Actor: "eve", Note: "orphan deleted by hand"}, sagadriver.StatusCompensated)
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusCompensated, ch.After.Status)
		open, err := b.eng.Findings(ctx, orphan, true)
		require.NoError(t, err)
		require.Empty(t, open)
		require.Equal(t, 1.0, gauge(t, b, "unstuck_saga_open_findings", ""), "the other finding is still open")
		age := gauge(t, b, "unstuck_saga_oldest_open_finding_age_seconds", "")
		require.Greater(t, age, 0.0, "the open finding's age")
		require.Less(t, age, 600.0, "ages on the database's clock")
		all, err := b.eng.Findings(ctx, "", false)
		require.NoError(t, err)
		require.Len(t, all, 2)
	})
}

// gauge returns the value of the gauge name (with status label, if not
// empty) gathered from the runner's collector.
func gauge(t *testing.T, b *bundle, name, status string) float64 {
	t.Helper()
	mfs, err := b.metrics.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if status == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == status) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{status=%q}", name, status)
	return 0
}

// TestG8AcceptedFindingStaysAccepted: an operator
// confirms a step with an identifier the provider does not have under the
// step's key, reconciliation raises missing_external, the operator
// resolves the operation as completed — and later reconciliations leave it
// completed with the one, accepted, finding. Only a new difference (the
// provider now has another workspace under the key) reopens it, and the
// new finding says what changed and which finding it supersedes.
func TestG8AcceptedFindingStaysAccepted(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		id := fmt.Sprintf("g8a-%d", time.Now().UnixNano())
		key := id + "/workspace"
		b.provider.Inject(key, fakeworkspace.TimeoutAfter, fakeworkspace.LookupUnknown, fakeworkspace.LookupUnknown, fakeworkspace.LookupUnknown)
		_, err := b.eng.Start(ctx, "signup", signupInput{Email: "g8a@example.com"}, &saga.StartOpts{ID: id})
		require.NoError(t, err)
		op := waitStatus(t, b, id, sagadriver.StatusReviewRequired)
		b.provider.Remove(key) // the provider lost it; the operator has another ID
		_, err = b.eng.ConfirmStep(ctx, saga.ConfirmParams{ActionParams: saga.ActionParams{OperationID: id, Step: "workspace", Version: op.Version,
			Actor: "ann", Note: "provider support says ws_manual is it"}, Happened: true, ExternalID: "ws_manual"})
		require.NoError(t, err)
		op = waitStatus(t, b, id, sagadriver.StatusCompleted)

		found, err := b.eng.Reconcile(ctx)
		require.NoError(t, err)
		require.Len(t, found, 1)
		require.Equal(t, sagadriver.FindingMissingExternal, found[0].Kind)
		first := found[0]
		op, err = b.eng.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusReviewRequired, op.Status)
		_, err = b.eng.Resolve(ctx, saga.ActionParams{OperationID: id, Version: op.Version, Actor: "ann", Note: "ws_manual is right; the provider files it elsewhere"}, sagadriver.StatusCompleted)
		require.NoError(t, err)

		for range 3 {
			found, err = b.eng.Reconcile(ctx)
			require.NoError(t, err)
			require.Empty(t, found, "an accepted difference is not found again")
		}
		op, err = b.eng.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusCompleted, op.Status, "the resolution stays")
		all, err := b.eng.Findings(ctx, id, false)
		require.NoError(t, err)
		require.Len(t, all, 1)
		require.NotNil(t, all[0].ResolvedAt)
		require.Equal(t, "operator:ann", all[0].ResolvedBy)
		require.Contains(t, all[0].Fingerprint, `"ws_manual"`)

		// A new fact: the provider now has a workspace under the key, and
		// it is not ws_manual.
		ws := b.provider.Put(key, "g8a@example.com")
		found, err = b.eng.Reconcile(ctx)
		require.NoError(t, err)
		require.Len(t, found, 1, "a new difference reopens")
		require.Equal(t, first.ID, found[0].Supersedes)
		require.Contains(t, found[0].Detail, "reopened")
		require.Contains(t, found[0].Detail, ws.ID)
		op, err = b.eng.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusReviewRequired, op.Status)
		require.Equal(t, "reconciliation_finding", op.ReviewReason)
		require.Contains(t, op.LastError, fmt.Sprintf("reopened: differs from finding #%d", first.ID), "the operator sees why")
		found, err = b.eng.Reconcile(ctx)
		require.NoError(t, err)
		require.Empty(t, found)
	})
}

// TestClockSkewIsReportedAndDelaysNothingG10: with the
// application's clock 10 minutes ahead of the database's, the skew is
// measured, logged and exported, and the records keep the database's
// clock, so an operation (here through an uncertain step, verified after
// VerifyAfter) completes without waiting for the clocks to agree.
func TestClockSkewIsReportedAndDelaysNothingG10(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			const ahead = 10 * time.Minute
			logs := &syncLog{}
			b := be.setup(t, func(c *saga.Config) {
				c.NowFunc = func() time.Time { return time.Now().Add(ahead) }
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			ctx := t.Context()
			skew, err := b.eng.ClockSkew(ctx)
			require.NoError(t, err)
			require.InDelta(t, ahead.Seconds(), skew.Seconds(), 2, "app − database")
			require.Contains(t, logs.String(), "level=WARN msg=\"saga: the application's clock and the database's disagree", "a warning above 2 s")
			require.InDelta(t, ahead.Seconds(), gauge(t, b, "unstuck_clock_skew_seconds", ""), 2)

			id := fmt.Sprintf("skew-%d", time.Now().UnixNano())
			b.provider.Inject(id+"/workspace", fakeworkspace.TimeoutAfter)
			began := time.Now()
			_, err = b.eng.Start(ctx, "signup", signupInput{Email: "skew@example.com"}, &saga.StartOpts{ID: id})
			require.NoError(t, err)
			op := waitStatus(t, b, id, sagadriver.StatusCompleted)
			require.Equal(t, 1, step(t, op, "workspace").Verifications)
			// The database's clock (PostgreSQL's, or the process's for
			// SQLite), not the application's 10 minutes ahead.
			require.WithinDuration(t, began, op.CreatedAt, time.Minute)
			require.WithinDuration(t, began, *op.FinishedAt, time.Minute)
			evs, err := b.eng.Events(ctx, id)
			require.NoError(t, err)
			for _, e := range evs {
				require.WithinDuration(t, began, e.At, time.Minute, "event %s", e.Action)
			}
			require.Less(t, gauge(t, b, "unstuck_saga_oldest_age_seconds", "running"), 60.0, "ages on the database's clock")
		})
	}
}

// syncLog is a log sink safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
