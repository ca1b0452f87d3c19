package saga_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// runExample opens a throwaway SQLite database, migrates River's and the
// engine's tables, starts a River client working def's operations, starts
// one operation with input and waits until it settles. It returns the
// runner, to read the records.
func runExample(def saga.Definition, input any) (*saga.Runner[*sql.Tx], sagadriver.Operation, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "saga-example-")
	if err != nil {
		return nil, sagadriver.Operation{}, err
	}
	defer os.RemoveAll(dir)
	db, err := idemsqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		return nil, sagadriver.Operation{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // riversqlite's advice

	rd := riversqlite.New(db)
	migrator, err := rivermigrate.New(rd, nil)
	if err != nil {
		return nil, sagadriver.Operation{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, sagadriver.Operation{}, err
	}
	driver := sagasqlite.New(db)
	if err := driver.Migrate(ctx); err != nil {
		return nil, sagadriver.Operation{}, err
	}

	runner, err := saga.NewRunner(driver, saga.Config{Definitions: []saga.Definition{def}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, sagadriver.Operation{}, err
	}
	workers := river.NewWorkers()
	if err := runner.AddWorkers(workers); err != nil {
		return nil, sagadriver.Operation{}, err
	}
	cfg := &river.Config{
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
	}
	// JobTimeout and RescueStuckJobsAfter from the steps' leases, so that a
	// step of a process that died resumes in minutes, not River's hour.
	if err := runner.ConfigureRiver(cfg); err != nil {
		return nil, sagadriver.Operation{}, err
	}
	client, err := river.NewClient(rd, cfg)
	if err != nil {
		return nil, sagadriver.Operation{}, err
	}
	runner.SetClient(client)
	if err := client.Start(ctx); err != nil {
		return nil, sagadriver.Operation{}, err
	}
	defer func() { _ = client.Stop(ctx) }()

	op, err := runner.Start(ctx, def.Type, input, &saga.StartOpts{ID: "op-1"})
	if err != nil {
		return nil, sagadriver.Operation{}, err
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if op, err = runner.Get(ctx, op.ID); err != nil || op.Status.Terminal() || op.Status == sagadriver.StatusReviewRequired {
			break
		}
	}
	// Read the history before the database goes away.
	evs, evErr := runner.Events(ctx, op.ID)
	exampleEvents = evs
	return runner, op, errors.Join(err, evErr)
}

var exampleEvents []sagadriver.Event

// A signup: a local account (compensatable), a workspace at a provider
// (the pivot, verified by its key when its answer is lost) and a welcome
// email (retriable, after the pivot).
func ExampleDefinition() {
	workspaces := map[string]string{} // the provider: key → workspace id
	def := saga.Definition{Type: "signup", Steps: []saga.Step{
		{
			Name: "account", System: "local", Kind: sagadriver.Compensatable,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				var v struct{ Email string }
				if err := in.Decode(&v); err != nil {
					return saga.Result{}, saga.Permanent(err)
				}
				return saga.Result{ExternalID: "acct-" + v.Email}, nil
			},
			Compensate: func(ctx context.Context, in saga.StepInput) error { return nil },
		},
		{
			Name: "workspace", System: "provider", Kind: sagadriver.Pivot,
			Retry: saga.RetryPolicy{MaxAttempts: 3, Initial: 100 * time.Millisecond},
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				// The provider deduplicates by the step's stable key.
				if _, ok := workspaces[in.Key]; !ok {
					workspaces[in.Key] = fmt.Sprintf("ws-%d", len(workspaces)+1)
				}
				return saga.Result{ExternalID: workspaces[in.Key]}, nil
			},
			Verify: func(ctx context.Context, in saga.StepInput) (saga.Verification, error) {
				if id, ok := workspaces[in.StepKey]; ok {
					return saga.Verification{Outcome: saga.Applied, Result: saga.Result{ExternalID: id}}, nil
				}
				return saga.Verification{Outcome: saga.NotApplied}, nil
			},
			Compensate: func(ctx context.Context, in saga.StepInput) error {
				delete(workspaces, in.StepKey) // deleting nothing succeeds
				return nil
			},
		},
		{
			Name: "welcome", System: "mailer", Kind: sagadriver.Retriable,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				return saga.Result{ExternalID: "msg-1"}, nil
			},
		},
	}}

	_, op, err := runExample(def, map[string]string{"email": "ann@example.com"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("operation", op.ID, op.Status)
	for _, st := range op.Steps {
		fmt.Printf("  %-9s %-13s %s attempts=%d key=%s external=%s\n", st.Name, st.Kind, st.Status, st.Attempts, st.Key, st.ExternalID)
	}
	// Output:
	// operation op-1 completed
	//   account   compensatable completed attempts=1 key=op-1/account external=acct-ann@example.com
	//   workspace pivot         completed attempts=1 key=op-1/workspace external=ws-1
	//   welcome   retriable     completed attempts=1 key=op-1/welcome external=msg-1
}

// A permanent failure at the pivot compensates the steps before it, in
// reverse order; the steps never reached are skipped.
func ExampleDefinition_compensation() {
	step := func(name string, kind sagadriver.Kind, do saga.StepFunc) saga.Step {
		return saga.Step{Name: name, Kind: kind, Do: do,
			Compensate: func(ctx context.Context, in saga.StepInput) error { return nil }}
	}
	ok := func(ctx context.Context, in saga.StepInput) (saga.Result, error) { return saga.Result{}, nil }
	def := saga.Definition{Type: "order", Steps: []saga.Step{
		step("reserve_stock", sagadriver.Compensatable, ok),
		step("hold_credit", sagadriver.Compensatable, ok),
		step("charge_card", sagadriver.Pivot, func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
			return saga.Result{}, saga.Permanent(errors.New("card declined"))
		}),
		{Name: "ship", Kind: sagadriver.Retriable, Do: ok},
	}}

	_, op, err := runExample(def, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("operation", op.Status)
	for _, st := range op.Steps {
		fmt.Printf("  %-13s %s\n", st.Name, st.Status)
	}
	fmt.Print("compensated in order:")
	for _, e := range exampleEvents {
		if e.Action == "compensated" {
			fmt.Print(" ", e.Step)
		}
	}
	fmt.Println()
	// Output:
	// operation compensated
	//   reserve_stock compensated
	//   hold_credit   compensated
	//   charge_card   failed
	//   ship          skipped
	// compensated in order: hold_credit reserve_stock
}

// A permanent failure after the pivot is not compensated: the operation
// waits for an operator (forward recovery).
func ExampleDefinition_reviewRequired() {
	def := saga.Definition{Type: "signup", Steps: []saga.Step{
		{Name: "workspace", Kind: sagadriver.Pivot,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				return saga.Result{ExternalID: "ws-1"}, nil
			},
			Compensate: func(ctx context.Context, in saga.StepInput) error { return nil }},
		{Name: "welcome", Kind: sagadriver.Retriable,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				return saga.Result{}, saga.Permanent(errors.New("mailbox does not exist"))
			}},
	}}

	_, op, err := runExample(def, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(op.Status, op.ReviewReason)
	fmt.Println(op.LastError)
	// Output:
	// review_required permanent_failure
	// step welcome failed after 1 attempt(s) (permanent_failure): mailbox does not exist
}

func ExampleClassify() {
	for _, err := range []error{
		errors.New("connection refused"),
		saga.Permanent(errors.New("plan limit reached")),
		fmt.Errorf("create workspace: %w", saga.Uncertain(errors.New("no answer"))),
		fmt.Errorf("call: %w", context.DeadlineExceeded),
	} {
		fmt.Printf("%-10s %v\n", saga.Classify(err), err)
	}
	// Output:
	// transient  connection refused
	// permanent  plan limit reached
	// uncertain  create workspace: no answer
	// uncertain  call: context deadline exceeded
}
