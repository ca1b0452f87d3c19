// Package sagatest is the conformance suite every saga driver passes: the
// write contract the step machine uses ([sagadriver.Driver]) and the admin
// read contract consoles use ([sagadriver.Admin]). Ours (saga/sagapgx,
// saga/sagasqlite) run it from one test file each, and so does any driver
// a user writes:
//
//	func TestConformance(t *testing.T) {
//		sagatest.Run(t, func(t *testing.T) sagatest.Fixture[pgx.Tx] {
//			pool := newPoolOnFreshSchema(t)
//			d := sagapgx.New(pool)
//			require.NoError(t, d.Migrate(t.Context()))
//			return sagatest.Fixture[pgx.Tx]{Driver: d}
//		})
//	}
//
// The suite writes records as the engine does (through the driver's write
// methods, in its WithinTx) and checks what comes back: every field of an
// operation and its steps, versions and ErrStale, ErrExists, the order of
// events, findings inserted unless one is open and resolved together, the
// engine's lists and stats, and for the admin contract every list filter,
// keyset pages through ties, refused cursors, the detail with its newest
// events, counts with their exactness, the review list and the batch
// iterator under concurrent updates.
package sagatest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Fixture is one driver over fresh, empty, migrated tables that no other
// test touches.
type Fixture[TTx any] struct {
	Driver sagadriver.Driver[TTx]
	// Analyze refreshes the statistics that the driver's CountOperations
	// estimates from beyond its exactUpTo (ANALYZE on PostgreSQL). Leave it
	// nil for a driver that always counts exactly: the suite then requires
	// every count to be exact.
	Analyze func(ctx context.Context) error
}

// Run runs the conformance suite against fixtures made by newFixture, one
// per subtest; subtests run in parallel.
func Run[TTx any](t *testing.T, newFixture func(t *testing.T) Fixture[TTx]) {
	t.Helper()
	t.Run("Records", func(t *testing.T) { runRecords(t, newFixture) })
	t.Run("Admin", func(t *testing.T) { runAdmin(t, newFixture) })
}

// base is the time the fixtures' operations are built around: whole
// seconds, a day in the past, so that the database's clock is later.
var base = time.Now().Add(-24 * time.Hour).Truncate(time.Second).UTC()

// at returns base plus minutes.
func at(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }

// bundle is a fixture with the helpers of the suite.
type bundle[TTx any] struct {
	Fixture[TTx]
}

func setup[TTx any](t *testing.T, newFixture func(t *testing.T) Fixture[TTx]) bundle[TTx] {
	t.Helper()
	return bundle[TTx]{Fixture: newFixture(t)}
}

// write records op, its events and findings in one transaction, as the
// engine does when it starts an operation.
func (b bundle[TTx]) write(t *testing.T, op sagadriver.Operation, events []sagadriver.Event, findings []sagadriver.Finding) {
	t.Helper()
	d := b.Driver
	require.NoError(t, d.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
		if err := d.InsertOperation(ctx, tx, &op); err != nil {
			return err
		}
		if err := d.InsertEvents(ctx, tx, events); err != nil {
			return err
		}
		for i := range findings {
			if _, err := d.InsertFinding(ctx, tx, &findings[i]); err != nil {
				return err
			}
		}
		return nil
	}))
}

// get reads operation id in a transaction of its own.
func (b bundle[TTx]) get(t *testing.T, id string) (sagadriver.Operation, error) {
	t.Helper()
	var op sagadriver.Operation
	err := b.Driver.WithinTx(t.Context(), func(ctx context.Context, tx TTx) error {
		var err error
		op, err = b.Driver.GetOperation(ctx, tx, id, false)
		return err
	})
	return op, err
}

// opOpts describes an operation for bundle.op; zero fields get defaults.
type opOpts struct {
	ID            string            // random
	Type          string            // "signup"
	Status        sagadriver.Status // running
	CorrelationID string
	At            time.Time // base: updated then, created a minute before
	ExternalID    string    // the first step's
	Events        int       // how many events besides "started"
}

// newOp returns an operation of two steps, as the engine records one.
func newOp(o opOpts) sagadriver.Operation {
	o.ID = cmp.Or(o.ID, "op-"+rand.Text())
	o.Type = cmp.Or(o.Type, "signup")
	o.Status = cmp.Or(o.Status, sagadriver.StatusRunning)
	if o.At.IsZero() {
		o.At = base
	}
	started := o.At.Add(-time.Minute)
	op := sagadriver.Operation{ID: o.ID, Type: o.Type, Status: o.Status, CorrelationID: o.CorrelationID,
		Input: json.RawMessage(`{"email":"a@example.com"}`), CurrentStep: "workspace", LastError: "provider: 503",
		ReviewReason: "", Version: 3, DefinitionVersion: 2, CreatedAt: started, UpdatedAt: o.At,
		Steps: []sagadriver.StepRecord{
			{Name: "account", Seq: 0, Kind: sagadriver.Compensatable, System: "local", Status: sagadriver.StepCompleted,
				Key: o.ID + "/account", ExternalID: o.ExternalID, Result: json.RawMessage(`{"external_id":"acc-1"}`),
				Attempts: 1, MaxAttempts: 5, Compensable: true, Unkeyed: true, CompSeq: 2, CompKey: o.ID + "/account/compensate",
				CompMaxAttempts: 5, Generation: 1, StartedAt: &started, FinishedAt: &started, UpdatedAt: started},
			{Name: "workspace", Seq: 1, Kind: sagadriver.Pivot, System: "workspace-provider", Status: sagadriver.StepRetrying,
				Key: o.ID + "/workspace", Attempts: 2, MaxAttempts: 5, Verifications: 1, LastError: "provider: 503",
				LastErrorClass: sagadriver.ClassTransient, Compensable: true, Verifiable: true, CompSeq: 1, CompKey: o.ID + "/workspace/compensate",
				CompStatus: sagadriver.CompNone, CompMaxAttempts: 3, Generation: 2, StartedAt: &o.At, UpdatedAt: o.At},
		}}
	if o.Status.Terminal() {
		op.FinishedAt = &o.At
	}
	if o.Status == sagadriver.StatusReviewRequired {
		op.ReviewReason = "retries_exhausted"
	}
	return op
}

// op writes an operation made by newOp with its events ("started", then
// o.Events retries) and returns it as written.
func (b bundle[TTx]) op(t *testing.T, o opOpts) sagadriver.Operation {
	t.Helper()
	op := newOp(o)
	started := op.CreatedAt
	events := []sagadriver.Event{{OperationID: op.ID, Action: "started", To: "pending", Actor: "app", At: started}}
	for i := range o.Events {
		events = append(events, sagadriver.Event{OperationID: op.ID, Step: "workspace", Action: "step_retrying",
			From: "running", To: "retrying", Actor: "worker", Message: "attempt " + strconv.Itoa(i+1), Attempt: i + 1,
			At: started.Add(time.Duration(i+1) * time.Second)})
	}
	b.write(t, op, events, nil)
	return op
}

// normalized is op with its JSON taken from got where they are equal as
// JSON (a database may reformat it), for comparing whole records.
func normalized(t *testing.T, op, got sagadriver.Operation) sagadriver.Operation {
	t.Helper()
	if op.Input != nil && got.Input != nil {
		require.JSONEq(t, string(op.Input), string(got.Input), "input")
		op.Input = got.Input
	}
	op.Steps = append([]sagadriver.StepRecord(nil), op.Steps...)
	for i := range op.Steps {
		if i < len(got.Steps) && op.Steps[i].Result != nil && got.Steps[i].Result != nil {
			require.JSONEq(t, string(op.Steps[i].Result), string(got.Steps[i].Result), "step %s result", op.Steps[i].Name)
			op.Steps[i].Result = got.Steps[i].Result
		}
	}
	return op
}

// listed is op as lists return it: no steps, no input.
func listed(op sagadriver.Operation) sagadriver.Operation {
	op.Steps, op.Input = nil, nil
	return op
}

func ids(ops []sagadriver.Operation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.ID
	}
	return out
}
