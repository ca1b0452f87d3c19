package browserbulk

import (
	"fmt"
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

// The browser journey of a bulk redrive (SPEC G12, K22, K23), on the real
// program in Chromium:
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run BrowserBulkRedrive ./internal/consolecmd/browserbulk/
//
// Six signups whose welcome mail the mailer refused are one incident
// group; on-call acts on all of it with "redrive", which resumes each
// operation at its failed step, submits the frozen set; admin approves it;
// the run passes its canary batch and resumes every operation, and each
// completes with its redrive in its history.
func TestBrowserBulkRedrive(t *testing.T) {
	const n = 6
	browser := chromium.Launch(t)
	path := filepath.Join(t.TempDir(), "browser-bulk-redrive.db")
	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, "sqlite:"+path, "--bulk-batch", "1", "--bulk-pause", "150ms")
	consoletest.WaitReady(t, base)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = consoletest.PostSignup(t, base, consoletest.SignupKey(t, fmt.Sprint(i)), fmt.Sprintf(`{"email":"redrive%d@example.com","fail":"welcome_permanent"}`, i))
	}
	for _, id := range ids {
		consoletest.WaitSignup(t, base, id, sagadriver.StatusReviewRequired, 30*time.Second)
	}
	c := chromium.NewConsole(browser, base, t.TempDir())
	chromium.SignInAs(t, c, "oncall")
	chromium.SignInAs(t, c, "admin")

	// oncall: from the incident group to a frozen set of redrives.
	p := c.Open(t, "oncall")
	row := p.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "mailbox <email> does not exist"})
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		p.GoTo("/incidents")
		if k, _ := row.Count(); k == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no incident group of the refused welcome mails on /incidents")
	}
	p.OK(row.GetByRole("link", playwright.LocatorGetByRoleOptions{Name: regexp.MustCompile(`^Act on all`)}).Click(), "act on all")
	if !regexp.MustCompile(`action=redrive`).MatchString(p.URL()) {
		p.OK(p.GetByTestId("other-actions").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "redrive", Exact: playwright.Bool(true)}).Click(),
			"the group's other action: redrive")
	}
	p.OK(chromium.Expect.Page(p.Page).ToHaveURL(regexp.MustCompile(`/bulk/\d+$`)), "the frozen set's page")
	count, err := p.GetByTestId("legal-count").TextContent()
	require.NoError(t, err)
	m := regexp.MustCompile(`(\d+) matching items can be decided`).FindStringSubmatch(count)
	require.Len(t, m, 2, "the frozen count: %q", count)
	p.OK(p.GetByLabel("Reason", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("the mailer is back: resend every refused welcome mail"), "reason")
	p.OK(p.GetByLabel("Type the number of items ("+m[1]+") to confirm").Fill(m[1]), "typed count")
	p.OK(p.Role("button", "Redrive "+m[1]+" operations").Click(), "submit")
	p.OK(chromium.Expect.Locator(p.GetByTestId("bulk-status")).ToHaveText("waiting_approval"), "waits for a second person")
	id := regexp.MustCompile(`/bulk/(\d+)$`).FindStringSubmatch(p.URL())[1]

	// admin reads what will run, and approves it.
	a := c.Open(t, "admin")
	require.Equal(t, http.StatusOK, a.GoTo("/bulk/"+id))
	a.OK(chromium.Expect.Locator(a.GetByTestId("bulk-what")).ToContainText("Redrive: resume each operation at its failed step — operations where group"), "the action in words")
	a.OK(a.Role("button", "Approve request "+id).Click(), "approve")
	a.OK(chromium.Expect.Locator(a.GetByTestId("bulk-status")).ToHaveText("done", playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(60_000)}), "the run ends")
	a.OK(chromium.Expect.Locator(a.GetByTestId("applied")).ToHaveText(m[1]), "every item applied, the canary batch first")
	for _, op := range ids {
		consoletest.WaitSignup(t, base, op, sagadriver.StatusCompleted, 30*time.Second)
	}
	a.GoTo("/operations/" + ids[0])
	history := a.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Decisions on this item"})
	a.OK(chromium.Expect.Locator(history.GetByRole("row").Filter(playwright.LocatorFilterOptions{HasText: "operation.redrive"})).ToHaveCount(1), "the redrive in the operation's history")
}
