package web_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

func bulkFormKey(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`name="form_key" value="([^"]+)"`).FindStringSubmatch(page)
	require.Len(t, m, 2, "the preview has a form key")
	return m[1]
}

// freeze opens a bulk preview: it answers 303 to the draft that froze
// its set (SPEC K22), whose page is returned with its path.
func freeze(t *testing.T, b *bundle, c *http.Client, preview string) (string, string) {
	t.Helper()
	resp, body := do(t, c, http.MethodGet, b.srv.URL+preview, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	loc := resp.Header.Get("Location")
	require.Regexp(t, `^/bulk/\d+$`, loc)
	resp, page := do(t, c, http.MethodGet, b.srv.URL+loc, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return loc, page
}

func bulkStatus(t *testing.T, b *bundle, c *http.Client, id string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/bulk/"+id, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	return got
}

// TestBulkKeysWithApproval walks SPEC K12 and K13 through the routes:
// preview, bad input, a count that changed, the request, the requester
// refused as approver (403, audited), approval by another role, the run,
// and the JSON status.
func TestBulkKeysWithApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, k := range []string{"bulk-a", "bulk-b", "bulk-c"} {
		pendingKey(t, b, k)
	}
	support := signIn(t, b, store.RoleSupport)
	preview := "/keys/bulk?action=forget&scope=tenant%3Aweb&include_may_have_happened=1"
	loc, page := freeze(t, b, support, preview)
	require.Contains(t, page, "<strong>3</strong> matching items can be decided: this set is frozen")
	require.Contains(t, page, "waits for a second person")
	require.Contains(t, page, `aria-label="By state"`, "the breakdown")
	id := strings.TrimPrefix(loc, "/bulk/")

	for q, field := range map[string]string{
		"/keys/bulk?action=forget":                  "all",
		"/keys/bulk?action=explode&scope=x":         "action",
		"/keys/bulk?action=forget&state=bogus":      "state",
		"/keys/bulk?action=forget&key=raw-key-1234": "key",
		"/keys/bulk?action=confirm&scope=" + "%ff":  "scope",
		"/operations/bulk?action=resolve&status=ok": "status",
	} {
		c := support
		if strings.HasPrefix(q, "/operations") {
			c = signIn(t, b, store.RoleOncall)
		}
		req, err := http.NewRequest(http.MethodGet, b.srv.URL+q, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json")
		resp, err := c.Do(req)
		require.NoError(t, err)
		var problem map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&problem))
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
		require.Equal(t, "invalid", problem["code"], q)
		require.Equal(t, field, problem["field"], q)
	}

	// A key that starts matching after the freeze is not in the set, and
	// the typed count stays the frozen one.
	late, _ := pendingKey(t, b, "bulk-late")
	submit := b.srv.URL + loc + "/submit"
	form := url.Values{"reason": {"provider outage, safe to rerun"}, "confirm_count": {"4"}, "form_key": {bulkFormKey(t, page)}}
	resp, page := do(t, support, http.MethodPost, submit, form)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the typed count is not the frozen count")
	require.Contains(t, page, "Type the number of items of this frozen set: 3")
	_, drift := do(t, support, http.MethodGet, b.srv.URL+loc+"/drift", nil)
	require.Contains(t, drift, "1 new matches since this set was frozen")
	form.Set("form_key", bulkFormKey(t, page))
	form.Set("confirm_count", "3")
	form.Set("reason", "short")
	resp, _ = do(t, support, http.MethodPost, submit, form)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a reason of 10 characters at least")
	form.Set("reason", "provider outage, safe to rerun")
	form.Set("form_key", bulkFormKey(t, page)+"x")
	resp, _ = do(t, support, http.MethodPost, submit, form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, loc, resp.Header.Get("Location"))
	again, _ := do(t, support, http.MethodPost, submit, form)
	require.Equal(t, loc, again.Header.Get("Location"), "a double submit records one request")
	oncallDraft := signIn(t, b, store.RoleOncall)
	other, _ := freeze(t, b, oncallDraft, preview)
	resp, _ = do(t, support, http.MethodPost, b.srv.URL+other+"/submit", url.Values{"reason": {"someone else's preview"}, "confirm_count": {"4"},
		"form_key": {"form-key-other-draft"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, "only its requester submits a draft")

	got := bulkStatus(t, b, support, id)
	require.Equal(t, "waiting_approval", got["status"])
	require.EqualValues(t, 3, got["total"])
	_, overview := do(t, support, http.MethodGet, b.srv.URL+"/", nil)
	// The waiting approvals lead the title, before the count that needs a
	// human ("(N) Overview", SPEC K15).
	require.Regexp(t, `<title>\(1 waiting approval\) (\(\d+\) )?Overview · unstuck</title>`, overview)

	resp, _ = do(t, support, http.MethodPost, b.srv.URL+"/approvals/"+id+"/approve", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "the requester cannot approve their own request")
	denied, _, err := b.trail.List(ctx, audit.Filter{Outcome: audit.OutcomeDenied, Action: "bulk.approve"})
	require.NoError(t, err)
	require.Len(t, denied, 1)
	auditor := signIn(t, b, store.RoleAuditor)
	resp, _ = do(t, auditor, http.MethodPost, b.srv.URL+"/approvals/"+id+"/approve", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "auditors see approvals read-only")
	_, approvals := do(t, auditor, http.MethodGet, b.srv.URL+"/approvals", nil)
	require.Contains(t, approvals, "provider outage, safe to rerun")

	oncall := signIn(t, b, store.RoleOncall)
	_, detail := do(t, oncall, http.MethodGet, b.srv.URL+loc, nil)
	require.Contains(t, detail, "Approve request "+id)
	resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+"/approvals/"+id+"/approve", url.Values{"reason": {"checked"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	n, err := strconv.ParseInt(id, 10, 64)
	require.NoError(t, err)
	done, err := b.bulks.Run(ctx, n, 0)
	require.NoError(t, err)
	require.True(t, done)
	got = bulkStatus(t, b, support, id)
	for k, v := range map[string]any{"id": float64(n), "action": "keys.forget", "status": "done", "total": float64(3), "applied": float64(3),
		"skipped": float64(0), "refused": float64(0), "failed": float64(0), "pending": float64(0), "items": loc + "/items",
		"what": "Forget, acknowledging that the client's retry runs the operation again — keys where scope tenant:web"} {
		require.Equal(t, v, got[k], k)
	}
	_, ok, err := b.records.KeyByID(ctx, late)
	require.NoError(t, err)
	require.True(t, ok, "the key that matched after the freeze is untouched")
	_, items := do(t, support, http.MethodGet, b.srv.URL+loc+"/items?outcome=applied", nil)
	require.Equal(t, 3, strings.Count(items, "request_id=bulk-"+id), "each applied item links to its audit entries")
	resp, entries := do(t, signIn(t, b, store.RoleAuditor), http.MethodGet, b.srv.URL+"/audit?target_kind=key&request_id=bulk-"+id, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, entries, `value="bulk-`+id+`"`, "the filter is shown")
	listed, _, err := b.trail.List(ctx, audit.Filter{TargetKind: "key", RequestID: "bulk-" + id})
	require.NoError(t, err)
	require.Len(t, listed, 3, "the audit filter by request finds the items' entries")
	require.Equal(t, 3, strings.Count(entries, `>key.forget<`), "and lists them")
}

// TestBulkRBAC: support may bulk-forget keys but not bulk-compensate
// (SPEC K12): the preview and the request are refused and audited.
func TestBulkRBAC(t *testing.T) {
	t.Parallel()
	b := setup(t)
	support := signIn(t, b, store.RoleSupport)
	resp, _ := do(t, support, http.MethodGet, b.srv.URL+"/operations/bulk?action=compensate&status=review_required", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	oncall := signIn(t, b, store.RoleOncall)
	loc, page := freeze(t, b, oncall, "/operations/bulk?action=compensate&status=review_required")
	require.Contains(t, page, "<strong>1</strong> matching items can be decided")
	resp, _ = do(t, support, http.MethodPost, b.srv.URL+loc+"/submit", url.Values{"reason": {"outage at the provider"}, "confirm_count": {"1"},
		"form_key": {"form-key-rbac-0001"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	entries, _, err := b.trail.List(context.Background(), audit.Filter{Outcome: audit.OutcomeDenied})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	_, list := do(t, oncall, http.MethodGet, b.srv.URL+"/operations?status=review_required", nil)
	require.Contains(t, list, `href="/operations/bulk?action=compensate&amp;status=review_required"`)
}

// TestSingleDecisionApproval: with keys.forget in --approval-required a
// single forget is held as a request of one item, and runs only when a
// second person approves; an item that changed meanwhile is skipped.
func TestSingleDecisionApproval(t *testing.T) {
	t.Parallel()
	var bulks *ops.Bulks[*sql.Tx]
	b := setup(t, func(c *web.Config) {
		a, err := ops.ParseApproval("bulk,keys.forget")
		require.NoError(t, err)
		bulks = newBulks(t, c, nil, nil, ops.BulkConfig{Approval: a})
		c.Bulks = bulks
	})
	ctx := context.Background()
	support := signIn(t, b, store.RoleSupport)
	oncall := signIn(t, b, store.RoleOncall)
	bad, _ := pendingKey(t, b, "single-bad")
	resp, body := do(t, support, http.MethodPost, b.srv.URL+"/keys/"+strconv.FormatInt(bad, 10)+"/forget", url.Values{"version": {"1"},
		"reason": {"short"}, "form_key": {"form-key-single-bad-reason"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "checked when held, not when run: %s", body)
	waiting, err := bulks.Waiting(ctx)
	require.NoError(t, err)
	require.Zero(t, waiting, "no request for an invalid decision")
	for _, stale := range []bool{false, true} {
		id, version := pendingKey(t, b, "single-"+strconv.FormatBool(stale))
		path := "/keys/" + strconv.FormatInt(id, 10)
		resp, body := do(t, support, http.MethodPost, b.srv.URL+path+"/forget", url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(version, 10)},
			"reason": {"the provider has no such charge"}, "form_key": {"form-key-single-" + strconv.FormatBool(stale)}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		loc := resp.Header.Get("Location")
		require.Regexp(t, `^/bulk/\d+$`, loc)
		_, ok, err := b.records.KeyByID(ctx, id)
		require.NoError(t, err)
		require.True(t, ok, "nothing is decided before approval")
		n, err := strconv.ParseInt(strings.TrimPrefix(loc, "/bulk/"), 10, 64)
		require.NoError(t, err)
		if stale {
			// Confirmed meanwhile by oncall, directly (confirm needs no
			// approval here): the held forget must not be forced, and
			// cannot even be approved — it would decide nothing.
			resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+path+"/confirm", url.Values{"version": {strconv.FormatInt(version, 10)},
				"outcome": {"happened"}, "external_ref": {"ch_9"}, "reason": {"seen at the provider"}, "form_key": {"form-key-single-confirm"}})
			require.Equal(t, http.StatusSeeOther, resp.StatusCode)
			resp, body = do(t, oncall, http.MethodPost, b.srv.URL+"/approvals/"+strings.TrimPrefix(loc, "/bulk/")+"/approve", url.Values{})
			require.Equal(t, http.StatusConflict, resp.StatusCode)
			require.Contains(t, body, "No item of this request can be decided any more")
			// Forced through the store, as a race between the check and
			// the approval would: the run still skips it.
			ok, err := b.db.SetBulkStatus(ctx, n, []string{store.BulkWaitingApproval}, store.BulkRunning, store.RoleAdmin, "race")
			require.NoError(t, err)
			require.True(t, ok)
		} else {
			resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+"/approvals/"+strings.TrimPrefix(loc, "/bulk/")+"/approve", url.Values{})
			require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		}
		_, err = bulks.Run(ctx, n, 0)
		require.NoError(t, err)
		_, ok, err = b.records.KeyByID(ctx, id)
		require.NoError(t, err)
		require.Equal(t, stale, ok, "forgotten once approved, unless it changed meanwhile")
		got := bulkStatus(t, b, support, strconv.FormatInt(n, 10))
		if stale {
			require.EqualValues(t, 1, got["skipped"])
		} else {
			require.EqualValues(t, 1, got["applied"])
		}
	}
}

// A cancelled request's page keeps refreshing for 10 s (cancelSettle) after the
// cancel, so that a decision in flight when it was recorded shows in the
// counts the page ends with; after that it stops.
func TestCancelledRequestPageSettles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req, err := b.db.CreateBulk(ctx, store.Bulk{Kind: "keys", Action: "forget", Reason: "settle", RequestedBy: store.RoleAdmin,
		RequestedRole: store.RoleAdmin, Status: store.BulkRunning}, []store.BulkItem{{Seq: 1, TargetID: "1", Version: 1}})
	require.NoError(t, err)
	ok, err := b.db.SetBulkStatus(ctx, req.ID, []string{store.BulkRunning}, store.BulkCancelled, store.RoleAdmin, "")
	require.NoError(t, err)
	require.True(t, ok)
	admin := signIn(t, b, store.RoleAdmin)
	page := "/bulk/" + strconv.FormatInt(req.ID, 10)
	resp, body := do(t, admin, http.MethodGet, b.srv.URL+page, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `hx-trigger="every 2s"`, "just cancelled: still refreshing")

	past := time.Now().Add(-11 * time.Second).UnixMicro() // past the 10 s settle; the SQLite store's timestamps
	_, err = b.sqlDB.ExecContext(ctx, `UPDATE unstuck_console_bulk SET finished_at = ? WHERE id = ?`, past, req.ID)
	require.NoError(t, err)
	resp, body = do(t, admin, http.MethodGet, b.srv.URL+page, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "cancelled")
	require.NotContains(t, body, `hx-trigger="every 2s"`, "settled: no more refreshing")
}

// TestBulkPauseResumeRoutes (SPEC K23): the requester pauses, an admin
// resumes, anyone else is refused and audited; a finished request offers
// neither pause nor cancel; the steps' forms are bounded.
func TestBulkPauseResumeRoutes(t *testing.T) {
	t.Parallel()
	var bulks *ops.Bulks[*sql.Tx]
	b := setup(t, func(c *web.Config) {
		bulks = newBulks(t, c, nil, nil, ops.BulkConfig{Approval: ops.Approval{}})
		c.Bulks = bulks
	})
	ctx := context.Background()
	for i := range 6 {
		pendingKey(t, b, "pause-route-"+strconv.Itoa(i))
	}
	support := signIn(t, b, store.RoleSupport)
	loc, page := freeze(t, b, support, "/keys/bulk?action=forget&scope=tenant%3Aweb&include_may_have_happened=1")
	n := strings.Split(strings.Split(page, `<strong>`)[1], `</strong>`)[0]
	resp, _ := do(t, support, http.MethodPost, b.srv.URL+loc+"/submit", url.Values{"reason": {"provider outage, safe to rerun"}, "confirm_count": {n},
		"form_key": {bulkFormKey(t, page)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = do(t, support, http.MethodGet, b.srv.URL+loc, nil)
	id := strings.TrimPrefix(loc, "/bulk/")
	require.Contains(t, page, "Pause request "+id)

	oncall := signIn(t, b, store.RoleOncall)
	resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+loc+"/pause", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "neither the requester nor an admin")
	denied, _, err := b.trail.List(ctx, audit.Filter{Outcome: audit.OutcomeDenied, Action: "bulk.pause"})
	require.NoError(t, err)
	require.Len(t, denied, 1, "audited")
	resp, _ = do(t, support, http.MethodPost, b.srv.URL+loc+"/cancel", url.Values{"note": {strings.Repeat("x", 1<<20)}})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a step's form is bounded")
	resp, _ = do(t, support, http.MethodPost, b.srv.URL+loc+"/pause", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = do(t, support, http.MethodGet, b.srv.URL+loc, nil)
	require.Contains(t, page, "Paused by support")
	require.Contains(t, page, "Resume request "+id)
	require.NotContains(t, page, "Pause request "+id)

	admin := signIn(t, b, store.RoleAdmin)
	resp, _ = do(t, admin, http.MethodPost, b.srv.URL+loc+"/resume", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "an admin resumes")
	require.Equal(t, "running", bulkStatus(t, b, support, id)["status"])
	reqID, err := strconv.ParseInt(id, 10, 64)
	require.NoError(t, err)
	done, err := bulks.Run(ctx, reqID, 0)
	require.NoError(t, err)
	require.True(t, done)
	_, page = do(t, support, http.MethodGet, b.srv.URL+loc, nil)
	require.Contains(t, page, `data-testid="bulk-status">done`)
	require.NotContains(t, page, "Cancel request "+id, "a finished request offers no cancel")
	require.NotContains(t, page, "Pause request "+id)
	require.Contains(t, page, `data-testid="bulk-duration"`, "the report's duration and rate")
	got := bulkStatus(t, b, support, id)
	require.Equal(t, loc+"/items", got["items"])
	require.EqualValues(t, 0, got["pending"])
	resp, _ = do(t, support, http.MethodGet, b.srv.URL+loc+"/items?outcome=bogus", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "an unknown outcome names its field")
}
