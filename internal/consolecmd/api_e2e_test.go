package consolecmd

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// TestAPIEndToEnd: SPEC K25 on the program as it serves, on SQLite and
// PostgreSQL — a service token reads the keys, a stale decision is 409
// with the current version, the decision then applies and is audited as
// the token.
func TestAPIEndToEnd(t *testing.T) {
	t.Parallel()
	for name, dbURL := range map[string]func(t *testing.T) string{
		"SQLite":     func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "api.db") },
		"PostgreSQL": func(t *testing.T) string { return pgtest.Database(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := dbURL(t)
			base := consoletest.StartDemo(t, run, url)
			order := consoletest.Call(t, "POST", base+"/shop/orders", `"api-e2e-order-000001"`, `{"sku":"book","qty":1}`)
			require.Equal(t, http.StatusCreated, order.Status, order.Body)

			db, err := openDatabase(context.Background(), url)
			require.NoError(t, err)
			defer db.Close()
			secret, hash := store.NewTokenSecret()
			_, err = db.Console.CreateAPIToken(context.Background(), store.APIToken{Name: "e2e", Role: store.RoleOncall, CreatedBy: "test"}, hash)
			require.NoError(t, err)
			auth := []string{"Authorization", "Bearer " + secret}

			consoletest.RequireProblem(t, consoletest.Call(t, "GET", base+web.APIPrefix+"/keys", "", ""), http.StatusUnauthorized, "unauthorized")
			list := consoletest.Call(t, "GET", base+web.APIPrefix+"/keys?state=completed", "", "", auth...)
			require.Equal(t, http.StatusOK, list.Status, list.Body)
			items, _ := list.JSON["items"].([]any)
			require.NotEmpty(t, items, list.Body)
			rec := items[0].(map[string]any)
			id, version := fmt.Sprint(int64(rec["id"].(float64))), int64(rec["version"].(float64))

			path := base + web.APIPrefix + "/keys/" + id + "/forget"
			stale := consoletest.Call(t, "POST", path, "", fmt.Sprintf(`{"version":%d,"reason":"an old read of the key","acknowledge_rerun":true}`, version-1), auth...)
			consoletest.RequireProblem(t, stale, http.StatusConflict, "stale")
			require.EqualValues(t, version, stale.JSON["current_version"])
			done := consoletest.Call(t, "POST", path, `"api-e2e-forget-000001"`,
				fmt.Sprintf(`{"version":%d,"reason":"the order was cancelled at the provider","acknowledge_rerun":true}`, version), auth...)
			require.Equal(t, http.StatusOK, done.Status, done.Body)
			require.Equal(t, true, done.JSON["removed"])

			hist, err := db.Trail.History(context.Background(), "key", id, 1)
			require.NoError(t, err)
			require.Len(t, hist, 1)
			require.Equal(t, "key.forget", hist[0].Action)
			require.Equal(t, "token:e2e", hist[0].Actor)
			require.True(t, strings.HasPrefix(hist[0].UserAgent, web.TokenAgentPrefix+"e2e;"), hist[0].UserAgent)
			require.NotContains(t, hist[0].UserAgent, secret)

			tok, ok, err := db.Console.APITokenByHash(context.Background(), hash)
			require.NoError(t, err)
			require.True(t, ok)
			require.WithinDuration(t, time.Now(), tok.LastUsedAt, time.Minute)
		})
	}
}
