package browserux

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
)

// listPaths are the pages whose height is compared between a phone and a
// desktop: the lists a phone user scrolls through.
func listPaths(t *testing.T, c *chromium.Console) []string {
	p := c.Open(t, "admin", chromium.Sized(chromium.Desktop))
	p.GoTo("/incidents")
	group, err := p.Locator(`table[aria-label="Incident groups"] a:text-is("Items")`).First().GetAttribute("href")
	require.NoError(t, err, "an incident group on /incidents")
	return []string{"/operations", "/", "/audit", "/operations?status=review_required", group, "/approvals", "/keys"}
}

// pageHeight is the height of the page's content in CSS pixels (not of
// the viewport it may leave empty).
func pageHeight(p *chromium.Tab) float64 {
	p.T.Helper()
	h, err := p.Evaluate(`() => Math.ceil(document.body.getBoundingClientRect().height)`)
	require.NoError(p.T, err)
	switch v := h.(type) {
	case int:
		return float64(v)
	case float64:
		return v
	}
	p.T.Fatalf("scrollHeight %T %v", h, h)
	return 0
}

// testPhoneLists: at 390 × 844 a list's rows are stacked blocks, so that
// a page is at most twice as tall as the same page at 1440 × 900 (it was
// 5–15 times as tall: cells squeezed to a character a line), and nothing
// is wider than the viewport.
func testPhoneLists(t *testing.T, c *chromium.Console) {
	paths := listPaths(t, c)
	wide := c.Open(t, "admin", chromium.Sized(chromium.Desktop))
	narrow := c.Open(t, "admin", chromium.Sized(chromium.Phone))
	for _, path := range paths {
		require.Equal(t, http.StatusOK, wide.GoTo(path), path)
		require.Equal(t, http.StatusOK, narrow.GoTo(path), path)
		hw, hn := pageHeight(wide), pageHeight(narrow)
		t.Logf("%s: %.0f px tall at 1440 × 900, %.0f px at 390 × 844 (%.2f×)", path, hw, hn, hn/hw)
		require.LessOrEqual(t, hn, 2*hw, "%s: the phone page is more than twice as tall", path)
		require.Empty(t, chromium.Overflow(narrow), "%s at 390 px", path)
		// A stacked row starts with what identifies the item, whole.
		if n, _ := narrow.Locator("table.list tbody tr").Count(); n > 0 {
			out, err := narrow.Evaluate(`() => {
				const td = document.querySelector("table.list tbody tr > :first-child");
				const tr = td.parentElement;
				return Math.round(td.getBoundingClientRect().width) + "/" + Math.round(tr.getBoundingClientRect().width);
			}`)
			require.NoError(t, err)
			var w, rw int
			_, err = fmt.Sscanf(out.(string), "%d/%d", &w, &rw)
			require.NoError(t, err)
			require.GreaterOrEqual(t, w, rw-4, "%s: the first cell takes the row's first line (%s)", path, out)
		}
	}
}

// brokenTokens returns the chips, IDs and times that the page renders on
// more than one line: their text's line boxes at more than one height.
func brokenTokens(p *chromium.Tab) []string {
	p.T.Helper()
	out, err := p.Evaluate(`() => {
		const bad = [];
		for (const el of document.querySelectorAll("main .chip, main td code, main td time, main td a")) {
			if (el.closest(".scroller") === null && el.closest("table") === null) continue;
			const range = document.createRange();
			range.selectNodeContents(el);
			const tops = new Set();
			for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
			if (tops.size > 1 && !/\s/.test(el.textContent.trim())) bad.push(el.tagName.toLowerCase() + ": " + el.textContent.trim());
			if (bad.length >= 8) break;
		}
		return bad;
	}`)
	require.NoError(p.T, err)
	var bad []string
	for _, b := range out.([]any) {
		bad = append(bad, b.(string))
	}
	return bad
}

// testDesktopTokens: at 1440 px no chip, ID or time in a list is broken
// inside a word ("complet ed", "review_r equired").
func testDesktopTokens(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "admin", chromium.Sized(chromium.Desktop))
	for _, path := range append(listPaths(t, c), "/operations/"+w.Review[0], "/incidents") {
		p.GoTo(path)
		require.Empty(t, brokenTokens(p), "%s at 1440 px: tokens broken across lines", path)
	}
}

// testNeedsAHumanFirst: the overview opens with what needs a human,
// inside the first viewport on a desktop and on a phone.
func testNeedsAHumanFirst(t *testing.T, c *chromium.Console) {
	for _, size := range []*playwright.Size{chromium.Desktop, chromium.Phone} {
		p := c.Open(t, "oncall", chromium.Sized(size))
		p.GoTo("/")
		needs := p.Role("region", "Needs a human")
		p.OK(chromium.Expect.Locator(needs.GetByRole("table").First()).ToBeVisible(), "something to show")
		box, err := needs.GetByRole("table").First().Locator("tbody tr").First().BoundingBox()
		require.NoError(t, err)
		require.Less(t, box.Y+box.Height, float64(size.Height), "at %d px: the first row that needs a human is in the first viewport (at %.0f px)", size.Width, box.Y)
		keys, err := p.Role("region", "Idempotency keys").BoundingBox()
		require.NoError(t, err)
		require.Greater(t, keys.Y, box.Y, "the counts come after what needs a human")
	}
}

// testPastedHeaderLine: the header line as e-mailed, the header's name in
// any case and the value quoted, goes straight to the record.
func testPastedHeaderLine(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "support")
	for _, line := range []string{
		"Idempotency-Key: " + strings.TrimSuffix(w.RawKey, `"`) + `-spare"`,
		"idempotency-key:" + strings.Trim(w.RawKey, `"`) + "-spare",
	} {
		p.GoTo("/")
		chromium.Search(p, line)
		p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/\d+$`)), "straight to the record: %s", line)
	}
	chromium.Search(p, "no-such-key-"+strings.Trim(w.RawKey, `"`))
	p.OK(chromium.Expect.Locator(p.Locator("main")).Not().ToContainText("migration"), "the note does not talk about migrations")
}

// testKeyboardToResults: from the top of a list page the first row is at
// most 10 keystrokes away (skip to the results, then the row), "/" puts
// the focus in the search box, and a filter's answer puts it on the
// results heading.
func testKeyboardToResults(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "admin", chromium.Sized(chromium.Desktop))
	kb := p.Keyboard()
	p.GoTo("/audit")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Results")).ToHaveCount(1), "/audit: a results heading")
	for _, path := range []string{"/operations", "/keys"} {
		p.GoTo(path)
		p.OK(chromium.Expect.Locator(p.Role("heading", "Results")).ToHaveCount(1), "%s: a results heading", path)
		presses := 0
		inRow := func() bool {
			v, err := p.Evaluate(`() => !!(document.activeElement && document.activeElement.closest("#results tbody tr"))`)
			require.NoError(t, err)
			return v == true
		}
		for presses < 40 && !inRow() {
			focused, err := p.Evaluate(`() => document.activeElement && document.activeElement.textContent.trim()`)
			require.NoError(t, err)
			if focused == "Skip to results" {
				p.OK(kb.Press("Enter"), "Enter")
			} else {
				p.OK(kb.Press("Tab"), "Tab")
			}
			presses++
		}
		t.Logf("%s: the first row after %d keystrokes", path, presses)
		require.LessOrEqual(t, presses, 10, "%s: keystrokes from the top to the first row", path)
	}
	p.GoTo("/operations")
	p.OK(kb.Press("/"), "/")
	p.OK(chromium.Expect.Locator(p.GetByRole("search").GetByRole("searchbox")).ToBeFocused(), `"/" focuses the search`)
	p.GoTo("/operations")
	_, err := p.GetByLabel("Status", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"review_required"}})
	require.NoError(t, err)
	p.OK(p.Role("button", "Apply filters").Click(), "Apply filters")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Results")).ToBeFocused(), "the results heading has the focus after a filter")
}

// top is the top of the first element loc matches, in page pixels.
func top(p *chromium.Tab, loc playwright.Locator, what string) float64 {
	p.T.Helper()
	box, err := loc.First().BoundingBox()
	require.NoError(p.T, err, what)
	require.NotNil(p.T, box, "%s is not rendered", what)
	return box.Y
}

// testKeyPagesStateFirst: a key's and an operation's page open with the
// state, the last error and the decisions; the internals (digest,
// fingerprint, fence, version) come below them.
func testKeyPagesStateFirst(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "admin", chromium.Sized(chromium.Desktop))
	dt := func(name string) playwright.Locator {
		return p.Locator("dl.fields dt").GetByText(name, playwright.LocatorGetByTextOptions{Exact: playwright.Bool(true)})
	}
	p.GoTo("/keys?state=unavailable")
	href, err := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("link").First().GetAttribute("href")
	require.NoError(t, err)
	p.GoTo(href)
	lastErr, decide := top(p, dt("Last error"), "Last error"), top(p, p.Role("region", "Decide"), "Decide")
	for _, internal := range []string{"Key digest", "Fingerprint", "Fence", "Version"} {
		y := top(p, dt(internal), internal)
		require.Greater(t, y, lastErr, "%s: %s below the last error", href, internal)
		require.Greater(t, y, decide, "%s: %s below the decisions", href, internal)
	}
	p.GoTo("/operations/" + w.Review[1])
	lastErr = top(p, dt("Last error"), "Last error")
	require.Less(t, top(p, dt("Status"), "Status"), lastErr, "the status first")
	require.Less(t, top(p, p.GetByTestId("last-event"), "what happened last"), top(p, dt("ID"), "ID"), "what happened before the internals")
	for _, internal := range []string{"ID", "Version"} {
		require.Greater(t, top(p, dt(internal), internal), lastErr, "operation: %s below the last error", internal)
	}
}

// testIncidentsSayWhen: an incident group says since when in absolute
// time without a hover, the page says how old its snapshot is, and each
// sparkline has a scale.
func testIncidentsSayWhen(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "admin", chromium.Sized(chromium.Desktop))
	p.GoTo("/incidents")
	since := p.GetByTestId("incident-since").First()
	p.OK(chromium.Expect.Locator(since).ToHaveText(regexp.MustCompile(`\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)), "the absolute time shows")
	p.OK(chromium.Expect.Locator(p.GetByTestId("snapshot-age")).ToBeVisible(), "the snapshot's age")
	n, err := p.Locator("table.incidents .spark-scale").Count()
	require.NoError(t, err)
	m, err := p.Locator("table.incidents svg.spark").Count()
	require.NoError(t, err)
	require.Equal(t, m, n, "a scale for every sparkline")
	group, err := p.Locator(`table[aria-label="Incident groups"] a:text-is("Items")`).First().GetAttribute("href")
	require.NoError(t, err)
	p.GoTo(group)
	p.OK(chromium.Expect.Locator(p.GetByTestId("snapshot-age")).ToContainText("snapshot taken"), "the items page says how old its count is")
}

// testDeadEnds: the page not found keeps the navigation and offers search
// and the next step; no "act on all matching" on an empty result or on
// every key unfiltered.
func testDeadEnds(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "support")
	require.Equal(t, http.StatusNotFound, p.GoTo("/no-such-page"))
	p.OK(chromium.Expect.Locator(p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"})).ToBeVisible(), "the navigation")
	p.OK(chromium.Expect.Locator(p.GetByTestId("next-step")).ToContainText("search"), "the next step")
	p.OK(chromium.Expect.Locator(p.Locator("main").GetByRole("searchbox")).ToBeVisible(), "a search on the page")
	p.GoTo("/keys")
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-link")).ToHaveCount(0), "no act on all for every key")
	p.GoTo("/keys?scope=no-such-scope")
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-link")).ToHaveCount(0), "no act on all for nothing")
	p.GoTo("/keys?state=unavailable")
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-link")).ToHaveCount(1), "act on all for a filtered list")
}

// testIncidentAt3am: on-call, woken at 3 a.m. on a phone, goes from the
// overview to the incident, its items, one operation under review and
// compensates it: every click counted.
func testIncidentAt3am(t *testing.T, c *chromium.Console, w *chromium.World) {
	p := c.Open(t, "oncall", chromium.Sized(chromium.Phone))
	p.GoTo("/")
	n := &clicks{t: t}
	n.click(p.GetByRole("navigation", playwright.PageGetByRoleOptions{Name: "Main"}).GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Incidents", Exact: playwright.Bool(true)}), "Incidents")
	group := p.Locator(`table[aria-label="Incident groups"] tbody tr`).Filter(playwright.LocatorFilterOptions{HasText: "review_required"}).First()
	n.click(group.Locator(`a:text-is("Items")`), "the group's items")
	n.click(p.Locator(`a[href="/operations/`+w.Review[1]+`"]`), "the operation still under review")
	compensate := p.Role("region", "Decide").Locator(`details[data-action="compensate"]`)
	n.click(compensate.Locator("summary"), "open Compensate")
	p.OK(compensate.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the welcome mail is not coming back: undo the signup"), "reason")
	n.click(compensate.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Compensate operation " + w.Review[1], Exact: playwright.Bool(true)}), "Compensate")
	p.OK(chromium.Expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Compensation started"})).ToBeVisible(), "compensation started")
	t.Logf("3 a.m. incident walk-through: %d clicks from the overview to the operation compensated", n.n)
	require.LessOrEqual(t, n.n, 5)
}

// testAuditFilters: the audit's actor field offers the console's users,
// the date fields are in the viewer's zone (and sent in UTC), and
// presets select the last hour and today.
func testAuditFilters(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "auditor", func(o *playwright.BrowserNewContextOptions) { o.TimezoneId = playwright.String("Asia/Tokyo") })
	p.GoTo("/audit?from=2026-01-01T00:00")
	p.OK(chromium.Expect.Locator(p.Locator(`datalist#actors option[value="support"]`)).ToHaveCount(1), "the actor picker offers the users")
	from := p.GetByLabel(regexp.MustCompile(`^From`))
	p.OK(chromium.Expect.Locator(from).ToHaveValue("2026-01-01T09:00"), "shown in the viewer's zone")
	p.OK(chromium.Expect.Locator(p.Locator(`label[for="from"]`)).ToContainText("UTC+09:00"), "the label names the zone")
	resp, err := p.ExpectResponse(regexp.MustCompile(`/audit\?`), func() error { return p.Role("button", "Apply filters").Click() })
	require.NoError(t, err)
	require.Contains(t, resp.URL(), "from=2026-01-01T00%3A00", "sent in UTC")
	p.OK(p.GetByTestId("preset-hour").Click(), "last hour")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/audit\?from=\d{4}-\d\d-\d\dT\d\d`)), "the last hour")
	p.OK(chromium.Expect.Locator(p.GetByTestId("preset-today")).ToHaveAttribute("href", regexp.MustCompile(`T15%3A00$`)), "today from the viewer's midnight (15:00 UTC)")
}

// testPhoneRowDisclosure: on a phone a list row shows what identifies and
// explains the item; its other fields are behind the row's "More", and a
// shortened operation ID has a copy button for the whole of it. On a
// desktop every cell shows and neither control does.
func testPhoneRowDisclosure(t *testing.T, c *chromium.Console) {
	p := c.Open(t, "admin", chromium.Sized(chromium.Phone))
	require.NoError(t, p.Context().GrantPermissions([]string{"clipboard-read", "clipboard-write"}))
	p.GoTo("/operations")
	row := p.Locator("#results table.list tbody tr").First()
	corr := row.Locator(`td[data-label="Correlation ID"]`)
	more := row.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "More"})
	p.OK(chromium.Expect.Locator(corr).ToBeHidden(), "the correlation ID waits behind More")
	p.OK(chromium.Expect.Locator(more).ToHaveAttribute("aria-expanded", "false"), "More is closed")
	p.OK(more.Click(), "More")
	p.OK(chromium.Expect.Locator(more).ToHaveAttribute("aria-expanded", "true"), "More is open")
	p.OK(chromium.Expect.Locator(row.Locator(`td[data-label="Current step"]`)).ToBeVisible(), "the current step shows")
	if txt, _ := corr.TextContent(); strings.TrimSpace(txt) != "" {
		p.OK(chromium.Expect.Locator(corr).ToBeVisible(), "the correlation ID shows")
		before, err := corr.Evaluate(`el => getComputedStyle(el, "::before").content`, nil)
		require.NoError(t, err)
		require.Equal(t, `"Correlation ID: "`, before, "labelled with its column")
	}
	require.Empty(t, chromium.Overflow(p), "an open row stays inside the viewport")
	p.OK(more.Click(), "More again")
	p.OK(chromium.Expect.Locator(row.Locator(`td[data-label="Current step"]`)).ToBeHidden(), "closed again")

	// The ID is shortened on the phone; its copy button copies all of it.
	href, err := row.Locator("a").First().GetAttribute("href")
	require.NoError(t, err)
	id := strings.TrimPrefix(href, "/operations/")
	clipped, err := row.Locator("a code").First().Evaluate(`el => el.scrollWidth > el.clientWidth`, nil)
	require.NoError(t, err)
	t.Logf("operation ID %q shortened on the phone: %v", id, clipped)
	copyID := row.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Copy operation ID"})
	p.OK(chromium.Expect.Locator(copyID).ToBeVisible(), "the row's copy button")
	p.OK(copyID.Click(), "copy the ID")
	p.OK(chromium.Expect.Locator(copyID).ToHaveText("Copied"), "the button confirms the copy")
	got, err := p.Evaluate(`() => navigator.clipboard.readText()`)
	require.NoError(t, err)
	require.Equal(t, id, got, "the clipboard holds the whole operation ID")

	// Keys and the audit trail have the same disclosure.
	for path, field := range map[string]string{"/keys": "Attempts", "/audit": "Request ID"} {
		p.GoTo(path)
		r := p.Locator("table.list tbody tr:has(button[data-row-more])").First()
		cell := r.Locator(`td[data-label="` + field + `"]`)
		p.OK(chromium.Expect.Locator(cell).ToBeHidden(), "%s: %s waits behind More", path, field)
		p.OK(r.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "More"}).Click(), "%s: More", path)
		p.OK(chromium.Expect.Locator(cell).ToHaveAttribute("data-label", field), "%s: %s", path, field)
		if path == "/keys" {
			p.OK(chromium.Expect.Locator(cell).ToBeVisible(), "%s: %s shows", path, field)
		}
	}

	wide := c.Open(t, "admin", chromium.Sized(chromium.Desktop))
	wide.GoTo("/operations")
	wrow := wide.Locator("#results table.list tbody tr").First()
	wide.OK(chromium.Expect.Locator(wrow.Locator(`td[data-label="Current step"]`)).ToBeVisible(), "every cell shows on a desktop")
	wide.OK(chromium.Expect.Locator(wrow.Locator("button[data-row-more]")).ToBeHidden(), "no More on a desktop")
	wide.OK(chromium.Expect.Locator(wrow.Locator("button.row-copy")).ToBeHidden(), "no row copy on a desktop")
}
