package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
)

// deniedEntries returns the trail's denied entries, newest first.
func deniedEntries(t *testing.T, b *bundle) []audit.Entry {
	t.Helper()
	entries, _, err := b.trail.List(context.Background(), audit.Filter{Outcome: audit.OutcomeDenied})
	require.NoError(t, err)
	return entries
}

// TestDeniedLongPathIsAudited: a refused attempt on a path longer than the
// trail's name fields, or with bytes they cannot hold, is still recorded,
// its path cut and made valid, not refused by the trail and only
// logged.
func TestDeniedLongPathIsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleAuditor)
	for _, tc := range []struct {
		name, id string
	}{
		{"a 300-byte key ID", strings.Repeat("9", 300)},
		{"a 1000-byte operation path", strings.Repeat("é", 500)},
		{"NUL and invalid UTF-8", "a%00b%ffc"},
	} {
		before := len(deniedEntries(t, b))
		for _, path := range []string{"/keys/" + tc.id + "/forget", "/operations/" + tc.id + "/retry"} {
			resp, _ := do(t, c, http.MethodPost, b.srv.URL+path, url.Values{"reason": {"trying"}})
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", tc.name, path)
		}
		got := deniedEntries(t, b)
		require.Len(t, got, before+2, "%s: both refusals are audited", tc.name)
		for _, e := range got[:2] {
			require.Equal(t, "auditor", e.Actor, tc.name)
			require.LessOrEqual(t, len(e.Action), 256, tc.name)
			require.LessOrEqual(t, len(e.TargetID), 256, tc.name)
			require.True(t, utf8.ValidString(e.Action+e.TargetID), tc.name)
			require.NotContains(t, e.Action+e.TargetID, "\x00", tc.name)
			require.True(t, strings.HasPrefix(e.Action, "POST /"), tc.name)
		}
	}
	require.Equal(t, "ab\uFFFDc", deniedEntries(t, b)[0].TargetID, "NUL dropped, the invalid byte replaced, the rest kept")
	require.Equal(t, "operation", deniedEntries(t, b)[0].TargetKind)
}

// TestRequestIDBounded: the client's X-Request-Id becomes the audit
// trail's request ID only in a bounded, safe form; anything else is
// replaced with a generated one, never stored verbatim.
func TestRequestIDBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleAuditor)
	for _, tc := range []struct {
		sent string
		kept bool
	}{
		{"req-01J9:abc.def_9", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"<script>alert(1)</script>", false},
		{"line\tbreak", false},
		{"forged, actor=admin", false},
		{"żółw", false},
	} {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/keys/1/forget", strings.NewReader("reason=x"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("X-Request-Id", tc.sent)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		e := deniedEntries(t, b)[0]
		require.Equal(t, resp.Header.Get("X-Request-Id"), e.RequestID, "the response names the recorded ID")
		if tc.kept {
			require.Equal(t, tc.sent, e.RequestID)
		} else {
			require.NotEqual(t, tc.sent, e.RequestID, "%q is replaced", tc.sent)
			require.Regexp(t, `^[0-9a-f]{32}$`, e.RequestID, "%q is replaced", tc.sent)
		}
	}
}

// TestOperationDataGated: an operation's input and its steps' results
// (a signup's email; SPEC CON K7) are shown only to roles with the operation_data
// permission, oncall and admin, on request, and each showing is audited
// as a read, as stored responses are; support and auditor do not see
// them.
func TestOperationDataGated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	page := b.srv.URL + "/operations/" + b.opID
	reads := func() []audit.Entry {
		entries, _, err := b.trail.List(context.Background(), audit.Filter{Action: "operation.view_data"})
		require.NoError(t, err)
		return entries
	}
	for _, role := range []string{store.RoleSupport, store.RoleAuditor} {
		resp, body := do(t, signIn(t, b, role), http.MethodGet, page+"?data=show", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, role)
		require.NotContains(t, body, "ann@example.com", "%s: no input", role)
		require.NotContains(t, body, `{&#34;external_id&#34;`, "%s: no step result", role)
		require.NotContains(t, body, ">Result<", "%s: no step result", role)
		require.Contains(t, body, "Your role may not see the inputs and step results of operations.", role)
		require.Contains(t, body, "acct-881", "%s: the external ID is not personal data", role)
	}
	require.Empty(t, reads(), "nothing shown, nothing recorded")

	for i, role := range []string{store.RoleOncall, store.RoleAdmin} {
		c := signIn(t, b, role)
		resp, body := do(t, c, http.MethodGet, page, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, role)
		require.NotContains(t, body, "ann@example.com", "%s: shown on request only", role)
		require.Contains(t, body, `href="/operations/`+b.opID+`?data=show"`, role)
		require.Len(t, reads(), i, "%s: a plain view records nothing", role)

		resp, body = do(t, c, http.MethodGet, page+"?data=show", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, role)
		require.Contains(t, body, "ann@example.com", "%s sees the input", role)
		require.Contains(t, body, ">Result<", "%s sees the step results", role)
		got := reads()
		require.Len(t, got, i+1, "%s: the showing is audited", role)
		require.Equal(t, []string{role, "operation", b.opID, audit.OutcomeRead},
			[]string{got[0].Actor, got[0].TargetKind, got[0].TargetID, got[0].Outcome})
	}
}
