package browseraxe

import (
	"fmt"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
)

// TestEveryPageAxe checks every page of the console, signed out, as admin
// and as support, at a phone's and a desktop's size in the light and the
// dark theme, with axe-core (WCAG 2.x A and AA and best practices, moderate
// impact and above) and for horizontal overflow (SPEC K9):
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -race -run EveryPageAxe ./internal/consolecmd/browseraxe/
func TestEveryPageAxe(t *testing.T) {
	c, w := chromium.StartWorld(t)
	for _, scheme := range []*playwright.ColorScheme{playwright.ColorSchemeLight, playwright.ColorSchemeDark} {
		for _, size := range []*playwright.Size{chromium.Phone, chromium.Desktop} {
			t.Run(fmt.Sprintf("%s-%d", *scheme, size.Width), func(t *testing.T) { testEveryPage(t, c, w, size, scheme) })
		}
	}
}

// testEveryPage visits every page of the console at size in scheme:
// signed out, as admin (who sees every page) and as support.
func testEveryPage(t *testing.T, c *chromium.Console, w *chromium.World, size *playwright.Size, scheme *playwright.ColorScheme) {
	anon := c.Open(t, "", chromium.ThemedAt(size, scheme))
	anon.GoTo("/login")
	chromium.CheckPage(anon, "/login")
	anon.OK(anon.GetByLabel("Username", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("admin"), "fill Username")
	anon.OK(anon.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)}).Fill("wrong-password"), "fill Password")
	anon.OK(anon.Role("button", "Sign in").Click(), "sign in with a wrong password")
	anon.OK(chromium.Expect.Locator(anon.GetByRole("alert")).ToBeVisible(), "the error")
	// Defect 14: the username is kept, the focus is on the password.
	anon.OK(chromium.Expect.Locator(anon.GetByLabel("Password", playwright.PageGetByLabelOptions{Exact: playwright.Bool(true)})).ToBeFocused(), "the password has the focus")
	chromium.CheckPage(anon, "/login after a wrong password")

	p := c.Open(t, "admin", chromium.ThemedAt(size, scheme))
	for _, path := range []string{"/", "/keys", "/keys?state=completed", "/keys?state=bogus", "/operations",
		"/operations?status=review_required", "/operations/" + w.Review[0], "/audit", "/users", "/search", "/no-such-page", "/incidents", "/approvals"} {
		p.GoTo(path)
		chromium.CheckPage(p, path)
	}
	// A group's items page (the signups under review are a group).
	p.GoTo("/incidents")
	group, err := p.Locator(`table[aria-label="Incident groups"] a:text-is("Items")`).First().GetAttribute("href")
	require.NoError(t, err, "an incident group on /incidents")
	p.GoTo(group)
	chromium.CheckPage(p, group)
	// A key with its stored response, and the search's results page.
	p.GoTo("/keys?state=completed")
	href, err := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("link").First().GetAttribute("href")
	require.NoError(t, err)
	p.GoTo(href)
	p.OK(chromium.Expect.Locator(p.Role("region", "Stored response")).ToBeVisible(), "the stored response")
	chromium.CheckPage(p, href)
	p.GoTo("/keys?state=unavailable")
	href, err = p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Keys"}).GetByRole("link").First().GetAttribute("href")
	require.NoError(t, err)
	p.GoTo(href)
	chromium.CheckPage(p, href)
	chromium.Search(p, "signup") // matches nothing by itself; the page with its note
	chromium.CheckPage(p, "search results")
	p.GoTo("/audit")
	if n, _ := p.GetByRole("table", playwright.PageGetByRoleOptions{Name: "Audit trail"}).GetByRole("link").Count(); n > 0 {
		p.GoTo("/audit")
	}

	support := c.Open(t, "support", chromium.ThemedAt(size, scheme))
	support.GoTo("/users")
	chromium.CheckPage(support, "/users as support (403)")
}
