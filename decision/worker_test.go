package decision_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

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
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

var testSecret = []byte("decision-test-secret-0123456789abcdef")

// riverDB is a database with an idempotency engine and River's tables: an
// insert-only client (the console's side) and working clients (the
// application's).
type riverDB struct {
	engine *idem.Engine
	// insert inserts ev as the console does, and returns its job's ID.
	insert func(t *testing.T, ev decision.Event) int64
	// work starts a client working the events queue with w; stopped at
	// the end of t.
	work func(t *testing.T, w river.Worker[decision.JobArgs])
	// state reads a job's state and attempts.
	state func(t *testing.T, id int64) (rivertype.JobState, int)
}

func newRiverDB[TTx any](t *testing.T, rd riverdriver.Driver[TTx], store idemdriver.Store) *riverDB {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, store.(interface{ Migrate(context.Context) error }).Migrate(ctx))
	m, err := rivermigrate.New(rd, nil)
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	engine, err := idem.New(store, idem.Config{Secret: testSecret})
	require.NoError(t, err)
	inserter, err := river.NewClient(rd, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return &riverDB{engine: engine,
		insert: func(t *testing.T, ev decision.Event) int64 {
			res, err := inserter.Insert(t.Context(), decision.JobArgs{Event: ev}, nil)
			require.NoError(t, err)
			return res.Job.ID
		},
		work: func(t *testing.T, w river.Worker[decision.JobArgs]) {
			workers := river.NewWorkers()
			require.NoError(t, river.AddWorkerSafely(workers, w))
			client, err := river.NewClient(rd, &river.Config{Logger: slog.New(slog.DiscardHandler), Workers: workers,
				FetchPollInterval: 100 * time.Millisecond, Queues: map[string]river.QueueConfig{decision.DefaultQueue: {MaxWorkers: 2}}})
			require.NoError(t, err)
			require.NoError(t, client.Start(context.Background()))
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = client.Stop(ctx)
			})
		},
		state: func(t *testing.T, id int64) (rivertype.JobState, int) {
			job, err := inserter.JobGet(t.Context(), id)
			require.NoError(t, err)
			return job.State, job.Attempt
		},
	}
}

// riverSQLiteDSN is the DSN of path for River: write transactions begin
// IMMEDIATE, as riversqlite advises.
func riverSQLiteDSN(path string) string {
	q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)"}, "_txlock": {"immediate"}}
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

// openRiverSQLite opens path for River: one connection whose write
// transactions begin IMMEDIATE, as riversqlite advises.
func openRiverSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", riverSQLiteDSN(path))
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

var backends = map[string]func(t *testing.T) *riverDB{
	"SQLite": func(t *testing.T) *riverDB {
		path := filepath.Join(t.TempDir(), "events.db")
		db, err := idemsqlite.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return newRiverDB(t, riversqlite.New(openRiverSQLite(t, path)), idemsqlite.New(db))
	},
	"PostgreSQL": func(t *testing.T) *riverDB {
		pool := pgtest.Schema(t)
		return newRiverDB(t, riverpgxv5.New(pool), idempgx.New(pool))
	},
}

// handled records the events a handler was called with, in order.
type handled struct {
	mu  sync.Mutex
	ids []string
}

func (h *handled) handle(_ context.Context, ev decision.Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids = append(h.ids, ev.ID)
	return nil
}

func (h *handled) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ids)
}

// waitCompleted waits until every job of ids is completed.
func waitCompleted(t *testing.T, db *riverDB, ids ...int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if st, _ := db.state(t, id); st != rivertype.JobStateCompleted {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
}

func event(id, subject, previous string, previousTime time.Time) decision.Event {
	return decision.Event{ID: id, Type: decision.KeyConfirmed, Outcome: decision.Happened, Actor: "ada", Reason: "checked at the provider",
		Subject:  decision.Subject{Kind: decision.SubjectKey, ID: subject, Operation: "POST /payments", ExternalRef: "ch_" + subject},
		Previous: previous, PreviousTime: previousTime, Time: time.Now().UTC()}
}

// TestWorkerHandlesEachEventOnce: with an engine, an event delivered twice
// (two jobs of the same event: a redelivery) is handled once; without
// one, every delivery calls the handler.
func TestWorkerHandlesEachEventOnce(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := backend(t)
			var h handled
			db.work(t, decision.NewWorker(decision.WorkerConfig{Engine: db.engine, Handle: h.handle}))
			ev := event("dec_1", "1", "", time.Time{})
			waitCompleted(t, db, db.insert(t, ev), db.insert(t, ev))
			require.Equal(t, []string{"dec_1"}, h.list(), "handled once")

			var plain handled
			w := decision.NewWorker(decision.WorkerConfig{Handle: plain.handle})
			job := &river.Job[decision.JobArgs]{JobRow: &rivertype.JobRow{CreatedAt: time.Now()}, Args: decision.JobArgs{Event: ev}}
			require.NoError(t, w.Work(t.Context(), job))
			require.NoError(t, w.Work(t.Context(), job))
			require.Equal(t, []string{"dec_1", "dec_1"}, plain.list(), "without an engine the handler dedupes")
		})
	}
}

// TestWorkerOrdersEventsPerSubject: the second event on a subject,
// delivered first, is snoozed until the first is handled; an event on
// another subject is not held back.
func TestWorkerOrdersEventsPerSubject(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := backend(t)
			var h handled
			w := &countingWorker{Worker: decision.NewWorker(decision.WorkerConfig{Engine: db.engine, Handle: h.handle, Snooze: 100 * time.Millisecond}),
				calls: map[string]int{}}
			db.work(t, w)
			first := event("dec_10", "7", "", time.Time{})
			second := event("dec_12", "7", first.ID, first.Time)
			other := event("dec_11", "8", "", time.Time{})
			secondJob := db.insert(t, second)
			otherJob := db.insert(t, other)
			waitCompleted(t, db, otherJob)
			require.Eventually(t, func() bool { return w.count(second.ID) >= 3 }, 10*time.Second, 20*time.Millisecond,
				"delivered again and again while its previous event is not handled")
			st, _ := db.state(t, secondJob)
			require.NotEqual(t, rivertype.JobStateCompleted, st)
			require.Equal(t, []string{other.ID}, h.list())
			waitCompleted(t, db, db.insert(t, first), secondJob)
			require.Equal(t, []string{other.ID, first.ID, second.ID}, h.list())
		})
	}
}

// countingWorker counts the deliveries of each event.
type countingWorker struct {
	*decision.Worker
	mu    sync.Mutex
	calls map[string]int
}

func (w *countingWorker) Work(ctx context.Context, job *river.Job[decision.JobArgs]) error {
	w.mu.Lock()
	w.calls[job.Args.ID]++
	w.mu.Unlock()
	return w.Worker.Work(ctx, job)
}

func (w *countingWorker) count(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[id]
}

// TestWorkerOrderWaitIsBounded: an event whose previous one is never
// handled is handled once it waited OrderWait; one whose previous event
// is older than the engine's retention does not wait.
func TestWorkerOrderWaitIsBounded(t *testing.T) {
	t.Parallel()
	var h handled
	db := backends["SQLite"](t)
	now := time.Now()
	w := decision.NewWorker(decision.WorkerConfig{Engine: db.engine, Handle: h.handle, OrderWait: time.Minute, Now: func() time.Time { return now }})
	job := func(ev decision.Event, created time.Time) *river.Job[decision.JobArgs] {
		return &river.Job[decision.JobArgs]{JobRow: &rivertype.JobRow{CreatedAt: created}, Args: decision.JobArgs{Event: ev}}
	}
	err := w.Work(t.Context(), job(event("dec_2", "1", "dec_1", now), now))
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, err, &snooze)
	require.NoError(t, w.Work(t.Context(), job(event("dec_2", "1", "dec_1", now), now.Add(-2*time.Minute))), "waited long enough")
	require.NoError(t, w.Work(t.Context(), job(event("dec_4", "2", "dec_3", now.Add(-48*time.Hour)), now)), "the previous record may be swept")
	require.Equal(t, []string{"dec_2", "dec_4"}, h.list())
}

// TestEventEncoding: the JSON of an event is the documented one.
func TestEventEncoding(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 3, 52, 44, 903110000, time.UTC)
	ev := decision.Event{ID: "dec_2", Type: decision.KeyConfirmed, Outcome: decision.Happened, Actor: "ada", Reason: "seen at the provider",
		Subject:  decision.Subject{Kind: decision.SubjectKey, ID: "917", Scope: "user:ann", Operation: "POST /payments", ExternalRef: "ch_1"},
		Previous: "dec_1", PreviousTime: at.Add(-time.Minute), Time: at}
	b, err := json.Marshal(decision.JobArgs{Event: ev})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"dec_2","type":"key.confirmed","outcome":"happened","actor":"ada","reason":"seen at the provider",
		"subject":{"kind":"key","id":"917","scope":"user:ann","operation":"POST /payments","external_ref":"ch_1"},
		"previous":"dec_1","previous_time":"2026-12-06T03:51:44.90311Z","time":"2026-12-06T03:52:44.90311Z"}`, string(b))
	b, err = json.Marshal(decision.Event{ID: "dec_1", Type: decision.KeyForgotten, Subject: decision.Subject{Kind: "key", ID: "1"}, Actor: "ada", Reason: "r", Time: at})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"dec_1","type":"key.forgotten","actor":"ada","reason":"r","subject":{"kind":"key","id":"1"},"time":"2026-12-06T03:52:44.90311Z"}`, string(b))
	require.Equal(t, decision.Kind, decision.JobArgs{}.Kind())
	require.Equal(t, decision.DefaultQueue, decision.JobArgs{}.InsertOpts().Queue)
}
