package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// fakeVerifier records the verifications the console asks for; err, if
// set, is its answer.
type fakeVerifier struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *fakeVerifier) Request(_ context.Context, actor ops.Actor, id, version int64, reason string) (audit.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return audit.Entry{}, f.err
	}
	f.calls = append(f.calls, actor.Username+" "+strconv.FormatInt(id, 10)+" v"+strconv.FormatInt(version, 10)+" "+reason)
	return audit.Entry{Seq: 1}, nil
}

// SPEC K19 through the routes: "Verify with the provider" is offered first
// on a key whose outcome is unknown, to roles that may verify; its POST
// asks once and lands on the key's page with a notice; bad input names
// its field; a key that cannot be verified is a 409; an auditor is denied.
func TestKeyVerifyRoute(t *testing.T) {
	t.Parallel()
	fake := &fakeVerifier{}
	b := setup(t, func(c *web.Config) { c.Verify = fake })
	id, version := pendingKey(t, b, "web-verify-0000001")
	path := "/keys/" + strconv.FormatInt(id, 10)

	support := signIn(t, b, store.RoleSupport)
	_, page := do(t, support, http.MethodGet, b.srv.URL+path, nil)
	require.Contains(t, page, "Verify with the provider — key "+strconv.FormatInt(id, 10))
	require.Less(t, strings.Index(page, `action="`+path+`/verify"`), strings.Index(page, `action="`+path+`/confirm"`), "offered first")
	form := url.Values{"version": {strconv.FormatInt(version, 10)}, "reason": {"the customer says it is stuck"}, "form_key": {formKeyOf(t, page, path+"/verify")}}
	resp, _ := do(t, support, http.MethodPost, b.srv.URL+path+"/verify", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, path+"?done=verify", resp.Header.Get("Location"))
	again, _ := do(t, support, http.MethodPost, b.srv.URL+path+"/verify", form)
	require.Equal(t, http.StatusSeeOther, again.StatusCode, "a double submit is replayed")
	require.Equal(t, []string{"support " + strconv.FormatInt(id, 10) + " v" + strconv.FormatInt(version, 10) + " the customer says it is stuck"}, fake.calls, "asked once")
	_, page = do(t, support, http.MethodGet, b.srv.URL+path+"?done=verify", nil)
	require.Contains(t, page, "Verification requested and recorded in the audit trail")

	fake.err = ops.InvalidField("reason", "give a reason of at least 10 characters")
	resp, page = do(t, support, http.MethodPost, b.srv.URL+path+"/verify", url.Values{"version": {strconv.FormatInt(version, 10)}, "reason": {"short"}, "form_key": {"verify-short-reason-01"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, page, `data-field="reason"`)

	fake.err = ops.ErrIllegal
	resp, page = do(t, support, http.MethodPost, b.srv.URL+path+"/verify", url.Values{"version": {strconv.FormatInt(version, 10)}, "reason": {"the customer says it is stuck"}, "form_key": {"verify-illegal-000001"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, page, "only a key whose outcome is unknown can be verified")

	auditor := signIn(t, b, store.RoleAuditor)
	_, page = do(t, auditor, http.MethodGet, b.srv.URL+path, nil)
	require.NotContains(t, page, path+"/verify", "not offered to a role that may not verify")
	resp, _ = do(t, auditor, http.MethodPost, b.srv.URL+path+"/verify", url.Values{"version": {"1"}, "reason": {"an auditor tries to verify"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
