package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/store"
)

// The console under pressure: the defects that need no browser.

// TestStaleForgetSaysWhoForgot (defect 10): a forget form left open after
// someone forgot the key answers 409 naming who forgot it and when, as the
// operations do, not a bare 404.
func TestStaleForgetSaysWhoForgot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, version := pendingKey(t, b, "web-forget-twice")
	path := "/keys/" + strconv.FormatInt(id, 10)
	support, oncall := signIn(t, b, store.RoleSupport), signIn(t, b, store.RoleOncall)
	_, first := do(t, support, http.MethodGet, b.srv.URL+path, nil)
	_, second := do(t, oncall, http.MethodGet, b.srv.URL+path, nil)
	resp, _ := do(t, support, http.MethodPost, b.srv.URL+path+"/forget", url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(version, 10)},
		"reason": {"the provider has no such charge"}, "form_key": {formKeyOf(t, first, path+"/forget")}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	resp, body := do(t, oncall, http.MethodPost, b.srv.URL+path+"/forget", url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(version, 10)},
		"reason": {"the customer asked to retry"}, "form_key": {formKeyOf(t, second, path+"/forget")}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Regexp(t, regexp.MustCompile(`forgotten by support \d+s ago`), body)
	require.Contains(t, body, "Nothing was changed")
}

// TestOverviewCountsWhatNeedsAHuman (defect 8): the page title starts with
// the count that needs a human, the headings carry counts and the lists
// say their order.
func TestOverviewCountsWhatNeedsAHuman(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pendingKey(t, b, "web-overview-pending")
	c := signIn(t, b, store.RoleOncall)
	resp, body := do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// One operation under review (seedOperation) and one pending key.
	require.Contains(t, body, "<title>(2) Overview · unstuck</title>")
	require.Regexp(t, `Operations under review <span class="count">\(1\)</span>`, body)
	require.Regexp(t, `Keys <span class="count">\(1\)</span>`, body)
	require.Contains(t, body, "Longest waiting first")
	require.Contains(t, body, "longest unchanged first")
}

// TestKeyDetailReadsCleanly (defect 6): times and their UTC form are
// apart, empty fields show "—", a stored JSON response is pretty-printed
// with a copy button.
func TestKeyDetailReadsCleanly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleOncall)
	_, body := do(t, c, http.MethodGet, b.srv.URL+"/keys/"+itoa(b.keyID), nil)
	require.NotRegexp(t, `ago</time><span>`, body, "no time runs into its UTC form")
	require.Regexp(t, `ago</time>\s+<span class="muted abs" data-at="[^"]+">\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)</span>`, body)
	require.Regexp(t, `<dt>Correlation ID</dt><dd>—</dd>`, body)
	require.Regexp(t, `<dt>Last error</dt><dd>—</dd>`, body)
	require.Contains(t, body, "{\n  &#34;id&#34;: &#34;ord_secret_body&#34;\n}", "the JSON body is indented")
	require.Contains(t, body, `aria-label="Copy the stored response body"`)
}

// TestReadsApartFromDecisions (defect 11): viewing a stored response is
// audited as a read, listed under "Reads", not under "Decisions".
func TestReadsApartFromDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleOncall)
	do(t, c, http.MethodGet, b.srv.URL+"/keys/"+itoa(b.keyID), nil) // one view, audited
	_, body := do(t, c, http.MethodGet, b.srv.URL+"/keys/"+itoa(b.keyID), nil)
	decisions, reads, ok := strings.Cut(body, `<h2 id="reads-title">Reads</h2>`)
	require.True(t, ok, "a Reads section")
	require.NotContains(t, decisions[strings.Index(decisions, `id="history-title"`):], "key.view_response", "no read under Decisions")
	require.Contains(t, decisions, "No operator has decided on this item.")
	require.Contains(t, reads, "key.view_response")
}

// TestListsSayTheirOrderAndLinkTheFirstPage (defect 7): the lists state
// their order, a later page links the first one, and links carry no
// empty parameters.
func TestListsSayTheirOrderAndLinkTheFirstPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pendingKey(t, b, "web-order-1")
	pendingKey(t, b, "web-order-2")
	page, err := b.records.ListKeys(context.Background(), idemdriver.KeyFilter{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	c := signIn(t, b, store.RoleOncall)
	_, body := do(t, c, http.MethodGet, b.srv.URL+"/keys?scope=&operation=&after="+url.QueryEscape(page.Next), nil)
	require.Contains(t, body, "Most recently updated first.")
	require.Contains(t, body, `<a href="/keys">First page</a>`)
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations", nil)
	require.Contains(t, body, "Most recently updated first.")
}

// TestConsoleRecordsApartFromCustomersKeys (defect 13): the records the
// console keeps for its own decision forms are not listed among the
// customers' keys unless asked for.
func TestConsoleRecordsApartFromCustomersKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, version := pendingKey(t, b, "web-console-records")
	path := "/keys/" + strconv.FormatInt(id, 10)
	support := signIn(t, b, store.RoleSupport)
	_, page := do(t, support, http.MethodGet, b.srv.URL+path, nil)
	resp, _ := do(t, support, http.MethodPost, b.srv.URL+path+"/forget", url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(version, 10)},
		"reason": {"the provider has no such charge"}, "form_key": {formKeyOf(t, page, path+"/forget")}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	_, body := do(t, support, http.MethodGet, b.srv.URL+"/keys", nil)
	require.NotContains(t, body, "console POST /keys/{id}/forget", "the console's record is not among the keys")
	require.Contains(t, body, "POST /orders", "the customers' keys are")
	require.Contains(t, body, "1 of the console's own decision records is left out.")
	require.Contains(t, body, "1 key matches.", "the total counts customers' keys only: the query leaves the console's out")
	_, body = do(t, support, http.MethodGet, b.srv.URL+"/keys?console=1", nil)
	require.Contains(t, body, "console POST /keys/{id}/forget", "shown when asked for")
}

// TestBulkSelectsWhatTheListShows (defect 13): "Act on all matching" on the
// key list selects the list's records: the console's own decision records
// only when the list includes them.
func TestBulkSelectsWhatTheListShows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, version := pendingKey(t, b, "web-bulk-console-records")
	path := "/keys/" + strconv.FormatInt(id, 10)
	admin := signIn(t, b, store.RoleAdmin)
	_, page := do(t, admin, http.MethodGet, b.srv.URL+path, nil)
	resp, _ := do(t, admin, http.MethodPost, b.srv.URL+path+"/forget", url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(version, 10)},
		"reason": {"the provider has no such charge"}, "form_key": {formKeyOf(t, page, path+"/forget")}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	_, body := freeze(t, b, admin, "/keys/bulk?action=forget&all=1&include_may_have_happened=1")
	require.Contains(t, body, "POST /orders")
	require.NotContains(t, body, "console POST /keys/{id}/forget", "the console's record is not selected")
	_, body = freeze(t, b, admin, "/keys/bulk?action=forget&all=1&console=1&include_may_have_happened=1")
	require.Contains(t, body, "console POST /keys/{id}/forget", "selected when the list includes it")
}
