package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// SPEC K13, K22: the approver approves exactly what will run. A single
// "confirm happened" held for approval names its outcome, its reference
// and its key on /bulk/{id}, its JSON and /approvals; a decision that is
// not legal for its item now is refused when it is requested, not when it
// runs; a bulk request's filter reads as words.
func TestApproverSeesWhatWillRun(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) {
		a, err := ops.ParseApproval("bulk,keys.confirm,keys.forget")
		require.NoError(t, err)
		bulks := newBulks(t, c, nil, nil, ops.BulkConfig{Approval: a})
		c.Bulks = bulks
	})
	support := signIn(t, b, store.RoleSupport)
	oncall := signIn(t, b, store.RoleOncall)
	id, version := pendingKey(t, b, "approve-what-00001")
	path := "/keys/" + strconv.FormatInt(id, 10)
	resp, body := do(t, support, http.MethodPost, b.srv.URL+path+"/confirm", url.Values{"version": {strconv.FormatInt(version, 10)},
		"outcome": {"happened"}, "external_ref": {"ch_ATTACKER_CHOSEN"}, "reason": {"the customer says it went through"}, "form_key": {"approve-what-form-01"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	loc := resp.Header.Get("Location")

	_, page := do(t, oncall, http.MethodGet, b.srv.URL+loc, nil)
	want := `Confirm it happened, with external reference &#34;ch_ATTACKER_CHOSEN&#34; — key ` + strconv.FormatInt(id, 10)
	require.Contains(t, page, want, "the request's page says what will run")
	require.Contains(t, page, `data-testid="bulk-target">key `+strconv.FormatInt(id, 10), "and links its item")
	_, page = do(t, oncall, http.MethodGet, b.srv.URL+"/approvals", nil)
	require.Contains(t, page, want, "/approvals too")
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+loc, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	r, err := oncall.Do(req)
	require.NoError(t, err)
	var doc struct{ What string }
	require.NoError(t, json.NewDecoder(r.Body).Decode(&doc))
	require.NoError(t, r.Body.Close())
	require.Equal(t, `Confirm it happened, with external reference "ch_ATTACKER_CHOSEN" — key `+strconv.FormatInt(id, 10), doc.What, "and its JSON")

	// A confirm on a key whose outcome is known is refused when it is
	// requested: nobody is asked to approve it.
	_, err = idem.Run(context.Background(), b.engine, "approve-what-00002", "tenant:web", func(context.Context) (int, error) { return 1, nil }, nil)
	require.NoError(t, err)
	kp, err := b.records.ListKeys(context.Background(), idemdriver.KeyFilter{KeyHash: idem.KeyHash("approve-what-00002")})
	require.NoError(t, err)
	require.Len(t, kp.Records, 1)
	done, doneVersion := kp.Records[0].ID, kp.Records[0].Version
	donePath := "/keys/" + strconv.FormatInt(done, 10)
	resp, body = do(t, support, http.MethodPost, b.srv.URL+donePath+"/confirm", url.Values{"version": {strconv.FormatInt(doneVersion, 10)},
		"outcome": {"did_not_happen"}, "reason": {"the customer says it did not"}, "form_key": {"approve-what-form-02"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "not allowed in the item")
	resp, _ = do(t, support, http.MethodPost, b.srv.URL+donePath+"/confirm", url.Values{"version": {strconv.FormatInt(doneVersion+1, 10)},
		"outcome": {"did_not_happen"}, "reason": {"an old page was still open"}, "form_key": {"approve-what-form-03"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, "a stale version is refused when requested")

	// A bulk request's filter reads as words; while it waits, the approver
	// reads the frozen count, its breakdown and a sample with each item's
	// last error, each linking to its page.
	loc, page = freeze(t, b, support, "/keys/bulk?action=forget&scope=tenant%3Aweb&include_may_have_happened=1")
	n := strings.Split(strings.Split(page, `<strong>`)[1], `</strong>`)[0]
	resp, _ = do(t, support, http.MethodPost, b.srv.URL+loc+"/submit", url.Values{"reason": {"provider outage, safe to rerun"}, "confirm_count": {n},
		"form_key": {"approve-what-bulk-01"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = do(t, oncall, http.MethodGet, b.srv.URL+loc, nil)
	require.Contains(t, page, "Forget, acknowledging that the client&#39;s retry runs the operation again — keys where scope tenant:web")
	require.Contains(t, page, "<strong>"+n+"</strong> matching items can be decided: this set is frozen")
	for _, by := range []string{"state", "operation", "scope"} {
		require.Contains(t, page, `aria-label="By `+by+`"`, "the breakdown by "+by)
	}
	require.Contains(t, page, `<a href="/keys/`+strconv.FormatInt(id, 10)+`">`, "the sample links its items")
	require.Contains(t, page, "Approve request", "and the approver may approve it")
}

// An approval's form is bounded: a 1 MiB note answers 413, and nothing is
// approved.
func TestApprovalFormIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) {
		a, err := ops.ParseApproval("bulk")
		require.NoError(t, err)
		bulks := newBulks(t, c, nil, nil, ops.BulkConfig{Approval: a})
		c.Bulks = bulks
	})
	pendingKey(t, b, "approve-bounded-key-1")
	support := signIn(t, b, store.RoleSupport)
	oncall := signIn(t, b, store.RoleOncall)
	loc, page := freeze(t, b, support, "/keys/bulk?action=forget&scope=tenant%3Aweb&include_may_have_happened=1")
	n := strings.Split(strings.Split(page, `<strong>`)[1], `</strong>`)[0]
	resp, _ := do(t, support, http.MethodPost, b.srv.URL+loc+"/submit", url.Values{"reason": {"provider outage, safe to rerun"}, "confirm_count": {n},
		"form_key": {"approve-bounded-01"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	id := strings.TrimPrefix(loc, "/bulk/")
	resp, body := do(t, oncall, http.MethodPost, b.srv.URL+"/approvals/"+id+"/approve", url.Values{"reason": {strings.Repeat("x", 1<<20)}})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	resp, body = do(t, oncall, http.MethodGet, b.srv.URL+"/bulk/"+id, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Approve request "+id, "still waiting for approval")
}
