package consolecmd

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

func TestDemoSignups(t *testing.T) {
	t.Parallel()
	for _, db := range consoletest.DemoDatabases {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			base := consoletest.StartDemo(t, run, db.URL(t))
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
	require.Equal(t, v.Account.ID, consoletest.SignupStep(t, v, "account").ExternalID)
	require.Equal(t, demo.AccountID(id+"/account"), v.Account.ID)
	ws := consoletest.Workspaces(t, base, id)
	require.Len(t, ws, 1, "exactly one workspace")
	require.True(t, ws[0].Active)
	require.Equal(t, ws[0].ID, consoletest.SignupStep(t, v, "workspace").ExternalID)
	require.Equal(t, "ann@example.com", ws[0].Owner)
	require.True(t, strings.HasPrefix(consoletest.SignupStep(t, v, "welcome").ExternalID, "msg_"))

	// After the replays: still one of each.
	require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/signups", key, body).Status)
	time.Sleep(200 * time.Millisecond)
	require.Len(t, consoletest.Workspaces(t, base, id), 1)
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
	acc := consoletest.SignupStep(t, v, "account")
	require.Equal(t, "failed", acc.Status)
	require.Equal(t, "permanent", acc.LastErrorClass)
	require.Contains(t, acc.LastError, "already has the active account")
	require.Nil(t, v.Account, "one active account per email")
	require.Equal(t, "skipped", consoletest.SignupStep(t, v, "workspace").Status)
	require.Empty(t, consoletest.Workspaces(t, base, second))
}

func testSignupWorkspacePermanent(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "perm"), `{"email":"perm@example.com","fail":"workspace_permanent"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusCompensated, 30*time.Second)
	ws := consoletest.SignupStep(t, v, "workspace")
	require.Equal(t, "compensated", ws.Status, "its partial effect (a workspace never activated) was undone")
	require.Equal(t, "permanent", ws.LastErrorClass)
	require.Contains(t, ws.LastError, "activation refused")
	require.Equal(t, "completed", ws.CompensationStatus)
	require.True(t, strings.HasPrefix(ws.ExternalID, "ws_"), "the refused workspace is named: %q", ws.ExternalID)
	acc := consoletest.SignupStep(t, v, "account")
	require.Equal(t, "compensated", acc.Status)
	require.Equal(t, "completed", acc.CompensationStatus)
	require.Equal(t, 1, acc.CompensationAttempts)
	require.Equal(t, "skipped", consoletest.SignupStep(t, v, "welcome").Status)
	require.NotNil(t, v.Account)
	require.Equal(t, "closed", v.Account.Status, "the account is compensated")
	require.Empty(t, consoletest.Workspaces(t, base, id), "no workspace left")
	require.Contains(t, v.LastError, "workspace")
}

func testSignupWorkspaceTimeoutAfterEffect(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "timeout"), `{"email":"slow@example.com","fail":"workspace_timeout_after_effect"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusCompleted, 30*time.Second)
	ws := consoletest.SignupStep(t, v, "workspace")
	require.Equal(t, 1, ws.Attempts, "verified, never executed again")
	require.Equal(t, 1, ws.Verifications)
	found := consoletest.Workspaces(t, base, id)
	require.Len(t, found, 1, "at most one workspace at the provider")
	require.Equal(t, found[0].ID, ws.ExternalID, "the verification recorded the workspace the lost answer made")
	require.Equal(t, "active", v.Account.Status)
	require.Equal(t, "completed", consoletest.SignupStep(t, v, "welcome").Status)
}

func testSignupWorkspaceCompensationFails(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "compfail"), `{"email":"stuck@example.com","fail":"workspace_compensation_fails"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusReviewRequired, 30*time.Second)
	require.Equal(t, "compensation_failed", v.ReviewReason)
	ws := consoletest.SignupStep(t, v, "workspace")
	require.Equal(t, "compensation_failed", ws.Status)
	require.Equal(t, "failed", ws.CompensationStatus)
	require.Equal(t, 3, ws.CompensationAttempts)
	require.Contains(t, ws.CompensationError, "could not delete")
	require.Contains(t, v.LastError, "compensation of step workspace failed")
	acc := consoletest.SignupStep(t, v, "account")
	require.Equal(t, "pending", acc.CompensationStatus, "halted at the failed compensation")
	require.Equal(t, "active", v.Account.Status, "the account is not compensated")
	left := consoletest.Workspaces(t, base, id)
	require.Len(t, left, 1, "the workspace is still there, visibly")
	require.False(t, left[0].Active)
	require.Equal(t, left[0].ID, ws.ExternalID, "the step names it")
	require.Contains(t, v.LastError, left[0].ID, "and so does the review")
}

func testSignupWelcomePermanent(t *testing.T, base string) {
	id := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "welcome"), `{"email":"nobody@example.com","fail":"welcome_permanent"}`)
	v := consoletest.WaitSignup(t, base, id, sagadriver.StatusReviewRequired, 30*time.Second)
	require.Equal(t, "permanent_failure", v.ReviewReason)
	w := consoletest.SignupStep(t, v, "welcome")
	require.Equal(t, "failed", w.Status)
	require.Contains(t, w.LastError, "does not exist")
	require.Contains(t, v.LastError, "does not exist")
	for _, s := range v.Steps {
		require.Empty(t, s.CompensationStatus, "no compensation after the pivot: %s", s.Name)
	}
	require.Equal(t, "completed", consoletest.SignupStep(t, v, "workspace").Status)
	require.Equal(t, "active", v.Account.Status)
	ws := consoletest.Workspaces(t, base, id)
	require.Len(t, ws, 1)
	require.True(t, ws[0].Active)
}

// The crash test (F3): a worker process is killed with
// SIGKILL after the workspace provider applied the effect and before the
// worker recorded it; a new worker process, once River rescued the job,
// verifies the step by its key and completes it without a second
// workspace. The provider is served by this process, so that it survives
// the worker; the workers are this test binary run again.
