package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// SPEC G12: on-call opens the redrive of an operation under review, reads
// what happens to each step, and applies it once with a reason: one
// change, one job, one audit entry that says what the redrive did. A
// stale page is refused with the current state; support may not redrive.
func TestOperationRedrive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.migrateRiver(t)
	oncall := signIn(t, b, store.RoleOncall)
	path := "/operations/" + b.opID

	_, page := do(t, oncall, http.MethodGet, b.srv.URL+path, nil)
	require.Contains(t, page, `data-testid="redrive-choices"`, "the operation's page offers the redrives")
	require.Contains(t, page, path+"/redrive?mode=resume", "resume first")

	resp, page := do(t, oncall, http.MethodGet, b.srv.URL+path+"/redrive?mode=rerun&step=account", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "Re-run from a step: account")
	require.Regexp(t, `<tr data-action="replays"><th scope="row">account</th>`, page, "the completed step replays its effect")
	require.Contains(t, page, "each under its own idempotency key", "the consequence in words")

	resp, page = do(t, oncall, http.MethodGet, b.srv.URL+path+"/redrive?mode=compensate&step=nonesuch", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `The operation has no step &#34;nonesuch&#34;.`, "an unknown step is named")

	_, page = do(t, oncall, http.MethodGet, b.srv.URL+path+"/redrive", nil)
	require.Contains(t, page, "Resume at the failed step: workspace", "by default the first choice")
	key := regexp.MustCompile(`name="form_key" value="([^"]+)"`).FindStringSubmatch(page)
	require.Len(t, key, 2)
	form := url.Values{"version": {"6"}, "mode": {"resume"}, "reason": {"the provider is back after its outage"}, "form_key": {key[1]}}
	resp, page = do(t, oncall, http.MethodPost, b.srv.URL+path+"/redrive", form)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "a stale version")
	require.Contains(t, page, "changed since you opened the page")

	form.Set("version", "7")
	form.Set("form_key", regexp.MustCompile(`name="form_key" value="([^"]+)"`).FindStringSubmatch(page)[1])
	resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+path+"/redrive", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, path+"?done=redrive", resp.Header.Get("Location"))
	again, _ := do(t, oncall, http.MethodPost, b.srv.URL+path+"/redrive", form)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "a double submit is replayed, not applied again")

	op := b.operation(t)
	require.Equal(t, sagadriver.StatusRunning, op.Status)
	require.EqualValues(t, 8, op.Version, "one change")
	var jobs int
	require.NoError(t, b.sqlDB.QueryRow(`SELECT count(*) FROM river_job WHERE kind IN ('saga.step', 'saga.verify')`).Scan(&jobs))
	require.Equal(t, 1, jobs, "the step's job is queued with the decision")
	var applied []audit.Entry
	for _, e := range b.operationEntries(t) {
		if e.Outcome == audit.OutcomeApplied {
			applied = append(applied, e)
		}
	}
	require.Len(t, applied, 1, "one decision, one audit entry")
	require.Equal(t, "operation.redrive", applied[0].Action)
	var after struct {
		Redrive struct {
			Mode  string            `json:"mode"`
			From  string            `json:"from"`
			Steps map[string]string `json:"steps"`
		} `json:"redrive"`
	}
	require.NoError(t, json.Unmarshal(applied[0].After, &after))
	require.Equal(t, "resume", after.Redrive.Mode)
	require.Equal(t, "workspace", after.Redrive.From)
	require.Equal(t, "kept", after.Redrive.Steps["account"])

	_, page = do(t, oncall, http.MethodGet, b.srv.URL+path+"?done=redrive", nil)
	require.Contains(t, page, "Redrive applied")
	require.Contains(t, page, "operator_redrive", "the timeline shows the redrive")
	_, page = do(t, oncall, http.MethodGet, b.srv.URL+path+"/redrive", nil)
	require.Contains(t, page, `data-testid="no-redrive"`, "a running operation offers none")

	support := signIn(t, b, store.RoleSupport)
	resp, _ = do(t, support, http.MethodGet, b.srv.URL+path+"/redrive", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
