package idemriver_test

import (
	"context"
	"log"
	"path/filepath"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// PaymentWebhook is a provider's webhook; the provider's event id makes a
// redelivery the same job.
type PaymentWebhook struct {
	EventID string `json:"event_id"`
	Amount  int64  `json:"amount"`
}

func (PaymentWebhook) Kind() string { return "payment_webhook" }

// IdempotencyKey implements idemriver.Keyed.
func (w PaymentWebhook) IdempotencyKey() (key, scope string) { return w.EventID, "provider:stripe" }

type PaymentWorker struct {
	river.WorkerDefaults[PaymentWebhook]
}

func (PaymentWorker) Work(ctx context.Context, job *river.Job[PaymentWebhook]) error {
	// Book the payment: runs at most once per event id.
	return nil
}

// Example wires the middleware into a River client on SQLite. Both
// inserts below become jobs; the worker runs once.
func Example() {
	ctx := context.Background()
	db, err := idemsqlite.Open(filepath.Join("testdata", "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // riversqlite's advice

	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		log.Fatal(err)
	}

	engine, err := idem.New(store, idem.Config{Secret: []byte("an application secret of 32 bytes!")})
	if err != nil {
		log.Fatal(err)
	}
	config := &river.Config{
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
	}
	mw, err := idemriver.New(engine,
		idemriver.Config{DefaultTimeout: config.JobTimeout, WorkerTimeouts: []idemriver.WorkerTimeout{idemriver.WorkerTimeoutOf[PaymentWebhook](PaymentWorker{})}},
	)
	if err != nil {
		log.Fatal(err)
	}
	config.Middleware = []rivertype.Middleware{mw}
	config.Workers = river.NewWorkers()
	river.AddWorker(config.Workers, PaymentWorker{})

	client, err := river.NewClient(driver, config)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	delivery := PaymentWebhook{EventID: "evt_1", Amount: 500}
	for range 2 { // the provider delivered the webhook twice
		if _, err := client.Insert(ctx, delivery, nil); err != nil {
			log.Fatal(err)
		}
	}
}
