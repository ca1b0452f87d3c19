package decision_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// The kill test: the application is this test binary run again
// (TestEventApp), as an adopter's would be: River on PostgreSQL or SQLite, the
// decision worker with an idempotency engine, a handler that appends the
// event's ID to a file. The first process handles events until one
// (holdEnv) is handled, then holds its job — handled, the engine's record
// completed, River's job still running — until it is killed with SIGKILL.
// The second process, started after, must deliver every event, the held
// one again, and handle each exactly once, in order per subject.
const (
	appEnv     = "UNSTUCK_DECISION_APP"
	appDBEnv   = "UNSTUCK_DECISION_APP_DB"
	appFileEnv = "UNSTUCK_DECISION_APP_FILE"
	holdEnv    = "UNSTUCK_DECISION_APP_HOLD"
)

// TestEventApp is the application process of TestEventsSurviveKill.
func TestEventApp(t *testing.T) {
	if os.Getenv(appEnv) == "" {
		t.Skip("the application process of TestEventsSurviveKill")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	require.NoError(t, runEventApp(ctx, os.Getenv(appDBEnv), os.Getenv(appFileEnv), os.Getenv(holdEnv)))
}

// holdingWorker holds the job of the event hold once it is handled, and
// says so on stdout.
type holdingWorker struct {
	*decision.Worker
	hold string
}

func (w holdingWorker) Work(ctx context.Context, job *river.Job[decision.JobArgs]) error {
	err := w.Worker.Work(ctx, job)
	if err == nil && job.Args.ID == w.hold {
		fmt.Printf("holding %s\n", job.Args.ID)
		select {} // until SIGKILL
	}
	return err
}

func runEventApp(ctx context.Context, dbURL, file, hold string) error {
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := idemsqlite.Open(path)
		if err != nil {
			return err
		}
		defer db.Close()
		rdb, err := sql.Open("sqlite", riverSQLiteDSN(path))
		if err != nil {
			return err
		}
		defer rdb.Close()
		rdb.SetMaxOpenConns(1)
		return workEvents(ctx, riversqlite.New(rdb), idemsqlite.New(db), file, hold)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	return workEvents(ctx, riverpgxv5.New(pool), idempgx.New(pool), file, hold)
}

// workEvents works the events queue with River on rd and an engine on
// store, the handler appending each event's ID to file, until ctx ends.
func workEvents[TTx any](ctx context.Context, rd riverdriver.Driver[TTx], store idemdriver.Store, file, hold string) error {
	engine, err := idem.New(store, idem.Config{Secret: testSecret})
	if err != nil {
		return err
	}
	out, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	w := decision.NewWorker(decision.WorkerConfig{Engine: engine, Snooze: 100 * time.Millisecond,
		Handle: func(_ context.Context, ev decision.Event) error {
			if _, err := fmt.Fprintln(out, ev.ID); err != nil {
				return err
			}
			return out.Sync()
		}})
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely[decision.JobArgs](workers, holdingWorker{Worker: w, hold: hold}); err != nil {
		return err
	}
	client, err := river.NewClient(rd, &river.Config{
		Logger: slog.New(slog.DiscardHandler), Workers: workers, FetchPollInterval: 100 * time.Millisecond,
		// One at a time, so that the held job holds the rest back; a
		// killed process's job is rescued in seconds.
		Queues:     map[string]river.QueueConfig{decision.DefaultQueue: {MaxWorkers: 1}},
		JobTimeout: time.Second, RescueStuckJobsAfter: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return client.Stop(stopCtx)
}

// startEventApp starts the application process; its stdout lines come on
// the channel it returns.
func startEventApp(t *testing.T, dbURL, file, hold string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEventApp$", "-test.count=1")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "UNSTUCK_DECISION_") }),
		appEnv+"=1", appDBEnv+"="+dbURL, appFileEnv+"="+file, holdEnv+"="+hold)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// waitLine waits for a line of lines starting with prefix.
func waitLine(t *testing.T, lines <-chan string, prefix string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the application stopped before printing %q", prefix)
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("no line %q from the application in 60 s", prefix)
		}
	}
}

// TestEventsSurviveKill: events pending while the application is killed
// (SIGKILL) are delivered after its restart, each handled once, in order
// per subject, the one whose job the kill left running included.
func TestEventsSurviveKill(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) (string, *riverDB){
		"SQLite": func(t *testing.T) (string, *riverDB) {
			path := filepath.Join(t.TempDir(), "events.db")
			db, err := idemsqlite.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			return "sqlite:" + path, newRiverDB(t, riversqlite.New(openRiverSQLite(t, path)), idemsqlite.New(db))
		},
		"PostgreSQL": func(t *testing.T) (string, *riverDB) {
			dbURL := pgtest.Database(t)
			pool, err := pgxpool.New(t.Context(), dbURL)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			return dbURL, newRiverDB(t, riverpgxv5.New(pool), idempgx.New(pool))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dbURL, db := open(t)
			testEventsSurviveKill(t, dbURL, db)
		})
	}
}

func testEventsSurviveKill(t *testing.T, dbURL string, db *riverDB) {
	// Two subjects of three decisions each, inserted out of order.
	at := time.Now().UTC()
	chain := func(subject string, ids ...string) []decision.Event {
		var out []decision.Event
		prev := ""
		for _, id := range ids {
			ev := event(id, subject, prev, at)
			if prev == "" {
				ev.PreviousTime = time.Time{}
			}
			out, prev = append(out, ev), id
		}
		return out
	}
	a, b := chain("1", "dec_1", "dec_3", "dec_5"), chain("2", "dec_2", "dec_4", "dec_6")
	var jobs []int64
	for _, ev := range []decision.Event{a[2], b[1], a[1], a[0], b[0], b[2]} {
		jobs = append(jobs, db.insert(t, ev))
	}
	held := jobs[2] // a[1]'s

	file := t.TempDir() + "/handled"
	first, lines := startEventApp(t, dbURL, file, a[1].ID)
	waitLine(t, lines, "ready")
	waitLine(t, lines, "holding "+a[1].ID)
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	state, attempts := db.state(t, held)
	require.Equal(t, rivertype.JobStateRunning, state, "the kill left the handled event's job running")
	st, _ := db.state(t, jobs[0])
	require.NotEqual(t, rivertype.JobStateCompleted, st, "the event after the held one is pending: the held job holds the one worker")
	before := handledIDs(t, file)
	require.Contains(t, before, a[1].ID)
	require.Less(t, len(before), 6, "events were pending at the kill")

	_, lines = startEventApp(t, dbURL, file, "")
	waitLine(t, lines, "ready")
	waitCompleted(t, db, jobs...)
	_, again := db.state(t, held)
	require.Greater(t, again, attempts, "the held event was delivered again")

	got := handledIDs(t, file)
	require.ElementsMatch(t, []string{"dec_1", "dec_2", "dec_3", "dec_4", "dec_5", "dec_6"}, got, "each event handled exactly once")
	for _, c := range [][]decision.Event{a, b} {
		require.Less(t, slices.Index(got, c[0].ID), slices.Index(got, c[1].ID))
		require.Less(t, slices.Index(got, c[1].ID), slices.Index(got, c[2].ID))
	}
}

func handledIDs(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	return strings.Fields(string(b))
}
