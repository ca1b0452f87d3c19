// Command riverjob runs a River job at most once per idempotency key: the
// idemriver middleware on a River client over SQLite (riversqlite), the
// idem store in the same database file. A payment webhook delivered twice
// becomes two jobs; the worker books the payment once.
//
// It also registers a verifier on idemriver's VerifyWorker, which answers
// the console's "did this key's effect happen?" (console serve inserts the
// verification jobs on this application's River tables), and asks it once.
//
//	go run ./examples/riverjob
package main

import (
	"context"
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
	"github.com/riverqueue/river/rivertype"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// PaymentWebhook is a provider's webhook; its event ID makes a redelivery
// the same job.
type PaymentWebhook struct {
	EventID string `json:"event_id"`
	Amount  int64  `json:"amount"`
}

func (PaymentWebhook) Kind() string { return "payment_webhook" }

// IdempotencyKey implements idemriver.Keyed: the key and its scope.
func (w PaymentWebhook) IdempotencyKey() (key, scope string) {
	return w.EventID, "provider:examplepay"
}

// Ledger stands for the system the worker changes.
type Ledger struct {
	mu       sync.Mutex
	bookings map[string]string // event ID → booking ID
}

func (l *Ledger) Book(eventID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := fmt.Sprintf("bk_%03d", len(l.bookings)+1)
	l.bookings[eventID] = id
	return id
}

func (l *Ledger) Find(ref string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.bookings {
		if id == ref {
			return true
		}
	}
	return false
}

type PaymentWorker struct {
	river.WorkerDefaults[PaymentWebhook]
	ledger *Ledger
	runs   chan string
}

func (w *PaymentWorker) Work(ctx context.Context, job *river.Job[PaymentWebhook]) error {
	booking := w.ledger.Book(job.Args.EventID)
	// The reference an operator (or the verifier below) looks the effect up by.
	if err := idem.Annotate(ctx, idem.Annotation{ExternalRef: booking}); err != nil {
		return err
	}
	w.runs <- booking
	return nil
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

	// Migrations: the idem store's, then River's own (rivermigrate).
	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}

	engine, err := idem.New(store, idem.Config{Secret: secret()})
	if err != nil {
		return err
	}
	defer func() {
		if err := engine.Shutdown(context.Background()); err != nil {
			log.Print(err)
		}
	}()

	config := &river.Config{
		FetchCooldown:     10 * time.Millisecond, // SQLite has no LISTEN/NOTIFY: River polls
		FetchPollInterval: 50 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:           river.NewWorkers(),
	}
	ledger := &Ledger{bookings: map[string]string{}}
	worker := &PaymentWorker{ledger: ledger, runs: make(chan string, 10)}
	river.AddWorker(config.Workers, worker)

	// The job middleware: at insert it copies the key into the job's
	// metadata; at work it runs the worker through idem.Run. The lease
	// follows the client's JobTimeout (and the timeouts of the workers
	// registered in WorkerTimeouts).
	mw, err := idemriver.New(engine, idemriver.Config{
		DefaultTimeout: config.JobTimeout,
		WorkerTimeouts: []idemriver.WorkerTimeout{idemriver.WorkerTimeoutOf[PaymentWebhook](worker)},
	})
	if err != nil {
		return err
	}
	config.Middleware = []rivertype.Middleware{mw}

	// The verifier of this job kind's keys, for the console's "verify".
	verify := idemriver.NewVerifyWorker(30 * time.Second)
	err = verify.Register(idemriver.Operation(PaymentWebhook{}.Kind()), "ledger", idem.VerifierFunc(
		func(ctx context.Context, a idem.Abandoned) (idem.Verification, error) {
			if a.ExternalRef == "" {
				return idem.Verification{Verdict: idem.VerdictUnknown}, nil
			}
			if !ledger.Find(a.ExternalRef) {
				return idem.Verification{Verdict: idem.VerdictNotHappened, Evidence: "no booking " + a.ExternalRef}, nil
			}
			return idem.Verification{Verdict: idem.VerdictHappened, ExternalRef: a.ExternalRef,
				Evidence: "booking " + a.ExternalRef + " in the ledger"}, nil
		}))
	if err != nil {
		return err
	}
	if err := idemriver.AddVerifyWorker(config.Workers, config, verify); err != nil {
		return err
	}

	client, err := river.NewClient(driver, config)
	if err != nil {
		return err
	}
	completed, cancel := client.Subscribe(river.EventKindJobCompleted)
	defer cancel()
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

	// The provider delivered the webhook twice: two jobs, one key.
	delivery := PaymentWebhook{EventID: "evt_0000000001", Amount: 500}
	for i := 1; i <= 2; i++ {
		res, err := client.Insert(ctx, delivery, nil)
		if err != nil {
			return err
		}
		fmt.Printf("inserted job %d (delivery %d of %s)\n", res.Job.ID, i, delivery.EventID)
		// Wait for it, so that the second is a duplicate after completion
		// (one delivered while the first runs would snooze, then complete).
		if err := waitCompleted(completed, res.Job.ID); err != nil {
			return err
		}
		fmt.Printf("job %d completed\n", res.Job.ID)
	}
	close(worker.runs)
	var bookings []string
	for b := range worker.runs {
		bookings = append(bookings, b)
	}
	fmt.Printf("worker ran %d time(s) for 2 deliveries: %v\n", len(bookings), bookings)

	// What the console gets when an operator asks to verify this key:
	// VerifyArgs is the job it inserts; the answer is the job's output.
	ans := verify.Answer(ctx, idemriver.VerifyArgs{
		Operation: idemriver.Operation(PaymentWebhook{}.Kind()), ExternalRef: bookings[0]})
	fmt.Printf("verify: verdict=%s external_ref=%s evidence=%q\n", ans.Verdict, ans.ExternalRef, ans.Evidence)
	return nil
}

func waitCompleted(events <-chan *river.Event, jobID int64) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return errors.New("subscription closed")
			}
			if ev.Job != nil && ev.Job.ID == jobID {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("job %d did not complete within 30 s", jobID)
		}
	}
}

// secret is the application secret: at least 32 bytes, from your secret
// store, the same that console serve gets as UNSTUCK_SECRET. The example
// falls back to a fixed one.
func secret() []byte {
	if s := os.Getenv("UNSTUCK_SECRET"); s != "" {
		return []byte(s)
	}
	return []byte("example-secret-not-for-production!!")
}
