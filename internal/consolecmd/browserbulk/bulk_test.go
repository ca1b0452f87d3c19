package browserbulk

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The browser journey of bulk decisions with four-eyes approval (issue
// 14, SPEC K12, K13), on the real program in Chromium:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserBulk ./internal/consolecmd/browserbulk/
//
// oncall previews "retry all review_required of type demo_signup",
// cannot approve their own request, one item changes meanwhile, admin
// approves, the run ends, the report lists the stale item as skipped, the
// operations' states match it, and the trail has one entry for the
// request, one for the approval and one per item.
func TestBrowserBulk(t *testing.T) {
	browser := chromium.Launch(t)
	path := filepath.Join(t.TempDir(), "browser-bulk.db")
	dbURL := "sqlite:" + path
	base := consoletest.StartDemo(t, consolecmd.Run, dbURL)
	consoletest.WaitReady(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())

	var ids []string
	for i := range 3 {
		ids = append(ids, consoletest.PostSignup(t, base, consoletest.SignupKey(t, "bulk"+strconv.Itoa(i)), `{"email":"bulk`+strconv.Itoa(i)+`@example.com","fail":"welcome_permanent"}`))
	}
	for _, id := range ids {
		consoletest.WaitSignup(t, base, id, sagadriver.StatusReviewRequired, 30*time.Second)
	}
	stale := ids[0]
	for _, role := range []string{"oncall", "admin"} {
		chromium.SignInAs(t, c, role)
	}

	p := c.Open(t, "oncall")
	list := "/operations?status=review_required&type=" + demo.SignupType
	require.Equal(t, http.StatusOK, p.GoTo(list))
	bulkLinks := p.GetByTestId("bulk-link")
	p.OK(bulkLinks.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "retry", Exact: playwright.Bool(true)}).Click(), "act on all matching: retry")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the preview")
	p.OK(chromium.Expect.Locator(p.GetByTestId("legal-count")).ToContainText("3 matching items"), "the exact count")
	p.OK(chromium.Expect.Locator(p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Sample"}).GetByRole("row")).ToHaveCount(4), "a header and 3 sampled items")
	p.OK(p.GetByLabel("Reason", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the mailer accepts mail again after its outage"), "reason")
	p.OK(p.GetByLabel("Type the number of items (3) to confirm").Fill("3"), "typed count")
	p.OK(p.Role("button", "Retry 3 operations").Click(), "submit")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the request's page")
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-status")).ToHaveText("waiting_approval"), "waits for a second person")
	p.OK(chromium.Expect.Locator(p.Role("button", "Approve request 1")).ToHaveCount(0), "no approve control for the requester")
	reqURL := p.URL()
	id := regexp.MustCompile(`/bulk/(\d+)$`).FindStringSubmatch(reqURL)[1]
	resp, err := p.Request().Post(c.Base+"/approvals/"+id+"/approve", playwright.APIRequestContextPostOptions{MaxRedirects: playwright.Int(0)})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.Status(), "the requester cannot approve their own request")

	// One item changes after the request: resolved by hand.
	op, _ := consoletest.SagaRecords(t, dbURL, stale)
	resp, err = p.Request().Post(c.Base+"/operations/"+stale+"/resolve", playwright.APIRequestContextPostOptions{
		Form: map[string]any{"version": strconv.FormatInt(op.Version, 10), "status": "failed", "reason": "refunded by hand, no account",
			"form_key": "browser-bulk-stale-resolve-1"}, MaxRedirects: playwright.Int(0)})
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, resp.Status())

	a := c.Open(t, "admin")
	a.GoTo("/")
	p.OK(chromium.Expect.Page(a.Page).ToHaveTitle(regexp.MustCompile(`^\(1 waiting approval\)`)), "the title counts the waiting request")
	a.OK(a.Role("link", "Approvals (1)").Click(), "open the approvals")
	a.OK(a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Waiting for approval"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: id, Exact: playwright.Bool(true)}).Click(), "open the request")
	a.OK(a.Role("button", "Approve request "+id).Click(), "approve")
	a.OK(chromium.Expect.Locator(a.GetByTestId("bulk-status")).ToHaveText("done", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(30_000)}), "the run ends (live progress)")
	a.OK(chromium.Expect.Locator(a.GetByTestId("applied")).ToHaveText("2"), "applied")
	a.OK(chromium.Expect.Locator(a.GetByTestId("skipped")).ToHaveText("1"), "skipped: changed since the request")
	report := a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Items not applied"})
	a.OK(chromium.Expect.Locator(report.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: stale, Exact: playwright.Bool(true)})).ToBeVisible(), "the stale item is listed")

	for _, op := range ids[1:] {
		consoletest.WaitSignup(t, base, op, sagadriver.StatusCompleted, 30*time.Second)
	}
	require.Equal(t, string(sagadriver.StatusFailed), consoletest.GetSignup(t, base, stale).Status, "the stale item was not forced")

	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	defer db.Close()
	keys, err := consolecmd.DemoAuditKeys(func(string) string { return "" }, consolecmd.DemoSecret, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	trail := audit.NewSQLite(db, audit.WithKeys(keys))
	entries, _, err := trail.List(context.Background(), audit.Filter{Limit: audit.MaxLimit})
	require.NoError(t, err)
	count := map[string]int{}
	for _, e := range entries {
		n, _ := strconv.ParseInt(id, 10, 64)
		if e.RequestID == ops.BulkRequestID(n) {
			count[e.Action+"/"+e.Outcome]++
		}
	}
	require.Equal(t, map[string]int{"bulk.request/applied": 1, "bulk.approve/applied": 1, "bulk.approve/denied": 1,
		"operation.retry/applied": 2, "operation.retry/conflict": 1}, count, "1 + N entries, the approval and the refused self-approval")
}
