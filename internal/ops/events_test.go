package ops_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// eventBundle is a database with key and operation decisions that emit
// decision events on the same River tables as the saga jobs.
type eventBundle struct {
	bundle
	ops operationDecisions
	// insertOp records an operation as the engine does.
	insertOp func(t *testing.T, op sagadriver.Operation)
	// events reads the decision event jobs, oldest first.
	events func(t *testing.T) []eventJob
	// failInsert makes the next event inserts fail after inserting.
	failInsert *bool
}

type eventJob struct {
	Queue string
	decision.Event
}

const testEventQueue = "test_decisions"

// failingInserter inserts, then fails when *fail is set: the decision's
// transaction rolls back with its job.
type failingInserter[TTx any] struct {
	ins  ops.EventInserter[TTx]
	fail *bool
}

var errInsertFailed = errors.New("the event insert failed after inserting")

func (f failingInserter[TTx]) InsertTx(ctx context.Context, tx TTx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	res, err := f.ins.InsertTx(ctx, tx, args, opts)
	if err == nil && *f.fail {
		return nil, errInsertFailed
	}
	return res, err
}

func newEventBundle[TTx any](t *testing.T, be backend, rd riverdriver.Driver[TTx], sd sagadriver.Driver[TTx], d *ops.DB[TTx],
	keysOn func(*ops.DB[TTx], *idem.Engine) (*ops.Keys[TTx], error), read func(t *testing.T) []eventJob) *eventBundle {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, be.store.(interface{ Migrate(context.Context) error }).Migrate(ctx))
	require.NoError(t, be.db.Migrate(ctx))
	require.NoError(t, be.trail.Migrate(ctx))
	migrator, err := rivermigrate.New(rd, nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	require.NoError(t, sd.Migrate(ctx))
	client, err := river.NewClient(rd, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	fail := false
	require.NoError(t, d.EmitEvents(failingInserter[TTx]{ins: client, fail: &fail}, testEventQueue))
	e, err := idem.New(be.store, idem.Config{Secret: []byte("ops-test-secret-0123456789abcdefgh")})
	require.NoError(t, err)
	keys, err := keysOn(d, e)
	require.NoError(t, err)
	runner, err := saga.NewRunner(sd, saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	runner.SetClient(client)
	operations, err := ops.NewOperations(d, runner)
	require.NoError(t, err)
	bulks := func(keyList keyIterator, cfg ops.BulkConfig) (bulkDecisions, error) {
		return ops.NewBulks(ops.BulkParts[TTx]{Store: be.db, Keys: keys, KeyList: keyList}, cfg)
	}
	return &eventBundle{
		bundle: bundle{engine: e, db: be.db, records: be.store.(idemdriver.Admin), trail: be.trail, keys: keys, newBulks: bulks,
			exec: be.exec, names: be.names, dialect: be.trail.Dialect()},
		ops: operations,
		insertOp: func(t *testing.T, op sagadriver.Operation) {
			require.NoError(t, sd.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
				return sd.InsertOperation(ctx, tx, &op)
			}))
		},
		events:     read,
		failInsert: &fail,
	}
}

// decodeEventJobs reads rows of eventJobsSQL: a *sql.Rows or a pgx.Rows.
func decodeEventJobs(t *testing.T, rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}) []eventJob {
	t.Helper()
	var out []eventJob
	for rows.Next() {
		var j eventJob
		var args []byte
		require.NoError(t, rows.Scan(&j.Queue, &args))
		require.NoError(t, json.Unmarshal(args, &j.Event))
		out = append(out, j)
	}
	require.NoError(t, rows.Err())
	return out
}

const eventJobsSQL = `SELECT queue, args FROM river_job WHERE kind = 'unstuck.decision' ORDER BY id`

var eventBackends = map[string]func(t *testing.T) *eventBundle{
	"SQLite": func(t *testing.T) *eventBundle {
		db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "events.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		imm, err := ops.OpenImmediate(t.Context(), db)
		require.NoError(t, err)
		t.Cleanup(func() { _ = imm.Close() })
		s, cdb, trail := idemsqlite.New(db), store.NewSQLite(db), audit.NewSQLite(db, audit.WithKeys(testAuditKeys))
		d, err := ops.SQLite(imm, trail, cdb, nil)
		require.NoError(t, err)
		be := backend{store: s, db: cdb, trail: trail, exec: func(t testing.TB, q string) {
			_, err := db.ExecContext(context.Background(), q)
			require.NoError(t, err, q)
		}, names: func(t testing.TB, q string) []string { return sqlNames(t, db, q) }}
		return newEventBundle(t, be, riversqlite.New(imm), sagasqlite.New(imm), d,
			func(d *ops.DB[*sql.Tx], e *idem.Engine) (*ops.Keys[*sql.Tx], error) { return ops.NewKeys(d, e, s, s) },
			func(t *testing.T) []eventJob {
				// riversqlite keeps args as SQLite's binary JSON.
				rows, err := db.QueryContext(t.Context(), strings.Replace(eventJobsSQL, "args", "json(args)", 1))
				require.NoError(t, err)
				defer rows.Close()
				return decodeEventJobs(t, rows)
			})
	},
	"PostgreSQL": func(t *testing.T) *eventBundle {
		pool := pgtest.Schema(t)
		s, cdb, trail := idempgx.New(pool), store.NewPostgres(pool), audit.NewPostgres(pool, audit.WithKeys(testAuditKeys))
		d, err := ops.Postgres(pool, trail, cdb, nil)
		require.NoError(t, err)
		be := backend{store: s, db: cdb, trail: trail, exec: func(t testing.TB, q string) {
			_, err := pool.Exec(context.Background(), q)
			require.NoError(t, err, q)
		}, names: func(t testing.TB, q string) []string { return pgNames(t, pool, q) }}
		return newEventBundle(t, be, riverpgxv5.New(pool), sagapgx.New(pool), d,
			func(d *ops.DB[pgx.Tx], e *idem.Engine) (*ops.Keys[pgx.Tx], error) { return ops.NewKeys(d, e, s, s) },
			func(t *testing.T) []eventJob {
				rows, err := pool.Query(t.Context(), eventJobsSQL)
				require.NoError(t, err)
				defer rows.Close()
				return decodeEventJobs(t, rows)
			})
	},
}

// TestDecisionEvents: every kind of applied decision emits exactly one
// event in its transaction, with its type, subject, actor, reason and the
// chain of Previous on its subject; refused, stale, approval-pending and
// rolled-back decisions emit none (SPEC K26).
func TestDecisionEvents(t *testing.T) {
	t.Parallel()
	for name, backend := range eventBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := backend(t)
			ada := ops.Actor{Username: "ada", Role: "oncall", RequestID: "req-1"}
			last := func(t *testing.T, n int) decision.Event {
				t.Helper()
				evs := b.events(t)
				require.Len(t, evs, n)
				require.Equal(t, testEventQueue, evs[n-1].Queue)
				return evs[n-1].Event
			}
			lastEntry := func(t *testing.T, kind, id string) audit.Entry {
				t.Helper()
				hist, err := b.trail.History(ctx, kind, id, 1)
				require.NoError(t, err)
				require.Len(t, hist, 1)
				return hist[0]
			}

			// Keys: confirmed, then forgotten (Previous chains them).
			rec := pending(t, b.bundle, "ev-confirm")
			target := strconv.FormatInt(rec.ID, 10)
			res, err := b.keys.Decide(ctx, ada, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version,
				Action: idem.OperatorConfirmHappened, ExternalRef: "ch_123", Reason: "the provider shows the charge"})
			require.NoError(t, err)
			ev := last(t, 1)
			e := lastEntry(t, "key", target)
			require.Equal(t, ops.EventID(e.Seq), ev.ID)
			require.Equal(t, decision.KeyConfirmed, ev.Type)
			require.Equal(t, decision.Subject{Kind: "key", ID: target, Scope: "tenant:ops", Operation: idem.DefaultOperation, ExternalRef: "ch_123"}, ev.Subject)
			require.Equal(t, "ada", ev.Actor)
			require.Equal(t, decision.Happened, ev.Outcome)
			require.Equal(t, "the provider shows the charge", ev.Reason)
			require.Equal(t, "req-1", ev.RequestID)
			require.Empty(t, ev.Previous)
			require.True(t, ev.PreviousTime.IsZero())
			require.True(t, ev.Time.Equal(e.At))
			first := ev
			rebuilt, ok := ops.EventOf(e)
			require.True(t, ok, "the entry records its event")
			require.Equal(t, ev, rebuilt, "the webhooks' event is the River job's")

			// A stale decision and an illegal one emit nothing.
			_, err = b.keys.Decide(ctx, ada, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version, Action: idem.OperatorForget,
				AcknowledgeRerun: true, Reason: "a stale page submitted again"})
			require.ErrorIs(t, err, ops.ErrStale)
			_, err = b.keys.Decide(ctx, ada, ops.KeyDecision{RecordID: rec.ID, Version: res.After.Version,
				Action: idem.OperatorConfirmNotHappened, Reason: "completed records are not released"})
			require.Error(t, err)
			require.Len(t, b.events(t), 1, "refused decisions emit no event")

			_, err = b.keys.Decide(ctx, ada, ops.KeyDecision{RecordID: rec.ID, Version: res.After.Version, Action: idem.OperatorForget,
				AcknowledgeRerun: true, Reason: "the customer asked for a new charge"})
			require.NoError(t, err)
			ev = last(t, 2)
			require.Equal(t, decision.KeyForgotten, ev.Type)
			require.Equal(t, first.ID, ev.Previous, "the second event on the key names the first")
			rebuilt, ok = ops.EventOf(lastEntry(t, "key", target))
			require.True(t, ok)
			rebuilt.Previous, rebuilt.PreviousTime = ev.Previous, ev.PreviousTime // the reader finds them
			require.Equal(t, ev, rebuilt)
			require.True(t, ev.PreviousTime.Equal(first.Time))

			// Not happened is confirmed too; an applied verifier's answer
			// is verified.
			rec = pending(t, b.bundle, "ev-not-happened")
			_, err = b.keys.Decide(ctx, ada, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version,
				Action: idem.OperatorConfirmNotHappened, Reason: "the provider has no such charge"})
			require.NoError(t, err)
			ev = last(t, 3)
			require.Equal(t, decision.KeyConfirmed, ev.Type)
			require.Equal(t, decision.NotHappened, ev.Outcome)
			require.Equal(t, "prov-ev-not-happened", ev.Subject.ExternalRef, "the record's own reference")
			require.Empty(t, ev.Previous, "another subject")
			rec = pending(t, b.bundle, "ev-verified")
			_, err = b.keys.Decide(ctx, ops.Actor{Username: "ada", Role: "oncall", RequestID: "verify-3"}, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version,
				Action: idem.OperatorConfirmHappened, ExternalRef: "ch_9", Reason: "asked the provider — via verifier stripe",
				Verification: map[string]any{"verdict": "happened"}})
			require.NoError(t, err)
			ev = last(t, 4)
			require.Equal(t, decision.KeyVerified, ev.Type)
			require.Equal(t, "verify-3", ev.RequestID)

			// A decision whose transaction rolls back leaves no job.
			rec = pending(t, b.bundle, "ev-rollback")
			*b.failInsert = true
			_, err = b.keys.Decide(ctx, ada, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version, Action: idem.OperatorForget,
				AcknowledgeRerun: true, Reason: "this one fails at the very end"})
			*b.failInsert = false
			require.ErrorIs(t, err, errInsertFailed)
			require.Len(t, b.events(t), 4, "the job rolled back with the decision")
			got, ok, err := b.records.KeyByID(ctx, rec.ID)
			require.NoError(t, err)
			require.True(t, ok, "and the decision with it")
			require.Equal(t, rec.Version, got.Version)

			// Operations: every action.
			n := 4
			opActions := []struct {
				op   sagadriver.Operation
				d    ops.OperationDecision
				want string
			}{
				{uncertainPivot("op-ev-retry"), ops.OperationDecision{Action: ops.OperationRetry, Step: "workspace"}, decision.OperationRetried},
				{uncertainPivot("op-ev-confirm"), ops.OperationDecision{Action: ops.OperationConfirm, Step: "workspace", Happened: true, ExternalID: "ws-1"}, decision.OperationConfirmed},
				{uncertainPivot("op-ev-compensate"), ops.OperationDecision{Action: ops.OperationCompensate}, decision.OperationCompensated},
				{uncertainPivot("op-ev-resolve"), ops.OperationDecision{Action: ops.OperationResolve, ResolveTo: sagadriver.StatusFailed}, decision.OperationResolved},
			}
			for _, c := range opActions {
				b.insertOp(t, c.op)
				c.d.ID, c.d.Version, c.d.Reason = c.op.ID, c.op.Version, "the operator checked the provider"
				_, err := b.ops.Decide(ctx, ada, c.d)
				require.NoError(t, err, c.want)
				n++
				ev := last(t, n)
				require.Equal(t, c.want, ev.Type)
				require.Equal(t, decision.Subject{Kind: "operation", ID: c.op.ID, Operation: "signup", CorrelationID: "corr-" + c.op.ID, ExternalRef: c.d.ExternalID}, ev.Subject)
				require.Equal(t, ops.EventID(lastEntry(t, "operation", c.op.ID).Seq), ev.ID)
			}
			// The resolved (failed) operation is redriven: its second event.
			resolved := opActions[3].op
			hist, err := b.ops.History(ctx, resolved.ID, 1)
			require.NoError(t, err)
			prevID := ops.EventID(hist[0].Seq)
			_, err = b.ops.Decide(ctx, ada, ops.OperationDecision{ID: resolved.ID, Version: resolved.Version + 1, Action: ops.OperationRedrive,
				Mode: saga.RedriveResume, Reason: "the provider is back after its outage"})
			require.NoError(t, err)
			n++
			ev = last(t, n)
			require.Equal(t, decision.OperationRedriven, ev.Type)
			require.Equal(t, string(saga.RedriveResume), ev.Outcome)
			require.Equal(t, prevID, ev.Previous)
			// A stale one emits nothing.
			_, err = b.ops.Decide(ctx, ada, ops.OperationDecision{ID: resolved.ID, Version: resolved.Version, Action: ops.OperationCompensate,
				Reason: "an old page submitted again"})
			require.ErrorIs(t, err, ops.ErrStale)
			require.Len(t, b.events(t), n)

			// Bulk: nothing while the request waits for approval; one
			// event per item once it runs, naming the request.
			for i := range 3 {
				pending(t, b.bundle, fmt.Sprintf("ev-bulk-%d", i))
			}
			bulks := newBulks(t, b.bundle, "bulk")
			req, _, err := bulks.Request(ctx, alice, ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget",
				KeyFilter: idemdriver.KeyFilter{Scope: "tenant:ops", Status: idemdriver.StatusPending}, FilterQuery: "status=pending", IncludeMayHaveHappened: true},
				"provider outage, keys safe to rerun", 4)
			require.NoError(t, err)
			require.Equal(t, store.BulkWaitingApproval, req.Status)
			done, err := bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, done)
			require.Len(t, b.events(t), n, "a request waiting for approval emits nothing")
			_, err = bulks.Approve(ctx, bob, req.ID, "checked with the provider")
			require.NoError(t, err)
			for done := false; !done; {
				done, err = bulks.Run(ctx, req.ID, 0)
				require.NoError(t, err)
			}
			evs := b.events(t)
			require.Len(t, evs, n+4, "one event per item")
			for _, ev := range evs[n:] {
				require.Equal(t, decision.KeyForgotten, ev.Type)
				require.Equal(t, ops.BulkRequestID(req.ID), ev.RequestID)
				require.Equal(t, "alice", ev.Actor)
				require.Contains(t, ev.Reason, "approved by bob")
			}
			ids := map[string]bool{}
			for _, ev := range evs {
				require.False(t, ids[ev.ID], "unique IDs")
				ids[ev.ID] = true
			}
			v, err := b.trail.Verify(ctx)
			require.NoError(t, err)
			require.True(t, v.OK, v.Problem)
		})
	}
}
