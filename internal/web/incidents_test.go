package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// seedIncidentKeys seeds pending keys of two causes in one operation
// (so that neither is the whole list of its state and operation) and a
// stuck key alone in its operation; it returns the IDs of the mailbox
// group's keys.
func seedIncidentKeys(t *testing.T, b *bundle) []string {
	t.Helper()
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	var recs []idemdriver.Record
	add := func(op string, status idemdriver.Status, lastErr string, lease time.Time) {
		n := len(recs) + 1
		recs = append(recs, idemdriver.Record{Ident: idemdriver.Ident{Scope: "user:incidents", Operation: op,
			KeyDigest: fmt.Sprintf("%064x", 5000+n)}, Status: status, LastError: lastErr, LeaseExpiresAt: lease,
			Owner: idemdriver.Owner{Token: fmt.Sprintf("inc-%d", n), Fence: int64(5000 + n)}, Attempts: 1, Version: 1,
			CreatedAt: at.Add(time.Duration(n) * time.Second), UpdatedAt: at.Add(time.Duration(n) * time.Second), ExpiresAt: at.Add(48 * time.Hour)})
	}
	add("POST /signups", idemdriver.StatusPending, "mailbox bob+17@example.com does not exist", time.Time{})
	add("POST /signups", idemdriver.StatusPending, "mailbox alice+3@example.com does not exist", time.Time{})
	add("POST /signups", idemdriver.StatusPending, "provider quota exceeded", time.Time{})
	add("job:sync", idemdriver.StatusProcessing, "", at.Add(time.Minute))
	require.NoError(t, b.records.(idemdriver.Seeder).SeedRecords(context.Background(), recs))
	page, err := b.records.ListKeys(context.Background(), idemdriver.KeyFilter{Scope: "user:incidents", Status: idemdriver.StatusPending})
	require.NoError(t, err)
	var ids []string
	for _, r := range page.Records {
		if r.LastError != "provider quota exceeded" {
			ids = append(ids, itoa(r.ID))
		}
	}
	require.Len(t, ids, 2)
	return ids
}

// SPEC K14: /incidents groups what is wrong by cause from the snapshot; a
// group's items page lists exactly its items; "Act on all" is offered only
// where the bulk flow's filter is the group exactly, to roles that may.
func TestIncidentsPageK14(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := setup(t, func(c *web.Config) { c.NowFunc = func() time.Time { return now } })
	mailboxIDs := seedIncidentKeys(t, b)
	auditor := signIn(t, b, store.RoleAuditor)
	resp, body := do(t, auditor, http.MethodGet, b.srv.URL+"/incidents", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "No snapshot yet", "the page reads the snapshots only: none, nothing shown")
	require.Contains(t, body, `data-testid="no-incidents"`)
	s := &incident.Snapshotter{Keys: b.records, Ops: b.sagas, Store: b.db, NowFunc: func() time.Time { return now.Add(-time.Minute) }}
	_, err := s.Once(context.Background())
	require.NoError(t, err)
	groups, err := b.db.IncidentGroups(context.Background(), 0)
	require.NoError(t, err)
	byMsg := map[string]store.IncidentGroup{}
	for _, g := range groups {
		byMsg[g.Message] = g
	}
	mailbox, stuck := byMsg["mailbox <email> does not exist"], byMsg["processing past its lease: its owner is presumably gone"]
	require.Equal(t, int64(2), mailbox.Count)
	require.Equal(t, int64(1), stuck.Count)

	resp, body = do(t, auditor, http.MethodGet, b.srv.URL+"/incidents", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "<title>(5) Incidents · unstuck</title>", "2 + 1 + 1 keys and the operation under review")
	require.Contains(t, body, `<code>mailbox &lt;email&gt; does not exist</code>`)
	require.Contains(t, body, `href="/incidents/`+mailbox.Key+`"`)
	require.NotContains(t, body, "Act on all", "an auditor may not act")
	require.Contains(t, body, `role="img" aria-label="keys pending in this group: 2, up 2 in 24 h"`)
	require.NotContains(t, body, "bob+17@", "the sample is one message; the group's pattern is what it shows first")

	support := signIn(t, b, store.RoleSupport)
	_, body = do(t, support, http.MethodGet, b.srv.URL+"/incidents", nil)
	require.Contains(t, body, `href="/keys/bulk?action=confirm_happened&amp;group=`+byMsg["processing past its lease: its owner is presumably gone"].Key+`&amp;operation=job%3Async&amp;state=stuck"`,
		"act on all, with an action (this console cannot verify) and the group")
	// The two pending groups share their list; each group's bulk selects
	// exactly its own keys.
	mailboxBulk := "/keys/bulk?" + url.Values{"action": {"forget"}, "group": {mailbox.Key}, "operation": {"POST /signups"}, "state": {"pending"},
		"include_may_have_happened": {"1"}}.Encode()
	require.Contains(t, body, `group=`+mailbox.Key)
	_, body = freeze(t, b, support, mailboxBulk)
	require.Contains(t, body, "<strong>2</strong> matching items can be decided", "the group's two keys, not the other group's")
	resp, _ = do(t, support, http.MethodGet, b.srv.URL+"/keys/bulk?action=forget&state=pending&group=not-a-group", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a group that is not one is refused, naming the field")

	resp, body = do(t, auditor, http.MethodGet, b.srv.URL+"/incidents/"+mailbox.Key, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := keyLinks(body)
	slices.Sort(got)
	slices.Sort(mailboxIDs)
	require.Equal(t, mailboxIDs, got, "exactly the group's items")
	require.Contains(t, body, "(includes other groups)")

	review := byMsg["workspace: timeout after <n>s"]
	require.Equal(t, "workspace-provider", review.System, "the system of the operation's current step")
	resp, body = do(t, auditor, http.MethodGet, b.srv.URL+"/incidents/"+review.Key, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `href="/operations/`+b.opID+`"`, "the operation under review is the group's item")

	// Every group leads into bulk, operations' too: their "act on all"
	// freezes exactly the group's items, and links the other actions.
	oncall := signIn(t, b, store.RoleOncall)
	_, body = do(t, oncall, http.MethodGet, b.srv.URL+"/incidents", nil)
	opBulk := "/operations/bulk?" + url.Values{"action": {"retry"}, "group": {review.Key}, "status": {"review_required"}, "type": {review.Operation}}.Encode()
	require.Contains(t, body, `href="`+html.EscapeString(opBulk)+`"`, "the operation group's act on all")
	require.Equal(t, len(incidentGroups(t, b)), strings.Count(body, ">Act on all</a>"), "on every group")
	_, body = freeze(t, b, oncall, opBulk)
	require.Contains(t, body, "<strong>1</strong> matching items can be decided", "the group's one operation")
	require.Contains(t, body, `data-testid="other-actions"`)
	require.Contains(t, body, "compensate</a>", "the group's other actions")

	for _, path := range []string{"/incidents/not-a-group", "/incidents/0123456789abcdef01234567"} {
		resp, _ = do(t, auditor, http.MethodGet, b.srv.URL+path, nil)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}

	_, body = do(t, client(t), http.MethodGet, b.srv.URL+"/metrics", nil)
	require.Contains(t, body, `unstuck_incident_groups{kind="key"} 3`)
	require.Contains(t, body, `unstuck_incident_groups{kind="operation"} 1`)
	require.Contains(t, body, `unstuck_incident_items{exact="true",kind="key"} 4`)
}

func incidentGroups(t *testing.T, b *bundle) []store.IncidentGroup {
	t.Helper()
	g, err := b.db.IncidentGroups(context.Background(), 0)
	require.NoError(t, err)
	return g
}

// SPEC K15: the overview draws each state's trend from the snapshots, as
// SVG images whose label states the current value and the change.
func TestOverviewTrendsK15(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := setup(t, func(c *web.Config) { c.NowFunc = func() time.Time { return now } })
	oncall := signIn(t, b, store.RoleOncall)
	_, body := do(t, oncall, http.MethodGet, b.srv.URL+"/", nil)
	require.NotContains(t, body, `id="trends-title"`, "no snapshot, no trend")

	for _, p := range []struct {
		at    time.Time
		stuck int64
	}{{now.Add(-3 * 24 * time.Hour), 1}, {now.Add(-23 * time.Hour), 3}, {now.Add(-5 * time.Hour), 30}, {now.Add(-time.Hour), 12}} {
		_, err := b.db.WriteSnapshot(context.Background(), func(context.Context) (store.Snapshot, error) {
			return store.Snapshot{At: p.at, Trends: []store.TrendPoint{{Kind: "key", State: "stuck", Count: p.stuck, Exact: true},
				{Kind: "operation", State: "review_required", Count: 2, Exact: true}}}, nil
		})
		require.NoError(t, err)
	}
	resp, body := do(t, oncall, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="trends-title"`)
	require.Contains(t, body, `role="img" aria-label="stuck: 12, up 9 in 24 h"`)
	require.Contains(t, body, `role="img" aria-label="stuck: 12, up 11 in 7 d"`)
	require.Contains(t, body, `role="img" aria-label="review_required: 2, unchanged in 24 h"`)
	require.Contains(t, body, "<polyline", "drawn on the server")
	require.NotContains(t, body, `data-testid="trend-key-completed"`, "a state without snapshots has no row")
}
