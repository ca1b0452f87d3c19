package ops_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// sagaBundle is a saga runner with an insert-only River client (no
// workers: the jobs a decision inserts stay queued), the operation
// decisions over it and the audit trail.
type sagaBundle struct {
	ops   operationDecisions
	trail *audit.Trail
	// insert records op through the saga driver, as the engine does.
	insert func(t *testing.T, op sagadriver.Operation)
	// get reads an operation through the runner.
	get func(t *testing.T, id string) sagadriver.Operation
	// jobs counts River jobs of kind.
	jobs func(t *testing.T, kind string) int
	// try runs one operator action in a transaction that is rolled back,
	// and returns the engine's answer (for TestLegalMatchesTheEngine).
	try func(t *testing.T, op sagadriver.Operation, d ops.OperationDecision) error
	// exec runs a statement on the test's own database, as its owner;
	// names runs a query of one text column there.
	exec  func(t testing.TB, query string)
	names func(t testing.TB, query string) []string
}

var sagaBackends = map[string]func(t *testing.T) *sagaBundle{
	"SQLite": func(t *testing.T) *sagaBundle {
		path := filepath.Join(t.TempDir(), "ops-sagas.db")
		db, err := idemsqlite.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		riverDB, err := ops.OpenImmediate(t.Context(), db)
		require.NoError(t, err)
		t.Cleanup(func() { _ = riverDB.Close() })
		trail := audit.NewSQLite(db, audit.WithKeys(testAuditKeys))
		decisions, err := ops.SQLite(riverDB, trail, store.NewSQLite(db), nil)
		require.NoError(t, err)
		b := newSagaBundle(t, riversqlite.New(riverDB), sagasqlite.New(riverDB), decisions, trail)
		b.exec = func(t testing.TB, query string) {
			t.Helper()
			_, err := db.ExecContext(context.Background(), query)
			require.NoError(t, err, query)
		}
		b.names = func(t testing.TB, query string) []string { return sqlNames(t, db, query) }
		b.jobs = func(t *testing.T, kind string) int {
			var n int
			require.NoError(t, db.QueryRowContext(t.Context(), `SELECT count(*) FROM river_job WHERE kind = ?`, kind).Scan(&n))
			return n
		}
		return b
	},
	"PostgreSQL": func(t *testing.T) *sagaBundle {
		pool := pgtest.Schema(t)
		trail := audit.NewPostgres(pool, audit.WithKeys(testAuditKeys))
		decisions, err := ops.Postgres(pool, trail, store.NewPostgres(pool), nil)
		require.NoError(t, err)
		b := newSagaBundle(t, riverpgxv5.New(pool), sagapgx.New(pool), decisions, trail)
		b.exec = func(t testing.TB, query string) {
			t.Helper()
			_, err := pool.Exec(context.Background(), query)
			require.NoError(t, err, query)
		}
		b.names = func(t testing.TB, query string) []string { return pgNames(t, pool, query) }
		b.jobs = func(t *testing.T, kind string) int {
			var n int
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = $1`, kind).Scan(&n))
			return n
		}
		return b
	},
}

var errRollback = errors.New("roll back")

// operationDecisions is an *ops.Operations of any backend's transaction
// type.
type operationDecisions interface {
	Decide(ctx context.Context, actor ops.Actor, d ops.OperationDecision) (ops.OperationResult, error)
	History(ctx context.Context, id string, limit int) ([]audit.Entry, error)
}

func newSagaBundle[TTx any](t *testing.T, rd riverdriver.Driver[TTx], sd sagadriver.Driver[TTx], db *ops.DB[TTx], trail *audit.Trail) *sagaBundle {
	t.Helper()
	ctx := t.Context()
	migrator, err := rivermigrate.New(rd, nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	require.NoError(t, sd.Migrate(ctx))
	require.NoError(t, trail.Migrate(ctx))
	// No definitions: operator actions need only the records.
	runner, err := saga.NewRunner(sd, saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	client, err := river.NewClient(rd, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	runner.SetClient(client)
	decisions, err := ops.NewOperations(db, runner)
	require.NoError(t, err)
	return &sagaBundle{ops: decisions, trail: trail,
		insert: func(t *testing.T, op sagadriver.Operation) {
			require.NoError(t, sd.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
				return sd.InsertOperation(ctx, tx, &op)
			}))
		},
		get: func(t *testing.T, id string) sagadriver.Operation {
			op, err := runner.Get(t.Context(), id)
			require.NoError(t, err)
			return op
		},
		try: func(t *testing.T, op sagadriver.Operation, d ops.OperationDecision) error {
			var applied error
			err := sd.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
				p := saga.ActionParams{OperationID: op.ID, Step: d.Step, Version: op.Version, Actor: "probe", Note: "probing the engine's rules"}
				switch d.Action {
				case ops.OperationRetry:
					_, applied = runner.RetryStepTx(ctx, tx, p)
				case ops.OperationConfirm:
					_, applied = runner.ConfirmStepTx(ctx, tx, saga.ConfirmParams{ActionParams: p, Happened: d.Happened})
				case ops.OperationCompensate:
					_, applied = runner.StartCompensationTx(ctx, tx, p)
				case ops.OperationResolve:
					_, applied = runner.ResolveTx(ctx, tx, p, sagadriver.StatusCompleted)
				}
				return errRollback
			})
			require.ErrorIs(t, err, errRollback)
			return applied
		},
	}
}

// The operations the tests decide on, in the states the engine leaves
// them in.
func step(name string, kind sagadriver.Kind, status sagadriver.StepStatus, comp sagadriver.CompStatus) sagadriver.StepRecord {
	return sagadriver.StepRecord{Name: name, Kind: kind, Status: status, CompStatus: comp, MaxAttempts: 4, CompMaxAttempts: 3,
		Compensable: kind != sagadriver.Retriable, Attempts: 1}
}

func operation(id string, status sagadriver.Status, steps ...sagadriver.StepRecord) sagadriver.Operation {
	at := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	op := sagadriver.Operation{ID: id, Type: "signup", Status: status, CorrelationID: "corr-" + id, Input: []byte(`{"email":"ann@example.com"}`),
		CurrentStep: steps[0].Name, Version: 5, CreatedAt: at, UpdatedAt: at}
	for i, st := range steps {
		st.Seq, st.Key, st.CompKey, st.CompSeq, st.Generation, st.UpdatedAt = i, id+"/"+st.Name, id+"/"+st.Name+"/compensate", len(steps)-i, 1, at
		op.Steps = append(op.Steps, st)
	}
	if status == sagadriver.StatusReviewRequired {
		op.ReviewReason = "uncertain_unresolved"
	}
	return op
}

// uncertainPivot is under review: its account completed, its workspace's
// outcome unknown, its welcome not reached.
func uncertainPivot(id string) sagadriver.Operation {
	return operation(id, sagadriver.StatusReviewRequired,
		step("account", sagadriver.Compensatable, sagadriver.StepCompleted, sagadriver.CompNone),
		step("workspace", sagadriver.Pivot, sagadriver.StepUncertain, sagadriver.CompNone),
		step("welcome", sagadriver.Retriable, sagadriver.StepPending, sagadriver.CompNone))
}

func TestOperationDecisions(t *testing.T) {
	t.Parallel()
	for name, backend := range sagaBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			t.Run("EightConcurrentSessionsApplyOnce", func(t *testing.T) {
				t.Parallel()
				b := backend(t)
				op := uncertainPivot("op-concurrent")
				b.insert(t, op)
				decisions := []ops.OperationDecision{
					{Action: ops.OperationConfirm, Step: "workspace", Happened: true, ExternalID: "ws-1"},
					{Action: ops.OperationCompensate},
					{Action: ops.OperationRetry, Step: "workspace"},
				}
				type answer struct {
					d   ops.OperationDecision
					err error
				}
				var wg sync.WaitGroup
				answers := make(chan answer, 8)
				start := make(chan struct{})
				for i := range 8 {
					d := decisions[i%len(decisions)]
					d.ID, d.Version, d.Reason = op.ID, op.Version, fmt.Sprintf("operator %d looked at the workspace provider", i)
					wg.Go(func() {
						<-start
						_, err := b.ops.Decide(context.Background(), ops.Actor{Username: fmt.Sprintf("op%d", i), Role: "oncall", RequestID: fmt.Sprintf("req-%d", i)}, d)
						answers <- answer{d, err}
					})
				}
				close(start)
				wg.Wait()
				close(answers)
				var winner ops.OperationDecision
				applied, conflicts := 0, 0
				for a := range answers {
					switch {
					case a.err == nil:
						applied++
						winner = a.d
					case errors.Is(a.err, ops.ErrStale):
						conflicts++
					default:
						t.Fatalf("unexpected error: %v", a.err)
					}
				}
				require.Equal(t, 1, applied, "exactly one decision applies")
				require.Equal(t, 7, conflicts, "the others are told the operation changed (409)")

				got := b.get(t, op.ID)
				require.Equal(t, op.Version+1, got.Version, "one change")
				entries, _, err := b.trail.List(context.Background(), audit.Filter{TargetKind: "operation", TargetID: op.ID})
				require.NoError(t, err)
				require.Len(t, entries, 8, "every attempt has exactly one audit entry")
				outcomes, requests := map[string]int{}, map[string]bool{}
				for _, e := range entries {
					outcomes[e.Outcome]++
					require.False(t, requests[e.RequestID], "one entry per attempt: %s twice", e.RequestID)
					requests[e.RequestID] = true
					if e.Outcome == audit.OutcomeApplied {
						require.Equal(t, "operation."+string(winner.Action), e.Action)
						require.Contains(t, string(e.Before), `"status":"review_required"`)
						require.Contains(t, string(e.After), fmt.Sprintf(`"version":%d`, op.Version+1))
						require.NotContains(t, string(e.After), "ann@example.com", "the input is not copied into the trail")
					} else {
						require.Contains(t, e.Reason, "refused")
						require.Contains(t, string(e.Before), fmt.Sprintf(`"version":%d`, op.Version+1), "a conflict records the state it met")
						require.Empty(t, e.After)
					}
				}
				require.Equal(t, map[string]int{audit.OutcomeApplied: 1, audit.OutcomeConflict: 7}, outcomes)
				v, err := b.trail.Verify(context.Background())
				require.NoError(t, err)
				require.True(t, v.OK, v.Problem)
			})

			t.Run("EachActionGoesThroughTheEngine", func(t *testing.T) {
				t.Parallel()
				b := backend(t)
				actor := ops.Actor{Username: "ada", Role: "oncall", RequestID: "req-1", ClientAddr: "10.0.0.1", UserAgent: "test"}

				retry := uncertainPivot("op-retry")
				b.insert(t, retry)
				res, err := b.ops.Decide(context.Background(), actor, ops.OperationDecision{ID: retry.ID, Version: retry.Version,
					Action: ops.OperationRetry, Step: "workspace", Reason: "the provider is back up after the outage"})
				require.NoError(t, err)
				require.Equal(t, sagadriver.StatusReviewRequired, res.Before.Status)
				require.Equal(t, sagadriver.StatusRunning, res.After.Status)
				st, _ := res.After.Step("workspace")
				require.Equal(t, sagadriver.StepPending, st.Status)
				require.Equal(t, 0, st.Attempts, "fresh attempts")
				require.Equal(t, retry.ID+"/workspace", st.Key, "the same key")
				require.Equal(t, 1, b.jobs(t, "saga.step"), "the step's job is inserted with the decision")

				confirm := uncertainPivot("op-confirm")
				b.insert(t, confirm)
				res, err = b.ops.Decide(context.Background(), actor, ops.OperationDecision{ID: confirm.ID, Version: confirm.Version,
					Action: ops.OperationConfirm, Step: "workspace", Happened: true, ExternalID: "ws-77", Reason: "the provider's console shows ws-77"})
				require.NoError(t, err)
				st, _ = res.After.Step("workspace")
				require.Equal(t, sagadriver.StepCompleted, st.Status)
				require.Equal(t, "ws-77", st.ExternalID)
				require.Equal(t, sagadriver.StatusRunning, res.After.Status, "on to the welcome step")

				compensate := uncertainPivot("op-compensate")
				b.insert(t, compensate)
				res, err = b.ops.Decide(context.Background(), actor, ops.OperationDecision{ID: compensate.ID, Version: compensate.Version,
					Action: ops.OperationCompensate, Reason: "the customer asked us to cancel the signup"})
				require.NoError(t, err)
				require.Equal(t, sagadriver.StatusCompensating, res.After.Status)
				require.Equal(t, 1, b.jobs(t, "saga.compensate"))

				resolve := uncertainPivot("op-resolve")
				b.insert(t, resolve)
				res, err = b.ops.Decide(context.Background(), actor, ops.OperationDecision{ID: resolve.ID, Version: resolve.Version,
					Action: ops.OperationResolve, ResolveTo: sagadriver.StatusCompleted, Reason: "created the workspace by hand as ws-9"})
				require.NoError(t, err)
				require.Equal(t, sagadriver.StatusCompleted, res.After.Status)
				require.Equal(t, "created the workspace by hand as ws-9", res.After.Resolution, "resolved manually, with the reason")

				for id, action := range map[string]string{retry.ID: "operation.retry", confirm.ID: "operation.confirm", compensate.ID: "operation.compensate", resolve.ID: "operation.resolve"} {
					hist, err := b.ops.History(context.Background(), id, 10)
					require.NoError(t, err)
					require.Len(t, hist, 1, id)
					e := hist[0]
					require.Equal(t, action, e.Action)
					require.Equal(t, "ada", e.Actor)
					require.Equal(t, "oncall", e.Role)
					require.Equal(t, "operation", e.TargetKind)
					require.Equal(t, audit.OutcomeApplied, e.Outcome)
					require.Equal(t, "req-1", e.RequestID)
					require.Equal(t, "10.0.0.1", e.ClientAddr)
					require.Contains(t, string(e.Before), `"status":"review_required"`)
					require.Contains(t, string(e.After), `"version":6`)
				}
				// A decision on a terminal operation is illegal, and audited.
				done := b.get(t, resolve.ID)
				_, err = b.ops.Decide(context.Background(), actor, ops.OperationDecision{ID: done.ID, Version: done.Version,
					Action: ops.OperationCompensate, Reason: "trying to undo a resolved signup"})
				require.ErrorIs(t, err, ops.ErrIllegal)
				hist, err := b.ops.History(context.Background(), done.ID, 10)
				require.NoError(t, err)
				require.Len(t, hist, 2)
				require.Equal(t, audit.OutcomeConflict, hist[0].Outcome)
				require.Contains(t, hist[0].Reason, "only a running operation or one under review can be compensated")

				// An unknown operation is audited as a conflict too.
				_, err = b.ops.Decide(context.Background(), actor, ops.OperationDecision{ID: "op-nowhere", Version: 1,
					Action: ops.OperationCompensate, Reason: "an operation that never existed"})
				require.ErrorIs(t, err, ops.ErrNotFound)
				hist, err = b.ops.History(context.Background(), "op-nowhere", 10)
				require.NoError(t, err)
				require.Len(t, hist, 1)
				require.Equal(t, audit.OutcomeConflict, hist[0].Outcome)
			})

			t.Run("TheDecisionAndItsEntryCommitTogether", func(t *testing.T) {
				t.Parallel()
				b := backend(t)
				op := uncertainPivot("op-atomic")
				b.insert(t, op)
				// The trail refuses an entry without an actor: the decision
				// that was applied in the same transaction rolls back.
				_, err := b.ops.Decide(context.Background(), ops.Actor{}, ops.OperationDecision{ID: op.ID, Version: op.Version,
					Action: ops.OperationRetry, Step: "workspace", Reason: "the provider is back up after the outage"})
				require.ErrorIs(t, err, audit.ErrInvalid)
				got := b.get(t, op.ID)
				require.Equal(t, op.Version, got.Version, "nothing applied without its audit entry")
				require.Equal(t, sagadriver.StatusReviewRequired, got.Status)
				require.Equal(t, 0, b.jobs(t, "saga.step"), "no job either")
			})

			t.Run("TheDatabaseRefusesTheEntry", func(t *testing.T) {
				t.Parallel()
				b := backend(t)
				breakAudit(t, b.trail.Dialect(), b.exec)
				op := uncertainPivot("op-insert-fails")
				b.insert(t, op)
				// The entry's INSERT fails in the database, after the
				// transition was applied in the same transaction: it rolls
				// back (an append after the commit would leave it applied).
				_, err := b.ops.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall"}, ops.OperationDecision{ID: op.ID, Version: op.Version,
					Action: ops.OperationRetry, Step: "workspace", Reason: "the provider is back up after the outage" + failAppend})
				require.ErrorContains(t, err, "the test refuses this audit entry")
				got := b.get(t, op.ID)
				require.Equal(t, op.Version, got.Version, "nothing applied without its audit entry")
				require.Equal(t, sagadriver.StatusReviewRequired, got.Status)
				require.Equal(t, 0, b.jobs(t, "saga.step"), "no job either")
				hist, err := b.ops.History(context.Background(), op.ID, 10)
				require.NoError(t, err)
				require.Zero(t, len(hist), "no audit entry")
			})

			t.Run("NoEntryWhenTheCommitFails", func(t *testing.T) {
				t.Parallel()
				b := backend(t)
				op := uncertainPivot("op-commit-fails")
				b.insert(t, op)
				// Everything in the decision's transaction succeeds, its
				// commit fails: an entry appended in a transaction of its
				// own would stay behind.
				restore := failCommits(t, b.trail.Dialect(), b.exec, b.names)
				_, err := b.ops.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall"}, ops.OperationDecision{ID: op.ID, Version: op.Version,
					Action: ops.OperationRetry, Step: "workspace", Reason: "the provider is back up after the outage"})
				restore()
				require.ErrorContains(t, err, "commit: ", "the COMMIT failed")
				got := b.get(t, op.ID)
				require.Equal(t, op.Version, got.Version, "nothing applied")
				require.Equal(t, sagadriver.StatusReviewRequired, got.Status)
				require.Equal(t, 0, b.jobs(t, "saga.step"), "no job either")
				hist, err := b.ops.History(context.Background(), op.ID, 10)
				require.NoError(t, err)
				require.Zero(t, len(hist), "no audit entry of a decision that did not commit")
			})

			t.Run("InvalidDecisionsChangeNothing", func(t *testing.T) {
				t.Parallel()
				b := backend(t)
				op := uncertainPivot("op-invalid")
				b.insert(t, op)
				for field, d := range map[string]ops.OperationDecision{
					"reason": {Action: ops.OperationCompensate, Reason: "too short"},
					"step":   {Action: ops.OperationRetry, Reason: "a long enough reason"},
					"status": {Action: ops.OperationResolve, ResolveTo: sagadriver.StatusRunning, Reason: "a long enough reason"},
					"action": {Action: "explode", Reason: "a long enough reason"},
				} {
					d.ID, d.Version = op.ID, op.Version
					_, err := b.ops.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall"}, d)
					var fe *fielderr.Error
					require.ErrorAs(t, err, &fe, field)
					require.Equal(t, field, fe.Field)
				}
				_, err := b.ops.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall"},
					ops.OperationDecision{ID: op.ID, Version: op.Version, Action: ops.OperationRetry, Step: "nonexistent", Reason: "a long enough reason"})
				var fe *fielderr.Error
				require.ErrorAs(t, err, &fe)
				require.Equal(t, "step", fe.Field)
				hist, err := b.ops.History(context.Background(), op.ID, 10)
				require.NoError(t, err)
				require.Empty(t, hist, "an invalid form is not a decision")

				_, err = b.ops.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall"},
					ops.OperationDecision{ID: op.ID, Version: op.Version - 1, Action: ops.OperationCompensate, Reason: "an outdated page was open"})
				require.ErrorIs(t, err, ops.ErrStale)
				require.Equal(t, op.Version, b.get(t, op.ID).Version, "nothing changed")
				hist, err = b.ops.History(context.Background(), op.ID, 10)
				require.NoError(t, err)
				require.Len(t, hist, 1)
				require.Equal(t, audit.OutcomeConflict, hist[0].Outcome)
			})
		})
	}
}

// TestLegalMatchesTheEngine checks that the actions the console offers
// (ops.Legal) are exactly those the saga's state machine accepts, for each
// state an operator meets.
func TestLegalMatchesTheEngine(t *testing.T) {
	t.Parallel()
	b := sagaBackends["SQLite"](t)
	states := []sagadriver.Operation{
		uncertainPivot("op-uncertain"),
		operation("op-welcome-failed", sagadriver.StatusReviewRequired,
			step("account", sagadriver.Compensatable, sagadriver.StepCompleted, sagadriver.CompNone),
			step("workspace", sagadriver.Pivot, sagadriver.StepCompleted, sagadriver.CompNone),
			step("welcome", sagadriver.Retriable, sagadriver.StepFailed, sagadriver.CompNone)),
		operation("op-comp-failed", sagadriver.StatusReviewRequired,
			step("account", sagadriver.Compensatable, sagadriver.StepCompensating, sagadriver.CompPending),
			step("workspace", sagadriver.Pivot, sagadriver.StepCompensationFailed, sagadriver.CompFailed),
			step("welcome", sagadriver.Retriable, sagadriver.StepSkipped, sagadriver.CompNone)),
		operation("op-running", sagadriver.StatusRunning,
			step("account", sagadriver.Compensatable, sagadriver.StepCompleted, sagadriver.CompNone),
			step("workspace", sagadriver.Pivot, sagadriver.StepRunning, sagadriver.CompNone),
			step("welcome", sagadriver.Retriable, sagadriver.StepPending, sagadriver.CompNone)),
		operation("op-compensating", sagadriver.StatusCompensating,
			step("account", sagadriver.Compensatable, sagadriver.StepCompensating, sagadriver.CompRunning),
			step("workspace", sagadriver.Pivot, sagadriver.StepFailed, sagadriver.CompNone),
			step("welcome", sagadriver.Retriable, sagadriver.StepSkipped, sagadriver.CompNone)),
		operation("op-completed", sagadriver.StatusCompleted,
			step("account", sagadriver.Compensatable, sagadriver.StepCompleted, sagadriver.CompNone),
			step("workspace", sagadriver.Pivot, sagadriver.StepCompleted, sagadriver.CompNone),
			step("welcome", sagadriver.Retriable, sagadriver.StepCompleted, sagadriver.CompNone)),
	}
	names := func(cs []ops.StepChoice) map[string]ops.StepChoice {
		m := map[string]ops.StepChoice{}
		for _, c := range cs {
			m[c.Name] = c
		}
		return m
	}
	for _, op := range states {
		b.insert(t, op)
		legal := ops.Legal(op)
		retry, confirm := names(legal.Retry), names(legal.Confirm)
		check := func(offered bool, d ops.OperationDecision, what string) {
			t.Helper()
			err := b.try(t, op, d)
			var te *saga.TransitionError
			if err != nil && !errors.As(err, &te) {
				t.Fatalf("%s: %s: unexpected error %v", op.ID, what, err)
			}
			require.Equal(t, offered, err == nil, "%s: %s offered=%t, engine says %v", op.ID, what, offered, err)
		}
		for _, st := range op.Steps {
			_, ok := retry[st.Name]
			check(ok, ops.OperationDecision{Action: ops.OperationRetry, Step: st.Name}, "retry "+st.Name)
			c, ok := confirm[st.Name]
			check(ok, ops.OperationDecision{Action: ops.OperationConfirm, Step: st.Name, Happened: true}, "confirm happened "+st.Name)
			check(ok && c.NotHappened, ops.OperationDecision{Action: ops.OperationConfirm, Step: st.Name}, "confirm not happened "+st.Name)
		}
		check(legal.Compensate, ops.OperationDecision{Action: ops.OperationCompensate}, "compensate")
		check(legal.Resolve, ops.OperationDecision{Action: ops.OperationResolve}, "resolve")
		require.Equal(t, !op.Status.Terminal() && op.Status != sagadriver.StatusCompensating, legal.Any(), op.ID)
	}
}
