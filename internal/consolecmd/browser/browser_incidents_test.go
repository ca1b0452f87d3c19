package browser

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest/chromium"
	"github.com/unstuckhq/unstuck/internal/incident"
)

// TestBrowserIncidents (SPEC K14): the demo's traffic, with a
// snapshot every second, yields incident groups on /incidents; a group's
// items link lists exactly its items, as the records say.
//
//	eval "$(bash scripts/playwright-setup.sh)" && go test -run BrowserIncidents ./internal/consolecmd/browser/
func TestBrowserIncidents(t *testing.T) {
	browser := chromium.Launch(t)
	path := filepath.Join(t.TempDir(), "browser-incidents.db")
	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, "sqlite:"+path, "--traffic", "--snapshot-every", "1s")
	consoletest.WaitReady(t, base)
	c := chromium.NewConsole(browser, base, t.TempDir())
	chromium.SignInAs(t, c, "support")
	p := c.Open(t, "support")

	// The traffic leaves a stalled job past its lease and an unavailable
	// receipt at once, and pending or failed payments within seconds.
	rows := p.Locator(`table[aria-label="Incident groups"] tbody tr`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		p.GoTo("/incidents")
		n, err := rows.Count()
		require.NoError(t, err)
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/incidents shows %d groups after 60 s of demo traffic", n)
		}
		time.Sleep(time.Second)
	}
	p.OK(chromium.Expect.Locator(p.Role("link", "Incidents")).ToHaveAttribute("aria-current", "page"), "the navigation has Incidents")
	title, err := p.Title()
	require.NoError(t, err)
	require.Regexp(t, `^\(\d+\) Incidents · unstuck$`, title)

	db, err := consolecmd.OpenDatabase(context.Background(), "sqlite:"+path)
	require.NoError(t, err)
	defer db.Close()
	// members lists the IDs of the keys now in group key, from the records.
	members := func(key, state, operation string) []string {
		f := incident.KeyStateFilter(state)
		f.Operation = operation
		var ids []string
		require.NoError(t, db.Records.EachKey(context.Background(), f, idemdriver.MaxLimit, func(recs []idemdriver.Record) error {
			for _, r := range recs {
				if fl, ok := incident.KeyFields(r); ok && fl.Key() == key {
					ids = append(ids, strconv.FormatInt(r.ID, 10))
				}
			}
			return nil
		}))
		slices.Sort(ids)
		return ids
	}

	groups, err := db.Console.IncidentGroups(context.Background(), 0)
	require.NoError(t, err)
	checked := 0
	for _, g := range groups {
		if g.Kind != incident.KindKey {
			continue
		}
		before := members(g.Key, g.State, g.Operation)
		p.GoTo("/incidents")
		link := p.Locator(`tr[data-testid="incident-` + g.Key + `"] a:text-is("Items")`)
		if n, _ := link.Count(); n == 0 {
			continue // a group of a later snapshot than the page's
		}
		p.OK(link.Click(), "open the items of %s", g.Key)
		p.OK(chromium.Expect.Page(p.Page).ToHaveURL(base+"/incidents/"+g.Key), "the group's page")
		links, err := p.Locator(`table[aria-label="Keys"] a[href^="/keys/"]`).All()
		require.NoError(t, err)
		var listed []string
		for _, l := range links {
			href, err := l.GetAttribute("href")
			require.NoError(t, err)
			listed = append(listed, strings.TrimPrefix(href, "/keys/"))
		}
		slices.Sort(listed)
		after := members(g.Key, g.State, g.Operation)
		// Traffic goes on: every key of the group before the page is
		// listed, and every key listed is of the group after it.
		for _, id := range before {
			require.Contains(t, listed, id, "group %s (%s %s %q): a member before the page is listed", g.Key, g.State, g.Operation, g.Message)
		}
		for _, id := range listed {
			require.Contains(t, after, id, "group %s: a listed key is a member", g.Key)
		}
		require.NotEmpty(t, listed)
		checked++
	}
	t.Logf("%d key groups checked against the records", checked)
	require.GreaterOrEqual(t, checked, 2, "at least two key groups checked")

	// The overview draws the trends from the snapshots.
	p.GoTo("/")
	p.OK(chromium.Expect.Locator(p.GetByRole("img", playwright.PageGetByRoleOptions{Name: regexp.MustCompile(`^stuck: \d+, .* in 24 h$`)})).ToBeVisible(), "the stuck trend")
}
