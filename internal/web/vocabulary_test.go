package web_test

import (
	"html"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

// A key's page and the bulk actions on a list of keys name each decision
// with the same words, and those words are the decision names.
func TestDecisionsHaveOneNameOnSingleAndBulkPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, _ := pendingKey(t, b, "web-vocabulary")
	oncall := signIn(t, b, store.RoleOncall)
	target := " — key " + strconv.FormatInt(id, 10)

	_, page := do(t, oncall, http.MethodGet, b.srv.URL+"/keys/"+strconv.FormatInt(id, 10), nil)
	var single []string
	for _, m := range regexp.MustCompile(`<summary>([^<]*)</summary>`).FindAllStringSubmatch(page, -1) {
		title := html.UnescapeString(m[1])
		require.True(t, strings.HasSuffix(title, target), "%q names its key as %q", title, target)
		name := strings.TrimSuffix(title, target)
		require.Contains(t, views.Decisions, name, "the key page's decision %q is a decision name", name)
		single = append(single, name)
	}
	require.NotEmpty(t, single, "the key page offers decisions")

	_, list := do(t, oncall, http.MethodGet, b.srv.URL+"/keys?scope=tenant%3Aweb", nil)
	links := regexp.MustCompile(`data-testid="bulk-link"[\s\S]*?</p>`).FindString(list)
	require.NotEmpty(t, links, "the list offers bulk actions")
	var bulk []string
	for _, m := range regexp.MustCompile(`<a href="[^"]*">([^<]*)</a>`).FindAllStringSubmatch(links, -1) {
		name := html.UnescapeString(m[1])
		name = strings.TrimSuffix(name, " (each key's reference)")
		name = strings.ToUpper(name[:1]) + name[1:]
		require.Contains(t, views.Decisions, name, "the bulk action %q is a decision name", name)
		bulk = append(bulk, name)
	}
	for _, name := range single {
		require.True(t, slices.Contains(bulk, name), "the key page's %q is a bulk action too: %v", name, bulk)
	}
}
