package browser

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
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
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
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

// receiptJobs runs, in the test process, jobs against the demo's
// database with the demo's secret: the demo has no HTTP route whose key
// ends unavailable, so the test runs what its traffic generator runs — a
// job whose result cannot be stored.
type receiptJobs struct {
	engine *idem.Engine
}

const receiptScope, receiptOperation = "job:browser", "browser:send-receipt"

func openReceiptJobs(t *testing.T, path string) receiptJobs {
	t.Helper()
	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	engine, err := idem.New(idemsqlite.New(db), idem.Config{Secret: []byte(consolecmd.DemoSecret)})
	require.NoError(t, err)
	return receiptJobs{engine: engine}
}

// run runs the receipt job of key; ran reports whether its function ran.
func (j receiptJobs) run(t *testing.T, key string, storable bool) (ran bool, err error) {
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

// unavailable leaves key unavailable, as the demo traffic's receipt job.
func (j receiptJobs) unavailable(t *testing.T, key string) {
	t.Helper()
	ran, _ := j.run(t, key, false)
	require.True(t, ran)
	ran, err := j.run(t, key, true)
	require.False(t, ran, "an unavailable key does not run again")
	require.ErrorIs(t, err, idem.ErrResultUnavailable)
}

// signInAs signs role in through the form and keeps its session for the
// journeys.
func signInAs(t *testing.T, c *console, role string) {
	t.Helper()
	p := c.open(t, "")
	p.signIn(role, "demo-"+role)
	state := filepath.Join(c.dir, role+".json")
	_, err := p.Context().StorageState(playwright.BrowserContextStorageStateOptions{Path: playwright.String(state)})
	require.NoError(t, err)
	c.sessions[role] = state
}

// decisions is what the journeys share: the operations and keys they made
// and decided on.
type decisions struct {
	base     string
	jobs     receiptJobs
	retried  string // the operation oncall retried
	redriven string // the operation oncall redrove
	review   string // an operation left under review, for the auditor
	key      string // the receipt key support forgot
	keyID    string
	spare    string // console ID of an unavailable key left alone
}

func TestBrowserDecisions(t *testing.T) {
	browser := launchChromium(t)
	path := filepath.Join(t.TempDir(), "browser-decisions.db")
	base := consoletest.StartDemo(t, consolecmd.Run, "sqlite:"+path)
	consoletest.WaitReady(t, base)
	c := &console{browser: browser, base: base, sessions: map[string]string{}, dir: t.TempDir()}
	d := &decisions{base: base, jobs: openReceiptJobs(t, path)}
	started := time.Now()
	defer func() { t.Logf("decision journeys took %v", time.Since(started).Round(time.Millisecond)) }()

	// Two signups whose welcome email the mailer refuses: review_required.
	d.retried = consoletest.PostSignup(t, base, consoletest.SignupKey(t, "retry"), `{"email":"rita@example.com","fail":"welcome_permanent"}`)
	d.review = consoletest.PostSignup(t, base, consoletest.SignupKey(t, "review"), `{"email":"rob@example.com","fail":"welcome_permanent"}`)
	d.redriven = consoletest.PostSignup(t, base, consoletest.SignupKey(t, "redrive"), `{"email":"rhea@example.com","fail":"welcome_permanent"}`)
	d.key = fmt.Sprintf("receipt-browser-%d", time.Now().UnixNano())
	d.jobs.unavailable(t, d.key)
	d.jobs.unavailable(t, d.key+"-spare")
	consoletest.WaitSignup(t, base, d.retried, sagadriver.StatusReviewRequired, 30*time.Second)
	consoletest.WaitSignup(t, base, d.review, sagadriver.StatusReviewRequired, 30*time.Second)
	consoletest.WaitSignup(t, base, d.redriven, sagadriver.StatusReviewRequired, 30*time.Second)

	t.Run("CSPDetector", func(t *testing.T) { testCSPDetector(t, c) })
	t.Run("SignIn", func(t *testing.T) {
		for _, role := range []string{"oncall", "support", "auditor"} {
			t.Run(role, func(t *testing.T) { signInAs(t, c, role) })
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
func testOncallRetries(t *testing.T, c *console, d *decisions) {
	p := c.open(t, "oncall")
	path := "/operations/" + d.retried
	require.Equal(t, http.StatusOK, p.goTo(path))
	h1 := p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})
	p.ok(expect.Locator(h1).ToContainText("review_required"), "the operation is under review")
	p.ok(expect.Locator(p.role("region", "Needs a human")).ToContainText("permanent_failure"), "why it needs a human")
	decide := p.role("region", "Decide")
	p.ok(expect.Locator(decide).ToBeVisible(), "oncall is offered decisions")

	retry := decide.Locator(`details[data-action="retry"]`)
	button := retry.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Retry a step of operation " + d.retried, Exact: playwright.Bool(true)})
	p.ok(expect.Locator(button).Not().ToBeVisible(), "the form is folded until opened")
	p.ok(retry.Locator("summary").Click(), "open the retry")
	p.ok(expect.Locator(retry.Locator(".consequence")).ToContainText("same idempotency key"), "what it will do, before submitting")
	_, err := retry.GetByLabel("Step", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).SelectOption(playwright.SelectOptionValues{Values: &[]string{"welcome"}})
	require.NoError(t, err)
	p.ok(retry.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(retryReason), "fill Reason")
	p.ok(button.Click(), "submit the retry")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`\?done=retry$`)), "redirected to the operation")
	p.ok(expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Retry applied"})).ToBeVisible(), "the notice")
	// The outcome takes the focus, so that a keyboard or screen reader
	// user lands on it after the redirect.
	focused, err := p.Evaluate(`() => document.activeElement && document.activeElement.getAttribute("data-testid")`)
	require.NoError(t, err)
	require.Equal(t, "decision-outcome", focused, "focus on the decision's outcome")

	consoletest.WaitSignup(t, d.base, d.retried, sagadriver.StatusCompleted, 30*time.Second)
	p.goTo(path)
	p.ok(expect.Locator(h1).ToContainText("completed"), "the operation completed")
	history := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Decisions on this item"})
	row := history.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.retry"})
	p.ok(expect.Locator(row).ToHaveCount(1), "the decision in the operation's history")
	p.ok(expect.Locator(row).ToContainText(retryReason), "with its reason")
	p.ok(expect.Locator(row).ToContainText("applied"), "applied")
	p.ok(expect.Locator(row).ToContainText("oncall"), "by oncall")
	p.ok(expect.Locator(p.role("region", "Decide")).ToHaveCount(0), "nothing left to decide")
}

// testSupportForgets: support finds the unavailable key, forgets it with a
// reason, and the next run of the key executes again.
func testSupportForgets(t *testing.T, c *console, d *decisions) {
	p := c.open(t, "support")
	p.goTo("/keys?state=unavailable")
	rows := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "mail-" + d.key})
	p.ok(expect.Locator(rows).ToHaveCount(2), "the key and its spare") // mail-<key> is a prefix of the spare's reference
	row := rows.Filter(playwright.LocatorFilterOptions{HasNotText: d.key + "-spare"})
	p.ok(expect.Locator(row).ToContainText("unavailable"), "its state")
	id, err := row.GetByRole("link").TextContent()
	require.NoError(t, err)
	d.keyID = strings.TrimSpace(id)
	spare, err := rows.Filter(playwright.LocatorFilterOptions{HasText: d.key + "-spare"}).GetByRole("link").TextContent()
	require.NoError(t, err)
	d.spare = strings.TrimSpace(spare)
	p.ok(p.role("link", "Key "+d.keyID).Click(), "open key %s", d.keyID)
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+d.keyID+`$`)), "its page")

	forget := p.role("region", "Decide").Locator(`details:has(form[action="/keys/` + d.keyID + `/forget"])`)
	p.ok(forget.Locator("summary").Click(), "open the forget")
	p.ok(expect.Locator(forget.Locator(".consequence")).ToContainText("The next request with this key runs again"), "what it will do")
	p.ok(forget.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill(forgetReason), "fill Reason")
	// SPEC K20: the key ran (unavailable), so forget asks for an
	// acknowledgement that the next run repeats the effect; the browser
	// does not submit without it.
	submit := forget.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Forget — key " + d.keyID, Exact: playwright.Bool(true)})
	p.ok(expect.Locator(forget.Locator(".alert")).ToContainText("the effect happens a second time"), "the consequence, named")
	p.ok(submit.Click(), "submit without the acknowledgement")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+d.keyID+`$`)), "not submitted")
	p.ok(forget.GetByLabel("I understand: the client's retry runs the operation again.").Check(), "acknowledge")
	p.ok(submit.Click(), "submit")
	// SPEC K21: the removed key's page, its heading focused, says who
	// forgot it, when and why.
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/keys/`+d.keyID+`\?done=removed$`)), "the removed key's page")
	p.ok(expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Key " + d.keyID + " forgotten"})).ToBeVisible(), "the notice")
	p.ok(expect.Locator(p.Locator("#removed-title")).ToBeFocused(), "focus on its heading")
	p.ok(expect.Locator(p.GetByTestId("removed")).ToContainText(forgetReason), "why")

	ran, err := d.jobs.run(t, d.key, true)
	require.NoError(t, err)
	require.True(t, ran, "the next run with the forgotten key executes again")
	_, err = d.jobs.run(t, d.key+"-spare", true)
	require.ErrorIs(t, err, idem.ErrResultUnavailable, "the key left alone still refuses")
}

// testAuditorExports: the auditor finds both decisions in /audit with
// their reasons and exports them as CSV.
func testAuditorExports(t *testing.T, c *console, d *decisions) {
	p := c.open(t, "auditor")
	p.goTo("/audit")
	p.ok(expect.Locator(p.role("heading", "Audit trail")).ToBeVisible(), "Audit trail heading")
	trail := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"})
	retried := trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.retry"})
	p.ok(expect.Locator(retried).ToHaveCount(1), "the retry")
	p.ok(expect.Locator(retried).ToContainText(retryReason), "its reason")
	p.ok(expect.Locator(retried).ToContainText(d.retried), "its operation")
	forgot := trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "key.forget"})
	p.ok(expect.Locator(forgot).ToHaveCount(1), "the forget")
	p.ok(expect.Locator(forgot).ToContainText(forgetReason), "its reason")
	p.ok(expect.Locator(forgot).ToContainText("support"), "by support")

	download, err := p.ExpectDownload(func() error { return p.role("link", "Export as CSV").Click() })
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
	p.goTo("/audit?action=audit.export")
	p.ok(expect.Locator(trail.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "export csv"})).Not().ToHaveCount(0), "the export is recorded")
}

// testAuditorDenied: on an operation under review and an unavailable key,
// where oncall and support have controls, the auditor has none; a POST
// made by hand with the auditor's session gets 403 and is audited denied.
func testAuditorDenied(t *testing.T, c *console, d *decisions) {
	opPath, keyPath := "/operations/"+d.review, "/keys/"+d.spare
	oncall := c.open(t, "oncall")
	oncall.goTo(opPath)
	oncall.ok(expect.Locator(oncall.role("region", "Decide")).ToBeVisible(), "oncall has controls here")
	support := c.open(t, "support")
	support.goTo(keyPath)
	support.ok(expect.Locator(support.role("region", "Decide")).ToBeVisible(), "support has controls here")

	p := c.open(t, "auditor")
	for _, path := range []string{opPath, keyPath} {
		require.Equal(t, http.StatusOK, p.goTo(path))
		p.ok(expect.Locator(p.role("region", "Decide")).ToHaveCount(0), "no Decide section on %s", path)
		p.ok(expect.Locator(p.Locator(`form[method="post"][action^="`+path+`/"]`)).ToHaveCount(0), "no decision form on %s", path)
		p.ok(expect.Locator(p.GetByRole("button").Filter(playwright.LocatorFilterOptions{HasText: regexp.MustCompile(`^(Retry|Confirm|Compensate|Resolve|Forget)`)})).ToHaveCount(0), "no action button on %s", path)
		p.ok(expect.Locator(p.role("region", "Decisions")).ToBeVisible(), "the history is still shown on %s", path)
	}

	resp, err := p.Request().Post(c.base+opPath+"/retry", playwright.APIRequestContextPostOptions{
		Form:         map[string]any{"version": "1", "step": "welcome", "reason": "an auditor trying to act", "form_key": "auditor-hand-made-0001"},
		MaxRedirects: playwright.Int(0),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.Status(), "a hand-made POST with the auditor's session")
	require.Equal(t, string(sagadriver.StatusReviewRequired), consoletest.GetSignup(t, c.base, d.review).Status, "nothing applied")

	p.goTo("/audit?outcome=denied")
	denied := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"}).GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "POST " + opPath + "/retry"})
	p.ok(expect.Locator(denied).ToHaveCount(1), "the attempt is in the trail")
	p.ok(expect.Locator(denied).ToContainText("auditor"), "by the auditor")
	p.ok(expect.Locator(denied).ToContainText("denied"), "outcome denied")
}

// testOncallRedrives: oncall opens the redrive of a signup whose welcome
// mail failed, reads the per-step preview (the account and the workspace
// are kept, the welcome step runs again) and its consequence, redrives it
// with a reason once the mailer is back, and the operation completes
// (SPEC G12).
func testOncallRedrives(t *testing.T, c *console, d *decisions) {
	p := c.open(t, "oncall")
	path := "/operations/" + d.redriven
	require.Equal(t, http.StatusOK, p.goTo(path))
	redrive := p.role("region", "Decide").Locator(`details[data-action="redrive"]`)
	p.ok(redrive.Locator("summary").Click(), "open the redrive choices")
	p.ok(redrive.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Resume at the failed step"}).Click(), "choose resume")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`/redrive\?mode=resume`)), "the redrive page")
	plan := p.GetByTestId("redrive-plan")
	for step, what := range map[string]string{"account": "Kept: does not run", "workspace": "Kept: does not run", "welcome": "Runs again"} {
		row := plan.Locator(`tr:has(th:text-is("` + step + `"))`)
		p.ok(expect.Locator(row).ToContainText(what), "the preview says what happens to %s", step)
	}
	p.ok(expect.Locator(p.GetByTestId("redrive-consequence")).ToContainText("The steps before it keep their effects"), "the consequence in words")
	p.checkPage("the redrive page")
	p.ok(p.GetByLabel("Reason", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the mailer is back; send the welcome mail"), "fill Reason")
	p.ok(p.role("button", "Redrive operation "+d.redriven).Click(), "submit the redrive")
	p.ok(expect.Page(p.Page).ToHaveURL(regexp.MustCompile(regexp.QuoteMeta(path)+`\?done=redrive$`)), "back on the operation")
	p.ok(expect.Locator(p.GetByRole("status").Filter(playwright.LocatorFilterOptions{HasText: "Redrive applied"})).ToBeVisible(), "the notice")
	consoletest.WaitSignup(t, d.base, d.redriven, sagadriver.StatusCompleted, 30*time.Second)
	p.goTo(path)
	history := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Decisions on this item"})
	p.ok(expect.Locator(history.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.redrive"})).ToHaveCount(1), "the redrive in the history")
	p.ok(expect.Locator(p.GetByTestId("timeline")).ToContainText("operator_redrive"), "and on the timeline")
}
