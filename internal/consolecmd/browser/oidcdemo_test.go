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
	browser := launchChromium(t)
	base, printed := startSSODemo(t)
	require.Regexp(t, `otto\s+groups unstuck-oncall,unstuck-support\s+-> oncall`, printed, "the demo prints its test users")
	consoletest.WaitReady(t, base)
	c := &console{browser: browser, base: base, sessions: map[string]string{}, dir: t.TempDir()}

	p := c.open(t, "")
	p.goTo("/login")
	p.ok(expect.Locator(p.role("button", "Sign in")).ToBeVisible(), "the local form is offered too")
	p.ok(p.role("link", "Sign in with the demo identity provider").Click(), "click the SSO link")
	p.ok(expect.Locator(p.role("heading", "Demo identity provider")).ToBeVisible(), "at the provider's login page")
	p.ok(p.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("otto"), "fill Username")
	p.ok(p.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("demo-sso"), "fill Password")
	p.ok(p.role("button", "Sign in").Click(), "click Sign in at the provider")
	p.ok(expect.Locator(p.role("heading", "Overview")).ToBeVisible(), "back at the console, signed in")
	p.ok(expect.Locator(p.Locator("header .who")).ToContainText("otto"), "signed in as otto")
	p.ok(expect.Locator(p.Locator("header .who")).ToContainText("oncall"), "with the role of the groups")

	p.ok(p.role("button", "Sign out").Click(), "sign out")
	p.ok(expect.Locator(p.role("heading", "Signed out")).ToBeVisible(), "signed out of the console")
	p.ok(p.role("link", "Sign out of the identity provider too").Click(), "sign out at the provider")
	p.ok(expect.Locator(p.role("heading", "Sign in")).ToBeVisible(), "the provider sends the browser back to the sign-in page")
	require.Regexp(t, regexp.MustCompile(regexp.QuoteMeta(base)+`/login$`), p.URL())

	q := c.open(t, "")
	q.goTo("/login")
	q.ok(q.role("link", "Sign in with the demo identity provider").Click(), "click the SSO link")
	q.ok(q.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("mia"), "fill Username")
	q.ok(q.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("demo-sso"), "fill Password")
	q.ok(q.role("button", "Sign in").Click(), "click Sign in at the provider")
	q.ok(expect.Locator(q.role("heading", "No access to this console")).ToBeVisible(), "a user in no mapped group is refused")
}
