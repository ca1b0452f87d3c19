package browser

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// The browser tests drive the real program ("console demo") in Debian
// Chromium through playwright-go, by role and accessible name (SPEC
// K9). The driver and the browser come from scripts/playwright-setup.sh:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run Browser ./internal/consolecmd/browser/
//
// Without them the tests skip, except under CI=true, where a missing browser
// is a failure.

// chromiumFlags keep headless Chromium working as root and off the network
// (see scripts/playwright-setup.sh).
var chromiumFlags = []string{"--no-sandbox", "--disable-gpu", "--disable-background-networking",
	"--disable-component-update", "--disable-sync", "--no-first-run"}

// expect waits up to 10 s: the server runs under the race detector.
var expect = playwright.NewPlaywrightAssertions(10_000)

// launchChromium starts the playwright driver and Chromium for the calling
// test, stopping both when it ends. Under -short it skips the test (a
// browser test). A missing driver or browser skips the test, or fails it
// when CI=true.
func launchChromium(t *testing.T) playwright.Browser {
	t.Helper()
	slowtest.Skip(t, slowtest.Browser)
	missing := func(format string, args ...any) {
		t.Helper()
		reason := fmt.Sprintf(format, args...) + `; run: eval "$(bash scripts/playwright-setup.sh)"`
		if os.Getenv("CI") == "true" {
			t.Fatal("browser tests cannot run under CI: " + reason)
		}
		t.Skip(reason)
	}
	driverDir := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driverDir == "" {
		missing("PLAYWRIGHT_DRIVER_PATH is not set")
	}
	if _, err := os.Stat(filepath.Join(driverDir, "package", "cli.js")); err != nil {
		missing("no playwright driver in %s: %v", driverDir, err)
	}
	chromium := os.Getenv("PLAYWRIGHT_CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing("no Chromium at %s: %v", chromium, err)
	}

	start := time.Now()
	pw, err := playwright.Run(&playwright.RunOptions{DriverDirectory: driverDir, SkipInstallBrowsers: true})
	if err != nil {
		missing("playwright driver in %s does not start: %v", driverDir, err)
	}
	t.Cleanup(func() {
		if err := pw.Stop(); err != nil {
			t.Errorf("stop playwright: %v", err)
		}
	})
	browser, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args:           chromiumFlags,
	})
	require.NoError(t, err, "launch %s", chromium)
	t.Cleanup(func() {
		if err := browser.Close(); err != nil {
			t.Errorf("close browser: %v", err)
		}
	})
	t.Logf("playwright driver and %s %s started in %v", chromium, browser.Version(), time.Since(start).Round(time.Millisecond))
	return browser
}

// console is the demo under test and the browser driving it.
type console struct {
	browser playwright.Browser
	base    string
	// sessions holds each role's signed-in storage state (a file in dir),
	// saved by the sign-in journey so that later journeys skip the form.
	sessions map[string]string
	dir      string
}

// tab is one page in a fresh browser context, watched for CSP violations
// and script errors.
type tab struct {
	playwright.Page
	t *testing.T

	mu         sync.Mutex
	visited    []string
	violations []string // CSP violations reported by Chromium
	errs       []string // uncaught script errors
}

// open opens a page in a new browser context, signed in as role when role
// is not empty. When the test ends, it fails the test for every CSP
// violation and script error seen on any page the tab visited.
func (c *console) open(t *testing.T, role string, adjust ...func(*playwright.BrowserNewContextOptions)) *tab {
	t.Helper()
	opts := playwright.BrowserNewContextOptions{BaseURL: playwright.String(c.base)}
	for _, a := range adjust {
		a(&opts)
	}
	if role != "" {
		state, ok := c.sessions[role]
		if !ok {
			t.Fatalf("no session for %s: the sign-in journey failed", role)
		}
		opts.StorageStatePath = playwright.String(state)
	}
	bctx, err := c.browser.NewContext(opts)
	require.NoError(t, err)
	bctx.SetDefaultTimeout(15_000)
	page, err := bctx.NewPage()
	require.NoError(t, err)
	p := &tab{Page: page, t: t}
	page.OnLoad(func(pg playwright.Page) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.visited = append(p.visited, pg.URL())
	})
	page.OnConsole(func(m playwright.ConsoleMessage) {
		text := m.Text()
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case strings.Contains(text, "Content Security Policy") || strings.HasPrefix(text, "Refused to"):
			p.violations = append(p.violations, m.Page().URL()+": "+text)
		case m.Type() == "error" && strings.HasPrefix(text, "Failed to load resource") && m.Location() != nil &&
			(m.Location().URL == m.Page().URL() || strings.HasSuffix(m.Location().URL, "/favicon.ico")):
			// The error status of a page visited on purpose (the 403
			// page), or the favicon Chromium asks for on its own.
		case m.Type() == "error":
			// A script error, or a failed subresource such as a script.
			p.errs = append(p.errs, m.Page().URL()+": console: "+text+locationOf(m))
		}
	})
	page.OnPageError(func(err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.errs = append(p.errs, page.URL()+": "+err.Error())
	})
	t.Cleanup(func() {
		// Closing the context delivers the page's pending events first.
		if err := bctx.Close(); err != nil {
			t.Errorf("close browser context: %v", err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, v := range p.violations {
			t.Errorf("CSP violation: %s", v)
		}
		for _, e := range p.errs {
			t.Errorf("script error: %s", e)
		}
		t.Logf("%d page loads checked for CSP violations: %s", len(p.visited), strings.Join(p.visited, " "))
	})
	return p
}

func locationOf(m playwright.ConsoleMessage) string {
	if loc := m.Location(); loc != nil && loc.URL != "" {
		return fmt.Sprintf(" (%s:%d)", loc.URL, loc.Line+1)
	}
	return ""
}

// goTo navigates to path and returns the main document's status.
func (p *tab) goTo(path string) int {
	p.t.Helper()
	resp, err := p.Goto(path)
	require.NoError(p.t, err, "goto %s", path)
	return resp.Status()
}

func (p *tab) role(role playwright.AriaRole, name string) playwright.Locator {
	return p.GetByRole(role, playwright.PageGetByRoleOptions{Name: name, Exact: playwright.Bool(true)})
}

func (p *tab) ok(err error, what string, args ...any) {
	p.t.Helper()
	require.NoError(p.t, err, append([]any{what}, args...)...)
}

// signIn signs in with the form and waits for the overview.
func (p *tab) signIn(username, password string) {
	p.t.Helper()
	p.goTo("/login")
	p.ok(p.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(username), "fill Username")
	p.ok(p.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(password), "fill Password")
	p.ok(p.role("button", "Sign in").Click(), "click Sign in")
	p.ok(expect.Locator(p.role("heading", "Overview")).ToBeVisible(), "%s sees the Overview heading", username)
}

// seeded are the records the shop creates before the journeys.
type seeded struct {
	pendingRef string // external reference of the pending payment
}

// seedShop creates records in several states through the shop's HTTP API:
// completed orders and payment, a pending payment (answer lost after the
// charge) and a declined one.
func seedShop(t *testing.T, base string) seeded {
	t.Helper()
	order := consoletest.Call(t, "POST", base+"/shop/orders", `"browser-order-00000001"`, `{"sku":"book","qty":2}`)
	require.Equal(t, http.StatusCreated, order.Status, order.Body)
	body := fmt.Sprintf(`{"order_id":%q,"amount_cents":1999}`, order.JSON["id"])
	paid := consoletest.Call(t, "POST", base+"/shop/payments", `"browser-payment-000001"`, body)
	require.Equal(t, http.StatusCreated, paid.Status, paid.Body)
	lost := consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"browser-payment-000002"`, body)
	require.Equal(t, http.StatusAccepted, lost.Status, lost.Body)
	ref, _ := lost.JSON["provider_reference"].(string)
	require.NotEmpty(t, ref, lost.Body)
	declined := consoletest.Call(t, "POST", base+"/shop/payments?fail=permanent", `"browser-payment-000003"`, body)
	require.Equal(t, http.StatusPaymentRequired, declined.Status, declined.Body)
	return seeded{pendingRef: ref}
}

func TestBrowser(t *testing.T) {
	browser := launchChromium(t)
	base := consoletest.StartDemo(t, consolecmd.Run, "sqlite:"+filepath.Join(t.TempDir(), "browser.db"))
	consoletest.WaitReady(t, base)
	seed := seedShop(t, base)
	c := &console{browser: browser, base: base, sessions: map[string]string{}, dir: t.TempDir()}
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
func testCSPDetector(t *testing.T, c *console) {
	p := c.open(t, "")
	require.NoError(t, p.Route("**/csp-canary", func(r playwright.Route) {
		_ = r.Fulfill(playwright.RouteFulfillOptions{Status: playwright.Int(200), ContentType: playwright.String("text/html"),
			Headers: map[string]string{"Content-Security-Policy": "default-src 'none'"},
			Body:    "<!DOCTYPE html><title>canary</title><script>document.title = 'ran'</script>"})
	}))
	p.goTo("/csp-canary")
	title, err := p.Title()
	require.NoError(t, err)
	require.Equal(t, "canary", title, "the inline script was blocked")
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.violations) > 0
	}, 5*time.Second, 20*time.Millisecond, "Chromium reported no CSP violation for an inline script: the watcher would miss real ones")
	p.mu.Lock()
	t.Logf("the watcher sees violations, e.g. %q", p.violations[0])
	p.violations = nil // expected here
	p.mu.Unlock()
}

// testSignIn: each role signs in through the form and sees the overview
// with its counts table; the session is kept for the later journeys.
func testSignIn(t *testing.T, c *console, role string) {
	p := c.open(t, "")
	p.signIn(role, "demo-"+role)
	keys := p.role("region", "Idempotency keys")
	p.ok(expect.Locator(keys.GetByRole("table")).ToBeVisible(), "counts table")
	p.ok(expect.Locator(keys.GetByRole("columnheader", playwright.LocatorGetByRoleOptions{Name: "Records"})).ToBeVisible(), "Records column")
	completed := keys.GetByRole("row").Filter(playwright.LocatorFilterOptions{
		Has: p.GetByRole("rowheader", playwright.PageGetByRoleOptions{Name: "completed", Exact: playwright.Bool(true)})})
	p.ok(expect.Locator(completed).ToHaveCount(1), "a completed row")
	p.ok(expect.Locator(p.GetByTestId("count-completed")).ToHaveText(regexp.MustCompile(`^\s*[1-9]\d*\s*$`)), "completed count")
	p.ok(expect.Locator(p.GetByTestId("count-pending")).ToHaveText(regexp.MustCompile(`^\s*[1-9]\d*\s*$`)), "pending count")
	p.ok(expect.Locator(p.role("region", "Needs a human")).ToContainText("pending"), "the pending payment needs a human")
	p.ok(expect.Locator(p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Overview"})).
		ToHaveAttribute("aria-current", "page"), "Overview is the current page")

	state := filepath.Join(c.dir, role+".json")
	_, err := p.Context().StorageState(playwright.BrowserContextStorageStateOptions{Path: playwright.String(state)})
	require.NoError(t, err)
	c.sessions[role] = state
}

// testOverviewScreenshot saves a picture of the overview as oncall.
func testOverviewScreenshot(t *testing.T, c *console) {
	p := c.open(t, "oncall")
	p.goTo("/")
	p.ok(expect.Locator(p.role("heading", "Overview")).ToBeVisible(), "Overview heading")
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
func testFilterPending(t *testing.T, c *console, seed seeded) {
	p := c.open(t, "oncall")
	p.goTo("/keys")
	p.ok(expect.Locator(p.role("heading", "Keys")).ToBeVisible(), "Keys heading")
	_, err := p.GetByLabel("State", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"pending"}})
	require.NoError(t, err)
	// The form swaps the results only (hx-get, hx-select="#results").
	resp, err := p.ExpectResponse(regexp.MustCompile(`/keys\?.*state=pending`), func() error {
		return p.role("button", "Apply filters").Click()
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status())
	hx, err := resp.Request().HeaderValue("Hx-Request")
	require.NoError(t, err)
	require.Equal(t, "true", hx, "the filter is an HTMX request, not a page load")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys\?.*state=pending`)), "the filter lives in the URL")

	rows := p.GetByRole("table").GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: seed.pendingRef})
	p.ok(expect.Locator(rows).ToHaveCount(1), "the pending payment's row (ref %s)", seed.pendingRef)
	p.ok(expect.Locator(rows).ToContainText("pending"), "its state")
	p.ok(expect.Locator(rows).ToContainText("POST /shop/payments"), "its operation")
	for _, other := range []string{"completed", "failed"} {
		p.ok(expect.Locator(p.GetByRole("table").GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: other})).ToHaveCount(0),
			"no %s rows after filtering by pending", other)
	}

	link := rows.GetByRole("link")
	id, err := link.TextContent()
	require.NoError(t, err)
	id = strings.TrimSpace(id)
	require.Regexp(t, `^\d+$`, id, "the row's link is the record ID")
	p.ok(p.role("link", "Key "+id).Click(), "open key %s by its accessible name", id)
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+id+`$`)), "detail URL")
	p.ok(expect.Locator(p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).ToHaveText(regexp.MustCompile(`^\s*Key `+id+`\s+pending\s*$`)), "detail heading")
	// dt/dd (roles term and definition) take no name from their content,
	// so the field is found by its text.
	p.ok(expect.Locator(p.GetByRole("term").Filter(playwright.LocatorFilterOptions{HasText: "External reference"})).ToBeVisible(), "External reference field")
	p.ok(expect.Locator(p.GetByRole("definition").Filter(playwright.LocatorFilterOptions{HasText: seed.pendingRef})).ToHaveCount(1), "the reference")
	copyRef := p.role("button", "Copy external reference")
	p.ok(expect.Locator(copyRef).ToBeVisible(), "Copy external reference button")
	p.ok(expect.Locator(copyRef).ToHaveAttribute("data-copy", seed.pendingRef), "the button copies the reference")
	// The copy button works under the CSP (static/app.js).
	require.NoError(t, p.Context().GrantPermissions([]string{"clipboard-read", "clipboard-write"}))
	p.ok(copyRef.Click(), "click copy")
	p.ok(expect.Locator(copyRef).ToHaveText("Copied"), "the button confirms the copy")
}

// completedOrderURL finds the detail page of the completed order through
// the key list, as oncall.
func completedOrderURL(t *testing.T, p *tab) string {
	t.Helper()
	p.goTo("/keys?state=completed")
	rows := p.GetByRole("table").GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "POST /shop/orders"})
	p.ok(expect.Locator(rows).ToHaveCount(1), "the completed order")
	href, err := rows.GetByRole("link").GetAttribute("href")
	require.NoError(t, err)
	require.Regexp(t, `^/keys/\d+$`, href)
	return href
}

// testStoredResponse: oncall sees a completed key's stored response;
// support sees the record but not the response.
func testStoredResponse(t *testing.T, c *console) {
	oncall := c.open(t, "oncall")
	href := completedOrderURL(t, oncall)
	oncall.goTo(href)
	stored := oncall.role("region", "Stored response")
	oncall.ok(expect.Locator(stored).ToContainText("HTTP 201"), "oncall sees the status")
	oncall.ok(expect.Locator(stored.GetByTestId("stored-response")).ToContainText(`"sku": "book"`), "oncall sees the body, pretty-printed")

	support := c.open(t, "support")
	support.goTo(href)
	stored = support.role("region", "Stored response")
	support.ok(expect.Locator(stored).ToContainText("may not see stored responses"), "support is told why")
	support.ok(expect.Locator(stored.GetByTestId("stored-response")).ToHaveCount(0), "support sees no body")
	support.ok(expect.Locator(support.GetByText(`"sku"`)).ToHaveCount(0), "the body is nowhere on the page")
}

// testForbiddenControls: only admin has the Users link and page.
func testForbiddenControls(t *testing.T, c *console) {
	for _, role := range []string{"support", "oncall", "auditor"} {
		p := c.open(t, role)
		p.goTo("/")
		nav := p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"})
		p.ok(expect.Locator(nav.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Keys", Exact: playwright.Bool(true)})).ToBeVisible(), "%s has Keys", role)
		p.ok(expect.Locator(nav.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Users", Exact: playwright.Bool(true)})).ToHaveCount(0), "%s has no Users link", role)
	}

	admin := c.open(t, "admin")
	admin.goTo("/")
	nav := admin.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"})
	admin.ok(nav.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Users", Exact: playwright.Bool(true)}).Click(), "admin opens Users")
	admin.ok(expect.Locator(admin.role("heading", "Users")).ToBeVisible(), "Users heading")
	table := admin.GetByRole("table")
	for _, u := range consolecmd.DemoUsers {
		row := table.GetByRole("row").Filter(playwright.LocatorFilterOptions{
			Has: admin.GetByRole("cell", playwright.PageGetByRoleOptions{Name: u, Exact: playwright.Bool(true)})})
		admin.ok(expect.Locator(row).ToHaveCount(1), "user %s is listed", u)
		admin.ok(expect.Locator(row).ToContainText("active"), "user %s is active", u)
	}

	support := c.open(t, "support")
	require.Equal(t, http.StatusForbidden, support.goTo("/users"))
	support.ok(expect.Locator(support.role("heading", "Forbidden")).ToBeVisible(), "support gets the 403 page")
	support.ok(expect.Locator(support.Locator("main").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Overview", Exact: playwright.Bool(true)})).ToBeVisible(), "a way back")
	support.ok(expect.Locator(support.GetByTestId("next-step")).ToContainText("ask an administrator"), "the next step")
}

// testSignOut: signing out ends the session: the overview then asks for
// a sign-in.
func testSignOut(t *testing.T, c *console) {
	p := c.open(t, "")
	p.signIn("auditor", "demo-auditor")
	p.ok(p.role("button", "Sign out").Click(), "click Sign out")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/login$`)), "back on the sign-in page")
	p.ok(expect.Locator(p.role("heading", "Sign in")).ToBeVisible(), "Sign in heading")
	p.ok(expect.Locator(p.role("button", "Sign out")).ToHaveCount(0), "no Sign out button")

	p.goTo("/")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/login$`)), "/ redirects to sign-in")
	p.ok(expect.Locator(p.role("heading", "Sign in")).ToBeVisible(), "Sign in heading")
}

// testKeyboard: the sign-in form works with the keyboard alone.
func testKeyboard(t *testing.T, c *console) {
	p := c.open(t, "")
	p.goTo("/login")
	user := p.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)})
	pass := p.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)})
	submit := p.role("button", "Sign in")
	kb := p.Keyboard()

	// The form has autofocus; before it come the skip link and the brand.
	p.ok(expect.Locator(user).ToBeFocused(), "Username has the focus on load")
	p.ok(kb.Press("Shift+Tab"), "Shift+Tab")
	p.ok(expect.Locator(p.role("link", "unstuck")).ToBeFocused(), "before Username: the brand link")
	p.ok(kb.Press("Shift+Tab"), "Shift+Tab")
	p.ok(expect.Locator(p.role("link", "Skip to content")).ToBeFocused(), "first: the skip link")
	p.ok(kb.Press("Tab"), "Tab")
	p.ok(expect.Locator(p.role("link", "unstuck")).ToBeFocused(), "Tab 2: brand link")
	p.ok(kb.Press("Tab"), "Tab")
	p.ok(expect.Locator(user).ToBeFocused(), "Tab 3: Username")
	p.ok(kb.Type("oncall"), "type username")
	p.ok(kb.Press("Tab"), "Tab")
	p.ok(expect.Locator(pass).ToBeFocused(), "Tab 4: Password")
	p.ok(kb.Type("demo-oncall"), "type password")
	p.ok(kb.Press("Tab"), "Tab")
	p.ok(expect.Locator(submit).ToBeFocused(), "Tab 5: Sign in")
	p.ok(kb.Press("Shift+Tab"), "Shift+Tab")
	p.ok(expect.Locator(pass).ToBeFocused(), "back to Password")
	// Enter in a field submits the form (implicit submission).
	p.ok(kb.Press("Enter"), "Enter")
	p.ok(expect.Locator(p.role("heading", "Overview")).ToBeVisible(), "Enter signed in")
	p.ok(expect.Locator(p.GetByText("Signed in as oncall")).ToBeVisible(), "signed in as oncall")
}
