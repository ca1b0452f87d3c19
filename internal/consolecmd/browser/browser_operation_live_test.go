package browser

import (
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The operation page's live refresh (after a retry the page must not
// still say "compensating" until reloaded), on the real program in
// Chromium, with the harness of browser_test.go:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -run BrowserOperationLive ./internal/consolecmd/browser/
func TestBrowserOperationLive(t *testing.T) {
	browser := chromium.Launch(t)
	base := consoletest.StartDemo(t, consolecmd.Run, "sqlite:"+filepath.Join(t.TempDir(), "browser-live.db"))
	consoletest.WaitReady(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())
	chromium.SignInAs(t, c, "oncall")

	// One signup whose workspace's compensation fails, one whose welcome
	// email is refused: both review_required.
	undone := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "undone"), `{"email":"una@example.com","fail":"workspace_compensation_fails"}`)
	typing := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "typing"), `{"email":"tia@example.com","fail":"welcome_permanent"}`)
	consoletest.WaitSignup(t, base, undone, sagadriver.StatusReviewRequired, 30*time.Second)
	consoletest.WaitSignup(t, base, typing, sagadriver.StatusReviewRequired, 30*time.Second)

	t.Run("RetriedOperationShowsItsStatusWithoutReload", func(t *testing.T) { testLiveAfterRetry(t, c, undone) })
	t.Run("DecideFormIsNotReplacedWhileTypedIn", func(t *testing.T) { testLiveKeepsTypedForm(t, c, typing) })
}

// markPage sets a mark on the page's window that a reload would lose.
func markPage(p *chromium.Tab) {
	_, err := p.Evaluate(`() => { window.unstuckLiveMark = "kept"; }`)
	require.NoError(p.T, err)
}

// requireNotReloaded fails unless the mark of markPage is still there.
func requireNotReloaded(p *chromium.Tab) {
	mark, err := p.Evaluate(`() => window.unstuckLiveMark || ""`)
	require.NoError(p.T, err)
	require.Equal(p.T, "kept", mark, "the page was not reloaded")
}

// retryFromPage retries step of the operation on p's page with a reason.
func retryFromPage(t *testing.T, p *chromium.Tab, id, step string) {
	t.Helper()
	retry := p.Role("region", "Decide").Locator(`details[data-action="retry"]`)
	p.OK(retry.Locator("summary").Click(), "open the retry")
	if step != "" {
		_, err := retry.GetByLabel("Step", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{step}})
		require.NoError(t, err)
	}
	p.OK(retry.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the provider is back: run it again"), "fill Reason")
	p.OK(retry.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Retry a step of operation " + id, Exact: playwright.Bool(true)}).Click(), "submit the retry")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta("/operations/"+id)+`\?done=retry$`)), "redirected to the operation")
}

// testLiveAfterRetry: oncall retries an operation whose compensation
// failed; the page it lands on follows the operation to compensated
// without a reload, and announces the change.
func testLiveAfterRetry(t *testing.T, c *chromium.Console, id string) {
	p := c.Open(t, "oncall")
	require.Equal(t, http.StatusOK, p.GoTo("/operations/"+id))
	h1 := p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})
	p.OK(chromium.Expect.Locator(h1).ToContainText("review_required"), "the operation is under review")
	retryFromPage(t, p, id, "")
	first, err := h1.TextContent()
	require.NoError(t, err)
	t.Logf("right after the retry the page says: %q", first)
	markPage(p)
	p.OK(p.Mouse().Move(0, 0), "point away from the decisions")

	p.OK(chromium.Expect.Locator(h1).ToContainText("compensated", playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(30_000)}), "the page follows the operation to compensated")
	p.OK(chromium.Expect.Locator(p.Locator("#announce")).ToHaveText("Status: compensated"), "the change is announced")
	// A compensated operation can only be re-run (SPEC G12): the redrive
	// is all that is left to decide.
	decide := p.Role("region", "Decide")
	p.OK(chromium.Expect.Locator(decide.Locator("details.action")).ToHaveCount(1), "one choice left")
	p.OK(chromium.Expect.Locator(decide.Locator(`details[data-action="redrive"]`)).ToHaveCount(1), "the redrive")
	p.OK(chromium.Expect.Locator(p.Locator("#live")).Not().ToHaveAttribute("hx-trigger", regexp.MustCompile(".")), "a final operation is not refreshed any more")
	p.OK(chromium.Expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Retry applied"})).ToBeVisible(), "the notice stays")
	p.OK(chromium.Expect.Locator(p.Locator("#live")).Not().ToHaveAttribute("aria-live", regexp.MustCompile(".")), "the live part is not itself a live region")
	requireNotReloaded(p)
}

// testLiveKeepsTypedForm: oncall types a reason on the page of an
// operation while another tab retries it; the form is not replaced while
// its field has the focus or holds text; once left empty, the page
// shows the completed operation.
func testLiveKeepsTypedForm(t *testing.T, c *chromium.Console, id string) {
	p := c.Open(t, "oncall")
	// The page right after a decision refreshes even under review: the
	// engine may not have taken the decision yet.
	require.Equal(t, http.StatusOK, p.GoTo("/operations/"+id+"?done=retry"))
	p.OK(p.Mouse().Move(0, 0), "point away from the decisions")
	resolve := p.Role("region", "Decide").Locator(`details[data-action="resolve"]`)
	p.OK(resolve.Locator("summary").Click(), "open the resolve form")
	reason := resolve.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)})
	p.OK(reason.Focus(), "focus Reason")
	_, err := reason.Evaluate(`el => { el.dataset.mark = "typed-here"; }`, nil)
	require.NoError(t, err)
	markPage(p)
	p.OK(p.Mouse().Move(0, 0), "point away from the decisions")

	other := c.Open(t, "oncall")
	require.Equal(t, http.StatusOK, other.GoTo("/operations/"+id))
	retryFromPage(t, other, id, "welcome")
	consoletest.WaitSignup(t, c.Base, id, sagadriver.StatusCompleted, 30*time.Second)

	// Focused and empty, then focused and typed in, then typed in and
	// left: three refresh periods each, the form is the same element.
	h1 := p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})
	time.Sleep(5 * time.Second)
	p.OK(chromium.Expect.Locator(reason).ToHaveAttribute("data-mark", "typed-here"), "the focused form is not replaced")
	p.OK(reason.PressSequentially("the account was checked"), "type a reason")
	time.Sleep(5 * time.Second)
	p.OK(chromium.Expect.Locator(reason).ToHaveAttribute("data-mark", "typed-here"), "the form being typed in is not replaced")
	p.OK(reason.Blur(), "leave Reason")
	time.Sleep(5 * time.Second)
	p.OK(chromium.Expect.Locator(reason).ToHaveAttribute("data-mark", "typed-here"), "a form holding text is not replaced")
	p.OK(chromium.Expect.Locator(reason).ToHaveValue("the account was checked"), "the text is kept")
	p.OK(chromium.Expect.Locator(h1).ToContainText("review_required"), "the page has not moved under the typing")

	p.OK(reason.Fill(""), "empty Reason")
	p.OK(reason.Blur(), "leave Reason")
	p.OK(chromium.Expect.Locator(h1).ToContainText("completed", playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(15_000)}), "the page then shows the completed operation")
	p.OK(chromium.Expect.Locator(p.Locator("#announce")).ToHaveText("Status: completed"), "the change is announced")
	requireNotReloaded(p)
}
