package browser

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The browser journeys of operator decisions, on the real
// program in Chromium, with the harness of browser_test.go:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserDecisions ./internal/consolecmd/browser/

// Reasons the operators give; the auditor looks for them.
const (
	retryReason  = "the mailer accepts mail again after its outage"
	forgetReason = "the receipt job never sent anything: provider shows no mail"
)

// decisions is what the journeys share: the operations and keys they made
// and decided on.
type decisions struct {
	base     string
	jobs     chromium.ReceiptJobs
	retried  string // the operation oncall retried
	redriven string // the operation oncall redrove
	review   string // an operation left under review, for the auditor
	key      string // the receipt key support forgot
	keyID    string
	spare    string // console ID of an unavailable key left alone
}

func TestBrowserDecisions(t *testing.T) {
	browser := chromium.Launch(t)
	path := filepath.Join(t.TempDir(), "browser-decisions.db")
	base := consoletest.StartDemo(t, consolecmd.Run, "sqlite:"+path)
	consoletest.WaitReady(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())
	d := &decisions{base: base, jobs: chromium.OpenReceiptJobs(t, path)}
	started := time.Now()
	defer func() { t.Logf("decision journeys took %v", time.Since(started).Round(time.Millisecond)) }()

	// Two signups whose welcome email the mailer refuses: review_required.
	d.retried = consoletest.PostSignup(t, base, consoletest.SignupKey(t, "retry"), `{"email":"rita@example.com","fail":"welcome_permanent"}`)
	d.review = consoletest.PostSignup(t, base, consoletest.SignupKey(t, "review"), `{"email":"rob@example.com","fail":"welcome_permanent"}`)
	d.redriven = consoletest.PostSignup(t, base, consoletest.SignupKey(t, "redrive"), `{"email":"rhea@example.com","fail":"welcome_permanent"}`)
	d.key = fmt.Sprintf("receipt-browser-%d", time.Now().UnixNano())
	d.jobs.Unavailable(t, d.key)
	d.jobs.Unavailable(t, d.key+"-spare")
	consoletest.WaitSignup(t, base, d.retried, sagadriver.StatusReviewRequired, 30*time.Second)
	consoletest.WaitSignup(t, base, d.review, sagadriver.StatusReviewRequired, 30*time.Second)
	consoletest.WaitSignup(t, base, d.redriven, sagadriver.StatusReviewRequired, 30*time.Second)

	t.Run("CSPDetector", func(t *testing.T) { testCSPDetector(t, c) })
	t.Run("SignIn", func(t *testing.T) {
		for _, role := range []string{"oncall", "support", "auditor"} {
			t.Run(role, func(t *testing.T) { chromium.SignInAs(t, c, role) })
		}
	})
	t.Run("OncallRetriesAReviewAndItCompletes", func(t *testing.T) { testOncallRetries(t, c, d) })
	t.Run("OncallRedrivesAFailedSignupAfterThePreview", func(t *testing.T) { testOncallRedrives(t, c, d) })
	t.Run("SupportForgetsAnUnavailableKey", func(t *testing.T) { testSupportForgets(t, c, d) })
	t.Run("AuditorSeesAndExportsTheDecisions", func(t *testing.T) { testAuditorExports(t, c, d) })
	t.Run("AuditorHasNoControlsAndAHandMadePostIsDenied", func(t *testing.T) { testAuditorDenied(t, c, d) })
}

// testOncallRetries: oncall opens an operation under review, reads what a
// retry does, retries its welcome step with a reason, and the operation
// completes; its page shows the decision in its history.
func testOncallRetries(t *testing.T, c *chromium.Console, d *decisions) {
	p := c.Open(t, "oncall")
	path := "/operations/" + d.retried
	require.Equal(t, http.StatusOK, p.GoTo(path))
	h1 := p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})
	p.OK(chromium.Expect.Locator(h1).ToContainText("review_required"), "the operation is under review")
	p.OK(chromium.Expect.Locator(p.Role("region", "Needs a human")).ToContainText("permanent_failure"), "why it needs a human")
	decide := p.Role("region", "Decide")
	p.OK(chromium.Expect.Locator(decide).ToBeVisible(), "oncall is offered decisions")

	retry := decide.Locator(`details[data-action="retry"]`)
	button := retry.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Retry a step of operation " + d.retried, Exact: playwright.Bool(true)})
	p.OK(chromium.Expect.Locator(button).Not().ToBeVisible(), "the form is folded until opened")
	p.OK(retry.Locator("summary").Click(), "open the retry")
	p.OK(chromium.Expect.Locator(retry.Locator(".consequence")).ToContainText("same idempotency key"), "what it will do, before submitting")
	_, err := retry.GetByLabel("Step", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"welcome"}})
	require.NoError(t, err)
	p.OK(retry.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(retryReason), "fill Reason")
	p.OK(button.Click(), "submit the retry")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`\?done=retry$`)), "redirected to the operation")
	p.OK(chromium.Expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Retry applied"})).ToBeVisible(), "the notice")
	// The outcome takes the focus, so that a keyboard or screen reader
	// user lands on it after the redirect.
	focused, err := p.Evaluate(`() => document.activeElement && document.activeElement.getAttribute("data-testid")`)
	require.NoError(t, err)
	require.Equal(t, "decision-outcome", focused, "focus on the decision's outcome")

	consoletest.WaitSignup(t, d.base, d.retried, sagadriver.StatusCompleted, 30*time.Second)
	p.GoTo(path)
	p.OK(chromium.Expect.Locator(h1).ToContainText("completed"), "the operation completed")
	history := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Decisions on this item"})
	row := history.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.retry"})
	p.OK(chromium.Expect.Locator(row).ToHaveCount(1), "the decision in the operation's history")
	p.OK(chromium.Expect.Locator(row).ToContainText(retryReason), "with its reason")
	p.OK(chromium.Expect.Locator(row).ToContainText("applied"), "applied")
	p.OK(chromium.Expect.Locator(row).ToContainText("oncall"), "by oncall")
	p.OK(chromium.Expect.Locator(p.Role("region", "Decide")).ToHaveCount(0), "nothing left to decide")
}

// testSupportForgets: support finds the unavailable key, forgets it with a
// reason, and the next run of the key executes again.
func testSupportForgets(t *testing.T, c *chromium.Console, d *decisions) {
	p := c.Open(t, "support")
	p.GoTo("/keys?state=unavailable")
	rows := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "mail-" + d.key})
	p.OK(chromium.Expect.Locator(rows).ToHaveCount(2), "the key and its spare") // mail-<key> is a prefix of the spare's reference
	row := rows.Filter(playwright.LocatorFilterOptions{HasNotText: d.key + "-spare"})
	p.OK(chromium.Expect.Locator(row).ToContainText("unavailable"), "its state")
	id, err := row.GetByRole("link").TextContent()
	require.NoError(t, err)
	d.keyID = strings.TrimSpace(id)
	spare, err := rows.Filter(playwright.LocatorFilterOptions{HasText: d.key + "-spare"}).GetByRole("link").TextContent()
	require.NoError(t, err)
	d.spare = strings.TrimSpace(spare)
	p.OK(p.Role("link", "Key "+d.keyID).Click(), "open key %s", d.keyID)
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+d.keyID+`$`)), "its page")

	forget := p.Role("region", "Decide").Locator(`details:has(form[action="/keys/` + d.keyID + `/forget"])`)
	p.OK(forget.Locator("summary").Click(), "open the forget")
	p.OK(chromium.Expect.Locator(forget.Locator(".consequence")).ToContainText("The next request with this key runs again"), "what it will do")
	p.OK(forget.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(forgetReason), "fill Reason")
	// SPEC K20: the key ran (unavailable), so forget asks for an
	// acknowledgement that the next run repeats the effect; the browser
	// does not submit without it.
	submit := forget.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Forget — key " + d.keyID, Exact: playwright.Bool(true)})
	p.OK(chromium.Expect.Locator(forget.Locator(".alert")).ToContainText("the effect happens a second time"), "the consequence, named")
	p.OK(submit.Click(), "submit without the acknowledgement")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+d.keyID+`$`)), "not submitted")
	p.OK(forget.GetByLabel("I understand: the client's retry runs the operation again.").Check(), "acknowledge")
	p.OK(submit.Click(), "submit")
	// SPEC K21: the removed key's page, its heading focused, says who
	// forgot it, when and why.
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+d.keyID+`\?done=removed$`)), "the removed key's page")
	p.OK(chromium.Expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Key " + d.keyID + " forgotten"})).ToBeVisible(), "the notice")
	p.OK(chromium.Expect.Locator(p.Locator("#removed-title")).ToBeFocused(), "focus on its heading")
	p.OK(chromium.Expect.Locator(p.GetByTestId("removed")).ToContainText(forgetReason), "why")

	ran, err := d.jobs.Run(t, d.key, true)
	require.NoError(t, err)
	require.True(t, ran, "the next run with the forgotten key executes again")
	_, err = d.jobs.Run(t, d.key+"-spare", true)
	require.ErrorIs(t, err, idem.ErrResultUnavailable, "the key left alone still refuses")
}

// testAuditorExports: the auditor finds both decisions in /audit with
// their reasons and exports them as CSV.
func testAuditorExports(t *testing.T, c *chromium.Console, d *decisions) {
	p := c.Open(t, "auditor")
	p.GoTo("/audit")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Audit trail")).ToBeVisible(), "Audit trail heading")
	trail := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"})
	retried := trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.retry"})
	p.OK(chromium.Expect.Locator(retried).ToHaveCount(1), "the retry")
	p.OK(chromium.Expect.Locator(retried).ToContainText(retryReason), "its reason")
	p.OK(chromium.Expect.Locator(retried).ToContainText(d.retried), "its operation")
	forgot := trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "key.forget"})
	p.OK(chromium.Expect.Locator(forgot).ToHaveCount(1), "the forget")
	p.OK(chromium.Expect.Locator(forgot).ToContainText(forgetReason), "its reason")
	p.OK(chromium.Expect.Locator(forgot).ToContainText("support"), "by support")

	download, err := p.ExpectDownload(func() error { return p.Role("link", "Export as CSV").Click() })
	require.NoError(t, err)
	require.Regexp(t, `^audit-\d{8}T\d{6}Z\.csv$`, download.SuggestedFilename())
	file, err := download.Path()
	require.NoError(t, err)
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.NotEmpty(t, records)
	header := records[0]
	col := func(name string) int {
		i := slices.Index(header, name)
		require.GreaterOrEqual(t, i, 0, "column %s in %v", name, header)
		return i
	}
	action, reason, actor, target, outcome := col("action"), col("reason"), col("actor"), col("target_id"), col("outcome")
	found := map[string]bool{}
	for _, r := range records[1:] {
		switch {
		case r[action] == "operation.retry" && r[target] == d.retried:
			require.Equal(t, retryReason, r[reason])
			require.Equal(t, "oncall", r[actor])
			require.Equal(t, "applied", r[outcome])
			found["retry"] = true
		case r[action] == "key.forget" && r[target] == d.keyID:
			require.Equal(t, forgetReason, r[reason])
			require.Equal(t, "support", r[actor])
			require.Equal(t, "applied", r[outcome])
			found["forget"] = true
		}
	}
	require.Equal(t, map[string]bool{"retry": true, "forget": true}, found, "both decisions are in the download (%d rows)", len(records)-1)

	// The export itself is in the trail, as a read.
	p.GoTo("/audit?action=audit.export")
	p.OK(chromium.Expect.Locator(trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "export csv"})).Not().ToHaveCount(0), "the export is recorded")
}

// testAuditorDenied: on an operation under review and an unavailable key,
// where oncall and support have controls, the auditor has none; a POST
// made by hand with the auditor's session gets 403 and is audited denied.
func testAuditorDenied(t *testing.T, c *chromium.Console, d *decisions) {
	opPath, keyPath := "/operations/"+d.review, "/keys/"+d.spare
	oncall := c.Open(t, "oncall")
	oncall.GoTo(opPath)
	oncall.OK(chromium.Expect.Locator(oncall.Role("region", "Decide")).ToBeVisible(), "oncall has controls here")
	support := c.Open(t, "support")
	support.GoTo(keyPath)
	support.OK(chromium.Expect.Locator(support.Role("region", "Decide")).ToBeVisible(), "support has controls here")

	p := c.Open(t, "auditor")
	for _, path := range []string{opPath, keyPath} {
		require.Equal(t, http.StatusOK, p.GoTo(path))
		p.OK(chromium.Expect.Locator(p.Role("region", "Decide")).ToHaveCount(0), "no Decide section on %s", path)
		p.OK(chromium.Expect.Locator(p.Locator(`form[method="post"][action^="`+path+`/"]`)).ToHaveCount(0), "no decision form on %s", path)
		p.OK(chromium.Expect.Locator(p.GetByRole("button").Filter(playwright.LocatorFilterOptions{HasText: regexp.MustCompile(`^(Retry|Confirm|Compensate|Resolve|Forget)`)})).ToHaveCount(0), "no action button on %s", path)
		p.OK(chromium.Expect.Locator(p.Role("region", "Decisions")).ToBeVisible(), "the history is still shown on %s", path)
	}

	resp, err := p.Request().Post(c.Base+opPath+"/retry", playwright.APIRequestContextPostOptions{
		Form:         map[string]any{"version": "1", "step": "welcome", "reason": "an auditor trying to act", "form_key": "auditor-hand-made-0001"},
		MaxRedirects: playwright.Int(0),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.Status(), "a hand-made POST with the auditor's session")
	require.Equal(t, string(sagadriver.StatusReviewRequired), consoletest.GetSignup(t, c.Base, d.review).Status, "nothing applied")

	p.GoTo("/audit?outcome=denied")
	denied := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"}).GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "POST " + opPath + "/retry"})
	p.OK(chromium.Expect.Locator(denied).ToHaveCount(1), "the attempt is in the trail")
	p.OK(chromium.Expect.Locator(denied).ToContainText("auditor"), "by the auditor")
	p.OK(chromium.Expect.Locator(denied).ToContainText("denied"), "outcome denied")
}

// testOncallRedrives: oncall opens the redrive of a signup whose welcome
// mail failed, reads the per-step preview (the account and the workspace
// are kept, the welcome step runs again) and its consequence, redrives it
// with a reason once the mailer is back, and the operation completes
// (SPEC G12).
func testOncallRedrives(t *testing.T, c *chromium.Console, d *decisions) {
	p := c.Open(t, "oncall")
	path := "/operations/" + d.redriven
	require.Equal(t, http.StatusOK, p.GoTo(path))
	redrive := p.Role("region", "Decide").Locator(`details[data-action="redrive"]`)
	p.OK(redrive.Locator("summary").Click(), "open the redrive choices")
	p.OK(redrive.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Resume at the failed step"}).Click(), "choose resume")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`/redrive\?mode=resume`)), "the redrive page")
	plan := p.GetByTestId("redrive-plan")
	for step, what := range map[string]string{"account": "Kept: does not run", "workspace": "Kept: does not run", "welcome": "Runs again"} {
		row := plan.Locator(`tr:has(th:text-is("` + step + `"))`)
		p.OK(chromium.Expect.Locator(row).ToContainText(what), "the preview says what happens to %s", step)
	}
	p.OK(chromium.Expect.Locator(p.GetByTestId("redrive-consequence")).ToContainText("The steps before it keep their effects"), "the consequence in words")
	chromium.CheckPage(p, "the redrive page")
	p.OK(p.GetByLabel("Reason", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the mailer is back; send the welcome mail"), "fill Reason")
	p.OK(p.Role("button", "Redrive operation "+d.redriven).Click(), "submit the redrive")
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`\?done=redrive$`)), "back on the operation")
	p.OK(chromium.Expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Redrive applied"})).ToBeVisible(), "the notice")
	consoletest.WaitSignup(t, d.base, d.redriven, sagadriver.StatusCompleted, 30*time.Second)
	p.GoTo(path)
	history := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Decisions on this item"})
	p.OK(chromium.Expect.Locator(history.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.redrive"})).ToHaveCount(1), "the redrive in the history")
	p.OK(chromium.Expect.Locator(p.GetByTestId("timeline")).ToContainText("operator_redrive"), "and on the timeline")
}
