package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"
)

// desktop is the viewport of the desktop checks.
var desktop = &playwright.Size{Width: 1440, Height: 900}

// sized opens pages at size.
func sized(size *playwright.Size) func(*playwright.BrowserNewContextOptions) {
	return func(o *playwright.BrowserNewContextOptions) { o.Viewport = size }
}

// listPaths are the pages whose height is compared between a phone and a
// desktop: the lists a phone user scrolls through.
func listPaths(t *testing.T, c *console) []string {
	p := c.open(t, "admin", sized(desktop))
	p.goTo("/incidents")
	group, err := p.Locator(`table[aria-label="Incident groups"] a:text-is("Items")`).First().GetAttribute("href")
	require.NoError(t, err, "an incident group on /incidents")
	return []string{"/operations", "/", "/audit", "/operations?status=review_required", group, "/approvals", "/keys"}
}

// pageHeight is the height of the page's content in CSS pixels (not of
// the viewport it may leave empty).
func (p *tab) pageHeight() float64 {
	p.t.Helper()
	h, err := p.Evaluate(`() => Math.ceil(document.body.getBoundingClientRect().height)`)
	require.NoError(p.t, err)
	switch v := h.(type) {
	case int:
		return float64(v)
	case float64:
		return v
	}
	p.t.Fatalf("scrollHeight %T %v", h, h)
	return 0
}

// testPhoneLists: at 390 × 844 a list's rows are stacked blocks, so that
// a page is at most twice as tall as the same page at 1440 × 900 (it was
// 5–15 times as tall: cells squeezed to a character a line), and nothing
// is wider than the viewport.
func testPhoneLists(t *testing.T, c *console) {
	paths := listPaths(t, c)
	wide := c.open(t, "admin", sized(desktop))
	narrow := c.open(t, "admin", sized(phone))
	for _, path := range paths {
		require.Equal(t, http.StatusOK, wide.goTo(path), path)
		require.Equal(t, http.StatusOK, narrow.goTo(path), path)
		hw, hn := wide.pageHeight(), narrow.pageHeight()
		t.Logf("%s: %.0f px tall at 1440 × 900, %.0f px at 390 × 844 (%.2f×)", path, hw, hn, hn/hw)
		require.LessOrEqual(t, hn, 2*hw, "%s: the phone page is more than twice as tall", path)
		require.Empty(t, narrow.overflow(), "%s at 390 px", path)
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
func (p *tab) brokenTokens() []string {
	p.t.Helper()
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
	require.NoError(p.t, err)
	var bad []string
	for _, b := range out.([]any) {
		bad = append(bad, b.(string))
	}
	return bad
}

// testDesktopTokens: at 1440 px no chip, ID or time in a list is broken
// inside a word ("complet ed", "review_r equired").
func testDesktopTokens(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "admin", sized(desktop))
	for _, path := range append(listPaths(t, c), "/operations/"+w.review[0], "/incidents") {
		p.goTo(path)
		require.Empty(t, p.brokenTokens(), "%s at 1440 px: tokens broken across lines", path)
	}
}

// testNeedsAHumanFirst: the overview opens with what needs a human,
// inside the first viewport on a desktop and on a phone.
func testNeedsAHumanFirst(t *testing.T, c *console) {
	for _, size := range []*playwright.Size{desktop, phone} {
		p := c.open(t, "oncall", sized(size))
		p.goTo("/")
		needs := p.role("region", "Needs a human")
		p.ok(expect.Locator(needs.GetByRole("table").First()).ToBeVisible(), "something to show")
		box, err := needs.GetByRole("table").First().Locator("tbody tr").First().BoundingBox()
		require.NoError(t, err)
		require.Less(t, box.Y+box.Height, float64(size.Height), "at %d px: the first row that needs a human is in the first viewport (at %.0f px)", size.Width, box.Y)
		keys, err := p.role("region", "Idempotency keys").BoundingBox()
		require.NoError(t, err)
		require.Greater(t, keys.Y, box.Y, "the counts come after what needs a human")
	}
}

// testPastedHeaderLine: the header line as e-mailed, the header's name in
// any case and the value quoted, goes straight to the record.
func testPastedHeaderLine(t *testing.T, c *console, w *uxWorld) {
	p := c.open(t, "support")
	for _, line := range []string{
		"Idempotency-Key: " + strings.TrimSuffix(w.rawKey, `"`) + `-spare"`,
		"idempotency-key:" + strings.Trim(w.rawKey, `"`) + "-spare",
	} {
		p.goTo("/")
		p.search(line)
		p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/\d+$`)), "straight to the record: %s", line)
	}
	p.search("no-such-key-" + strings.Trim(w.rawKey, `"`))
	p.ok(expect.Locator(p.Locator("main")).Not().ToContainText("migration"), "the note does not talk about migrations")
}

// testKeyboardToResults: from the top of a list page the first row is at
// most 10 keystrokes away (skip to the results, then the row), "/" puts
// the focus in the search box, and a filter's answer puts it on the
// results heading.
func testKeyboardToResults(t *testing.T, c *console) {
	p := c.open(t, "admin", sized(desktop))
	kb := p.Keyboard()
	p.goTo("/audit")
	p.ok(expect.Locator(p.role("heading", "Results")).ToHaveCount(1), "/audit: a results heading")
	for _, path := range []string{"/operations", "/keys"} {
		p.goTo(path)
		p.ok(expect.Locator(p.role("heading", "Results")).ToHaveCount(1), "%s: a results heading", path)
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
				p.ok(kb.Press("Enter"), "Enter")
			} else {
				p.ok(kb.Press("Tab"), "Tab")
			}
			presses++
		}
		t.Logf("%s: the first row after %d keystrokes", path, presses)
		require.LessOrEqual(t, presses, 10, "%s: keystrokes from the top to the first row", path)
	}
	p.goTo("/operations")
	p.ok(kb.Press("/"), "/")
	p.ok(expect.Locator(p.GetByRole("search").GetByRole("searchbox")).ToBeFocused(), `"/" focuses the search`)
	p.goTo("/operations")
	_, err := p.GetByLabel("Status", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"review_required"}})
	require.NoError(t, err)
	p.ok(p.role("button", "Apply filters").Click(), "Apply filters")
	p.ok(expect.Locator(p.role("heading", "Results")).ToBeFocused(), "the results heading has the focus after a filter")
}
