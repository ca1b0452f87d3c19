package web_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// userCountingStore counts the console's separate user reads.
type userCountingStore struct {
	*store.DB
	byID atomic.Int64
}

func (s *userCountingStore) UserByID(ctx context.Context, id int64) (store.User, bool, error) {
	s.byID.Add(1)
	return s.DB.UserByID(ctx, id)
}

// TestSessionReadsItsUser: a signed-in page reads the session
// and its user in one statement, no separate user read; a disabled account
// and a role change still take effect at the next request (SPEC K5, K6).
func TestSessionReadsItsUser(t *testing.T) {
	t.Parallel()
	var st *userCountingStore
	b := setup(t, func(c *web.Config) {
		st = &userCountingStore{DB: c.Store.(*store.DB)}
		c.Store = st
	})
	c := signIn(t, b, store.RoleAdmin)
	st.byID.Store(0)
	for _, p := range []string{"/", "/keys", "/operations", "/users"} {
		resp, _ := do(t, c, http.MethodGet, b.srv.URL+p, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
	require.Zero(t, st.byID.Load(), "the user came with the session")

	require.NoError(t, b.db.SetUserRole(t.Context(), "admin", store.RoleAuditor))
	resp, _ := do(t, c, http.MethodGet, b.srv.URL+"/users", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "the role read with the session is the current one")
	require.NoError(t, b.db.SetUserDisabled(t.Context(), "admin", true))
	resp, _ = do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a disabled account loses its session at once")
	require.Zero(t, st.byID.Load())
}
