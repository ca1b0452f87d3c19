package browserbulk

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
	"github.com/unstuckhq/unstuck/internal/store"
)

// The browser journey of a bulk request an approver can trust (SPEC K22,
// K23), on the real program in Chromium:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserBulkCanary ./internal/consolecmd/browserbulk/
//
// oncall opens the incident group of 12 stuck payments, acts on all of it
// ("confirm it did not happen", one of the group's other actions), and
// submits the frozen set; admin reads, before approving, the action in
// words, the frozen count, the breakdown and a sample; the run (one item a
// batch) passes its canary batch, then a failure injected in the database
// pauses it with the error grouped; admin resumes it, and the report lists
// every item, each decided one linking to its audit entry.
func TestBrowserBulkCanary(t *testing.T) {
	const n = 12
	const scope = "tenant:canary"
	const message = "card network timeout while charging"
	browser := chromium.Launch(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "browser-bulk-canary.db")
	dbURL := "sqlite:" + path
	flags := []string{"--bulk-batch", "1", "--bulk-pause", "150ms"}

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
		recs[i] = idemdriver.Record{Ident: idemdriver.Ident{Scope: scope, Operation: "POST /charges", KeyDigest: fmt.Sprintf("%064x", i+1)},
			Fingerprint: "fp", Status: idemdriver.StatusPending, LastError: message, Attempts: 1, Version: 1,
			Owner:     idemdriver.Owner{Token: fmt.Sprintf("owner-%d", i), Fence: int64(i + 1)},
			CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	}
	require.NoError(t, db.Records.(idemdriver.Seeder).SeedRecords(ctx, recs))

	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, dbURL, flags...)
	consoletest.WaitReady(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())
	chromium.SignInAs(t, c, "oncall")
	chromium.SignInAs(t, c, "admin")

	// oncall: from the incident group to a frozen set.
	p := c.Open(t, "oncall")
	row := p.GetByRole("row").Filter(playwright.LocatorFilterOptions{
		Has: p.Locator("code").Filter(playwright.LocatorFilterOptions{HasText: regexp.MustCompile("^" + regexp.QuoteMeta(message) + "$")})})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		p.GoTo("/incidents")
		if k, _ := row.Count(); k == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no incident group %q on /incidents", message)
	}
	p.OK(row.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: regexp.MustCompile(`^Act on all`)}).Click(), "act on all")
	p.OK(p.GetByTestId("other-actions").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "confirm it did not happen", Exact: playwright.Bool(true)}).Click(),
		"the group's other action: confirm it did not happen")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the frozen set's page")
	p.OK(chromium.Expect.Locator(p.GetByTestId("legal-count")).ToContainText(strconv.Itoa(n)+" matching items can be decided: this set is frozen"), "the frozen count")
	p.OK(p.GetByLabel("Reason", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the card network never saw these charges"), "reason")
	p.OK(p.GetByLabel("Type the number of items ("+strconv.Itoa(n)+") to confirm").Fill(strconv.Itoa(n)), "typed count")
	p.OK(p.Role("button", "Confirm it did not happen "+strconv.Itoa(n)+" keys").Click(), "submit")
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-status")).ToHaveText("waiting_approval"), "waits for a second person")
	id := regexp.MustCompile(`/bulk/(\d+)$`).FindStringSubmatch(p.URL())[1]
	reqID, err := strconv.ParseInt(id, 10, 64)
	require.NoError(t, err)

	// A failure the run meets after its canary batch (5 items): the
	// database refuses to release the eighth key.
	items, err := db.Console.BulkItems(ctx, reqID, "", 0, n)
	require.NoError(t, err)
	require.Len(t, items, n)
	raw, err := idemsqlite.Open(path)
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.ExecContext(ctx, `CREATE TRIGGER unstuck_test_fail BEFORE DELETE ON unstuck_idem_record WHEN OLD.id = `+items[7].TargetID+`
BEGIN SELECT RAISE(ABORT, 'card network ledger locked'); END`)
	require.NoError(t, err)

	// admin reads what will run, and approves it.
	a := c.Open(t, "admin")
	require.Equal(t, http.StatusOK, a.GoTo("/approvals"))
	a.OK(a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Waiting for approval"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: id, Exact: playwright.Bool(true)}).Click(), "open the request")
	a.OK(chromium.Expect.Locator(a.GetByTestId("bulk-what")).ToHaveText("Confirm it did not happen — keys where group "+regexp.MustCompile(`group=([0-9a-f]+)`).FindStringSubmatch(mustFilter(t, db, reqID))[1]+", operation POST /charges, state pending"),
		"the action in words, with its target")
	a.OK(chromium.Expect.Locator(a.GetByTestId("legal-count")).ToContainText(strconv.Itoa(n)+" matching items can be decided"), "the frozen count")
	a.OK(chromium.Expect.Locator(a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "By scope"})).ToContainText(scope), "the breakdown")
	sample := a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Sample"})
	a.OK(chromium.Expect.Locator(sample.GetByRole("row")).ToHaveCount(n+1), "a header and the sample")
	a.OK(chromium.Expect.Locator(sample.GetByRole("row").Nth(1)).ToContainText(message), "each with its last error")
	a.OK(a.Role("button", "Approve request "+id).Click(), "approve")

	// The canary passes; the injected failure pauses the run.
	a.OK(chromium.Expect.Locator(a.GetByTestId("bulk-status")).ToHaveText("paused", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30_000)}), "paused by itself")
	paused := a.GetByTestId("paused")
	a.OK(chromium.Expect.Locator(paused).ToContainText("Paused by system"), "by the run")
	a.OK(chromium.Expect.Locator(paused).ToContainText("1 of 1 items of a batch failed"), "why")
	a.OK(chromium.Expect.Locator(paused.GetByRole("table", playwright.LocatorGetByRoleOptions{Name: "Failures, grouped"})).ToContainText("card network ledger locked"), "the error, grouped")
	a.OK(chromium.Expect.Locator(a.GetByTestId("applied")).ToHaveText("7"), "the canary batch and the two after it")
	a.OK(chromium.Expect.Locator(a.GetByTestId("failed")).ToHaveText("1"), "the failed one")

	_, err = raw.ExecContext(ctx, `DROP TRIGGER unstuck_test_fail`)
	require.NoError(t, err)
	a.OK(a.Role("button", "Resume request "+id).Click(), "admin resumes")
	a.OK(chromium.Expect.Locator(a.GetByTestId("bulk-status")).ToHaveText("done", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30_000)}), "the run ends")
	a.OK(chromium.Expect.Locator(a.GetByTestId("applied")).ToHaveText(strconv.Itoa(n-1)), "every other item applied")
	a.OK(chromium.Expect.Locator(a.Role("button", "Cancel request "+id)).ToHaveCount(0), "no cancel once done")

	// The report: every item, each decided one with its audit entry.
	a.OK(a.GetByTestId("bulk-items-link").Click(), "the items")
	report := a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Items"})
	a.OK(chromium.Expect.Locator(report.GetByRole("row")).ToHaveCount(n+1), "every item")
	a.OK(chromium.Expect.Locator(report.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "audit entry"})).ToHaveCount(n-1), "each applied item links its entry")
	a.OK(chromium.Expect.Locator(report.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "failed"})).ToContainText("card network ledger locked"), "the failed one, with why")
	a.OK(report.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "audit entry"}).First().Click(), "open an item's entry")
	a.OK(chromium.Expect.Locator(a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"}).GetByRole("row")).ToHaveCount(2), "exactly its entry")
	a.OK(chromium.Expect.Locator(a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"})).ToContainText("key.confirm_not_happened"), "the decision")

	stored, ok, err := db.Console.BulkByID(ctx, reqID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store.BulkDone, stored.Status)
	require.Equal(t, map[string]int64{store.ItemApplied: n - 1, store.ItemFailed: 1}, stored.Counts)
	left, err := db.Records.ListKeys(ctx, idemdriver.KeyFilter{Scope: scope, Limit: idemdriver.MaxLimit})
	require.NoError(t, err)
	require.Len(t, left.Records, 1, "only the key whose release failed is left")
	require.Equal(t, items[7].TargetID, strconv.FormatInt(left.Records[0].ID, 10))
}

// mustFilter is request id's filter as stored.
func mustFilter(t *testing.T, db *consolecmd.Database, id int64) string {
	t.Helper()
	req, ok, err := db.Console.BulkByID(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok)
	return req.Filter
}
