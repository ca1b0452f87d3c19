package browserux

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
)

// TestBrowserUX: the console under pressure, in Chromium on the real
// program: filters, live refresh, refusals, phone layouts, search, and the
// task walk-throughs that count their clicks (every page through axe-core
// is TestEveryPageAxe, in browseraxe).
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserUX ./internal/consolecmd/browserux/
func TestBrowserUX(t *testing.T) {
	c, w := chromium.StartWorld(t)
	started := time.Now()
	defer func() { t.Logf("UX journeys took %v", time.Since(started).Round(time.Millisecond)) }()

	t.Run("FilterLabelsStayWithTheirControls", func(t *testing.T) { testFilterLabels(t, c) })
	t.Run("FilterErrorThroughHTMXIsShown", func(t *testing.T) { testFilterError(t, c) })
	t.Run("LiveRefreshKeepsFocus", func(t *testing.T) { testLiveRefresh(t, c) })
	t.Run("RefusedDecisionFocusesTheField", func(t *testing.T) { testRefusedDecision(t, c, w) })
	t.Run("PhoneListsAreStackedRows", func(t *testing.T) { testPhoneLists(t, c) })
	t.Run("DesktopTokensDoNotBreak", func(t *testing.T) { testDesktopTokens(t, c, w) })
	t.Run("NeedsAHumanFirst", func(t *testing.T) { testNeedsAHumanFirst(t, c) })
	t.Run("PastedHeaderLineFindsTheKey", func(t *testing.T) { testPastedHeaderLine(t, c, w) })
	t.Run("KeyboardToResults", func(t *testing.T) { testKeyboardToResults(t, c) })
	t.Run("KeyPagesStateFirst", func(t *testing.T) { testKeyPagesStateFirst(t, c, w) })
	t.Run("IncidentsSayWhen", func(t *testing.T) { testIncidentsSayWhen(t, c) })
	t.Run("NoDeadEnds", func(t *testing.T) { testDeadEnds(t, c) })
	t.Run("AuditFilters", func(t *testing.T) { testAuditFilters(t, c) })
	t.Run("SupportFindsAQuotedRawKeyAndForgetsIt", func(t *testing.T) { testSupportFindsKey(t, c, w) })
	t.Run("OverviewTitleCountsAndRefreshes", func(t *testing.T) { testOverviewTitle(t, c, w) })
	t.Run("OncallResolvesTheOldestReview", func(t *testing.T) { testOncallOldestReview(t, c, w) })
	t.Run("AuditorFindsBothDecisionsAndExportsThem", func(t *testing.T) { testAuditorFindsDecisions(t, c, w) })
	t.Run("TimesInTheViewersZone", func(t *testing.T) { testTimes(t, c, w) })
	t.Run("IncidentAt3am", func(t *testing.T) { testIncidentAt3am(t, c, w) })
	// After the journeys: the audit trail has entries to disclose.
	t.Run("PhoneRowsDiscloseTheRest", func(t *testing.T) { testPhoneRowDisclosure(t, c) })
}

// clicks counts the pointer clicks and Enter presses of a walk-through.
type clicks struct {
	t *testing.T
	n int
}

func (c *clicks) click(l playwright.Locator, what string) {
	c.t.Helper()
	c.n++
	require.NoError(c.t, l.Click(), "click %d: %s", c.n, what)
}

// testFilterLabels (defect 1): on the three filter forms every label sits
// right above its own control, at a desktop width and at 390 px.
func testFilterLabels(t *testing.T, c *chromium.Console) {
	for _, size := range []*playwright.Size{{Width: 1280, Height: 900}, chromium.Phone} {
		p := c.Open(t, "admin", func(o *playwright.BrowserNewContextOptions) { o.Viewport = size })
		for _, path := range []string{"/audit", "/keys", "/operations"} {
			p.GoTo(path)
			out, err := p.Evaluate(`() => {
				const bad = [];
				for (const label of document.querySelectorAll(".filters label[for]")) {
					const control = document.getElementById(label.htmlFor);
					if (!control || control.type === "checkbox") continue;
					const l = label.getBoundingClientRect(), c = control.getBoundingClientRect();
					if (Math.abs(l.left - c.left) > 2 || c.top < l.bottom - 1 || c.top - l.bottom > 12)
						bad.push(label.textContent.trim() + " at " + Math.round(l.left) + "," + Math.round(l.bottom) + " vs its control at " + Math.round(c.left) + "," + Math.round(c.top));
				}
				return bad.join("; ");
			}`)
			require.NoError(t, err)
			require.Empty(t, out, "%s at %.0f px: labels apart from their controls", path, float64(size.Width))
		}
	}
}

// testFilterError (defect 2): a filter the server refuses (400) through
// HTMX shows its message in place of the list.
func testFilterError(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "oncall")
	p.GoTo("/keys")
	p.OK(p.GetByLabel("Scope", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(strings.Repeat("s", 300)), "a scope longer than any")
	resp, err := p.ExpectResponse(regexp.MustCompile(`/keys\?`), func() error { return p.Role("button", "Apply filters").Click() })
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.Status())
	require.NotRegexp(t, `[?&](state|operation|correlation_id|external_ref|from|to)=(&|$)`, resp.URL(), "defect 7: no empty parameters in the URL")
	alert := p.Locator("#results").GetByRole("alert")
	p.OK(chromium.Expect.Locator(alert).ToContainText(`Field "scope" must be text`), "the refusal is shown")
	p.OK(chromium.Expect.Locator(p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"})).ToHaveCount(0), "the old list is gone")
	// Chromium logs the 400 of the request made on purpose.
	p.ForgiveErrors(func(e string) bool { return strings.Contains(e, "status of 400 (Bad Request) ("+c.Base+"/keys?") })
}

// testLiveRefresh (defect 3): with live refresh on, a focused result link
// keeps the focus across refreshes, the list is not an aria-live region,
// and the refresh can be paused.
func testLiveRefresh(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "oncall")
	p.GoTo("/keys?live=1")
	results := p.Locator("#results")
	p.OK(chromium.Expect.Locator(results).Not().ToHaveAttribute("aria-live", regexp.MustCompile(".")), "the whole list is not aria-live")
	link := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("link").First()
	p.OK(link.Focus(), "focus the first result")
	href, err := link.GetAttribute("href")
	require.NoError(t, err)
	time.Sleep(6500 * time.Millisecond) // past the next poll (5 s)
	focused, err := p.Evaluate(`() => document.activeElement && document.activeElement.getAttribute("href")`)
	require.NoError(t, err)
	require.Equal(t, href, focused, "the focused link keeps the focus")
	pause := p.Role("button", "Pause live refresh")
	p.OK(pause.Click(), "pause")
	p.OK(chromium.Expect.Locator(p.Role("button", "Resume live refresh")).ToHaveAttribute("aria-pressed", "true"), "paused, and it says so")
}

// testRefusedDecision (defect 9): a decision refused for its reason puts
// the focus on the reason, marked invalid and described by the error, and
// the address bar shows the operation, so that a reload does not post.
func testRefusedDecision(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "oncall")
	path := "/operations/" + w.Review[1]
	p.GoTo(path)
	retry := p.Role("region", "Decide").Locator(`details[data-action="retry"]`)
	p.OK(retry.Locator("summary").Click(), "open the retry")
	_, err := retry.GetByLabel("Step", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"welcome"}})
	require.NoError(t, err)
	reason := retry.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)})
	p.OK(reason.Fill("short"), "a reason too short")
	_, err = retry.Locator("form").Evaluate(`f => f.noValidate = true`, nil) // as a browser without form validation
	require.NoError(t, err)
	p.OK(retry.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Retry a step of operation " + w.Review[1], Exact: playwright.Bool(true)}).Click(), "submit")
	p.OK(chromium.Expect.Locator(p.GetByRole("alert")).ToContainText("at least 10 characters"), "the error")
	reason = p.Locator(`details[data-action="retry"] textarea[name="reason"]`)
	p.OK(chromium.Expect.Locator(reason).ToBeFocused(), "the reason has the focus")
	p.OK(chromium.Expect.Locator(reason).ToHaveAttribute("aria-invalid", "true"), "marked invalid")
	p.OK(chromium.Expect.Locator(reason).ToHaveAccessibleDescription(regexp.MustCompile("at least 10 characters")), "described by the error")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`$`)), "the address is the operation's, not /retry")
}

// testSupportFindsKey: support is given a raw key quoted as the client
// sent it, finds its record from the header's search box in two steps
// (type, Enter) without knowing its scope or operation, and forgets it.
// The key is in no URL the browser visited.
func testSupportFindsKey(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "support")
	p.GoTo("/")
	n := &clicks{t: t}
	box := p.GetByRole("search").GetByRole("searchbox", playwright.LocatorGetByRoleOptions{Name: "Search", Exact: playwright.Bool(true)})
	p.OK(box.Fill(w.RawKey), "type the key with its quotes")
	n.n++
	p.OK(box.Press("Enter"), "Enter")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/\d+$`)), "straight to the record")
	p.OK(chromium.Expect.Locator(p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).ToContainText("unavailable"), "the unavailable key")
	id := regexp.MustCompile(`/keys/(\d+)$`).FindStringSubmatch(p.URL())[1]
	t.Logf("support: search → record in 2 steps (type, Enter), %d click", n.n)

	forget := p.Role("region", "Decide").Locator(`details:has(form[action="/keys/` + id + `/forget"])`)
	n.click(forget.Locator("summary"), "open Forget")
	p.OK(forget.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the customer's receipt was never sent: let it run again"), "reason")
	// The key ran (unavailable): forgetting it needs the acknowledgement
	// of a second run (SPEC K20), one click more.
	n.click(forget.GetByLabel("I understand: the client's retry runs the operation again."), "acknowledge")
	n.click(forget.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Forget — key " + id, Exact: playwright.Bool(true)}), "Forget")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+id+`\?done=removed$`)), "forgotten")
	t.Logf("support walk-through: %d clicks (Enter counted) from the overview to the key forgotten", n.n)
	require.LessOrEqual(t, n.n, 4)
	key := strings.Trim(w.RawKey, `"`)
	for _, u := range p.Visited() {
		require.NotContains(t, u, key, "the raw key is in no URL")
	}
}

// testOncallOldestReview: on-call resolves the oldest operation under
// review from the overview: the list under "Needs a human" is oldest
// first and says so, the decisions come right after the banner.
func testOncallOldestReview(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "oncall")
	p.GoTo("/")
	n := &clicks{t: t}
	needs := p.Role("region", "Needs a human")
	p.OK(chromium.Expect.Locator(needs).ToContainText("Longest waiting first"), "the order is stated")
	n.click(needs.GetByRole("table").First().GetByRole("link").First(), "the first (oldest) operation under review")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta("/operations/"+w.Review[0])+`$`)), "the oldest review")
	decide := p.Role("region", "Decide")
	banner, err := p.GetByTestId("review").BoundingBox()
	require.NoError(t, err)
	box, err := decide.BoundingBox()
	require.NoError(t, err)
	require.Less(t, box.Y-(banner.Y+banner.Height), 200.0, "Decide follows the banner (was ~1,400 px below)")
	retry := decide.Locator(`details[data-action="retry"]`)
	n.click(retry.Locator("summary"), "open Retry")
	_, err = retry.GetByLabel("Step", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"welcome"}})
	require.NoError(t, err)
	p.OK(retry.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the mailer accepts mail again after its outage"), "reason")
	n.click(retry.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Retry a step of operation " + w.Review[0], Exact: playwright.Bool(true)}), "Retry")
	p.OK(chromium.Expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Retry applied"})).ToBeVisible(), "applied")
	t.Logf("on-call walk-through: %d clicks from the overview to the oldest review retried", n.n)
	require.LessOrEqual(t, n.n, 4)
}

// testAuditorFindsDecisions: the auditor finds both decisions (the
// forget and the retry) and exports them.
func testAuditorFindsDecisions(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "auditor")
	p.GoTo("/")
	n := &clicks{t: t}
	n.click(p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Audit", Exact: playwright.Bool(true)}), "Audit")
	_, err := p.GetByLabel("Outcome", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"applied"}})
	require.NoError(t, err)
	n.click(p.Role("button", "Apply filters"), "Apply filters")
	trail := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"})
	p.OK(chromium.Expect.Locator(trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "key.forget"})).ToHaveCount(1), "the forget")
	p.OK(chromium.Expect.Locator(trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.retry"})).ToHaveCount(1), "the retry")
	n.n++
	download, err := p.ExpectDownload(func() error { return p.Role("link", "Export as CSV").Click() })
	require.NoError(t, err)
	file, err := download.Path()
	require.NoError(t, err)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Contains(t, string(raw), "key.forget")
	require.Contains(t, string(raw), "operation.retry")
	t.Logf("auditor walk-through: %d clicks from the overview to both decisions exported", n.n)
}

// testTimes: times show in the viewer's zone with UTC on hover, and a
// toggle shows them in UTC (SPEC K17).
func testTimes(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "oncall", func(o *playwright.BrowserNewContextOptions) { o.TimezoneId = playwright.String("Asia/Tokyo") })
	p.GoTo("/operations/" + w.Review[1])
	created := p.Locator("[data-at]").First()
	p.OK(chromium.Expect.Locator(created).ToHaveText(regexp.MustCompile(`^\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\+09:00\)$`)), "in the viewer's zone")
	p.OK(chromium.Expect.Locator(created).ToHaveAttribute("title", regexp.MustCompile(`Z$`)), "UTC on hover")
	toggle := p.Role("button", "UTC times")
	p.OK(toggle.Click(), "switch to UTC")
	p.OK(chromium.Expect.Locator(toggle).ToHaveAttribute("aria-pressed", "true"), "the toggle says it is on")
	p.OK(chromium.Expect.Locator(created).ToHaveText(regexp.MustCompile(`^\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)$`)), "in UTC")
	p.GoTo("/operations/" + w.Review[1])
	p.OK(chromium.Expect.Locator(p.Locator("[data-at]").First()).ToHaveText(regexp.MustCompile(`Z\)$`)), "the choice is kept")
}

// testOverviewTitle (defect 8): the overview's tab title starts with the
// count that needs a human, and follows it without a reload.
func testOverviewTitle(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "oncall")
	p.GoTo("/")
	title, err := p.Title()
	require.NoError(t, err)
	m := regexp.MustCompile(`^\((\d+)\) Overview · unstuck$`).FindStringSubmatch(title)
	require.NotNil(t, m, "title %q", title)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	// One more key needs a human: the open tab's title follows.
	w.Jobs.Unavailable(t, fmt.Sprintf("title-%d", time.Now().UnixNano()))
	p.OK(chromium.Expect.Page(p.Page).ToHaveTitle(fmt.Sprintf("(%d) Overview · unstuck", n+1), playwright.PageAssertionsToHaveTitleOptions{Timeout: playwright.Float(25_000)}), "the title follows")
}
