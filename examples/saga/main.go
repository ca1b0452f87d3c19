// Command saga runs a three-step operation on River over SQLite: reserve
// stock (compensatable), charge the card (the pivot) and ship (retriable).
// The first order completes; the second is declined at the pivot, so the
// stock reserved before it is released again (a compensation).
//
// It shows the migrations an application runs: River's (rivermigrate) and
// the saga driver's Migrate.
//
//	go run ./examples/saga
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// Order is the operation's input.
type Order struct {
	SKU    string `json:"sku"`
	Amount int64  `json:"amount"`
}

// shop stands for the systems the steps change.
type shop struct {
	mu       sync.Mutex
	reserved map[string]bool   // step key → stock reserved
	charges  map[string]string // step key → charge ID (the provider deduplicates by key)
}

func (s *shop) definition() saga.Definition {
	return saga.Definition{Type: "order", Steps: []saga.Step{
		{
			Name: "reserve_stock", System: "warehouse", Kind: sagadriver.Compensatable,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				s.reserved[in.Key] = true
				return saga.Result{ExternalID: "res-" + in.Key}, nil
			},
			Compensate: func(ctx context.Context, in saga.StepInput) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				delete(s.reserved, in.StepKey) // releasing nothing succeeds
				return nil
			},
		},
		{
			Name: "charge_card", System: "payments", Kind: sagadriver.Pivot,
			Retry: saga.RetryPolicy{MaxAttempts: 3, Initial: 100 * time.Millisecond},
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				var o Order
				if err := in.Decode(&o); err != nil {
					return saga.Result{}, saga.Permanent(err)
				}
				if o.Amount > 10_000 {
					return saga.Result{}, saga.Permanent(errors.New("card declined"))
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if _, ok := s.charges[in.Key]; !ok {
					s.charges[in.Key] = fmt.Sprintf("ch_%03d", len(s.charges)+1)
				}
				return saga.Result{ExternalID: s.charges[in.Key]}, nil
			},
			// Verify answers "did the charge happen?" when an attempt's
			// answer was lost, before anything is repeated.
			Verify: func(ctx context.Context, in saga.StepInput) (saga.Verification, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				if id, ok := s.charges[in.StepKey]; ok {
					return saga.Verification{Outcome: saga.Applied, Result: saga.Result{ExternalID: id}}, nil
				}
				return saga.Verification{Outcome: saga.NotApplied}, nil
			},
			Compensate: func(ctx context.Context, in saga.StepInput) error { return nil }, // a refund
		},
		{
			Name: "ship", System: "carrier", Kind: sagadriver.Retriable,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				return saga.Result{ExternalID: "parcel-" + in.Key}, nil
			},
		},
	}}
}

func main() {
	dbPath := flag.String("db", "", "SQLite file (default: a new file in a temporary directory)")
	flag.Parse()
	if err := run(context.Background(), *dbPath); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dbPath string) error {
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "unstuck-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "app.db")
	}
	db, err := idemsqlite.Open(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // riversqlite's advice

	// Migrations: River's job tables, then the saga driver's tables.
	riverDriver := riversqlite.New(db)
	migrator, err := rivermigrate.New(riverDriver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	driver := sagasqlite.New(db)
	if err := driver.Migrate(ctx); err != nil {
		return err
	}

	s := &shop{reserved: map[string]bool{}, charges: map[string]string{}}
	def := s.definition()
	runner, err := saga.NewRunner(driver, saga.Config{Definitions: []saga.Definition{def}})
	if err != nil {
		return err
	}

	workers := river.NewWorkers()
	if err := runner.AddWorkers(workers); err != nil {
		return err
	}
	cfg := &river.Config{
		FetchCooldown:     10 * time.Millisecond, // SQLite has no LISTEN/NOTIFY: River polls
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 4}},
		Workers:           workers,
		PeriodicJobs:      runner.PeriodicJobs(), // reconciliation, on the leader
	}
	// JobTimeout and RescueStuckJobsAfter from the steps' leases, so that a
	// step of a process that died resumes in minutes, not River's hour.
	if err := runner.ConfigureRiver(cfg); err != nil {
		return err
	}
	client, err := river.NewClient(riverDriver, cfg)
	if err != nil {
		return err
	}
	runner.SetClient(client)
	if err := client.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			log.Print(err)
		}
	}()

	for _, o := range []struct {
		id    string
		order Order
	}{
		{"order-1", Order{SKU: "book", Amount: 1999}},
		{"order-2", Order{SKU: "piano", Amount: 250_000}},
	} {
		// The ID from a business key starts the operation at most once.
		op, err := runner.Start(ctx, def.Type, o.order, &saga.StartOpts{ID: o.id, CorrelationID: o.order.SKU})
		if err != nil {
			return err
		}
		if op, err = waitSettled(ctx, runner, op.ID); err != nil {
			return err
		}
		fmt.Printf("operation %s: %s\n", op.ID, op.Status)
		for _, st := range op.Steps {
			fmt.Printf("  %-13s %-13s %-11s external=%s\n", st.Name, st.Kind, st.Status, st.ExternalID)
		}
		if op.LastError != "" {
			fmt.Printf("  last error: %s\n", op.LastError)
		}
	}
	s.mu.Lock()
	fmt.Printf("stock still reserved: %d; charges: %d\n", len(s.reserved), len(s.charges))
	s.mu.Unlock()
	return nil
}

// waitSettled polls the operation until it is terminal or waits for an
// operator (review_required).
func waitSettled(ctx context.Context, runner *saga.Runner[*sql.Tx], id string) (sagadriver.Operation, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		op, err := runner.Get(ctx, id)
		if err != nil {
			return op, err
		}
		if op.Status.Terminal() || op.Status == sagadriver.StatusReviewRequired {
			return op, nil
		}
		if time.Now().After(deadline) {
			return op, fmt.Errorf("operation %s still %s after 30 s", id, op.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
