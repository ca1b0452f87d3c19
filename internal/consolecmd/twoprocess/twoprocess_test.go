package twoprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemriver"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// The two-process deployment test: production's deployment, run as two
// real processes on one fresh PostgreSQL database.
//
//   - The console is the built binary, as production runs it: "console
//     migrate", "console user add", then "console serve". It is started
//     first, so that a console that joined River's leader election on the
//     application's tables would win it.
//   - The application is this test binary run again (TestTwoProcessApp),
//     written as an adopter's application in its own module would be: only
//     the module's public packages (saga, saga/sagapgx), River and pgx. It
//     does not migrate (the console's migrate did), runs a River client
//     with a fixed ID, the saga's periodic jobs and one of its own (a tick
//     every second), and a short RescueStuckJobsAfter from short step
//     leases (Runner.ConfigureRiver).
//
// The checks: an operator's retry and compensation through the console's
// HTTP forms answer 303 and are carried out by the application's workers;
// the application's reconciliation raises a difference that a resolution
// from the console then closes for good; a console "Verify with the
// provider" is answered by the application's verifier (idemriver) and
// applied once, also when the application is killed in the middle of the
// verifier's call;
// a bulk retry through the console's bulk flow completes and its
// operations complete; public.river_leader only ever names the
// application; the application's periodic job keeps firing; a step whose
// process was killed (SIGKILL) is rescued by the next application process
// within the application's setting, not the console's hour; and the
// console never logs River's "not registered in the client's Workers
// bundle".
//
// Each check is a subtest, so that a console that breaks several of them
// shows every one that fails.

const (
	// twoprocAppEnv makes this test binary the application process.
	twoprocAppEnv = "UNSTUCK_TWOPROC_APP"
	// twoprocDBEnv is the application's database URL.
	twoprocDBEnv = "UNSTUCK_TWOPROC_DB"
	// twoprocIDEnv is the ID of the application's River client.
	twoprocIDEnv = "UNSTUCK_TWOPROC_APP_ID"
	// twoprocHangEnv ("1") makes the step "reserve" of an operation in mode
	// "hang" never return: the process is killed in the middle of it.
	twoprocHangEnv = "UNSTUCK_TWOPROC_HANG"
	// twoprocConsoleBinEnv names a console binary to run instead of
	// building one (to run the test against another version's binary).
	twoprocConsoleBinEnv = "UNSTUCK_TWOPROC_CONSOLE_BIN"
)

const (
	twoprocType = "twoproc_order"
	// twoprocAppIDPrefix starts the River client ID of every application
	// process; nothing else may hold public.river_leader.
	twoprocAppIDPrefix = "twoproc-app-"

	// The application's recovery setting: every step's Timeout and the
	// saga's JobMargin give a lease of 2 × 2 s + 2 s = 6 s, which
	// Runner.ConfigureRiver makes River's JobTimeout and
	// RescueStuckJobsAfter.
	twoprocStepTimeout = 2 * time.Second
	twoprocJobMargin   = 2 * time.Second
	twoprocLease       = 2*twoprocStepTimeout + twoprocJobMargin

	// River's fixed periods (v0.51, not configurable on river.Config): a
	// leader's row outlives its last re-election by the elect interval
	// plus 10 s of padding (15 s); an elector tries every 5 s + up to 1 s
	// of jitter; the rescuer runs on the leader when it is elected and
	// every 30 s after; the scheduler makes a rescued job available every
	// 5 s.
	riverLeaderTTL         = 15 * time.Second
	riverElectInterval     = 6 * time.Second
	riverRescuerInterval   = 30 * time.Second
	riverSchedulerInterval = 5 * time.Second

	// twoprocRescueBound bounds the time from the SIGKILL of the
	// application process that ran a step to that step's operation
	// completed in the next process: the job must first have run for
	// longer than the lease (= RescueStuckJobsAfter); the dead process's
	// leadership expires (15 s) and the new process is elected at its next
	// attempt (6 s); the rescuer finds the job at its first run or 30 s
	// later; the scheduler makes it available within 5 s; plus 30 s of
	// slack for the new process to start under -race on a loaded machine
	// and run the three steps. 92 s in all (typically some 25 s); a
	// leader with River's default RescueStuckJobsAfter (1 h), the old
	// console's, never meets it.
	twoprocRescueBound = twoprocLease + riverLeaderTTL + riverElectInterval + riverRescuerInterval +
		riverSchedulerInterval + 30*time.Second

	// twoprocTicks is how many of its periodic jobs the application must
	// run within twoprocTickWindow (one a second; the window allows for a
	// new process's election after its predecessor was killed).
	twoprocTicks      = 5
	twoprocTickWindow = 45 * time.Second

	// twoprocWait bounds the ordinary waits: an operation reaching the
	// status its mode leads to, a bulk run finishing.
	twoprocWait = 90 * time.Second

	twoprocPassword = "twoproc-oncall-password-1234"
	twoprocSecret   = "twoproc-test-secret-0123456789abcdef"
	twoprocAuditKey = "twoproc-test-audit-key-0123456789abcdef"

	// notRegistered is River's refusal to insert a job kind that a client
	// with Workers lacks: what a console with a working River client on the
	// application's tables answered every decision with.
	notRegistered = "not registered in the client's Workers bundle"
)

// ---------------------------------------------------------------------
// The application process.
// ---------------------------------------------------------------------

// TestTwoProcessApp is the application process of
// TestTwoProcessDeployment.
func TestTwoProcessApp(t *testing.T) {
	if os.Getenv(twoprocAppEnv) == "" {
		t.Skip("the application process of TestTwoProcessDeployment")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	require.NoError(t, runTwoprocApp(ctx, os.Getenv(twoprocDBEnv), os.Getenv(twoprocIDEnv), os.Getenv(twoprocHangEnv) == "1", os.Stdout, os.Stderr))
}

// twoprocInput is an operation's input: its mode says how its steps
// behave.
//
//   - "ok": every step succeeds;
//   - "fail_once": ship (retriable) fails permanently at its first attempt,
//     so that the operation is review_required, and succeeds after;
//   - "fail": ship always fails permanently (to be compensated);
//   - "hang": reserve never returns in a process started with
//     UNSTUCK_TWOPROC_HANG=1, and succeeds in any other;
//   - "redrive_hang": as "fail_once", and reserve, when run a second time
//     (a redrive's re-run), never returns in a process started with
//     UNSTUCK_TWOPROC_HANG=1.
type twoprocInput struct {
	Mode string `json:"mode"`
}

type twoprocTickArgs struct{}

func (twoprocTickArgs) Kind() string { return "twoproc.tick" }

// twoprocApp is the application's steps over its own tables: the effect of
// a step (by its key), the attempts of ship (in the database, as a process
// may be killed), a log of the calls with the River client ID of the
// process that made them, and the ticks of the periodic job.
type twoprocApp struct {
	pool *pgxpool.Pool
	id   string
	hang bool
}

const twoprocAppSchema = `
CREATE TABLE IF NOT EXISTS twoproc_tick (at timestamptz NOT NULL DEFAULT clock_timestamp(), client text NOT NULL);
CREATE TABLE IF NOT EXISTS twoproc_effect (key text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS twoproc_attempt (op text NOT NULL, step text NOT NULL, n int NOT NULL, PRIMARY KEY (op, step));
CREATE TABLE IF NOT EXISTS twoproc_call (op text NOT NULL, step text NOT NULL, action text NOT NULL, client text NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp());
`

func runTwoprocApp(ctx context.Context, dbURL, id string, hang bool, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("app", id)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, twoprocAppSchema); err != nil {
		return fmt.Errorf("create the application's tables: %w", err)
	}
	app := &twoprocApp{pool: pool, id: id, hang: hang}
	runner, err := saga.NewRunner(sagapgx.New(pool), saga.Config{Definitions: []saga.Definition{app.definition()}, Logger: log,
		JobMargin: twoprocJobMargin, ReconcileInterval: 2 * time.Second})
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	if err := runner.AddWorkers(workers); err != nil {
		return err
	}
	if err := river.AddWorkerSafely(workers, river.WorkFunc(func(ctx context.Context, _ *river.Job[twoprocTickArgs]) error {
		_, err := pool.Exec(ctx, `INSERT INTO twoproc_tick (client) VALUES ($1)`, id)
		return err
	})); err != nil {
		return err
	}
	tick := river.NewPeriodicJob(river.PeriodicInterval(time.Second), func() (river.JobArgs, *river.InsertOpts) {
		return twoprocTickArgs{}, &river.InsertOpts{Queue: saga.QueueDefault}
	}, &river.PeriodicJobOpts{ID: "twoproc.tick", RunOnStart: true})
	cfg := &river.Config{
		ID:                id,
		FetchPollInterval: 200 * time.Millisecond,
		Logger:            log.With("component", "river"),
		Queues:            map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 10}},
		Workers:           workers,
		PeriodicJobs:      append(runner.PeriodicJobs(), tick),
	}
	// JobTimeout and RescueStuckJobsAfter from the steps' leases (6 s).
	if err := runner.ConfigureRiver(cfg); err != nil {
		return err
	}
	// The idempotency engine of POST /charge, and its verifier, which the
	// console's "Verify with the provider" asks through River (SPEC K19).
	engine, err := idem.New(idempgx.New(pool), idem.Config{Secret: []byte(twoprocSecret), Logger: log})
	if err != nil {
		return err
	}
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		return err
	}
	verify := idemriver.NewVerifyWorker(5 * time.Second)
	if err := verify.Register(twoprocChargeOperation, "twoproc provider", idem.VerifierFunc(app.verifyCharge)); err != nil {
		return err
	}
	if err := idemriver.AddVerifyWorker(workers, cfg, verify); err != nil {
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return err
	}
	runner.SetClient(client)
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	defer func() {
		soft, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(soft); err != nil {
			hard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.StopAndCancel(hard)
		}
	}()

	// POST /start?mode=…&corr=… starts an operation and answers its ID.
	mux := http.NewServeMux()
	mux.HandleFunc("POST /start", func(w http.ResponseWriter, r *http.Request) {
		op, err := runner.Start(r.Context(), twoprocType, twoprocInput{Mode: r.FormValue("mode")},
			&saga.StartOpts{CorrelationID: r.FormValue("corr")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, op.ID)
	})
	// POST /charge?hang=1 charges under the key and loses the answer: the
	// key is left pending, its reference the charge's.
	mux.Handle("POST /charge", mw.Required(&idem.RouteOpts{Name: twoprocChargeOperation})(http.HandlerFunc(app.charge)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(stdout, "twoproc app ready http://%s\n", ln.Addr())
	log.Info("application ready", "addr", ln.Addr().String(), "rescue_stuck_jobs_after", cfg.RescueStuckJobsAfter.String())
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// definition is the application's one operation type: reserve and charge
// (compensatable), then ship (retriable: its permanent failure is
// review_required, with nothing compensated).
func (a *twoprocApp) definition() saga.Definition {
	fast := saga.RetryPolicy{MaxAttempts: 5, Initial: 200 * time.Millisecond, Max: time.Second}
	step := func(name string, kind sagadriver.Kind) saga.Step {
		return saga.Step{Name: name, System: "twoproc", Kind: kind, Do: a.do, Verify: a.verify, Compensate: a.compensate,
			Retry: fast, CompensationRetry: fast, Timeout: twoprocStepTimeout, VerifyAfter: 500 * time.Millisecond}
	}
	ship := step("ship", sagadriver.Retriable)
	ship.Compensate = nil
	return saga.Definition{Type: twoprocType, Steps: []saga.Step{step("reserve", sagadriver.Compensatable), step("charge", sagadriver.Compensatable), ship}}
}

func (a *twoprocApp) logCall(ctx context.Context, in saga.StepInput, action string) error {
	_, err := a.pool.Exec(ctx, `INSERT INTO twoproc_call (op, step, action, client) VALUES ($1, $2, $3, $4)`, in.OperationID, in.Step, action, a.id)
	return err
}

func (a *twoprocApp) do(ctx context.Context, in saga.StepInput) (saga.Result, error) {
	var input twoprocInput
	if err := in.Decode(&input); err != nil {
		return saga.Result{}, saga.Permanent(err)
	}
	if a.hang && input.Mode == "hang" && in.Step == "reserve" {
		// Recorded, then the call never returns, whatever its context
		// says: the test kills this process in the middle of the step.
		if err := a.logCall(ctx, in, "hang"); err != nil {
			return saga.Result{}, err
		}
		select {}
	}
	if a.hang && input.Mode == "redrive_hang" && in.Step == "reserve" {
		var n int
		if err := a.pool.QueryRow(ctx, `INSERT INTO twoproc_attempt (op, step, n) VALUES ($1, $2, 1)
			ON CONFLICT (op, step) DO UPDATE SET n = twoproc_attempt.n + 1 RETURNING n`, in.OperationID, in.Step).Scan(&n); err != nil {
			return saga.Result{}, err
		}
		if n == 2 {
			if err := a.logCall(ctx, in, "hang"); err != nil {
				return saga.Result{}, err
			}
			select {}
		}
	}
	if in.Step == "ship" && (input.Mode == "fail" || input.Mode == "fail_once" || input.Mode == "redrive_hang") {
		var n int
		if err := a.pool.QueryRow(ctx, `INSERT INTO twoproc_attempt (op, step, n) VALUES ($1, $2, 1)
			ON CONFLICT (op, step) DO UPDATE SET n = twoproc_attempt.n + 1 RETURNING n`, in.OperationID, in.Step).Scan(&n); err != nil {
			return saga.Result{}, err
		}
		if input.Mode == "fail" || n == 1 {
			if err := a.logCall(ctx, in, "refused"); err != nil {
				return saga.Result{}, err
			}
			return saga.Result{}, saga.Permanent(fmt.Errorf("the carrier refused attempt %d", n))
		}
	}
	if _, err := a.pool.Exec(ctx, `INSERT INTO twoproc_effect (key) VALUES ($1) ON CONFLICT DO NOTHING`, in.StepKey); err != nil {
		return saga.Result{}, err
	}
	if err := a.logCall(ctx, in, "do"); err != nil {
		return saga.Result{}, err
	}
	return saga.Result{ExternalID: in.StepKey}, nil
}

func (a *twoprocApp) verify(ctx context.Context, in saga.StepInput) (saga.Verification, error) {
	var applied bool
	if err := a.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM twoproc_effect WHERE key = $1)`, in.StepKey).Scan(&applied); err != nil {
		return saga.Verification{}, err
	}
	if applied {
		return saga.Verification{Outcome: saga.Applied, Result: saga.Result{ExternalID: in.StepKey}}, nil
	}
	return saga.Verification{Outcome: saga.NotApplied, Detail: "no effect under " + in.StepKey}, nil
}

// twoprocChargeOperation is the operation of the application's keys.
const twoprocChargeOperation = "POST /charge"

// charge makes the charge (an effect row under a reference derived from
// the key), then loses the provider's answer: the key is left pending.
func (a *twoprocApp) charge(w http.ResponseWriter, r *http.Request) {
	info, _ := idem.RunInfoFrom(r.Context())
	ref := "twoproc-charge-" + info.KeyDigest[:16]
	if r.URL.Query().Get("hang") == "1" {
		ref = "twoproc-hang-" + info.KeyDigest[:16]
	}
	_ = idem.Annotate(r.Context(), idem.Annotation{ExternalRef: ref})
	if _, err := a.pool.Exec(r.Context(), `INSERT INTO twoproc_effect (key) VALUES ($1) ON CONFLICT DO NOTHING`, ref); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = idem.MarkUncertain(r.Context(), "the provider's answer was lost after the charge")
	w.WriteHeader(http.StatusAccepted)
}

// verifyCharge is the application's verifier of charges: the effect row
// under the key's reference. In a process started to hang, a charge made
// with ?hang=1 is verified only after the call is recorded, and never
// answers: the test kills the process in the middle.
func (a *twoprocApp) verifyCharge(ctx context.Context, ab idem.Abandoned) (idem.Verification, error) {
	if a.hang && strings.HasPrefix(ab.ExternalRef, "twoproc-hang-") {
		if _, err := a.pool.Exec(ctx, `INSERT INTO twoproc_call (op, step, action, client) VALUES ($1, 'verify', 'hang', $2)`, ab.ExternalRef, a.id); err != nil {
			return idem.Verification{}, err
		}
		select {}
	}
	var found bool
	if err := a.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM twoproc_effect WHERE key = $1)`, ab.ExternalRef).Scan(&found); err != nil {
		return idem.Verification{}, err
	}
	if !found {
		return idem.Verification{Verdict: idem.VerdictNotHappened, Evidence: "no charge under " + ab.ExternalRef}, nil
	}
	if _, err := a.pool.Exec(ctx, `INSERT INTO twoproc_call (op, step, action, client) VALUES ($1, 'verify', 'answer', $2)`, ab.ExternalRef, a.id); err != nil {
		return idem.Verification{}, err
	}
	return idem.Verification{Verdict: idem.VerdictHappened, ExternalRef: "ch-" + ab.ExternalRef, Evidence: "charge found by " + a.id}, nil
}

func (a *twoprocApp) compensate(ctx context.Context, in saga.StepInput) error {
	if _, err := a.pool.Exec(ctx, `DELETE FROM twoproc_effect WHERE key = $1`, in.StepKey); err != nil {
		return err
	}
	return a.logCall(ctx, in, "compensate")
}

// ---------------------------------------------------------------------
// The test.
// ---------------------------------------------------------------------

func TestTwoProcessDeployment(t *testing.T) {
	slowtest.Skip(t, slowtest.Fault)
	t.Parallel()
	if os.Getenv(twoprocAppEnv) != "" {
		t.Skip("in the application process")
	}
	dbURL := pgtest.Database(t)
	bin := twoprocConsoleBinary(t)

	// The console's deployment steps, as its README gives them.
	twoprocRun(t, bin, nil, "migrate", "--db", dbURL)
	twoprocRun(t, bin, strings.NewReader(twoprocPassword+"\n"), "user", "add", "--username", "oncall", "--role", "oncall", "--db", dbURL)

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	serve := exec.Command(bin, "serve", "--db", dbURL, "--addr", "127.0.0.1:0", "--insecure-cookies", "--approval-required", "none")
	serve.Env = append(twoprocEnvWithout("UNSTUCK_"), "UNSTUCK_SECRET="+twoprocSecret, "UNSTUCK_AUDIT_KEY="+twoprocAuditKey)
	console := consoletest.StartProcess(t, t, "console", serve, "console listening on ")

	// Watch public.river_leader from now to the end.
	leaders := watchTwoprocLeader(pool)
	t.Cleanup(leaders.stop)
	// Give a console that runs a River client on the application's tables
	// the time to be elected before the application starts (it takes
	// milliseconds): that console then keeps the leadership, and the
	// checks below fail every time rather than by the luck of a race. A
	// console that does not elect itself there leaves no row; this only
	// waits.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && leaders.polls() == 0; {
		time.Sleep(100 * time.Millisecond)
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && len(leaders.snapshot()) == 0; {
		time.Sleep(100 * time.Millisecond)
	}

	// The application's processes belong to the whole test (not to the
	// subtest that starts the second one), which stops them at its end.
	parent := t
	app := startTwoprocApp(t, parent, dbURL, twoprocAppIDPrefix+"1", true)
	oncall := consoletest.SignIn(t, console.Base, "oncall", twoprocPassword)
	d := sagapgx.New(pool)

	t.Run("PeriodicJobFires", func(t *testing.T) {
		waitTwoprocTicks(t, pool, leaders)
	})

	t.Run("RetryFromConsole", func(t *testing.T) {
		id := startTwoprocOperation(t, app, "fail_once", "twoproc-single")
		waitTwoprocStatus(t, d, id, sagadriver.StatusReviewRequired, twoprocWait)
		path := "/operations/" + id
		resp, page := oncall.Do(t, http.MethodGet, path, nil, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "the operation's page: %s", consoletest.PageText(page))
		version, key := consoletest.DecisionForm(t, page, path+"/retry")
		resp, body := oncall.Do(t, http.MethodPost, path+"/retry", url.Values{"version": {version}, "step": {"ship"},
			"reason": {"the carrier is back after its outage"}, "form_key": {key}}, "")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the console's retry answers 303 (it answered %d: %s)", resp.StatusCode, consoletest.PageText(body))
		waitTwoprocStatus(t, d, id, sagadriver.StatusCompleted, twoprocWait)
		var attempts int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT n FROM twoproc_attempt WHERE op = $1 AND step = 'ship'`, id).Scan(&attempts))
		require.Equal(t, 2, attempts, "ship ran once more, after the retry")
		requireTwoprocCall(t, pool, id, "ship", "do", twoprocAppIDPrefix+"1")
	})

	t.Run("CompensateFromConsole", func(t *testing.T) {
		id := startTwoprocOperation(t, app, "fail", "twoproc-compensate")
		waitTwoprocStatus(t, d, id, sagadriver.StatusReviewRequired, twoprocWait)
		path := "/operations/" + id
		resp, page := oncall.Do(t, http.MethodGet, path, nil, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "the operation's page: %s", consoletest.PageText(page))
		version, key := consoletest.DecisionForm(t, page, path+"/compensate")
		resp, body := oncall.Do(t, http.MethodPost, path+"/compensate", url.Values{"version": {version},
			"reason": {"the carrier will not ship this order"}, "form_key": {key}}, "")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the console's compensate answers 303 (it answered %d: %s)", resp.StatusCode, consoletest.PageText(body))
		op := waitTwoprocStatus(t, d, id, sagadriver.StatusCompensated, twoprocWait)
		for _, name := range []string{"reserve", "charge"} {
			st, _ := op.Step(name)
			require.Equal(t, sagadriver.CompCompleted, st.CompStatus, "step %s compensated", name)
			requireTwoprocCall(t, pool, id, name, "compensate", twoprocAppIDPrefix+"1")
		}
	})

	t.Run("RedriveFromConsole", func(t *testing.T) {
		// SPEC G12: the console plans a re-run from the first step from
		// the records (it has no definitions) and the application's
		// workers run it: the steps that happened replay under their keys.
		id := startTwoprocOperation(t, app, "fail_once", "twoproc-redrive")
		waitTwoprocStatus(t, d, id, sagadriver.StatusReviewRequired, twoprocWait)
		twoprocRedrive(t, oncall, id)
		waitTwoprocStatus(t, d, id, sagadriver.StatusCompleted, twoprocWait)
		requireTwoprocRedriveEffects(t, pool, id, twoprocAppIDPrefix+"1", 2)
	})

	keys := idempgx.New(pool)
	t.Run("VerifyFromConsole", func(t *testing.T) {
		// The console asks; the application's worker runs its verifier;
		// the console applies the answer in the operator's name.
		rec := twoprocCharge(t, app, keys, "twoproc-verify-charge-0001", false)
		requestTwoprocVerify(t, oncall, rec)
		got := waitTwoprocKey(t, keys, rec.ID, idemdriver.StatusCompleted, twoprocWait)
		require.Equal(t, "ch-"+rec.ExternalRef, got.ExternalRef, "completed with the verifier's reference")
		require.Equal(t, 1, twoprocAppliedDecisions(t, pool, rec.ID), "one decision")
	})

	t.Run("ReconciliationFindingStaysResolved", func(t *testing.T) {
		// The application's reconciliation (a periodic job, so on its
		// leader) finds that a completed operation's shipment is gone at
		// the provider, and raises it for review; an operator resolves it
		// from the console; the same difference is never raised again.
		id := startTwoprocOperation(t, app, "ok", "twoproc-drift")
		op := waitTwoprocStatus(t, d, id, sagadriver.StatusCompleted, twoprocWait)
		ship, _ := op.Step("ship")
		_, err := pool.Exec(t.Context(), `DELETE FROM twoproc_effect WHERE key = $1`, ship.Key)
		require.NoError(t, err)
		op = waitTwoprocStatus(t, d, id, sagadriver.StatusReviewRequired, twoprocWait)
		require.NotEmpty(t, op.ReviewReason, "the finding says why")
		path := "/operations/" + id
		resp, page := oncall.Do(t, http.MethodGet, path, nil, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "the operation's page: %s", consoletest.PageText(page))
		version, key := consoletest.DecisionForm(t, page, path+"/resolve")
		resp, body := oncall.Do(t, http.MethodPost, path+"/resolve", url.Values{"version": {version}, "status": {"completed"},
			"reason": {"the carrier re-created the shipment by hand"}, "form_key": {key}}, "")
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the console's resolve answers 303 (it answered %d: %s)", resp.StatusCode, consoletest.PageText(body))
		waitTwoprocStatus(t, d, id, sagadriver.StatusCompleted, twoprocWait)
		// Reconciliation runs every 2 s and still sees the difference:
		// after several runs the resolution stands.
		for until := time.Now().Add(8 * time.Second); time.Now().Before(until); time.Sleep(250 * time.Millisecond) {
			require.Equal(t, sagadriver.StatusCompleted, twoprocOperation(t, d, id).Status, "the resolution stays resolved")
		}
	})

	t.Run("BulkRetryCompletes", func(t *testing.T) {
		twoprocBulkCompletes(t, app, oncall, d, pool, "retry", "twoproc-bulk", "the carrier is back: retry every refused shipment")
	})

	t.Run("BulkRedriveCompletes", func(t *testing.T) {
		// SPEC G12, K22–K23: a frozen set of operations under review,
		// each resumed at its failed step, canary batch first, by the
		// application's workers.
		twoprocBulkCompletes(t, app, oncall, d, pool, "redrive", "twoproc-bulk-redrive", "the carrier is back: resume every refused shipment")
	})

	var hungVerify idemdriver.Record
	t.Run("RescueAfterSIGKILL", func(t *testing.T) {
		// A verification whose verifier is in the middle of its call when
		// the process dies, too.
		hungVerify = twoprocCharge(t, app, keys, "twoproc-verify-hang-00001", true)
		requestTwoprocVerify(t, oncall, hungVerify)
		for deadline := time.Now().Add(twoprocWait); ; time.Sleep(100 * time.Millisecond) {
			var n int
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM twoproc_call WHERE op = $1 AND action = 'hang'`, hungVerify.ExternalRef).Scan(&n))
			if n > 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "the verifier was never called")
		}
		// A redrive whose re-run is in the middle of its first step when
		// the process dies (SPEC G12: resumed, no step run twice without
		// its key, one audit entry).
		redriven := startTwoprocOperation(t, app, "redrive_hang", "twoproc-redrive-rescue")
		waitTwoprocStatus(t, d, redriven, sagadriver.StatusReviewRequired, twoprocWait)
		twoprocRedrive(t, oncall, redriven)
		for deadline := time.Now().Add(twoprocWait); ; time.Sleep(100 * time.Millisecond) {
			var n int
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM twoproc_call WHERE op = $1 AND step = 'reserve' AND action = 'hang'`, redriven).Scan(&n))
			if n > 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "the redriven reserve never started")
		}
		id := startTwoprocOperation(t, app, "hang", "twoproc-rescue")
		// The step is in the middle of its call: the call is recorded and
		// River's job is running.
		for deadline := time.Now().Add(twoprocWait); ; {
			var calls int
			var state string
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM twoproc_call WHERE op = $1 AND step = 'reserve' AND action = 'hang'),
				coalesce((SELECT state::text FROM public.river_job WHERE kind = 'saga.step' AND args->>'operation_id' = $1 AND args->>'step' = 'reserve'
				ORDER BY id DESC LIMIT 1), '')`, id).Scan(&calls, &state))
			if calls > 0 && state == "running" {
				break
			}
			require.True(t, time.Now().Before(deadline), "the step reserve never started (calls %d, job %q)", calls, state)
			time.Sleep(100 * time.Millisecond)
		}
		app.Kill(t)
		killed := time.Now()
		app = startTwoprocApp(t, parent, dbURL, twoprocAppIDPrefix+"2", false)

		waitTwoprocStatus(t, d, id, sagadriver.StatusCompleted, twoprocRescueBound-time.Since(killed))
		t.Logf("the step killed in the middle was rescued, and its operation completed, %v after the SIGKILL (bound %v)",
			time.Since(killed).Round(time.Second), twoprocRescueBound)
		requireTwoprocCall(t, pool, id, "reserve", "do", twoprocAppIDPrefix+"2")
		waitTwoprocStatus(t, d, redriven, sagadriver.StatusCompleted, twoprocRescueBound-time.Since(killed))
		// The rescued reserve found its effect by verification and was not
		// called again; the steps after it ran on the next process.
		requireTwoprocRedriveEffects(t, pool, redriven, twoprocAppIDPrefix+"2", 1)
		var errs string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT coalesce(errors::text, '') FROM public.river_job WHERE kind = 'saga.step'
			AND args->>'operation_id' = $1 AND args->>'step' = 'reserve' ORDER BY id DESC LIMIT 1`, id).Scan(&errs))
		require.Contains(t, errs, "Stuck job rescued by JobRescuer", "River's rescuer handed the job over")
	})

	t.Run("VerificationResumedAfterSIGKILL", func(t *testing.T) {
		// River rescued the verification job of the killed process; the
		// next process answered; the console decided once.
		got := waitTwoprocKey(t, keys, hungVerify.ID, idemdriver.StatusCompleted, twoprocRescueBound)
		require.Equal(t, "ch-"+hungVerify.ExternalRef, got.ExternalRef)
		var by string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT client FROM twoproc_call WHERE op = $1 AND action = 'answer'`, hungVerify.ExternalRef).Scan(&by))
		require.Equal(t, twoprocAppIDPrefix+"2", by, "answered by the next process")
		require.Equal(t, 1, twoprocAppliedDecisions(t, pool, hungVerify.ID), "one decision")
	})

	t.Run("PeriodicJobFiresAfterRestart", func(t *testing.T) {
		waitTwoprocTicks(t, pool, leaders)
	})

	t.Run("LeaderIsTheApplication", func(t *testing.T) {
		leaders.stop()
		seen := leaders.snapshot()
		var foreign []string
		for id, n := range seen {
			if !strings.HasPrefix(id, twoprocAppIDPrefix) {
				foreign = append(foreign, fmt.Sprintf("%s (%d of %d polls)", id, n, leaders.polls()))
			}
		}
		slices.Sort(foreign)
		require.Empty(t, foreign, "public.river_leader named a client other than the application's (%s*): %v", twoprocAppIDPrefix, seen)
		require.NotEmpty(t, seen, "public.river_leader was read and named the application at least once (%d polls, last error %q)",
			leaders.polls(), leaders.lastError())
	})

	t.Run("ConsoleLogsNoUnregisteredKind", func(t *testing.T) {
		var refused []string
		for line := range strings.Lines(console.Errs.String()) {
			if strings.Contains(line, notRegistered) {
				refused = append(refused, strings.TrimSpace(line))
			}
		}
		require.Empty(t, refused, "the console's stderr says %q: it inserted a job kind its River client refuses", notRegistered)
	})
}

// ---------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------

// twoprocConsoleBinary builds the console as production does (with -race
// when this test binary has it), or returns UNSTUCK_TWOPROC_CONSOLE_BIN.
func twoprocConsoleBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(twoprocConsoleBinEnv); bin != "" {
		t.Logf("console binary from %s: %s", twoprocConsoleBinEnv, bin)
		return bin
	}
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the console")
	out := filepath.Join(t.TempDir(), "console")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool, append(args, "./cmd/console")...)
	cmd.Dir = filepath.Join("..", "..", "..") // the module's root
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), b)
	return out
}

// twoprocEnvWithout returns this process's environment without the
// variables that start with prefix.
func twoprocEnvWithout(prefix string) []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, prefix) })
}

// twoprocRun runs one command of the console binary to its end.
func twoprocRun(t *testing.T, bin string, stdin io.Reader, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = twoprocEnvWithout("UNSTUCK_")
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "console %s:\n%s", args[0], out)
}

// startTwoprocApp starts an application process whose River client has
// the ID id, stopped when owner ends; hang makes the step reserve of a
// "hang" operation never return in it.
func startTwoprocApp(t, owner *testing.T, dbURL, id string, hang bool) *consoletest.Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTwoProcessApp$", "-test.count=1")
	cmd.Env = append(twoprocEnvWithout("UNSTUCK_TWOPROC_"), twoprocAppEnv+"=1", twoprocDBEnv+"="+dbURL, twoprocIDEnv+"="+id)
	if hang {
		cmd.Env = append(cmd.Env, twoprocHangEnv+"=1")
	}
	return consoletest.StartProcess(t, owner, id, cmd, "twoproc app ready ")
}

// startTwoprocOperation starts an operation in mode through the
// application and returns its ID.
func startTwoprocOperation(t *testing.T, app *consoletest.Process, mode, corr string) string {
	t.Helper()
	resp, err := http.Post(app.Base+"/start?"+url.Values{"mode": {mode}, "corr": {corr}}.Encode(), "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the application started no operation: %s", b)
	return string(b)
}

// twoprocCharge makes a charge through the application whose answer is
// lost (?hang=1: its verifier hangs in a process started to hang) and
// returns its key record, pending.
func twoprocCharge(t *testing.T, app *consoletest.Process, keys *idempgx.Store, raw string, hang bool) idemdriver.Record {
	t.Helper()
	u := app.Base + "/charge"
	if hang {
		u += "?hang=1"
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(`{"amount":1999}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", `"`+raw+`"`)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "the charge: %s", b)
	page, err := keys.ListKeys(t.Context(), idemdriver.KeyFilter{KeyHash: idem.KeyHash(raw)})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	require.Equal(t, idemdriver.StatusPending, page.Records[0].Status)
	return page.Records[0]
}

// requestTwoprocVerify asks the console to verify rec, through the key
// page's form.
func requestTwoprocVerify(t *testing.T, c *consoletest.Session, rec idemdriver.Record) {
	t.Helper()
	path := "/keys/" + strconv.FormatInt(rec.ID, 10)
	resp, page := c.Do(t, http.MethodGet, path, nil, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, consoletest.PageText(page))
	version, key := consoletest.DecisionForm(t, page, path+"/verify")
	resp, body := c.Do(t, http.MethodPost, path+"/verify", url.Values{"version": {version}, "form_key": {key},
		"reason": {"the customer says the charge is stuck"}}, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the console's verify answers 303 (it answered %d: %s)", resp.StatusCode, consoletest.PageText(body))
}

// waitTwoprocKey waits until key record id is in status.
func waitTwoprocKey(t *testing.T, keys *idempgx.Store, id int64, status idemdriver.Status, within time.Duration) idemdriver.Record {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		rec, ok, err := keys.KeyByID(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok, "key %d is gone", id)
		if rec.Status == status {
			return rec
		}
		require.True(t, time.Now().Before(deadline), "key %d is %s, not %s, after %v", id, rec.Status, status, within)
	}
}

// twoprocAppliedDecisions counts the decisions applied to key record id
// in the console's audit trail.
func twoprocAppliedDecisions(t *testing.T, pool *pgxpool.Pool, id int64) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM unstuck_audit_entry WHERE target_kind = 'key' AND target_id = $1 AND outcome = 'applied'`,
		strconv.FormatInt(id, 10)).Scan(&n))
	return n
}

// twoprocOperation reads an operation from the saga's tables.
func twoprocOperation(t *testing.T, d *sagapgx.Driver, id string) sagadriver.Operation {
	t.Helper()
	var op sagadriver.Operation
	require.NoError(t, d.WithinTx(t.Context(), func(ctx context.Context, tx pgx.Tx) error {
		var err error
		op, err = d.GetOperation(ctx, tx, id, false)
		return err
	}))
	return op
}

// waitTwoprocStatus polls the operation until it is in status, failing
// after within.
func waitTwoprocStatus(t *testing.T, d *sagapgx.Driver, id string, status sagadriver.Status, within time.Duration) sagadriver.Operation {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		op := twoprocOperation(t, d, id)
		if op.Status == status {
			return op
		}
		if time.Now().After(deadline) {
			var steps []string
			for _, s := range op.Steps {
				steps = append(steps, fmt.Sprintf("%s=%s(attempts %d, compensation %s) %s", s.Name, s.Status, s.Attempts, s.CompStatus, s.LastError))
			}
			require.Failf(t, "operation not in its expected status", "operation %s is %s, not %s, after %v (review reason %q, last error %q); steps: %s",
				id, op.Status, status, within, op.ReviewReason, op.LastError, strings.Join(steps, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requireTwoprocCall checks that the application process client made the
// call action of the operation's step.
func requireTwoprocCall(t *testing.T, pool *pgxpool.Pool, id, step, action, client string) {
	t.Helper()
	var n int
	var by string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE client = $4), coalesce(string_agg(client, ','), '')
		FROM twoproc_call WHERE op = $1 AND step = $2 AND action = $3`, id, step, action, client).Scan(&n, &by))
	require.Positive(t, n, "the %s of step %s of %s ran in the application's workers (%s); the calls were made by [%s]", action, step, id, client, by)
}

// waitTwoprocTicks requires twoprocTicks new runs of the application's
// periodic job within twoprocTickWindow.
func waitTwoprocTicks(t *testing.T, pool *pgxpool.Pool, leaders *twoprocLeaders) {
	t.Helper()
	var since time.Time
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT now()`).Scan(&since))
	deadline := time.Now().Add(twoprocTickWindow)
	for {
		var n int
		var by string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*), coalesce(string_agg(DISTINCT client, ','), '') FROM twoproc_tick WHERE at > $1`,
			since).Scan(&n, &by))
		if n >= twoprocTicks {
			t.Logf("%d ticks by [%s]", n, by)
			return
		}
		require.True(t, time.Now().Before(deadline), "the application's periodic job (every second) ran %d times in %v, want %d; public.river_leader named %v",
			n, twoprocTickWindow, twoprocTicks, leaders.snapshot())
		time.Sleep(200 * time.Millisecond)
	}
}

// twoprocLeaders records what public.river_leader names, every 200 ms.
type twoprocLeaders struct {
	mu      sync.Mutex
	seen    map[string]int
	n       int
	lastErr string
	cancel  context.CancelFunc
	done    chan struct{}
}

func watchTwoprocLeader(pool *pgxpool.Pool) *twoprocLeaders {
	ctx, cancel := context.WithCancel(context.Background())
	l := &twoprocLeaders{seen: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			rows, err := pool.Query(ctx, `SELECT leader_id FROM public.river_leader`)
			var ids []string
			if err == nil {
				ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			l.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					l.lastErr = err.Error()
				}
			} else {
				l.n++
				for _, id := range ids {
					l.seen[id]++
				}
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

// stop ends the watch (and may be called again).
func (l *twoprocLeaders) stop() {
	l.cancel()
	<-l.done
}

func (l *twoprocLeaders) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.seen))
	for k, v := range l.seen {
		out[k] = v
	}
	return out
}

func (l *twoprocLeaders) polls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *twoprocLeaders) lastError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// twoprocBulkCompletes puts three operations under review (their
// shipment refused once), takes action on all of them in one bulk request
// from the console, and checks that each completes on the application's
// workers.
func twoprocBulkCompletes(t *testing.T, app *consoletest.Process, oncall *consoletest.Session, d *sagapgx.Driver, pool *pgxpool.Pool, action, corr, reason string) {
	t.Helper()
	const n = 3
	ids := make([]string, n)
	for i := range ids {
		ids[i] = startTwoprocOperation(t, app, "fail_once", corr)
	}
	for _, id := range ids {
		waitTwoprocStatus(t, d, id, sagadriver.StatusReviewRequired, twoprocWait)
	}
	loc, page := oncall.Freeze(t, "/operations/bulk?action="+action+"&status=review_required&correlation_id="+corr)
	legal := regexp.MustCompile(`<strong>(\d+)</strong> matching items can be decided`).FindStringSubmatch(page)
	require.Len(t, legal, 2, "the preview counts the items: %s", consoletest.PageText(page))
	require.Equal(t, strconv.Itoa(n), legal[1], "the preview finds the %d operations under review", n)
	form := consoletest.HiddenFields(t, page, loc+"/submit")
	require.NotEmpty(t, form.Get("form_key"), "the bulk form carries a form key")
	form.Set("reason", reason)
	form.Set("confirm_count", legal[1])
	resp, body := oncall.Do(t, http.MethodPost, loc+"/submit", form, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the bulk request answers 303 (it answered %d: %s)", resp.StatusCode, consoletest.PageText(body))
	require.Equal(t, loc, resp.Header.Get("Location"))

	var got twoprocBulk
	for deadline := time.Now().Add(twoprocWait); ; {
		resp, body := oncall.Do(t, http.MethodGet, loc, nil, "application/json")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.NoError(t, json.Unmarshal([]byte(body), &got), body)
		if got.Status != "running" && got.Status != "waiting_approval" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the bulk run did not finish within %v: %+v", twoprocWait, got)
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, "done", got.Status, "the bulk request is done: %+v", got)
	require.EqualValues(t, n, got.Applied, "every item of the bulk %s applied: %+v", action, got)
	for _, id := range ids {
		waitTwoprocStatus(t, d, id, sagadriver.StatusCompleted, twoprocWait)
		requireTwoprocCall(t, pool, id, "ship", "do", twoprocAppIDPrefix+"1")
	}
}

// twoprocRedrive re-runs operation id from its first step through the
// console's redrive page and form, checking the preview first.
func twoprocRedrive(t *testing.T, oncall *consoletest.Session, id string) {
	t.Helper()
	path := "/operations/" + id
	resp, page := oncall.Do(t, http.MethodGet, path+"/redrive?mode=rerun&step=reserve", nil, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the redrive page: %s", consoletest.PageText(page))
	require.Contains(t, page, `<tr data-action="replays"><th scope="row">charge</th>`, "the charge replays under its key: %s", consoletest.PageText(page))
	plan := strings.Index(page, `data-testid="redrive-plan"`)
	require.Positive(t, plan, "the page shows the plan: %s", consoletest.PageText(page))
	form := consoletest.HiddenFields(t, page[plan:], path+"/redrive")
	require.Equal(t, "rerun", form.Get("mode"))
	form.Set("reason", "the carrier is back: run the order again from the start")
	resp, body := oncall.Do(t, http.MethodPost, path+"/redrive", form, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the console's redrive answers 303 (it answered %d: %s)", resp.StatusCode, consoletest.PageText(body))
}

// requireTwoprocRedriveEffects checks a re-run operation: one effect per
// step key; charge called again (and answered with its first effect), by
// client; reserve called reserveDo times (twice, or once when a rescued
// re-run verified its effect instead of calling again); one applied
// redrive in the audit trail.
func requireTwoprocRedriveEffects(t *testing.T, pool *pgxpool.Pool, id, client string, reserveDo int) {
	t.Helper()
	requireTwoprocCall(t, pool, id, "charge", "do", client)
	for step, want := range map[string]int{"reserve": reserveDo, "charge": 2, "ship": 0} {
		var calls, effects int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM twoproc_call WHERE op = $1 AND step = $2 AND action = 'do'`, id, step).Scan(&calls))
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM twoproc_effect WHERE key = $1`, id+"/"+step).Scan(&effects))
		require.Equal(t, 1, effects, "one effect of %s under its key", step)
		if want > 0 {
			require.Equal(t, want, calls, "the calls of %s", step)
		}
	}
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM unstuck_audit_entry WHERE target_kind = 'operation' AND target_id = $1
		AND action = 'operation.redrive' AND outcome = 'applied'`, id).Scan(&n))
	require.Equal(t, 1, n, "one redrive in the audit trail")
}

// twoprocBulk is GET /bulk/{id} as JSON.
type twoprocBulk struct {
	ID      int64  `json:"id"`
	Action  string `json:"action"`
	Status  string `json:"status"`
	Total   int64  `json:"total"`
	Applied int64  `json:"applied"`
	Skipped int64  `json:"skipped"`
	Refused int64  `json:"refused"`
	Failed  int64  `json:"failed"`
}
