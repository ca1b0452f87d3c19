package crash

import (
	"context"
	"net/http/httptest"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

const (
	crashWorkerEnv   = "UNSTUCK_CRASH_WORKER"
	crashDBEnv       = "UNSTUCK_CRASH_DB"
	crashProviderEnv = "UNSTUCK_CRASH_PROVIDER"
)

// crashStepTimeout is the Timeout of the crash test's steps. Nothing else
// is configured: River's recovery knobs are saga.Runner.ConfigureRiver's
// defaults, so a step's lease is 2 × 5 s + the 30 s default JobMargin.
const (
	crashStepTimeout = 5 * time.Second
	crashLease       = 2*crashStepTimeout + 30*time.Second
)

// TestSignupCrashWorker is the worker process of TestSignupCrash: the demo
// with the workspace provider at UNSTUCK_CRASH_PROVIDER and a step Timeout
// of 5 s.
func TestSignupCrashWorker(t *testing.T) {
	if os.Getenv(crashWorkerEnv) == "" {
		t.Skip("the worker process of TestSignupCrash")
	}
	consolecmd.UseDemoWorkspaces(os.Getenv(crashProviderEnv), crashStepTimeout)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := consolecmd.Run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", os.Getenv(crashDBEnv), "--traffic=false"},
		func(string) string { return "" }, os.Stdout, os.Stderr)
	require.NoError(t, err)
}

func startWorker(t *testing.T, dbURL, providerURL string) *consoletest.Process {
	t.Helper()
	cmd := consoletest.TestBinary("TestSignupCrashWorker", crashWorkerEnv+"=1", crashDBEnv+"="+dbURL, crashProviderEnv+"="+providerURL)
	return consoletest.StartProcess(t, t, "worker", cmd, "listening on ")
}

// riverAttempt returns the attempt of the River job of the operation's
// workspace step.
func riverAttempt(t *testing.T, dbURL, id string) int {
	t.Helper()
	ctx := t.Context()
	var n int
	if path, ok := strings.CutPrefix(dbURL, "sqlite:"); ok {
		db, err := idemsqlite.Open(path)
		require.NoError(t, err)
		defer db.Close()
		require.NoError(t, db.QueryRowContext(ctx, `SELECT attempt FROM river_job WHERE kind = 'saga.step'
			AND json_extract(args, '$.operation_id') = ? AND json_extract(args, '$.step') = 'workspace'`, id).Scan(&n))
		return n
	}
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, `SELECT attempt FROM river_job WHERE kind = 'saga.step'
		AND args->>'operation_id' = $1 AND args->>'step' = 'workspace'`, id).Scan(&n))
	return n
}

func TestSignupCrash(t *testing.T) {
	slowtest.Skip(t, slowtest.Fault)
	t.Parallel()
	if os.Getenv(crashWorkerEnv) != "" {
		t.Skip("in a worker process")
	}
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL and SIGTERM")
	}
	for _, db := range consoletest.DemoDatabases {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			dbURL := db.URL(t)

			provider := demo.NewWorkspaceProvider()
			applied := make(chan string, 1)
			killed := make(chan struct{})
			var once sync.Once
			provider.AfterApply = func(key string) {
				once.Do(func() {
					applied <- key
					<-killed // the answer is never sent: its caller is dead
				})
			}
			srv := httptest.NewServer(demo.WorkspaceHandler(provider))
			t.Cleanup(srv.Close)
			client := &demo.WorkspaceClient{BaseURL: srv.URL}

			first := startWorker(t, dbURL, srv.URL)
			id := consoletest.PostSignup(t, first.Base, consoletest.SignupKey(t, "crash"), `{"email":"crash@example.com"}`)
			var key string
			select {
			case key = <-applied:
			case <-time.After(30 * time.Second):
				t.Fatalf("the workspace was never created:\n%s", first.Errs.String())
			}
			require.Equal(t, id+"/workspace", key)
			// The effect is applied, the worker waits for the answer: kill it.
			first.Kill(t)
			killedAt := time.Now()
			close(killed)

			// Before the local commit: the step is still running, its one
			// attempt unrecorded; the provider has the workspace.
			op, _ := consoletest.SagaRecords(t, dbURL, id)
			ws, _ := op.Step("workspace")
			require.Equal(t, sagadriver.StepRunning, ws.Status)
			require.Equal(t, 1, ws.Attempts)
			require.Empty(t, ws.ExternalID)
			counts, err := client.Counts(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, demo.WorkspaceCounts{Creates: 1, Effects: 1}, counts)

			second := startWorker(t, dbURL, srv.URL)
			upAfter := time.Since(killedAt)
			v := consoletest.WaitSignup(t, second.Base, id, sagadriver.StatusCompleted, 2*crashLease+60*time.Second)
			recovery := time.Since(killedAt)
			// With River's defaults the step stayed
			// running for an hour. The product's bound, not a
			// performance figure: resumed (and here completed) within
			// 2 × its lease + 30 s of the crash.
			require.LessOrEqual(t, recovery, 2*crashLease+30*time.Second, "time from SIGKILL to the step resumed and the operation completed")

			step := consoletest.SignupStep(t, v, "workspace")
			counts, err = client.Counts(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, demo.WorkspaceCounts{Creates: 1, Effects: 1}, counts, "the effect applied once, never asked for again")
			live := consoletest.Workspaces(t, second.Base, id)
			require.Len(t, live, 1)
			require.Equal(t, live[0].ID, step.ExternalID, "the verification recorded the workspace")
			require.Equal(t, 2, step.Attempts, "the interrupted attempt and the verifying one")
			require.Equal(t, "active", v.Account.Status)
			_, evs := consoletest.SagaRecords(t, dbURL, id)
			verified := false
			for _, e := range evs {
				verified = verified || (e.Step == "workspace" && e.Action == "step_begun" && strings.Contains(e.Message, "verifying first"))
			}
			require.True(t, verified, "the second worker verified before executing")
			attempt := riverAttempt(t, dbURL, id)
			require.Equal(t, 2, attempt, "River rescued the job once")
			second.Stop(t)
			t.Logf("crash figures (%s, step lease %s, bound %s): worker 2 up %v after SIGKILL; job rescued %s after SIGKILL; operation completed %v after SIGKILL; provider Create calls %d, workspaces made %d; step attempts %d; River job attempt %d",
				db.Name, crashLease, 2*crashLease+30*time.Second, upAfter.Round(time.Millisecond), rescuedAfter(second.Errs.String(), killedAt), recovery.Round(time.Millisecond),
				counts.Creates, counts.Effects, step.Attempts, attempt)
		})
	}
}

// rescuedAfter finds in a worker's log when River's rescuer moved the
// stuck job, as a time since killedAt.
func rescuedAfter(log string, killedAt time.Time) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "JobRescuer: Ran successfully") {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
			return at.Sub(killedAt).Round(time.Millisecond).String()
		}
	}
	return "?"
}
