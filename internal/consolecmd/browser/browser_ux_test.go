package browser

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The console under pressure, in Chromium on the real program:
// every page at 390 × 844 in the light and the dark theme is checked by
// axe-core (vendored in testdata/axe, so that it runs offline) and for
// horizontal overflow; the three task walk-throughs count their clicks.
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserUX ./internal/consolecmd/browser/

//go:embed testdata/axe/axe.min.js
var axeSource string

// phone is the viewport of the phone checks.
var phone = &playwright.Size{Width: 390, Height: 844}

// themedAt opens pages at size in a colour scheme.
func themedAt(size *playwright.Size, scheme *playwright.ColorScheme) func(*playwright.BrowserNewContextOptions) {
	return func(o *playwright.BrowserNewContextOptions) {
		o.Viewport = size
		o.ColorScheme = scheme
	}
}

// axeViolation is what the test reads of an axe-core result.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
		Fail   string `json:"failureSummary"`
	} `json:"nodes"`
}

// axeCheck runs axe-core (every rule it runs by default: WCAG 2.x A and
// AA, and best practices) on the page and returns its violations of
// moderate impact or above, one line each. It is evaluated through the
// DevTools protocol, which the page's CSP does not govern.
func (p *tab) axeCheck() []string {
	p.t.Helper()
	loaded, err := p.Evaluate(`() => typeof window.axe === "object"`)
	require.NoError(p.t, err)
	if loaded != true {
		_, err := p.Evaluate(axeSource)
		require.NoError(p.t, err, "load axe-core")
	}
	out, err := p.Evaluate(`async () => JSON.stringify((await axe.run(document, {resultTypes: ["violations"]})).violations)`)
	require.NoError(p.t, err, "axe.run")
	var vs []axeViolation
	require.NoError(p.t, json.Unmarshal([]byte(out.(string)), &vs))
	var bad []string
	for _, v := range vs {
		if v.Impact != "moderate" && v.Impact != "serious" && v.Impact != "critical" {
			continue
		}
		var where []string
		for i, n := range v.Nodes {
			if i == 3 {
				where = append(where, fmt.Sprintf("… %d more", len(v.Nodes)-3))
				break
			}
			where = append(where, fmt.Sprintf("%v %s", n.Target, strings.ReplaceAll(n.Fail, "\n", " ")))
		}
		bad = append(bad, fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(where, "; ")))
	}
	return bad
}

// overflow returns what sticks out of the viewport horizontally: the
// document's scroll width beyond the window's, and the widest elements
// that are not inside a scrolling region of their own.
func (p *tab) overflow() string {
	p.t.Helper()
	out, err := p.Evaluate(`() => {
		const vw = document.documentElement.clientWidth;
		const sw = document.documentElement.scrollWidth;
		if (sw <= vw) return "";
		const inScroller = (el) => {
			for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
				const ox = getComputedStyle(a).overflowX;
				if (ox === "auto" || ox === "scroll" || ox === "hidden") return true;
			}
			return false;
		};
		const wide = [];
		for (const el of document.body.querySelectorAll("*")) {
			const r = el.getBoundingClientRect();
			if (r.right > vw + 1 && !inScroller(el)) wide.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : "") + " right=" + Math.round(r.right));
			if (wide.length >= 6) break;
		}
		for (const el of document.body.querySelectorAll("*")) {
			const r = el.getBoundingClientRect();
			const pos = getComputedStyle(el).position;
			if (r.right > vw + 1 && (pos === "absolute" || pos === "fixed")) wide.push(el.tagName.toLowerCase() + "." + el.className + " right=" + Math.round(r.right) + " (" + pos + ")");
		}
		if (wide.length === 0) {
			for (const el of document.body.querySelectorAll("*")) {
				const r = el.getBoundingClientRect();
				if (r.right > vw + 1) wide.push(el.tagName.toLowerCase() + "." + el.className + " right=" + Math.round(r.right) + " (in a scroller)");
				if (wide.length >= 6) break;
			}
		}
		const chain = [];
		if (wide.length) {
			let el = [...document.body.querySelectorAll("*")].find((e) => e.getBoundingClientRect().right > vw + 1 && !inScroller(e)) ||
				[...document.body.querySelectorAll("*")].find((e) => e.getBoundingClientRect().right > vw + 1);
			for (; el && el !== document.body; el = el.parentElement) chain.push(el.tagName.toLowerCase() + "." + el.className + ":" + Math.round(el.getBoundingClientRect().left) + "+" + Math.round(el.getBoundingClientRect().width));
		}
		return "document " + sw + "px wide in a " + vw + "px viewport: " + wide.join(", ") + " [outermost: " + chain.reverse().join(" > ") + "]";
	}`)
	require.NoError(p.t, err)
	return out.(string)
}

// checkPage checks the page the tab shows: no serious or critical axe
// violation and nothing wider than the viewport.
func (p *tab) checkPage(what string) {
	p.t.Helper()
	for _, v := range p.axeCheck() {
		p.t.Errorf("%s: axe: %s", what, v)
	}
	if o := p.overflow(); o != "" {
		p.t.Errorf("%s: overflow: %s", what, o)
	}
}

// uxWorld is what the UX journeys share.
type uxWorld struct {
	base   string
	jobs   receiptJobs
	seed   seeded
	review []string // operations under review, oldest first
	rawKey string   // the receipt key support is given, as the client sent it (quoted)
}

func TestBrowserUX(t *testing.T) {
	browser := launchChromium(t)
	path := filepath.Join(t.TempDir(), "browser-ux.db")
	// Snapshots every second, so that /incidents and the overview's
	// trends have content when axe checks them.
	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, "sqlite:"+path, "--snapshot-every", "1s")
	consoletest.WaitReady(t, base)
	c := &console{browser: browser, base: base, sessions: map[string]string{}, dir: t.TempDir()}
	w := &uxWorld{base: base, jobs: openReceiptJobs(t, path), seed: seedShop(t, base)}
	started := time.Now()
	defer func() { t.Logf("UX journeys took %v", time.Since(started).Round(time.Millisecond)) }()

	for _, who := range []string{"first", "second"} {
		w.review = append(w.review, consoletest.PostSignup(t, base, consoletest.SignupKey(t, who), fmt.Sprintf(`{"email":"%s@example.com","fail":"welcome_permanent"}`, who)))
		consoletest.WaitSignup(t, base, w.review[len(w.review)-1], sagadriver.StatusReviewRequired, 30*time.Second)
	}
	key := fmt.Sprintf("yourkey-%d", time.Now().UnixNano())
	w.jobs.unavailable(t, key)
	w.jobs.unavailable(t, key+"-spare") // left for the page checks after support forgets the first
	w.rawKey = `"` + key + `"`

	t.Run("SignIn", func(t *testing.T) {
		for _, role := range consolecmd.DemoUsers {
			t.Run(role, func(t *testing.T) { signInAs(t, c, role) })
		}
	})
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
	t.Run("EveryPagePhoneAndAxe", func(t *testing.T) {
		for _, scheme := range []*playwright.ColorScheme{playwright.ColorSchemeLight, playwright.ColorSchemeDark} {
			for _, size := range []*playwright.Size{phone, desktop} {
				t.Run(fmt.Sprintf("%s-%d", *scheme, size.Width), func(t *testing.T) { testEveryPage(t, c, w, size, scheme) })
			}
		}
	})
}

// testEveryPage visits every page of the console at size in scheme:
// signed out, as admin (who sees every page) and as support.
func testEveryPage(t *testing.T, c *console, w *uxWorld, size *playwright.Size, scheme *playwright.ColorScheme) {
	anon := c.open(t, "", themedAt(size, scheme))
	anon.goTo("/login")
	anon.checkPage("/login")
	anon.ok(anon.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("admin"), "fill Username")
	anon.ok(anon.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("wrong-password"), "fill Password")
	anon.ok(anon.role("button", "Sign in").Click(), "sign in with a wrong password")
	anon.ok(expect.Locator(anon.GetByRole("alert")).ToBeVisible(), "the error")
	// Defect 14: the username is kept, the focus is on the password.
	anon.ok(expect.Locator(anon.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)})).ToBeFocused(), "the password has the focus")
	anon.checkPage("/login after a wrong password")

	p := c.open(t, "admin", themedAt(size, scheme))
	for _, path := range []string{"/", "/keys", "/keys?state=completed", "/keys?state=bogus", "/operations",
		"/operations?status=review_required", "/operations/" + w.review[0], "/audit", "/users", "/search", "/no-such-page", "/incidents", "/approvals"} {
		p.goTo(path)
		p.checkPage(path)
	}
	// A group's items page (the signups under review are a group).
	p.goTo("/incidents")
	group, err := p.Locator(`table[aria-label="Incident groups"] a:text-is("Items")`).First().GetAttribute("href")
	require.NoError(t, err, "an incident group on /incidents")
	p.goTo(group)
	p.checkPage(group)
	// A key with its stored response, and the search's results page.
	p.goTo("/keys?state=completed")
	href, err := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("link").First().GetAttribute("href")
	require.NoError(t, err)
	p.goTo(href)
	p.ok(expect.Locator(p.role("region", "Stored response")).ToBeVisible(), "the stored response")
	p.checkPage(href)
	p.goTo("/keys?state=unavailable")
	href, err = p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("link").First().GetAttribute("href")
	require.NoError(t, err)
	p.goTo(href)
	p.checkPage(href)
	p.search("signup") // matches nothing by itself; the page with its note
	p.checkPage("search results")
	p.goTo("/audit")
	if n, _ := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"}).GetByRole("link").Count(); n > 0 {
		p.goTo("/audit")
	}

	support := c.open(t, "support", themedAt(size, scheme))
	support.goTo("/users")
	support.checkPage("/users as support (403)")
}

// search types q into the header's search box and submits it with Enter.
func (p *tab) search(q string) {
	p.t.Helper()
	box := p.GetByRole("search").GetByRole("searchbox", playwright.LocatorGetByRoleOptions{Name: "Search", Exact: playwright.Bool(true)})
	p.ok(box.Fill(q), "type into Search")
	p.ok(box.Press("Enter"), "submit the search")
	p.ok(p.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad}), "the answer")
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
func testFilterLabels(t *testing.T, c *console) {
	for _, size := range []*playwright.Size{{Width: 1280, Height: 900}, phone} {
		p := c.open(t, "admin", func(o *playwright.BrowserNewContextOptions) { o.Viewport = size })
		for _, path := range []string{"/audit", "/keys", "/operations"} {
			p.goTo(path)
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
func testFilterError(t *testing.T, c *console) {
	p := c.open(t, "oncall")
	p.goTo("/keys")
	p.ok(p.GetByLabel("Scope", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(strings.Repeat("s", 300)), "a scope longer than any")
	resp, err := p.ExpectResponse(regexp.MustCompile(`/keys\?`), func() error { return p.role("button", "Apply filters").Click() })
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.Status())
	require.NotRegexp(t, `[?&](state|operation|correlation_id|external_ref|from|to)=(&|$)`, resp.URL(), "defect 7: no empty parameters in the URL")
	alert := p.Locator("#results").GetByRole("alert")
	p.ok(expect.Locator(alert).ToContainText(`Field "scope" must be text`), "the refusal is shown")
	p.ok(expect.Locator(p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"})).ToHaveCount(0), "the old list is gone")
	// Chromium logs the 400 of the request made on purpose.
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.errs[:0]
	for _, e := range p.errs {
		if !strings.Contains(e, "status of 400 (Bad Request) ("+c.base+"/keys?") {
			kept = append(kept, e)
		}
	}
	p.errs = kept
}

// testLiveRefresh (defect 3): with live refresh on, a focused result link
// keeps the focus across refreshes, the list is not an aria-live region,
// and the refresh can be paused.
func testLiveRefresh(t *testing.T, c *console) {
	p := c.open(t, "oncall")
	p.goTo("/keys?live=1")
	results := p.Locator("#results")
	p.ok(expect.Locator(results).Not().ToHaveAttribute("aria-live", regexp.MustCompile(".")), "the whole list is not aria-live")
	link := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("link").First()
	p.ok(link.Focus(), "focus the first result")
	href, err := link.GetAttribute("href")
	require.NoError(t, err)
	time.Sleep(6500 * time.Millisecond) // past the next poll (5 s)
	focused, err := p.Evaluate(`() => document.activeElement && document.activeElement.getAttribute("href")`)
	require.NoError(t, err)
	require.Equal(t, href, focused, "the focused link keeps the focus")
	pause := p.role("button", "Pause live refresh")
	p.ok(pause.Click(), "pause")
	p.ok(expect.Locator(p.role("button", "Resume live refresh")).ToHaveAttribute("aria-pressed", "true"), "paused, and it says so")
}

// testRefusedDecision (defect 9): a decision refused for its reason puts
// the focus on the reason, marked invalid and described by the error, and
// the address bar shows the operation, so that a reload does not post.
func testRefusedDecision(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "oncall")
	path := "/operations/" + w.review[1]
	p.goTo(path)
	retry := p.role("region", "Decide").Locator(`details[data-action="retry"]`)
	p.ok(retry.Locator("summary").Click(), "open the retry")
	_, err := retry.GetByLabel("Step", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"welcome"}})
	require.NoError(t, err)
	reason := retry.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)})
	p.ok(reason.Fill("short"), "a reason too short")
	_, err = retry.Locator("form").Evaluate(`f => f.noValidate = true`, nil) // as a browser without form validation
	require.NoError(t, err)
	p.ok(retry.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Retry a step of operation " + w.review[1], Exact: playwright.Bool(true)}).Click(), "submit")
	p.ok(expect.Locator(p.GetByRole("alert")).ToContainText("at least 10 characters"), "the error")
	reason = p.Locator(`details[data-action="retry"] textarea[name="reason"]`)
	p.ok(expect.Locator(reason).ToBeFocused(), "the reason has the focus")
	p.ok(expect.Locator(reason).ToHaveAttribute("aria-invalid", "true"), "marked invalid")
	p.ok(expect.Locator(reason).ToHaveAccessibleDescription(regexp.MustCompile("at least 10 characters")), "described by the error")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`$`)), "the address is the operation's, not /retry")
}

// testSupportFindsKey: support is given a raw key quoted as the client
// sent it, finds its record from the header's search box in two steps
// (type, Enter) without knowing its scope or operation, and forgets it.
// The key is in no URL the browser visited.
func testSupportFindsKey(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "support")
	p.goTo("/")
	n := &clicks{t: t}
	box := p.GetByRole("search").GetByRole("searchbox", playwright.LocatorGetByRoleOptions{Name: "Search", Exact: playwright.Bool(true)})
	p.ok(box.Fill(w.rawKey), "type the key with its quotes")
	n.n++
	p.ok(box.Press("Enter"), "Enter")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/\d+$`)), "straight to the record")
	p.ok(expect.Locator(p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).ToContainText("unavailable"), "the unavailable key")
	id := regexp.MustCompile(`/keys/(\d+)$`).FindStringSubmatch(p.URL())[1]
	t.Logf("support: search → record in 2 steps (type, Enter), %d click", n.n)

	forget := p.role("region", "Decide").Locator(`details:has(form[action="/keys/` + id + `/forget"])`)
	n.click(forget.Locator("summary"), "open Forget")
	p.ok(forget.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the customer's receipt was never sent: let it run again"), "reason")
	// The key ran (unavailable): forgetting it needs the acknowledgement
	// of a second run (SPEC K20), one click more.
	n.click(forget.GetByLabel("I understand: the client's retry runs the operation again."), "acknowledge")
	n.click(forget.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Forget — key " + id, Exact: playwright.Bool(true)}), "Forget")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+id+`\?done=removed$`)), "forgotten")
	t.Logf("support walk-through: %d clicks (Enter counted) from the overview to the key forgotten", n.n)
	require.LessOrEqual(t, n.n, 4)
	p.mu.Lock()
	defer p.mu.Unlock()
	key := strings.Trim(w.rawKey, `"`)
	for _, u := range p.visited {
		require.NotContains(t, u, key, "the raw key is in no URL")
	}
}

// testOncallOldestReview: on-call resolves the oldest operation under
// review from the overview: the list under "Needs a human" is oldest
// first and says so, the decisions come right after the banner.
func testOncallOldestReview(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "oncall")
	p.goTo("/")
	n := &clicks{t: t}
	needs := p.role("region", "Needs a human")
	p.ok(expect.Locator(needs).ToContainText("Longest waiting first"), "the order is stated")
	n.click(needs.GetByRole("table").First().GetByRole("link").First(), "the first (oldest) operation under review")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta("/operations/"+w.review[0])+`$`)), "the oldest review")
	decide := p.role("region", "Decide")
	banner, err := p.GetByTestId("review").BoundingBox()
	require.NoError(t, err)
	box, err := decide.BoundingBox()
	require.NoError(t, err)
	require.Less(t, box.Y-(banner.Y+banner.Height), 200.0, "Decide follows the banner (was ~1,400 px below)")
	retry := decide.Locator(`details[data-action="retry"]`)
	n.click(retry.Locator("summary"), "open Retry")
	_, err = retry.GetByLabel("Step", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"welcome"}})
	require.NoError(t, err)
	p.ok(retry.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(retryReason), "reason")
	n.click(retry.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Retry a step of operation " + w.review[0], Exact: playwright.Bool(true)}), "Retry")
	p.ok(expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Retry applied"})).ToBeVisible(), "applied")
	t.Logf("on-call walk-through: %d clicks from the overview to the oldest review retried", n.n)
	require.LessOrEqual(t, n.n, 4)
}

// testAuditorFindsDecisions: the auditor finds both decisions (the
// forget and the retry) and exports them.
func testAuditorFindsDecisions(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "auditor")
	p.goTo("/")
	n := &clicks{t: t}
	n.click(p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Audit", Exact: playwright.Bool(true)}), "Audit")
	_, err := p.GetByLabel("Outcome", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"applied"}})
	require.NoError(t, err)
	n.click(p.role("button", "Apply filters"), "Apply filters")
	trail := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"})
	p.ok(expect.Locator(trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "key.forget"})).ToHaveCount(1), "the forget")
	p.ok(expect.Locator(trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.retry"})).ToHaveCount(1), "the retry")
	n.n++
	download, err := p.ExpectDownload(func() error { return p.role("link", "Export as CSV").Click() })
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
func testTimes(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "oncall", func(o *playwright.BrowserNewContextOptions) { o.TimezoneId = playwright.String("Asia/Tokyo") })
	p.goTo("/operations/" + w.review[1])
	created := p.Locator("[data-at]").First()
	p.ok(expect.Locator(created).ToHaveText(regexp.MustCompile(`^\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\+09:00\)$`)), "in the viewer's zone")
	p.ok(expect.Locator(created).ToHaveAttribute("title", regexp.MustCompile(`Z$`)), "UTC on hover")
	toggle := p.role("button", "UTC times")
	p.ok(toggle.Click(), "switch to UTC")
	p.ok(expect.Locator(toggle).ToHaveAttribute("aria-pressed", "true"), "the toggle says it is on")
	p.ok(expect.Locator(created).ToHaveText(regexp.MustCompile(`^\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)$`)), "in UTC")
	p.goTo("/operations/" + w.review[1])
	p.ok(expect.Locator(p.Locator("[data-at]").First()).ToHaveText(regexp.MustCompile(`Z\)$`)), "the choice is kept")
}

// testOverviewTitle (defect 8): the overview's tab title starts with the
// count that needs a human, and follows it without a reload.
func testOverviewTitle(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "oncall")
	p.goTo("/")
	title, err := p.Title()
	require.NoError(t, err)
	m := regexp.MustCompile(`^\((\d+)\) Overview · unstuck$`).FindStringSubmatch(title)
	require.NotNil(t, m, "title %q", title)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	// One more key needs a human: the open tab's title follows.
	w.jobs.unavailable(t, fmt.Sprintf("title-%d", time.Now().UnixNano()))
	p.ok(expect.Page(p.Page).ToHaveTitle(fmt.Sprintf("(%d) Overview · unstuck", n+1), playwright.PageAssertionsToHaveTitleOptions{Timeout: playwright.Float(25_000)}), "the title follows")
}
