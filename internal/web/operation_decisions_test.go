package web_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// operationDecisions wires the operation decisions as cmd/console does on
// SQLite: the decisions' handle (ops.OpenImmediate) for the saga records
// and River, an insert-only River
// client (no workers: inserted jobs stay queued) and a runner without
// definitions. River's tables, which a decision inserting a job needs, are
// made by migrateRiver, in the tests that decide: its migrations would
// double the time of every other test's setup.
func operationDecisions(t *testing.T, riverDB *sql.DB, dec *ops.DB[*sql.Tx]) *ops.Operations[*sql.Tx] {
	t.Helper()
	rd := riversqlite.New(riverDB)
	runner, err := saga.NewRunner(sagasqlite.New(riverDB), saga.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	client, err := river.NewClient(rd, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	runner.SetClient(client)
	decisions, err := ops.NewOperations(dec, runner)
	require.NoError(t, err)
	return decisions
}

// immediateHandle is ops.OpenImmediate on db, closed at t's end.
func immediateHandle(t *testing.T, db *sql.DB) *sql.DB {
	t.Helper()
	h, err := ops.OpenImmediate(t.Context(), db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// migrateRiver creates River's tables in the console's database.
func (b *bundle) migrateRiver(t *testing.T) {
	t.Helper()
	migrator, err := rivermigrate.New(riversqlite.New(immediateHandle(t, b.sqlDB)), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(t.Context(), rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
}

func (b *bundle) operation(t *testing.T) sagadriver.Operation {
	t.Helper()
	det, err := b.sagas.ReadOperation(context.Background(), b.opID, 0)
	require.NoError(t, err)
	return det.Operation
}

func (b *bundle) operationEntries(t *testing.T) []audit.Entry {
	t.Helper()
	entries, _, err := b.trail.List(context.Background(), audit.Filter{TargetKind: "operation", TargetID: b.opID})
	require.NoError(t, err)
	return entries
}

func TestOperationDecisions(t *testing.T) {
	t.Parallel()

	t.Run("OncallRetriesOnceEvenIfSubmittedTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.migrateRiver(t)
		oncall := signIn(t, b, store.RoleOncall)
		path := "/operations/" + b.opID
		_, page := do(t, oncall, http.MethodGet, b.srv.URL+path, nil)
		for _, title := range []string{"Retry a step of operation ", "Confirm it happened, or it did not happen — a step of operation ", "Compensate operation ", "Resolve operation "} {
			require.Contains(t, page, title+b.opID, "the review offers %q", title)
		}
		require.Contains(t, page, "the same idempotency key", "the consequence is stated")
		require.Contains(t, page, "compensates the steps account, workspace", "compensation says what it undoes")
		require.Contains(t, page, `<option value="workspace" selected>workspace (uncertain)</option>`, "the step under review is chosen")
		require.Contains(t, page, "No operator has decided on this item", "the history is shown, empty")

		form := url.Values{"version": {"7"}, "step": {"workspace"}, "reason": {"the workspace provider is back after its outage"},
			"form_key": {formKeyOf(t, page, path+"/retry")}}
		first, _ := do(t, oncall, http.MethodPost, b.srv.URL+path+"/retry", form)
		require.Equal(t, http.StatusSeeOther, first.StatusCode)
		require.Equal(t, path+"?done=retry", first.Header.Get("Location"))
		again, _ := do(t, oncall, http.MethodPost, b.srv.URL+path+"/retry", form)
		require.Equal(t, http.StatusSeeOther, again.StatusCode, "the double submit gets the same answer")
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "replayed, not applied again")

		op := b.operation(t)
		require.Equal(t, sagadriver.StatusRunning, op.Status)
		require.EqualValues(t, 8, op.Version, "one change")
		var jobs int
		require.NoError(t, b.sqlDB.QueryRow(`SELECT count(*) FROM river_job WHERE kind = 'saga.step'`).Scan(&jobs))
		require.Equal(t, 1, jobs, "the step's job is queued with the decision")
		entries := b.operationEntries(t)
		require.Len(t, entries, 1, "one decision, one audit entry")
		require.Equal(t, "operation.retry", entries[0].Action)
		require.Equal(t, "oncall", entries[0].Actor)
		require.Equal(t, audit.OutcomeApplied, entries[0].Outcome)
		require.Equal(t, "the workspace provider is back after its outage", entries[0].Reason)
		require.NotEmpty(t, entries[0].RequestID)

		_, page = do(t, oncall, http.MethodGet, b.srv.URL+first.Header.Get("Location"), nil)
		require.Contains(t, page, "Retry applied")
		require.Contains(t, page, "operation.retry", "the operation's own audit history")
		require.NotContains(t, page, `action="`+path+`/retry"`, "a running operation offers no retry")
		require.NotContains(t, page, `action="`+path+`/resolve"`, "nor a resolution")
		require.Contains(t, page, `action="`+path+`/compensate"`, "it can still be compensated")
	})

	t.Run("ResolvedManuallyIsShown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		admin := signIn(t, b, store.RoleAdmin)
		path := "/operations/" + b.opID
		_, page := do(t, admin, http.MethodGet, b.srv.URL+path, nil)
		form := url.Values{"version": {"7"}, "status": {"completed"}, "reason": {"created the workspace by hand as ws-9"},
			"form_key": {formKeyOf(t, page, path+"/resolve")}}
		resp, _ := do(t, admin, http.MethodPost, b.srv.URL+path+"/resolve", form)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		_, page = do(t, admin, http.MethodGet, b.srv.URL+resp.Header.Get("Location"), nil)
		require.Contains(t, page, "Review resolved manually")
		require.Contains(t, page, `data-testid="resolved-manually"`)
		require.Contains(t, page, "created the workspace by hand as ws-9", "the resolution")
		require.NotContains(t, page, `id="actions-title"`, "a closed operation offers no decision")
		op := b.operation(t)
		require.Equal(t, sagadriver.StatusCompleted, op.Status)
		require.Equal(t, "created the workspace by hand as ws-9", op.Resolution)
		_, list := do(t, admin, http.MethodGet, b.srv.URL+"/operations", nil)
		require.Contains(t, list, "resolved manually", "the list shows it too")
	})

	t.Run("StaleAndInvalidDecisionsAreRefusedClearly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.migrateRiver(t)
		oncall := signIn(t, b, store.RoleOncall)
		path := "/operations/" + b.opID
		_, page := do(t, oncall, http.MethodGet, b.srv.URL+path, nil)

		noOutcome := url.Values{"version": {"7"}, "step": {"workspace"}, "reason": {"checked the provider's console"},
			"form_key": {formKeyOf(t, page, path+"/confirm")}}
		resp, body := do(t, oncall, http.MethodPost, b.srv.URL+path+"/confirm", noOutcome)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, `data-field="outcome"`)
		require.Contains(t, body, "checked the provider&#39;s console", "the reason typed is kept")
		require.Regexp(t, `<details class="action" open data-action="confirm">`, body, "in the form it came from, open")

		short := url.Values{"version": {"7"}, "reason": {"short"}, "form_key": {formKeyOf(t, page, path+"/compensate")}}
		resp, body = do(t, oncall, http.MethodPost, b.srv.URL+path+"/compensate", short)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, `data-field="reason"`)
		require.Contains(t, body, "at least 10 characters")

		noStatus := url.Values{"version": {"7"}, "reason": {"closing this one by hand"}, "form_key": {formKeyOf(t, page, path+"/resolve")}}
		resp, body = do(t, oncall, http.MethodPost, b.srv.URL+path+"/resolve", noStatus)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body, `data-field="status"`)

		stale := url.Values{"version": {"6"}, "step": {"workspace"}, "reason": {"an old page was still open"}, "form_key": {"stale-form-key-00000001"}}
		resp, body = do(t, oncall, http.MethodPost, b.srv.URL+path+"/retry", stale)
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Contains(t, body, "changed since you opened the page")
		require.Contains(t, body, `name="version" value="7"`, "the fresh state, to decide again")
		require.EqualValues(t, 7, b.operation(t).Version, "nothing applied")

		entries := b.operationEntries(t)
		require.Len(t, entries, 1, "the stale attempt is audited; the invalid ones changed nothing and are not decisions")
		require.Equal(t, audit.OutcomeConflict, entries[0].Outcome)
		require.Equal(t, "operation.retry", entries[0].Action)
	})

	t.Run("EightConcurrentSessionsApplyOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.migrateRiver(t)
		path := "/operations/" + b.opID
		actions := []struct {
			name string
			form url.Values
		}{
			{"confirm", url.Values{"step": {"workspace"}, "outcome": {"happened"}, "external_ref": {"ws-1"}}},
			{"compensate", url.Values{}},
			{"retry", url.Values{"step": {"workspace"}}},
		}
		type attempt struct {
			c    *http.Client
			url  string
			form url.Values
		}
		var attempts []attempt
		for i := range 8 {
			c := signIn(t, b, store.RoleOncall)
			_, page := do(t, c, http.MethodGet, b.srv.URL+path, nil)
			a := actions[i%len(actions)]
			form := url.Values{"version": {"7"}, "reason": {"session " + strconv.Itoa(i) + " decided after checking"}, "form_key": {formKeyOf(t, page, path+"/"+a.name)}}
			for k, v := range a.form {
				form[k] = v
			}
			attempts = append(attempts, attempt{c, b.srv.URL + path + "/" + a.name, form})
		}
		statuses := make(chan int, len(attempts))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, a := range attempts {
			wg.Go(func() {
				<-start
				resp, _ := do(t, a.c, http.MethodPost, a.url, a.form)
				statuses <- resp.StatusCode
			})
		}
		close(start)
		wg.Wait()
		close(statuses)
		counts := map[int]int{}
		for s := range statuses {
			counts[s]++
		}
		require.Equal(t, map[int]int{http.StatusSeeOther: 1, http.StatusConflict: 7}, counts, "exactly one applies, the others get 409")
		require.EqualValues(t, 8, b.operation(t).Version)
		outcomes := map[string]int{}
		for _, e := range b.operationEntries(t) {
			outcomes[e.Outcome]++
		}
		require.Equal(t, map[string]int{audit.OutcomeApplied: 1, audit.OutcomeConflict: 7}, outcomes, "every attempt has exactly one audit entry")
	})

	t.Run("AuditorAndSupportSeeNoControlsAndAHandMadePostIsDeniedAndAudited", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		path := "/operations/" + b.opID
		for _, role := range []string{store.RoleAuditor, store.RoleSupport} {
			c := signIn(t, b, role)
			resp, page := do(t, c, http.MethodGet, b.srv.URL+path, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.NotContains(t, page, `id="actions-title"`, "%s is offered no decision", role)
			require.NotContains(t, page, `action="`+path+`/`, "%s has no decision form", role)
			require.Contains(t, page, `id="history-title"`, "%s sees the history", role)
		}
		auditor := signIn(t, b, store.RoleAuditor)
		resp, _ := do(t, auditor, http.MethodPost, b.srv.URL+path+"/retry",
			url.Values{"version": {"7"}, "step": {"workspace"}, "reason": {"trying what I may not do"}, "form_key": {"auditor-form-key-0001"}})
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		entries, _, err := b.trail.List(context.Background(), audit.Filter{Outcome: audit.OutcomeDenied})
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.Equal(t, "auditor", entries[0].Actor)
		require.Equal(t, "operation", entries[0].TargetKind)
		require.Equal(t, b.opID, entries[0].TargetID)
		require.Equal(t, "POST "+path+"/retry", entries[0].Action)
		require.EqualValues(t, 7, b.operation(t).Version, "nothing applied")
	})

	t.Run("WithoutADeciderThePageIsReadOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *web.Config) { c.Operations = nil })
		oncall := signIn(t, b, store.RoleOncall)
		resp, page := do(t, oncall, http.MethodGet, b.srv.URL+"/operations/"+b.opID, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotContains(t, page, `id="actions-title"`)
		require.Contains(t, page, "Needs a human")
	})
}
