package browserbulk

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
)

// The browser journey of a bulk run cancelled in its middle (SPEC
// K12), on the real program in Chromium:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserBulkCancel ./internal/consolecmd/browserbulk/
//
// support asks to forget the 30 keys of one scope, with no approval and a
// slow run (one item per batch, 300 ms between batches), cancels the run
// once some keys are forgotten, and the split is consistent: the report's
// counts add up to the total with some items applied and some not
// decided, exactly the applied keys are gone from the database, and the
// trail has one key.forget entry per applied item and none for the others.
func TestBrowserBulkCancel(t *testing.T) {
	const n = 30
	const scope = "tenant:cancel"
	browser := chromium.Launch(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "browser-bulk-cancel.db")
	dbURL := "sqlite:" + path
	flags := []string{"--approval-required", "none", "--bulk-batch", "1", "--bulk-pause", "300ms"}

	// The demo creates and migrates its database; then it stops while the
	// keys are chromium.Seeded.
	_, stop := consoletest.StartDemoWith(t, consolecmd.Run, dbURL, flags...)
	stop()
	db, err := consolecmd.OpenDatabase(ctx, dbURL)
	require.NoError(t, err)
	defer db.Close()
	auditKeys, err := consolecmd.DemoAuditKeys(func(string) string { return "" }, consolecmd.DemoSecret, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	db.UseAuditKeys(auditKeys)
	recs := make([]idemdriver.Record, n)
	now := time.Now().UTC().Add(-time.Hour)
	for i := range recs {
		status := idemdriver.StatusPending
		if i%2 == 1 {
			status = idemdriver.StatusCompleted
		}
		recs[i] = idemdriver.Record{Ident: idemdriver.Ident{Scope: scope, Operation: "POST /charges", KeyDigest: fmt.Sprintf("%064x", i+1)},
			Fingerprint: "fp", Status: status, LastError: "provider timeout", Attempts: 1, Version: 1,
			Owner:     idemdriver.Owner{Token: fmt.Sprintf("owner-%d", i), Fence: int64(i + 1)},
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	}
	require.NoError(t, db.Records.(idemdriver.Seeder).SeedRecords(ctx, recs))
	before, err := db.Records.ListKeys(ctx, idemdriver.KeyFilter{Scope: scope, Limit: idemdriver.MaxLimit})
	require.NoError(t, err)
	require.Len(t, before.Records, n)

	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, dbURL, flags...)
	consoletest.WaitReady(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())
	chromium.SignInAs(t, c, "support")

	p := c.Open(t, "support")
	require.Equal(t, http.StatusOK, p.GoTo("/keys?scope="+url.QueryEscape(scope)))
	p.OK(p.GetByTestId("bulk-link").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "forget", Exact: playwright.Bool(true)}).Click(), "act on all matching: forget")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/bulk\?`)), "the preview: no set to freeze")
	// Every key is pending or completed: their effect may have happened,
	// so they are left out until included explicitly (SPEC K20).
	p.OK(chromium.Expect.Locator(p.GetByTestId("may-have-happened")).ToContainText(strconv.Itoa(n)+" matching keys may already have happened, and are left out"), "counted apart")
	p.OK(p.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Include these " + strconv.Itoa(n) + " too"}).Click(), "include them")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the frozen set")
	p.OK(chromium.Expect.Locator(p.GetByTestId("legal-count")).ToContainText(strconv.Itoa(n)+" matching items"), "the exact count")
	p.OK(p.GetByLabel("Reason", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the tenant asked for its charges to be sent again"), "reason")
	p.OK(p.GetByLabel("Type the number of items ("+strconv.Itoa(n)+") to confirm").Fill(strconv.Itoa(n)), "typed count")
	p.OK(p.Role("button", "Forget "+strconv.Itoa(n)+" keys").Click(), "submit")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the request's page")
	id := regexp.MustCompile(`/bulk/(\d+)$`).FindStringSubmatch(p.URL())[1]
	reqID, err := strconv.ParseInt(id, 10, 64)
	require.NoError(t, err)
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-status")).ToHaveText("running"), "runs without approval")
	p.OK(chromium.Expect.Locator(p.GetByTestId("applied")).ToHaveText(regexp.MustCompile(`^[1-9]\d*$`)), "some items applied (live progress)")
	p.OK(p.Role("button", "Cancel request "+id).Click(), "cancel")
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-status")).ToHaveText("cancelled"), "the run is cancelled")
	p.OK(chromium.Expect.Locator(p.GetByText("Cancelled by")).ToBeVisible(), "who cancelled it")
	p.OK(chromium.Expect.Locator(p.Role("button", "Cancel request "+id)).ToHaveCount(0), "no cancel control any more")

	// The JSON report, once the counts no longer move: an item decided
	// while the cancel was recorded may still land, none after it.
	type report struct {
		Status                                   string
		Total, Applied, Skipped, Refused, Failed int64
	}
	get := func() report {
		t.Helper()
		resp, err := p.Request().Get(c.Base+"/bulk/"+id, playwright.APIRequestContextGetOptions{Headers: map[string]string{"Accept": "application/json"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status())
		body, err := resp.Body()
		require.NoError(t, err)
		var r report
		require.NoError(t, json.Unmarshal(body, &r), "body: %s", body)
		return r
	}
	got := get()
	for stable := 0; stable < 3; {
		time.Sleep(400 * time.Millisecond) // longer than the pause between batches
		next := get()
		if next == got {
			stable++
		} else {
			stable = 0
		}
		got = next
	}
	require.Equal(t, "cancelled", got.Status)
	require.Equal(t, int64(n), got.Total)
	stored, ok, err := db.Console.BulkByID(ctx, reqID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.BulkCancelled, stored.Status)
	notDecided := stored.Counts[store.ItemPending]
	require.Equal(t, got.Total, got.Applied+got.Skipped+got.Refused+got.Failed+notDecided, "the split adds up: %+v, %d not decided", got, notDecided)
	require.Positive(t, got.Applied, "cancelled after some items were applied")
	require.Less(t, got.Applied, got.Total, "cancelled before the run ended")
	require.Positive(t, notDecided, "the items after the cancel are not decided")
	require.Zero(t, got.Skipped+got.Refused+got.Failed, "nothing else happened to the items: %+v", got)
	p.OK(chromium.Expect.Locator(p.GetByTestId("applied")).ToHaveText(strconv.FormatInt(got.Applied, 10)), "the page shows the applied count")
	require.Equal(t, "cancelled", get().Status, "still cancelled: the run did not resume")

	// The applied items are exactly the forgotten keys.
	applied := map[string]bool{}
	for after := 0; ; {
		items, err := db.Console.BulkItems(ctx, reqID, store.ItemApplied, after, 100)
		require.NoError(t, err)
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			applied[it.TargetID] = true
			after = it.Seq
		}
	}
	require.Len(t, applied, int(got.Applied), "one applied item per count")
	left, err := db.Records.ListKeys(ctx, idemdriver.KeyFilter{Scope: scope, Limit: idemdriver.MaxLimit})
	require.NoError(t, err)
	present := map[string]bool{}
	for _, r := range left.Records {
		present[strconv.FormatInt(r.ID, 10)] = true
	}
	require.Len(t, left.Records, n-int(got.Applied), "the forgotten keys are the applied items")
	for _, r := range before.Records {
		rid := strconv.FormatInt(r.ID, 10)
		require.NotEqual(t, applied[rid], present[rid], "key %s: forgotten exactly when its item was applied", rid)
	}

	// The trail: the request, the cancel, and one key.forget per applied
	// item, none for the others.
	count := map[string]int{}
	perTarget := map[string]int{}
	for after := int64(0); ; {
		page, next, err := db.Trail.List(ctx, audit.Filter{After: after, Limit: audit.MaxLimit})
		require.NoError(t, err)
		for _, e := range page {
			if e.RequestID != ops.BulkRequestID(reqID) {
				continue
			}
			count[e.Action+"/"+e.Outcome]++
			if e.Action == "key.forget" {
				perTarget[e.TargetID]++
			}
		}
		if next == 0 {
			break
		}
		after = next
	}
	require.Equal(t, map[string]int{"bulk.request/applied": 1, "bulk.cancel/applied": 1, "key.forget/applied": int(got.Applied)}, count,
		"the request, the cancel and one entry per applied item")
	for target, k := range perTarget {
		require.Equal(t, 1, k, "item %s decided once", target)
		require.True(t, applied[target], "the trail's item %s was applied", target)
	}
	t.Logf("cancelled with %d of %d applied, %d not decided", got.Applied, got.Total, notDecided)
}
