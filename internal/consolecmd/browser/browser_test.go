package browser

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
)

// The browser tests drive the real program ("console demo") in Debian
// Chromium through playwright-go, by role and accessible name (SPEC
// K9). The driver and the browser come from scripts/playwright-setup.sh:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run Browser ./internal/consolecmd/browser/
//
// Without them the tests skip, except under CI=true, where a missing browser
// is a failure.

func TestBrowser(t *testing.T) {
	browser := chromium.Launch(t)
	base := consoletest.StartDemo(t, consolecmd.Run, "sqlite:"+filepath.Join(t.TempDir(), "browser.db"))
	consoletest.WaitReady(t, base)
	seed := chromium.SeedShop(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())
	started := time.Now()
	defer func() { t.Logf("browser journeys took %v", time.Since(started).Round(time.Millisecond)) }()

	t.Run("CSPDetector", func(t *testing.T) { testCSPDetector(t, c) })
	t.Run("SignIn", func(t *testing.T) {
		for _, role := range consolecmd.DemoUsers {
			t.Run(role, func(t *testing.T) { testSignIn(t, c, role) })
		}
	})
	t.Run("OverviewScreenshot", func(t *testing.T) { testOverviewScreenshot(t, c) })
	t.Run("FilterPending", func(t *testing.T) { testFilterPending(t, c, seed) })
	t.Run("StoredResponse", func(t *testing.T) { testStoredResponse(t, c) })
	t.Run("ForbiddenControls", func(t *testing.T) { testForbiddenControls(t, c) })
	t.Run("SignOut", func(t *testing.T) { testSignOut(t, c) })
	t.Run("Keyboard", func(t *testing.T) { testKeyboard(t, c) })
}

// testCSPDetector proves that the tab's watcher sees a violation: a page
// under the console's origin (served by the test, not the console) with
// a strict CSP and an inline script. Without this, "zero violations"
// could mean "not listening".
func testCSPDetector(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "")
	require.NoError(t, p.Route("**/csp-canary", func(r playwright.Route) {
		_ = r.Fulfill(playwright.RouteFulfillOptions{Status: playwright.Int(200), ContentType: playwright.String("text/html"),
			Headers: map[string]string{"Content-Security-Policy": "default-src 'none'"},
			Body:    "<!DOCTYPE html><title>canary</title><script>document.title = 'ran'</script>"})
	}))
	p.GoTo("/csp-canary")
	title, err := p.Title()
	require.NoError(t, err)
	require.Equal(t, "canary", title, "the inline script was blocked")
	var seen []string // expected here: taken, so they do not fail the test
	require.Eventually(t, func() bool {
		seen = append(seen, p.TakeViolations()...)
		return len(seen) > 0
	}, 5*time.Second, 20*time.Millisecond, "Chromium reported no CSP violation for an inline script: the watcher would miss real ones")
	t.Logf("the watcher sees violations, e.g. %q", seen[0])
}

// testSignIn: each role signs in through the form and sees the overview
// with its counts table; the session is kept for the later journeys.
func testSignIn(t *testing.T, c *chromium.Console, role string) {
	p := c.Open(t, "")
	p.SignIn(role, "demo-"+role)
	keys := p.Role("region", "Idempotency keys")
	p.OK(chromium.Expect.Locator(keys.GetByRole("table")).ToBeVisible(), "counts table")
	p.OK(chromium.Expect.Locator(keys.GetByRole("columnheader", playwright.LocatorGetByRoleOptions{Name: "Records"})).ToBeVisible(), "Records column")
	completed := keys.GetByRole("row").Filter(playwright.LocatorFilterOptions{
		Has: p.GetByRole("rowheader", playwright.PageGetByRoleOptions{Name: "completed", Exact: playwright.Bool(true)})})
	p.OK(chromium.Expect.Locator(completed).ToHaveCount(1), "a completed row")
	p.OK(chromium.Expect.Locator(p.GetByTestId("count-completed")).ToHaveText(regexp.MustCompile(`^\s*[1-9]\d*\s*$`)), "completed count")
	p.OK(chromium.Expect.Locator(p.GetByTestId("count-pending")).ToHaveText(regexp.MustCompile(`^\s*[1-9]\d*\s*$`)), "pending count")
	p.OK(chromium.Expect.Locator(p.Role("region", "Needs a human")).ToContainText("pending"), "the pending payment needs a human")
	p.OK(chromium.Expect.Locator(p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Overview"})).
		ToHaveAttribute("aria-current", "page"), "Overview is the current page")

	state := filepath.Join(c.Dir, role+".json")
	_, err := p.Context().StorageState(playwright.BrowserContextStorageStateOptions{Path: playwright.String(state)})
	require.NoError(t, err)
	c.Sessions[role] = state
}

// testOverviewScreenshot saves a picture of the overview as oncall.
func testOverviewScreenshot(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "oncall")
	p.GoTo("/")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Overview")).ToBeVisible(), "Overview heading")
	png, err := p.Screenshot(playwright.PageScreenshotOptions{FullPage: playwright.Bool(true)})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "overview-oncall.png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("overview screenshot: %s (%d bytes)", path, len(png))
	const shared = "/tmp/unstuck-overview.png"
	if err := os.WriteFile(shared, png, 0o644); err != nil {
		t.Logf("could not write %s: %v", shared, err)
	} else {
		t.Logf("overview screenshot also at %s", shared)
	}
}

// testFilterPending: oncall filters the key list by state through the HTMX
// form, finds the pending payment by its external reference and opens it.
func testFilterPending(t *testing.T, c *chromium.Console, seed chromium.Seeded) {
	p := c.Open(t, "oncall")
	p.GoTo("/keys")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Keys")).ToBeVisible(), "Keys heading")
	_, err := p.GetByLabel("State", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"pending"}})
	require.NoError(t, err)
	// The form swaps the results only (hx-get, hx-select="#results").
	resp, err := p.ExpectResponse(regexp.MustCompile(`/keys\?.*state=pending`), func() error {
		return p.Role("button", "Apply filters").Click()
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status())
	hx, err := resp.Request().HeaderValue("Hx-Request")
	require.NoError(t, err)
	require.Equal(t, "true", hx, "the filter is an HTMX request, not a page load")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys\?.*state=pending`)), "the filter lives in the URL")

	rows := p.GetByRole("table").GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: seed.PendingRef})
	p.OK(chromium.Expect.Locator(rows).ToHaveCount(1), "the pending payment's row (ref %s)", seed.PendingRef)
	p.OK(chromium.Expect.Locator(rows).ToContainText("pending"), "its state")
	p.OK(chromium.Expect.Locator(rows).ToContainText("POST /shop/payments"), "its operation")
	for _, other := range []string{"completed", "failed"} {
		p.OK(chromium.Expect.Locator(p.GetByRole("table").GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: other})).ToHaveCount(0),
			"no %s rows after filtering by pending", other)
	}

	link := rows.GetByRole("link")
	id, err := link.TextContent()
	require.NoError(t, err)
	id = strings.TrimSpace(id)
	require.Regexp(t, `^\d+$`, id, "the row's link is the record ID")
	p.OK(p.Role("link", "Key "+id).Click(), "open key %s by its accessible name", id)
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+id+`$`)), "detail URL")
	p.OK(chromium.Expect.Locator(p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).ToHaveText(regexp.MustCompile(`^\s*Key `+id+`\s+pending\s*$`)), "detail heading")
	// dt/dd (roles term and definition) take no name from their content,
	// so the field is found by its text.
	p.OK(chromium.Expect.Locator(p.GetByRole("term").Filter(playwright.LocatorFilterOptions{HasText: "External reference"})).ToBeVisible(), "External reference field")
	p.OK(chromium.Expect.Locator(p.GetByRole("definition").Filter(playwright.LocatorFilterOptions{HasText: seed.PendingRef})).ToHaveCount(1), "the reference")
	copyRef := p.Role("button", "Copy external reference")
	p.OK(chromium.Expect.Locator(copyRef).ToBeVisible(), "Copy external reference button")
	p.OK(chromium.Expect.Locator(copyRef).ToHaveAttribute("data-copy", seed.PendingRef), "the button copies the reference")
	// The copy button works under the CSP (static/app.js).
	require.NoError(t, p.Context().GrantPermissions([]string{"clipboard-read", "clipboard-write"}))
	p.OK(copyRef.Click(), "click copy")
	p.OK(chromium.Expect.Locator(copyRef).ToHaveText("Copied"), "the button confirms the copy")
}

// completedOrderURL finds the detail page of the completed order through
// the key list, as oncall.
func completedOrderURL(t *testing.T, p *chromium.Tab) string {
	t.Helper()
	p.GoTo("/keys?state=completed")
	rows := p.GetByRole("table").GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "POST /shop/orders"})
	p.OK(chromium.Expect.Locator(rows).ToHaveCount(1), "the completed order")
	href, err := rows.GetByRole("link").GetAttribute("href")
	require.NoError(t, err)
	require.Regexp(t, `^/keys/\d+$`, href)
	return href
}

// testStoredResponse: oncall sees a completed key's stored response;
// support sees the record but not the response.
func testStoredResponse(t *testing.T, c *chromium.Console) {
	oncall := c.Open(t, "oncall")
	href := completedOrderURL(t, oncall)
	oncall.GoTo(href)
	stored := oncall.Role("region", "Stored response")
	oncall.OK(chromium.Expect.Locator(stored).ToContainText("HTTP 201"), "oncall sees the status")
	oncall.OK(chromium.Expect.Locator(stored.GetByTestId("stored-response")).ToContainText(`"sku": "book"`), "oncall sees the body, pretty-printed")

	support := c.Open(t, "support")
	support.GoTo(href)
	stored = support.Role("region", "Stored response")
	support.OK(chromium.Expect.Locator(stored).ToContainText("may not see stored responses"), "support is told why")
	support.OK(chromium.Expect.Locator(stored.GetByTestId("stored-response")).ToHaveCount(0), "support sees no body")
	support.OK(chromium.Expect.Locator(support.GetByText(`"sku"`)).ToHaveCount(0), "the body is nowhere on the page")
}

// testForbiddenControls: only admin has the Users link and page.
func testForbiddenControls(t *testing.T, c *chromium.Console) {
	for _, role := range []string{"support", "oncall", "auditor"} {
		p := c.Open(t, role)
		p.GoTo("/")
		nav := p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"})
		p.OK(chromium.Expect.Locator(nav.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Keys", Exact: playwright.Bool(true)})).ToBeVisible(), "%s has Keys", role)
		p.OK(chromium.Expect.Locator(nav.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Users", Exact: playwright.Bool(true)})).ToHaveCount(0), "%s has no Users link", role)
	}

	admin := c.Open(t, "admin")
	admin.GoTo("/")
	nav := admin.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"})
	admin.OK(nav.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Users", Exact: playwright.Bool(true)}).Click(), "admin opens Users")
	admin.OK(chromium.Expect.Locator(admin.Role("heading", "Users")).ToBeVisible(), "Users heading")
	table := admin.GetByRole("table")
	for _, u := range consolecmd.DemoUsers {
		row := table.GetByRole("row").Filter(playwright.LocatorFilterOptions{
			Has: admin.GetByRole("cell", playwright.PageGetByRoleOptions{Name: u, Exact: playwright.Bool(true)})})
		admin.OK(chromium.Expect.Locator(row).ToHaveCount(1), "user %s is listed", u)
		admin.OK(chromium.Expect.Locator(row).ToContainText("active"), "user %s is active", u)
	}

	support := c.Open(t, "support")
	require.Equal(t, http.StatusForbidden, support.GoTo("/users"))
	support.OK(chromium.Expect.Locator(support.Role("heading", "Forbidden")).ToBeVisible(), "support gets the 403 page")
	support.OK(chromium.Expect.Locator(support.Locator("main").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Overview", Exact: playwright.Bool(true)})).ToBeVisible(), "a way back")
	support.OK(chromium.Expect.Locator(support.GetByTestId("next-step")).ToContainText("ask an administrator"), "the next step")
}

// testSignOut: signing out ends the session: the overview then asks for
// a sign-in.
func testSignOut(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "")
	p.SignIn("auditor", "demo-auditor")
	p.OK(p.Role("button", "Sign out").Click(), "click Sign out")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/login$`)), "back on the sign-in page")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Sign in")).ToBeVisible(), "Sign in heading")
	p.OK(chromium.Expect.Locator(p.Role("button", "Sign out")).ToHaveCount(0), "no Sign out button")

	p.GoTo("/")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/login$`)), "/ redirects to sign-in")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Sign in")).ToBeVisible(), "Sign in heading")
}

// testKeyboard: the sign-in form works with the keyboard alone.
func testKeyboard(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "")
	p.GoTo("/login")
	user := p.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)})
	pass := p.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)})
	submit := p.Role("button", "Sign in")
	kb := p.Keyboard()

	// The form has autofocus; before it come the skip link and the brand.
	p.OK(chromium.Expect.Locator(user).ToBeFocused(), "Username has the focus on load")
	p.OK(kb.Press("Shift+Tab"), "Shift+Tab")
	p.OK(chromium.Expect.Locator(p.Role("link", "unstuck")).ToBeFocused(), "before Username: the brand link")
	p.OK(kb.Press("Shift+Tab"), "Shift+Tab")
	p.OK(chromium.Expect.Locator(p.Role("link", "Skip to content")).ToBeFocused(), "first: the skip link")
	p.OK(kb.Press("Tab"), "Tab")
	p.OK(chromium.Expect.Locator(p.Role("link", "unstuck")).ToBeFocused(), "Tab 2: brand link")
	p.OK(kb.Press("Tab"), "Tab")
	p.OK(chromium.Expect.Locator(user).ToBeFocused(), "Tab 3: Username")
	p.OK(kb.Type("oncall"), "type username")
	p.OK(kb.Press("Tab"), "Tab")
	p.OK(chromium.Expect.Locator(pass).ToBeFocused(), "Tab 4: Password")
	p.OK(kb.Type("demo-oncall"), "type password")
	p.OK(kb.Press("Tab"), "Tab")
	p.OK(chromium.Expect.Locator(submit).ToBeFocused(), "Tab 5: Sign in")
	p.OK(kb.Press("Shift+Tab"), "Shift+Tab")
	p.OK(chromium.Expect.Locator(pass).ToBeFocused(), "back to Password")
	// Enter in a field submits the form (implicit submission).
	p.OK(kb.Press("Enter"), "Enter")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Overview")).ToBeVisible(), "Enter signed in")
	p.OK(chromium.Expect.Locator(p.GetByText("Signed in as oncall")).ToBeVisible(), "signed in as oncall")
}
