// Package chromium drives the console in real Chromium for its browser
// tests: it starts the playwright driver and Debian Chromium
// (scripts/playwright-setup.sh), opens pages signed in as a role and fails
// a test for every CSP violation or script error a page shows, and seeds
// the demo shop with records in several states.
package chromium

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// chromiumFlags keep headless Chromium working as root and off the network
// (see scripts/playwright-setup.sh).
var chromiumFlags = []string{"--no-sandbox", "--disable-gpu", "--disable-background-networking",
	"--disable-component-update", "--disable-sync", "--no-first-run"}

// Expect waits up to 10 s: the server runs under the race detector.
var Expect = playwright.NewPlaywrightAssertions(10_000)

// Launch starts the playwright driver and Chromium for the calling
// test, stopping both when it ends. Under -short it skips the test (a
// browser test). A missing driver or browser skips the test, or fails it
// when CI=true.
func Launch(t *testing.T) playwright.Browser {
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

// Console is the demo under test and the browser driving it.
type Console struct {
	Browser playwright.Browser
	Base    string
	// sessions holds each role's signed-in storage state (a file in dir),
	// saved by the sign-in journey so that later journeys skip the form.
	Sessions map[string]string
	Dir      string
}

// Tab is one page in a fresh browser context, watched for CSP violations
// and script errors.
type Tab struct {
	playwright.Page
	// T is the test the tab belongs to.
	T *testing.T

	mu         sync.Mutex
	visited    []string
	violations []string // CSP violations reported by Chromium
	errs       []string // uncaught script errors
}

// Open opens a page in a new browser context, signed in as role when role
// is not empty. When the test ends, it fails the test for every CSP
// violation and script error seen on any page the tab visited.
func (c *Console) Open(t *testing.T, role string, adjust ...func(*playwright.BrowserNewContextOptions)) *Tab {
	t.Helper()
	opts := playwright.BrowserNewContextOptions{BaseURL: playwright.String(c.Base)}
	for _, a := range adjust {
		a(&opts)
	}
	if role != "" {
		state, ok := c.Sessions[role]
		if !ok {
			t.Fatalf("no session for %s: the sign-in journey failed", role)
		}
		opts.StorageStatePath = playwright.String(state)
	}
	bctx, err := c.Browser.NewContext(opts)
	require.NoError(t, err)
	bctx.SetDefaultTimeout(15_000)
	page, err := bctx.NewPage()
	require.NoError(t, err)
	p := &Tab{Page: page, T: t}
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

// TakeViolations returns the CSP violations seen so far and forgets them,
// so that a test that provokes one on purpose does not fail for it.
func (p *Tab) TakeViolations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.violations
	p.violations = nil
	return v
}

// ForgiveErrors drops the script errors seen so far for which expected
// reports true: errors a test provokes on purpose.
func (p *Tab) ForgiveErrors(expected func(string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = slices.DeleteFunc(p.errs, expected)
}

// Visited returns the URLs of the pages the tab has loaded, in order.
func (p *Tab) Visited() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.visited)
}

func locationOf(m playwright.ConsoleMessage) string {
	if loc := m.Location(); loc != nil && loc.URL != "" {
		return fmt.Sprintf(" (%s:%d)", loc.URL, loc.Line+1)
	}
	return ""
}

// GoTo navigates to path and returns the main document's status.
func (p *Tab) GoTo(path string) int {
	p.T.Helper()
	resp, err := p.Goto(path)
	require.NoError(p.T, err, "goto %s", path)
	return resp.Status()
}

// Role is the element with role and exactly the accessible name.
func (p *Tab) Role(role playwright.AriaRole, name string) playwright.Locator {
	return p.GetByRole(role, playwright.PageGetByRoleOptions{Name: name, Exact: playwright.Bool(true)})
}

// OK fails the test when err is not nil, saying what failed.
func (p *Tab) OK(err error, what string, args ...any) {
	p.T.Helper()
	require.NoError(p.T, err, append([]any{what}, args...)...)
}

// SignIn signs in with the form and waits for the overview.
func (p *Tab) SignIn(username, password string) {
	p.T.Helper()
	p.GoTo("/login")
	p.OK(p.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(username), "fill Username")
	p.OK(p.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(password), "fill Password")
	p.OK(p.Role("button", "Sign in").Click(), "click Sign in")
	p.OK(Expect.Locator(p.Role("heading", "Overview")).ToBeVisible(), "%s sees the Overview heading", username)
}

// Seeded are the records the shop creates before the journeys.
type Seeded struct {
	PendingRef string // external reference of the pending payment
}

// SeedShop creates records in several states through the shop's HTTP API:
// completed orders and payment, a pending payment (answer lost after the
// charge) and a declined one.
func SeedShop(t *testing.T, base string) Seeded {
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
	return Seeded{PendingRef: ref}
}

// ReceiptJobs runs, in the test process, jobs against the demo's
// database with the demo's secret: the demo has no HTTP route whose key
// ends unavailable, so the test runs what its traffic generator runs — a
// job whose result cannot be stored.
type ReceiptJobs struct {
	engine *idem.Engine
}

const receiptScope, receiptOperation = "job:browser", "browser:send-receipt"

func OpenReceiptJobs(t *testing.T, path string) ReceiptJobs {
	t.Helper()
	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	engine, err := idem.New(idemsqlite.New(db), idem.Config{Secret: []byte(consolecmd.DemoSecret)})
	require.NoError(t, err)
	return ReceiptJobs{engine: engine}
}

// Run runs the receipt job of key; ran reports whether its function ran.
func (j ReceiptJobs) Run(t *testing.T, key string, storable bool) (ran bool, err error) {
	t.Helper()
	_, err = idem.Run(context.Background(), j.engine, key, receiptScope, func(ctx context.Context) (float64, error) {
		ran = true
		_ = idem.Annotate(ctx, idem.Annotation{ExternalRef: "mail-" + key})
		if !storable {
			return math.NaN(), nil // not JSON: the effect happened, the answer is lost
		}
		return 1, nil
	}, &idem.RunOpts{Operation: receiptOperation})
	return ran, err
}

// Unavailable leaves key unavailable, as the demo traffic's receipt job.
func (j ReceiptJobs) Unavailable(t *testing.T, key string) {
	t.Helper()
	ran, _ := j.Run(t, key, false)
	require.True(t, ran)
	ran, err := j.Run(t, key, true)
	require.False(t, ran, "an unavailable key does not run again")
	require.ErrorIs(t, err, idem.ErrResultUnavailable)
}

// SignInAs signs role in through the form and keeps its session for the
// journeys.
func SignInAs(t *testing.T, c *Console, role string) {
	t.Helper()
	p := c.Open(t, "")
	p.SignIn(role, "demo-"+role)
	state := filepath.Join(c.Dir, role+".json")
	_, err := p.Context().StorageState(playwright.BrowserContextStorageStateOptions{Path: playwright.String(state)})
	require.NoError(t, err)
	c.Sessions[role] = state
}

// NewConsole is the demo at base driven by browser; dir keeps the
// sessions SignInAs saves.
func NewConsole(browser playwright.Browser, base, dir string) *Console {
	return &Console{Browser: browser, Base: base, Sessions: map[string]string{}, Dir: dir}
}

// axeSource is axe-core, vendored so that the checks run offline.
//
//go:embed axe/axe.min.js
var axeSource string

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

// AxeCheck runs axe-core (every rule it runs by default: WCAG 2.x A and
// AA, and best practices) on the page and returns its violations of
// moderate impact or above, one line each. It is evaluated through the
// DevTools protocol, which the page's CSP does not govern.
func AxeCheck(p *Tab) []string {
	p.T.Helper()
	loaded, err := p.Evaluate(`() => typeof window.axe === "object"`)
	require.NoError(p.T, err)
	if loaded != true {
		_, err := p.Evaluate(axeSource)
		require.NoError(p.T, err, "load axe-core")
	}
	out, err := p.Evaluate(`async () => JSON.stringify((await axe.run(document, {resultTypes: ["violations"]})).violations)`)
	require.NoError(p.T, err, "axe.run")
	var vs []axeViolation
	require.NoError(p.T, json.Unmarshal([]byte(out.(string)), &vs))
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

// Overflow returns what sticks out of the viewport horizontally: the
// document's scroll width beyond the window's, and the widest elements
// that are not inside a scrolling region of their own.
func Overflow(p *Tab) string {
	p.T.Helper()
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
	require.NoError(p.T, err)
	return out.(string)
}

// CheckPage checks the page the tab shows: no serious or critical axe
// violation and nothing wider than the viewport.
func CheckPage(p *Tab, what string) {
	p.T.Helper()
	for _, v := range AxeCheck(p) {
		p.T.Errorf("%s: axe: %s", what, v)
	}
	if o := Overflow(p); o != "" {
		p.T.Errorf("%s: overflow: %s", what, o)
	}
}

// Phone and Desktop are the viewports of the phone and desktop checks.
var (
	Phone   = &playwright.Size{Width: 390, Height: 844}
	Desktop = &playwright.Size{Width: 1440, Height: 900}
)

// Sized opens pages at size.
func Sized(size *playwright.Size) func(*playwright.BrowserNewContextOptions) {
	return func(o *playwright.BrowserNewContextOptions) { o.Viewport = size }
}

// ThemedAt opens pages at size in a colour scheme.
func ThemedAt(size *playwright.Size, scheme *playwright.ColorScheme) func(*playwright.BrowserNewContextOptions) {
	return func(o *playwright.BrowserNewContextOptions) {
		o.Viewport = size
		o.ColorScheme = scheme
	}
}

// World is what the UX checks share: a demo holding records in the states
// an operator meets.
type World struct {
	Base   string
	Jobs   ReceiptJobs
	Seed   Seeded
	Review []string // operations under review, oldest first
	RawKey string   // the receipt key support is given, as the client sent it (quoted)
}

// StartWorld launches Chromium and a demo on a SQLite file of the test's
// own, taking incident snapshots every second so that /incidents and the
// overview's trends have content: the shop seeded, two signups under
// review, two receipt keys unavailable, and every demo role signed in.
func StartWorld(t *testing.T) (*Console, *World) {
	t.Helper()
	browser := Launch(t)
	path := filepath.Join(t.TempDir(), "browser-ux.db")
	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, "sqlite:"+path, "--snapshot-every", "1s")
	consoletest.WaitReady(t, base)
	c := NewConsole(browser, base, t.TempDir())
	w := &World{Base: base, Jobs: OpenReceiptJobs(t, path), Seed: SeedShop(t, base)}
	for _, who := range []string{"first", "second"} {
		w.Review = append(w.Review, consoletest.PostSignup(t, base, consoletest.SignupKey(t, who), fmt.Sprintf(`{"email":"%s@example.com","fail":"welcome_permanent"}`, who)))
		consoletest.WaitSignup(t, base, w.Review[len(w.Review)-1], sagadriver.StatusReviewRequired, 30*time.Second)
	}
	key := fmt.Sprintf("yourkey-%d", time.Now().UnixNano())
	w.Jobs.Unavailable(t, key)
	w.Jobs.Unavailable(t, key+"-spare") // left for the page checks after support forgets the first
	w.RawKey = `"` + key + `"`
	for _, role := range consolecmd.DemoUsers {
		SignInAs(t, c, role)
	}
	return c, w
}

// Search types q into the header's search box and submits it with Enter.
func Search(p *Tab, q string) {
	p.T.Helper()
	box := p.GetByRole("search").GetByRole("searchbox", playwright.LocatorGetByRoleOptions{Name: "Search", Exact: playwright.Bool(true)})
	p.OK(box.Fill(q), "type into Search")
	p.OK(box.Press("Enter"), "submit the search")
	p.OK(p.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad}), "the answer")
}
