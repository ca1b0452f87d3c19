package browser

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
)

// TestBrowserVerifyAll (SPEC K19, K20) in Chromium, the 3 a.m. path on the
// demo: payments time out after the charge and before it. On-call opens
// /incidents and, for each group of timed-out payments, "Act on all":
// "verify with the provider" on exactly the group's keys, reads the
// preview, types the count and submits; the report lists each answer with
// its evidence; the charged payments complete with their charges, the
// others are released, and their retries charge exactly once; none is
// forgotten.
// Then support opens a charged payment of its own: the page leads with
// Verify, and Forget asks for the acknowledgement.
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -run BrowserVerifyAll ./internal/consolecmd/browser/
func TestBrowserVerifyAll(t *testing.T) {
	browser := chromium.Launch(t)
	dbURL := "sqlite:" + filepath.Join(t.TempDir(), "browser-verify.db")
	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, dbURL, "--approval-required", "none", "--snapshot-every", "1s")
	consoletest.WaitReady(t, base)
	order := consoletest.Call(t, "POST", base+"/shop/orders", `"browser-verify-order1"`, `{"sku":"lamp","qty":1}`)
	require.Equal(t, http.StatusCreated, order.Status, order.Body)
	body := fmt.Sprintf(`{"order_id":%q,"amount_cents":4200}`, order.JSON["id"])
	charged := []string{`"browser-verify-paid-01"`, `"browser-verify-paid-02"`}
	uncharged := []string{`"browser-verify-none-01"`, `"browser-verify-none-02"`}
	for _, k := range charged {
		require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", k, body).Status)
	}
	for _, k := range uncharged {
		require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_before_effect", k, body).Status)
	}
	charges := len(consoletest.ProviderCharges(t, base))

	c := chromium.NewConsole(browser, base, t.TempDir())
	chromium.SignInAs(t, c, "oncall")
	chromium.SignInAs(t, c, "support")
	p := c.Open(t, "oncall")
	// From /incidents: each group of timed-out payments, "Act on all",
	// which opens the preview of "verify with the provider" on exactly the
	// group's keys.
	verifyGroup := func(message string) {
		t.Helper()
		// The group whose normalized message is exactly message.
		row := p.Locator(`table[aria-label="Incident groups"] tbody tr`).Filter(playwright.LocatorFilterOptions{
			Has: p.Locator("code").Filter(playwright.LocatorFilterOptions{HasText: regexp.MustCompile("^" + regexp.QuoteMeta(message) + "$")})})
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			p.GoTo("/incidents")
			if n, _ := row.Count(); n == 1 {
				break
			}
			require.True(t, time.Now().Before(deadline), "no incident group %q on /incidents", message)
		}
		p.OK(row.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: regexp.MustCompile(`^Act on all`)}).Click(), "act on all: %s", message)
		p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the preview of verify")
		p.OK(chromium.Expect.Locator(p.GetByTestId("legal-count")).ToContainText("2 matching items"), "exactly the group's keys")
		p.OK(chromium.Expect.Locator(p.Locator(".consequence")).ToContainText("Asks the application's verifier"), "what it does")
		p.OK(p.GetByLabel("Reason", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("payments timed out at the provider: ask it about each"), "reason")
		p.OK(p.GetByLabel("Type the number of items (2) to confirm").Fill("2"), "typed count")
		p.OK(p.Role("button", "Verify with the provider 2 keys").Click(), "submit")
		p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the request's page")
	}
	verifyGroup("provider did not answer: provider timed out after charging ch_<id>")
	// The report lists each answer with its evidence, live.
	answers := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Answers"})
	p.OK(chromium.Expect.Locator(answers.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "completed with ch_"})).ToHaveCount(2), "the charged ones, completed")
	verifyGroup("provider did not answer: provider timed out")
	p.OK(chromium.Expect.Locator(answers.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "the provider has no charge under this key"})).ToHaveCount(2), "the others, released, with the evidence")

	db, err := consolecmd.OpenDatabase(context.Background(), dbURL)
	require.NoError(t, err)
	defer db.Close()
	record := func(raw string) (idemdriver.Record, bool) {
		page, err := db.Records.ListKeys(context.Background(), idemdriver.KeyFilter{KeyHash: idem.KeyHash(strings.Trim(raw, `"`))})
		require.NoError(t, err)
		if len(page.Records) == 0 {
			return idemdriver.Record{}, false
		}
		return page.Records[0], true
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		settled := true
		for _, k := range charged {
			r, _ := record(k)
			settled = settled && r.Status == idemdriver.StatusCompleted
		}
		for _, k := range uncharged {
			_, there := record(k)
			settled = settled && !there
		}
		if settled {
			break
		}
		require.True(t, time.Now().Before(deadline), "the answers were not all applied")
	}
	// Each charged payment's page shows the decision, via the verifier, in
	// on-call's name.
	r, _ := record(charged[0])
	p.GoTo("/keys/" + strconv.FormatInt(r.ID, 10))
	p.OK(chromium.Expect.Locator(p.GetByRole("heading", playwright.PageGetByRoleOptions{Level: playwright.Int(1)})).ToContainText("completed"), "completed")
	p.OK(chromium.Expect.Locator(p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Decisions on this item"})).ToContainText("via verifier demo payment provider"), "via the verifier")
	require.Len(t, consoletest.ProviderCharges(t, base), charges, "asking charges nothing")
	for _, k := range uncharged {
		require.Equal(t, http.StatusCreated, consoletest.Call(t, "POST", base+"/shop/payments", k, body).Status)
	}
	require.Len(t, consoletest.ProviderCharges(t, base), charges+len(uncharged), "each released payment charged once on its retry")

	// Support's own charged payment, its answer lost: Verify comes first,
	// and Forget does not submit without the acknowledgement.
	const mine = `"browser-verify-paid-03"`
	require.Equal(t, http.StatusAccepted, consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", mine, body).Status)
	r, _ = record(mine)
	id := strconv.FormatInt(r.ID, 10)
	s := c.Open(t, "support")
	s.GoTo("/keys/" + id)
	decide := s.Role("region", "Decide")
	s.OK(chromium.Expect.Locator(decide.Locator("details summary").First()).ToHaveText("Verify with the provider — key "+id), "Verify first")
	forget := decide.Locator(`details:has(form[action="/keys/` + id + `/forget"])`)
	s.OK(forget.Locator("summary").Click(), "open Forget")
	s.OK(chromium.Expect.Locator(forget.Locator(".alert")).ToContainText("a second charge"), "the consequence, named")
	s.OK(forget.GetByLabel("Reason", playwright.LocatorGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the customer wants to pay again"), "reason")
	s.OK(forget.GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Forget — key " + id, Exact: playwright.Bool(true)}).Click(), "submit without the acknowledgement")
	s.OK(chromium.Expect.Page(s.Page).ToHaveURL(regexp.MustCompile(`/keys/`+id+`$`)), "not submitted")
	_, still := record(mine)
	require.True(t, still, "not forgotten")
}
