package web_test

import (
	"context"
	"database/sql"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// keyLinks returns the IDs of the key links of a list page, in order.
func keyLinks(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<a href="/keys/(\d+)"`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestListSortOrder (the operator's path): the key list of
// what is stuck is the longest waiting first, says so and offers the
// other order; order=newest turns it; a bad order is a 400 naming the
// field.
func TestListSortOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seeder, ok := b.records.(idemdriver.Seeder)
	require.True(t, ok, "the test store seeds records")
	base := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	var recs []idemdriver.Record
	for i, key := range []string{"sort-old", "sort-mid", "sort-new"} {
		at := base.Add(time.Duration(i) * time.Minute)
		recs = append(recs, idemdriver.Record{Ident: idemdriver.Ident{Scope: "tenant:sort", Operation: "charge",
			KeyDigest: idem.Digest("tenant:sort", "charge", key)}, Status: idemdriver.StatusProcessing,
			Owner: idemdriver.Owner{Token: "gone-" + key, Fence: int64(900 + i)}, LeaseExpiresAt: at.Add(time.Minute),
			Attempts: 1, Version: 1, CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(72 * time.Hour)})
	}
	require.NoError(t, seeder.SeedRecords(context.Background(), recs))
	page, err := b.records.ListKeys(context.Background(), idemdriver.KeyFilter{Scope: "tenant:sort"})
	require.NoError(t, err)
	require.Len(t, page.Records, 3)
	newest := []string{itoa(page.Records[0].ID), itoa(page.Records[1].ID), itoa(page.Records[2].ID)}
	oldest := []string{newest[2], newest[1], newest[0]}

	c := signIn(t, b, store.RoleOncall)
	resp, body := do(t, c, http.MethodGet, b.srv.URL+"/keys?state=stuck&scope=tenant:sort", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, oldest, keyLinks(body), "what is stuck: the longest waiting first")
	require.Contains(t, body, "Least recently updated first")
	require.Contains(t, body, `aria-current="true">Oldest first</a>`)
	require.Contains(t, body, `<a href="/keys?order=newest&amp;scope=tenant%3Asort&amp;state=stuck">Newest first</a>`)

	_, body = do(t, c, http.MethodGet, b.srv.URL+"/keys?order=newest&scope=tenant:sort&state=stuck", nil)
	require.Equal(t, newest, keyLinks(body))
	require.Contains(t, body, "Most recently updated first.")
	require.Contains(t, body, `aria-current="true">Newest first</a>`)
	require.Contains(t, body, `<input type="hidden" name="order" value="newest">`, "the filter form keeps the order")

	_, body = do(t, c, http.MethodGet, b.srv.URL+"/keys?order=newest", nil)
	require.Contains(t, body, "Most recently updated first.")
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/keys?scope=tenant:sort&order=oldest", nil)
	require.Equal(t, oldest, keyLinks(body))

	// Paging oldest first: the cursor carries the order; under the
	// other order it is refused, naming the page link.
	first, err := b.records.ListKeys(context.Background(), idemdriver.KeyFilter{Scope: "tenant:sort", Stuck: true, Limit: 1})
	require.NoError(t, err)
	resp, body = do(t, c, http.MethodGet, b.srv.URL+"/keys?state=stuck&scope=tenant:sort&after="+first.Next, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a newest-first cursor on the oldest-first list")
	require.Contains(t, body, `data-field="after"`)

	for _, u := range []string{"/keys?order=sideways", "/operations?order=sideways"} {
		resp, body = do(t, c, http.MethodGet, b.srv.URL+u, nil)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, u)
		require.Contains(t, body, `data-field="order"`, u)
		require.Contains(t, body, "Unknown order", u)
		require.NotContains(t, body, `name="order"`, "%s: the form does not keep a bad order", u)
	}

	// Operations under review: the longest waiting first by default.
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	older := sagadriver.Operation{ID: "op-web-sort", Type: "signup", Status: sagadriver.StatusReviewRequired, ReviewReason: "uncertain_unresolved",
		Input: []byte(`{}`), Version: 1, CreatedAt: at, UpdatedAt: at}
	require.NoError(t, b.sagas.WithinTx(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
		return b.sagas.InsertOperation(ctx, tx, &older)
	}))
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?status=review_required", nil)
	require.Equal(t, []string{older.ID, b.opID}, opLinks(body), "review: the longest waiting first")
	require.Contains(t, body, "Least recently updated first")
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations?status=review_required&order=newest", nil)
	require.Equal(t, []string{b.opID, older.ID}, opLinks(body))
	_, body = do(t, c, http.MethodGet, b.srv.URL+"/operations", nil)
	require.Equal(t, []string{b.opID, older.ID}, opLinks(body))
	require.Contains(t, body, "Most recently updated first.")
}

// opLinks returns the IDs of the operation links of a list page, in
// order, once each.
func opLinks(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<a href="/operations/([^"?/]+)"`).FindAllStringSubmatch(body, -1) {
		if len(ids) == 0 || ids[len(ids)-1] != m[1] {
			ids = append(ids, m[1])
		}
	}
	return ids
}
