package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// pagerLinks returns a list page's First, Previous and Next links ("" for
// an absent one), unescaped.
func pagerLinks(body string) (first, prev, next string) {
	find := func(re string) string {
		if m := regexp.MustCompile(re).FindStringSubmatch(body); m != nil {
			return html.UnescapeString(m[1])
		}
		return ""
	}
	return find(`<a href="([^"]*)">First page</a>`), find(`<a class="prev" href="([^"]*)" rel="prev">`),
		find(`<a class="next" href="([^"]*)" rel="next">`)
}

// TestListTotalsAndPreviousPages (the operator's path):
// the key and operation lists say how many items their filter selects,
// exact or "≥ N" above the count's cap, and page both ways by keyset: a
// Previous page link leads back to exactly the page before, in either
// order; a bad or doubled page link is a 400 naming the field.
func TestListTotalsAndPreviousPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seeder := b.records.(idemdriver.Seeder)
	base := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	seed := func(scope string, n int) {
		recs := make([]idemdriver.Record, n)
		for i := range recs {
			at := base.Add(time.Duration(i) * time.Second)
			recs[i] = idemdriver.Record{Ident: idemdriver.Ident{Scope: scope, Operation: "charge", KeyDigest: idem.Digest(scope, "charge", fmt.Sprint(i))},
				Status: idemdriver.StatusFailed, Owner: idemdriver.Owner{Fence: int64(10_000 + i)}, Attempts: 1, Version: 1,
				CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(72 * time.Hour)}
		}
		require.NoError(t, seeder.SeedRecords(context.Background(), recs))
	}
	seed("tenant:pages", 120)
	seed("tenant:many", idemdriver.DefaultCountUpTo+1)
	c := signIn(t, b, store.RoleOncall)

	for _, order := range []string{"newest", "oldest"} {
		list := b.srv.URL + "/keys?scope=tenant:pages&order=" + order
		_, body := do(t, c, http.MethodGet, list, nil)
		require.Contains(t, body, "120 keys match.", order)
		page1 := keyLinks(body)
		require.Len(t, page1, 50)
		first, prev, next := pagerLinks(body)
		require.Empty(t, first+prev, "%s: the first page links neither back nor to itself", order)
		require.NotEmpty(t, next)

		_, body = do(t, c, http.MethodGet, b.srv.URL+next, nil)
		page2 := keyLinks(body)
		require.Len(t, page2, 50)
		require.NotContains(t, page2, page1[49])
		first, prev, next = pagerLinks(body)
		require.NotEmpty(t, first)
		require.NotEmpty(t, prev)
		_, body = do(t, c, http.MethodGet, b.srv.URL+next, nil)
		page3 := keyLinks(body)
		require.Len(t, page3, 20, "%s: the last page", order)
		_, prev3, next3 := pagerLinks(body)
		require.Empty(t, next3)
		require.Contains(t, body, "120 keys match.", "the count is the filter's, on every page")

		_, body = do(t, c, http.MethodGet, b.srv.URL+prev3, nil)
		require.Equal(t, page2, keyLinks(body), "%s: Previous page from the last is the second", order)
		_, prev2, next2 := pagerLinks(body)
		require.NotEmpty(t, next2, "a page read backward links forward again")
		_, body = do(t, c, http.MethodGet, b.srv.URL+prev2, nil)
		require.Equal(t, page1, keyLinks(body), "%s: and from the second, the first", order)
		first, prev, _ = pagerLinks(body)
		require.Empty(t, first+prev, "%s: reached backward, the first page knows it is the first", order)
	}

	_, body := do(t, c, http.MethodGet, b.srv.URL+"/keys?scope=tenant:many", nil)
	require.Contains(t, body, fmt.Sprintf("≥ %d keys match (counted up to %d).", idemdriver.DefaultCountUpTo, idemdriver.DefaultCountUpTo))
	require.Contains(t, body, `data-exact="false"`)

	_, body = do(t, c, http.MethodGet, b.srv.URL+"/keys?scope=tenant:pages", nil)
	_, _, next := pagerLinks(body)
	cursor := regexp.MustCompile(`after=([^&]+)`).FindStringSubmatch(next)[1]
	for _, tc := range []struct{ query, field string }{
		{"before=!!!", "before"},
		{"after=" + cursor + "&before=" + cursor, "before"},
		// A Next link's cursor (newest-first) as a Previous link's: read
		// backward, the list is oldest-first, so it is another list's.
		{"before=" + cursor, "before"},
	} {
		resp, body := do(t, c, http.MethodGet, b.srv.URL+"/keys?scope=tenant:pages&"+tc.query, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, tc.query)
		require.Contains(t, body, `data-field="`+tc.field+`"`, tc.query)
	}

	// Operations: 60 more beside the setup's one under review.
	for i := range 60 {
		at := base.Add(time.Duration(i) * time.Second)
		op := sagadriver.Operation{ID: fmt.Sprintf("op-page-%03d", i), Type: "pager", Status: sagadriver.StatusCompleted, Input: []byte(`{}`), Version: 1, CreatedAt: at, UpdatedAt: at}
		require.NoError(t, b.sagas.WithinTx(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
			return b.sagas.InsertOperation(ctx, tx, &op)
		}))
	}
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?type=pager", nil)
	require.Contains(t, body, "60 operations match.")
	opLinks := func(body string) []string {
		return regexp.MustCompile(`href="/operations/(op-page-\d+)"`).FindAllString(body, -1)
	}
	page1 := opLinks(body)
	require.Len(t, page1, 50)
	_, _, next = pagerLinks(body)
	_, body = do(t, c, http.MethodGet, b.srv.URL+next, nil)
	require.Len(t, opLinks(body), 10)
	_, prev, _ := pagerLinks(body)
	_, body = do(t, c, http.MethodGet, b.srv.URL+prev, nil)
	require.Equal(t, page1, opLinks(body), "Previous page of operations")
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?status=review_required", nil)
	require.Contains(t, body, "1 operation matches.")
}

// slowCounts is a store whose key counts last until their context ends,
// as a count whose filter no index covers does on a very large table.
type slowCounts struct{ idemdriver.Admin }

func (slowCounts) CountKeys(ctx context.Context, _ idemdriver.KeyFilter, _ int) (idemdriver.KeyCount, error) {
	<-ctx.Done()
	return idemdriver.KeyCount{}, fmt.Errorf("count: %w", ctx.Err())
}

// TestKeyListCountStopsAtItsBudget (SPEC S7): a list whose count runs out
// of its time still answers, with its rows, and says the count stopped and
// how many it shows at least; the API gives that lower bound, not exact.
func TestKeyListCountStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) { c.Records, c.CountBudget = slowCounts{c.Records}, web.DefaultCountBudget })
	c := signIn(t, b, "oncall")
	resp, body := do(t, c, http.MethodGet, b.srv.URL+"/keys", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Len(t, keyLinks(body), 1)
	require.Contains(t, body, "≥ 1 keys match (not counted further: the count stopped at its time limit).")
	require.Contains(t, body, `data-exact="false"`)
}
