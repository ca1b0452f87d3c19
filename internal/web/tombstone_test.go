package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/store"
)

// SPEC K21: a forgotten key stays findable. Its page answers 200 with who
// forgot it, when and why (the auditor gets the link to the entry), and a
// search by its raw key, quoted or not, by its digest, its short ID and
// its record ID finds it, marked forgotten.
func TestForgottenKeyStaysFindable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rawKey = "order-tombstone-0001"
	id, version := pendingKey(t, b, rawKey)
	path := "/keys/" + strconv.FormatInt(id, 10)
	support := signIn(t, b, store.RoleSupport)
	_, page := do(t, support, http.MethodGet, b.srv.URL+path, nil)
	resp, _ := do(t, support, http.MethodPost, b.srv.URL+path+"/forget", url.Values{"acknowledge_rerun": {"yes"},
		"version": {strconv.FormatInt(version, 10)}, "reason": {"the customer asked to pay again by phone"}, "form_key": {formKeyOf(t, page, path+"/forget")}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, path+"?done=removed", resp.Header.Get("Location"))

	resp, body := do(t, support, http.MethodGet, b.srv.URL+path+"?done=removed", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "not a 404")
	require.Contains(t, body, "forgotten and recorded in the audit trail")
	require.Contains(t, body, "Forgotten")
	require.Contains(t, body, "<strong>support</strong>")
	require.Contains(t, body, "the customer asked to pay again by phone")
	require.Contains(t, body, "prov-"+rawKey, "the reference it carried")
	require.Contains(t, body, `id="removed-title" tabindex="-1" autofocus`, "focus lands on the heading")
	require.Contains(t, body, "Acknowledged by support", "what was acknowledged")
	require.NotContains(t, body, `href="/audit?`, "support may not open the trail")
	auditor := signIn(t, b, store.RoleAuditor)
	_, body = do(t, auditor, http.MethodGet, b.srv.URL+path, nil)
	require.Contains(t, body, `href="/audit?target_kind=key&amp;target_id=`+strconv.FormatInt(id, 10)+`"`, "the auditor's link to the entry")
	require.NotContains(t, body, "forgotten and recorded", "no notice without the redirect")

	digest := idem.Digest("tenant:web", idem.DefaultOperation, rawKey)
	for _, q := range []string{rawKey, `"` + rawKey + `"`, digest, digest[:12], "#" + strconv.FormatInt(id, 10)} {
		resp, _ := do(t, support, http.MethodPost, b.srv.URL+"/search", url.Values{"q": {q}})
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "search %q finds the one forgotten key", q)
		require.Equal(t, path, resp.Header.Get("Location"), q)
	}

	// A key that expired (no decision removed it) is still a 404.
	resp, _ = do(t, support, http.MethodGet, b.srv.URL+"/keys/999999", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
