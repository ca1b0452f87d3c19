//go:build oidcdemo

package browser

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
)

// startSSODemo runs "console demo --oidc-demo" and returns the console's
// base URL and what it printed until it listened.
func startSSODemo(t *testing.T) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	db := "sqlite:" + filepath.Join(t.TempDir(), "sso.db")
	go func() {
		done <- consolecmd.Run(ctx, []string{"demo", "--oidc-demo", "--addr", "127.0.0.1:0", "--db", db, "--traffic=false"}, func(string) string { return "" }, pw, io.Discard)
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	var out strings.Builder
	base := ""
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if b, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
			base = b
		}
		if strings.HasPrefix(lines.Text(), "  Groups map to roles") {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return base, out.String()
		}
	}
	t.Fatalf("demo stopped before printing its identity provider: %v\n%s", <-done, out.String())
	return "", ""
}

// TestBrowserSSO signs in through the demo identity provider's login page
// in Chromium, as a user whose groups give oncall, then signs out of the
// console and of the provider; a user in no mapped group is refused.
func TestBrowserSSO(t *testing.T) {
	browser := chromium.Launch(t)
	base, printed := startSSODemo(t)
	require.Regexp(t, `otto\s+groups unstuck-oncall,unstuck-support\s+-> oncall`, printed, "the demo prints its test users")
	consoletest.WaitReady(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())

	p := c.Open(t, "")
	p.GoTo("/login")
	p.OK(chromium.Expect.Locator(p.Role("button", "Sign in")).ToBeVisible(), "the local form is offered too")
	p.OK(p.Role("link", "Sign in with the demo identity provider").Click(), "click the SSO link")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Demo identity provider")).ToBeVisible(), "at the provider's login page")
	p.OK(p.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("otto"), "fill Username")
	p.OK(p.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("demo-sso"), "fill Password")
	p.OK(p.Role("button", "Sign in").Click(), "click Sign in at the provider")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Overview")).ToBeVisible(), "back at the console, signed in")
	p.OK(chromium.Expect.Locator(p.Locator("header .who")).ToContainText("otto"), "signed in as otto")
	p.OK(chromium.Expect.Locator(p.Locator("header .who")).ToContainText("oncall"), "with the role of the groups")

	p.OK(p.Role("button", "Sign out").Click(), "sign out")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Signed out")).ToBeVisible(), "signed out of the console")
	p.OK(p.Role("link", "Sign out of the identity provider too").Click(), "sign out at the provider")
	p.OK(chromium.Expect.Locator(p.Role("heading", "Sign in")).ToBeVisible(), "the provider sends the browser back to the sign-in page")
	require.Regexp(t, regexp.MustCompile(regexp.QuoteMeta(base)+`/login$`), p.URL())

	q := c.Open(t, "")
	q.GoTo("/login")
	q.OK(q.Role("link", "Sign in with the demo identity provider").Click(), "click the SSO link")
	q.OK(q.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("mia"), "fill Username")
	q.OK(q.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("demo-sso"), "fill Password")
	q.OK(q.Role("button", "Sign in").Click(), "click Sign in at the provider")
	q.OK(chromium.Expect.Locator(q.Role("heading", "No access to this console")).ToBeVisible(), "a user in no mapped group is refused")
}
