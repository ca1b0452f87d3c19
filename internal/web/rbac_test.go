package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/casbin/casbin/v2/util"
	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// TestCachedAuthorizationEqualsCasbin (SPEC K6): the cached
// decisions per role × route pattern × method are casbin's own for every
// role, every route of the console, every method and concrete paths of each
// route (ids with odd characters included), for paths that are no route and
// for capability names; deny by default stays.
func TestCachedAuthorizationEqualsCasbin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	enf, err := web.NewEnforcer(unstuck.RBACModel, unstuck.RBACPolicy)
	require.NoError(t, err)
	can, canPattern := web.NewAuthorizerForTest(enf, b.router)
	allRoles := append([]string{"", "nobody", "Admin"}, roles...)
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, "view"}
	ids := []string{"42", "a%2Fb", "k-1.x", "%E2%9C%93", ":id"}
	if testing.Short() {
		ids = ids[:2] // a plain id and an escaped slash: every route still, fewer paths of each
	}
	var paths []string
	var patterns []string
	require.NoError(t, chi.Walk(b.router, func(_, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		patterns = append(patterns, route)
		for _, id := range ids {
			p := route
			for strings.Contains(p, "{") {
				i, j := strings.IndexByte(p, '{'), strings.IndexByte(p, '}')
				p = p[:i] + id + p[j+1:]
			}
			paths = append(paths, p)
		}
		return nil
	}))
	require.Contains(t, patterns, "/keys/{id}/forget")
	paths = append(paths, "/nope", "/keys/", "/keys/1/2", "/users/x/unlock/", "//", "")
	objects := append(paths, "response", "operation_data", "nothing")
	allowed := 0
	for _, role := range allRoles {
		for _, act := range methods {
			for _, obj := range objects {
				want, err := enf.Enforce(role, obj, act)
				require.NoError(t, err)
				// Twice: the first answer fills the cache, the second reads it.
				require.Equal(t, want, can(role, obj, act), "%s %s %s", role, act, obj)
				require.Equal(t, want, can(role, obj, act), "%s %s %s (cached)", role, act, obj)
				if want {
					allowed++
				}
			}
			for _, p := range patterns {
				want, err := enf.Enforce(role, strings.NewReplacer("{id}", "x", "{username}", "x").Replace(p), act)
				require.NoError(t, err)
				require.Equal(t, want, canPattern(role, p, act), "%s %s pattern %s", role, act, p)
			}
		}
	}
	require.Positive(t, allowed, "some decisions allow")
	require.False(t, can("nobody", "/", http.MethodGet), "deny by default")
}

// TestRBACRunsOncePerRoleRouteMethod: casbin (keyMatch2, a
// regular expression per policy row) runs once per role × route pattern ×
// method, not on every request: more pages of the same routes, with other
// ids, ask it nothing more.
func TestRBACRunsOncePerRoleRouteMethod(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	model := strings.Replace(unstuck.RBACModel, "keyMatch2(", "countedKeyMatch2(", 1)
	require.NotEqual(t, unstuck.RBACModel, model)
	enf, err := web.NewEnforcer(model, unstuck.RBACPolicy)
	require.NoError(t, err)
	enf.AddFunction("countedKeyMatch2", func(args ...any) (any, error) {
		calls.Add(1)
		return util.KeyMatch2Func(args...)
	})
	b := setup(t, func(c *web.Config) { c.Enforcer = enf })
	c := signIn(t, b, store.RoleOncall)
	pages := func(id string) {
		for _, p := range []string{"/", "/keys", "/keys/" + id, "/operations", "/operations/" + b.opID} {
			resp, _ := do(t, c, http.MethodGet, b.srv.URL+p, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, p)
		}
	}
	pages(strconv.FormatInt(b.keyID, 10))
	first := calls.Load()
	require.Positive(t, first, "casbin decided the first pages")
	for range 3 {
		pages(strconv.FormatInt(b.keyID, 10))
	}
	resp, _ := do(t, c, http.MethodGet, b.srv.URL+"/keys/999999", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, first, calls.Load(), "decisions are cached per role × route × method")
}
