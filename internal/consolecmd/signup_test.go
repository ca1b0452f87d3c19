package consolecmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

var demoDatabases = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"SQLite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "demo.db") }},
	{"PostgreSQL", func(t *testing.T) string { return pgtest.Database(t) }},
}

func signupStep(t *testing.T, v demo.SignupView, name string) demo.SignupStep {
	t.Helper()
	for _, s := range v.Steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("signup %s has no step %s", v.OperationID, name)
	return demo.SignupStep{}
}

// workspacesOf returns the provider's workspaces made for the operation id,
// as GET /shop/provider/state shows them.
func workspacesOf(t *testing.T, base, id string) []demo.Workspace {
	t.Helper()
	r := consoletest.Call(t, "GET", base+"/shop/provider/state", "", "")
	require.Equal(t, http.StatusOK, r.Status, r.Body)
	var st demo.ProviderState
	require.NoError(t, json.Unmarshal([]byte(r.Body), &st))
	require.NotNil(t, st.Workspaces, "the state lists workspaces: %s", r.Body)
	require.NotNil(t, st.Charges, "and still the charges: %s", r.Body)
	var out []demo.Workspace
	for _, w := range st.Workspaces {
		if strings.HasPrefix(w.IdempotencyKey, id+"/") {
			out = append(out, w)
		}
	}
	return out
}

func TestDemoSignups(t *testing.T) {
	t.Parallel()
	for _, db := range demoDatabases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			base := consoletest.StartDemo(t, run, db.url(t))
			for name, test := range map[string]func(t *testing.T, base string){
				"Completes":                   testSignupCompletes,
				"Validation":                  testSignupValidation,
				"EmailTaken":                  testSignupEmailTaken,
				"WorkspacePermanent":          testSignupWorkspacePermanent,
				"WorkspaceTimeoutAfterEffect": testSignupWorkspaceTimeoutAfterEffect,
				"WorkspaceCompensationFails":  testSignupWorkspaceCompensationFails,
				"WelcomePermanent":            testSignupWelcomePermanent,
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					test(t, base)
				})
			}
		})
	}
}

func testSignupCompletes(t *testing.T, base string) {
	key, body := consoletest.SignupKey(t, "ok"), `{"email":"Ann@Example.com"}`
	first := consoletest.Call(t, "POST", base+"/shop/signups", key, body)
	require.Equal(t, http.StatusAccepted, first.Status, first.Body)
	id := first.JSON["operation_id"].(string)
	require.True(t, strings.HasPrefix(id, "signup_"), id)

	// A replayed request gets the same operation, and starts nothing.
	again := consoletest.Call(t, "POST", base+"/shop/signups", key, body)
	require.Equal(t, http.StatusAccepted, again.Status, again.Body)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.Body, again.Body)
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/signups", key, `{"email":"bob@example.com"}`), http.StatusUnprocessableEntity, "idempotency_key_reused")

	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusCompleted, 30*time.Second)
	require.Equal(t, demo.SignupType, v.Type)
	require.Equal(t, "ann@example.com", v.Email)
	require.NotNil(t, v.FinishedAt)
	require.Len(t, v.Steps, 3)
	for _, s := range v.Steps {
		require.Equal(t, "completed", s.Status, s.Name)
		require.Equal(t, 1, s.Attempts, s.Name)
		require.Equal(t, id+"/"+s.Name, s.IdempotencyKey)
		require.Empty(t, s.CompensationStatus)
	}
	require.Equal(t, []string{"compensatable", "pivot", "retriable"}, []string{v.Steps[0].Kind, v.Steps[1].Kind, v.Steps[2].Kind})
	require.NotNil(t, v.Account)
	require.Equal(t, "active", v.Account.Status)
	require.Equal(t, v.Account.ID, signupStep(t, v, "account").ExternalID)
	require.Equal(t, demo.AccountID(id+"/account"), v.Account.ID)
	ws := workspacesOf(t, base, id)
	require.Len(t, ws, 1, "exactly one workspace")
	require.True(t, ws[0].Active)
	require.Equal(t, ws[0].ID, signupStep(t, v, "workspace").ExternalID)
	require.Equal(t, "ann@example.com", ws[0].Owner)
	require.True(t, strings.HasPrefix(signupStep(t, v, "welcome").ExternalID, "msg_"))

	// After the replays: still one of each.
	require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/signups", key, body).Status)
	time.Sleep(200 * time.Millisecond)
	require.Len(t, workspacesOf(t, base, id), 1)
	require.Equal(t, v.Version, consoletest.GetSignup(t, base, id).Version, "nothing ran again")
}

func testSignupValidation(t *testing.T, base string) {
	for body, field := range map[string]string{
		`{}`:                              "email",
		`{"email":""}`:                    "email",
		`{"email":"not-an-address"}`:      "email",
		`{"email":"a@b"}`:                 "email",
		`{"email":42}`:                    "email",
		`{"email":"a@b.c","fail":"oops"}`: "fail",
		`{"email":"a@b.c","fail":7}`:      "fail",
		`{"email":"a@b.c","plan":"pro"}`:  "plan",
	} {
		r := consoletest.Call(t, "POST", base+"/shop/signups", consoletest.SignupKey(t, "bad"), body)
		consoletest.RequireProblem(t, r, http.StatusBadRequest, "invalid_request")
		require.Equal(t, field, r.JSON["field"], "%s: %s", body, r.Body)
	}
	r := consoletest.Call(t, "POST", base+"/shop/signups", consoletest.SignupKey(t, "bad"), `{"email":"a@b.c","fail":"oops"}`)
	require.Contains(t, r.JSON["detail"], "workspace_timeout_after_effect", "the detail lists the modes")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/signups", consoletest.SignupKey(t, "bad"), `{nope`), http.StatusBadRequest, "invalid_json")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/signups", "", `{"email":"a@b.c"}`), http.StatusBadRequest, "idempotency_key_missing")
	consoletest.RequireProblem(t, consoletest.Call(t, "GET", base+"/shop/signups/signup_nope", "", ""), http.StatusNotFound, "signup_not_found")

	// A rejected body stored nothing: the key works once it is fixed.
	key := consoletest.SignupKey(t, "fixed")
	consoletest.RequireProblem(t, consoletest.Call(t, "POST", base+"/shop/signups", key, `{"email":"x"}`), http.StatusBadRequest, "invalid_request")
	id := consoletest.PostSignup(t, base, key, `{"email":"fixed@example.com"}`)
	consoletest.WaitSignup(t, base, id, sagadriver.StatusCompleted, 30*time.Second)
}

func testSignupEmailTaken(t *testing.T, base string) {
	email := fmt.Sprintf("taken-%d@example.com", time.Now().UnixNano())
	first := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "a"), `{"email":"`+email+`"}`)
	consoletest.WaitSignup(t, base, first, sagadriver.StatusCompleted, 30*time.Second)
	second := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "b"), `{"email":"`+email+`"}`)
	v := consoletest.WaitSignup(t, base, second, sagadriver.StatusFailed, 30*time.Second)
	acc := signupStep(t, v, "account")
	require.Equal(t, "failed", acc.Status)
	require.Equal(t, "permanent", acc.LastErrorClass)
	require.Contains(t, acc.LastError, "already has the active account")
	require.Nil(t, v.Account, "one active account per email")
	require.Equal(t, "skipped", signupStep(t, v, "workspace").Status)
	require.Empty(t, workspacesOf(t, base, second))
}

func testSignupWorkspacePermanent(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "perm"), `{"email":"perm@example.com","fail":"workspace_permanent"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusCompensated, 30*time.Second)
	ws := signupStep(t, v, "workspace")
	require.Equal(t, "compensated", ws.Status, "its partial effect (a workspace never activated) was undone")
	require.Equal(t, "permanent", ws.LastErrorClass)
	require.Contains(t, ws.LastError, "activation refused")
	require.Equal(t, "completed", ws.CompensationStatus)
	require.True(t, strings.HasPrefix(ws.ExternalID, "ws_"), "the refused workspace is named: %q", ws.ExternalID)
	acc := signupStep(t, v, "account")
	require.Equal(t, "compensated", acc.Status)
	require.Equal(t, "completed", acc.CompensationStatus)
	require.Equal(t, 1, acc.CompensationAttempts)
	require.Equal(t, "skipped", signupStep(t, v, "welcome").Status)
	require.NotNil(t, v.Account)
	require.Equal(t, "closed", v.Account.Status, "the account is compensated")
	require.Empty(t, workspacesOf(t, base, id), "no workspace left")
	require.Contains(t, v.LastError, "workspace")
}

func testSignupWorkspaceTimeoutAfterEffect(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "timeout"), `{"email":"slow@example.com","fail":"workspace_timeout_after_effect"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusCompleted, 30*time.Second)
	ws := signupStep(t, v, "workspace")
	require.Equal(t, 1, ws.Attempts, "verified, never executed again")
	require.Equal(t, 1, ws.Verifications)
	found := workspacesOf(t, base, id)
	require.Len(t, found, 1, "at most one workspace at the provider")
	require.Equal(t, found[0].ID, ws.ExternalID, "the verification recorded the workspace the lost answer made")
	require.Equal(t, "active", v.Account.Status)
	require.Equal(t, "completed", signupStep(t, v, "welcome").Status)
}

func testSignupWorkspaceCompensationFails(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "compfail"), `{"email":"stuck@example.com","fail":"workspace_compensation_fails"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusReviewRequired, 30*time.Second)
	require.Equal(t, "compensation_failed", v.ReviewReason)
	ws := signupStep(t, v, "workspace")
	require.Equal(t, "compensation_failed", ws.Status)
	require.Equal(t, "failed", ws.CompensationStatus)
	require.Equal(t, 3, ws.CompensationAttempts)
	require.Contains(t, ws.CompensationError, "could not delete")
	require.Contains(t, v.LastError, "compensation of step workspace failed")
	acc := signupStep(t, v, "account")
	require.Equal(t, "pending", acc.CompensationStatus, "halted at the failed compensation")
	require.Equal(t, "active", v.Account.Status, "the account is not compensated")
	left := workspacesOf(t, base, id)
	require.Len(t, left, 1, "the workspace is still there, visibly")
	require.False(t, left[0].Active)
	require.Equal(t, left[0].ID, ws.ExternalID, "the step names it")
	require.Contains(t, v.LastError, left[0].ID, "and so does the review")
}

func testSignupWelcomePermanent(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "welcome"), `{"email":"nobody@example.com","fail":"welcome_permanent"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusReviewRequired, 30*time.Second)
	require.Equal(t, "permanent_failure", v.ReviewReason)
	w := signupStep(t, v, "welcome")
	require.Equal(t, "failed", w.Status)
	require.Contains(t, w.LastError, "does not exist")
	require.Contains(t, v.LastError, "does not exist")
	for _, s := range v.Steps {
		require.Empty(t, s.CompensationStatus, "no compensation after the pivot: %s", s.Name)
	}
	require.Equal(t, "completed", signupStep(t, v, "workspace").Status)
	require.Equal(t, "active", v.Account.Status)
	ws := workspacesOf(t, base, id)
	require.Len(t, ws, 1)
	require.True(t, ws[0].Active)
}

// The crash test (F3): a worker process is killed with
// SIGKILL after the workspace provider applied the effect and before the
// worker recorded it; a new worker process, once River rescued the job,
// verifies the step by its key and completes it without a second
// workspace. The provider is served by this process, so that it survives
// the worker; the workers are this test binary run again.

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
	sagaOverrides = sagaSettings{workspaces: &demo.WorkspaceClient{BaseURL: os.Getenv(crashProviderEnv)}, stepTimeout: crashStepTimeout}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--db", os.Getenv(crashDBEnv), "--traffic=false"},
		func(string) string { return "" }, os.Stdout, os.Stderr)
	require.NoError(t, err)
}

// worker is a running worker process.
type worker struct {
	cmd  *exec.Cmd
	base string
	log  *consoletest.SyncBuffer
	done chan struct{}
}

func startWorker(t *testing.T, dbURL, providerURL string) *worker {
	t.Helper()
	return startTestProcess(t, "TestSignupCrashWorker", crashWorkerEnv+"=1", crashDBEnv+"="+dbURL, crashProviderEnv+"="+providerURL)
}

// startTestProcess runs this test binary's test named run as a child
// process with env added (the test is the program: a worker or a console)
// and returns once it prints "listening on …". The child is killed when
// the test ends, and its log is shown if the test failed.
func startTestProcess(t *testing.T, run string, env ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	w := &worker{cmd: cmd, log: &consoletest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = w.log
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = cmd.Process.Kill()
			<-w.done
		}
		if t.Failed() {
			t.Logf("%s process %d log:\n%s", run, cmd.Process.Pid, w.log.String())
		}
	})
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if base, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
			w.base = base
			go func() { _, _ = io.Copy(w.log, out) }()
			return w
		}
	}
	<-w.done
	t.Fatalf("%s process stopped before listening:\n%s", run, w.log.String())
	return nil
}

// stop stops the worker with SIGTERM and waits for its clean exit.
func (w *worker) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-w.done:
		require.True(t, w.cmd.ProcessState.Success(), "worker exit: %v\n%s", w.cmd.ProcessState, w.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("worker did not stop on SIGTERM:\n%s", w.log.String())
	}
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
	for _, db := range demoDatabases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			dbURL := db.url(t)

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
			id := consoletest.PostSignup(t, first.base, consoletest.SignupKey(t, "crash"), `{"email":"crash@example.com"}`)
			var key string
			select {
			case key = <-applied:
			case <-time.After(30 * time.Second):
				t.Fatalf("the workspace was never created:\n%s", first.log.String())
			}
			require.Equal(t, id+"/workspace", key)
			// The effect is applied, the worker waits for the answer: kill it.
			require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
			killedAt := time.Now()
			<-first.done
			close(killed)
			require.Equal(t, "signal: killed", first.cmd.ProcessState.String())

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
			v := consoletest.WaitSignup(t, second.base, id, sagadriver.StatusCompleted, 2*crashLease+60*time.Second)
			recovery := time.Since(killedAt)
			// With River's defaults the step stayed
			// running for an hour. The product's bound, not a
			// performance figure: resumed (and here completed) within
			// 2 × its lease + 30 s of the crash.
			require.LessOrEqual(t, recovery, 2*crashLease+30*time.Second, "time from SIGKILL to the step resumed and the operation completed")

			step := signupStep(t, v, "workspace")
			counts, err = client.Counts(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, demo.WorkspaceCounts{Creates: 1, Effects: 1}, counts, "the effect applied once, never asked for again")
			live := workspacesOf(t, second.base, id)
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
			second.stop(t)
			t.Logf("crash figures (%s, step lease %s, bound %s): worker 2 up %v after SIGKILL; job rescued %s after SIGKILL; operation completed %v after SIGKILL; provider Create calls %d, workspaces made %d; step attempts %d; River job attempt %d",
				db.name, crashLease, 2*crashLease+30*time.Second, upAfter.Round(time.Millisecond), rescuedAfter(second.log.String(), killedAt), recovery.Round(time.Millisecond),
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
