package web_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
)

func TestMain(m *testing.M) { redistest.RunMain(m) }

// TestRedisKeyPages: the console administers keys kept in
// Redis as it does keys in SQL: the list, the detail page and a decision,
// audited as an intent and its outcome in the console's trail.
func TestRedisKeyPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var cfg web.Config
	b := setup(t, func(c *web.Config) { cfg = *c })

	rdb := redis.NewClient(&redis.Options{Addr: redistest.Server(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	rs, err := idemredis.New(ctx, rdb, idemredis.Config{Prefix: "web" + rand.Text()[:10] + ":"})
	require.NoError(t, err)
	engine, err := idem.New(rs, idem.Config{Secret: []byte("web-test-secret-0123456789abcdefgh")})
	require.NoError(t, err)
	dec, err := ops.SQLite(immediateHandle(t, b.sqlDB), b.trail, b.db, nil)
	require.NoError(t, err)
	keys, err := ops.NewKeysOnStore(dec, engine, rs, rs)
	require.NoError(t, err)
	cfg.Records, cfg.Engine, cfg.Keys, cfg.Bulks = rs, engine, keys, nil
	srv := httptest.NewServer(web.NewHandler(cfg))
	t.Cleanup(srv.Close)
	b.srv = srv // signIn posts to it; the users and sessions are the same

	_, err = idem.Run(ctx, engine, "web-redis", "tenant:web", func(ctx context.Context) (int, error) {
		require.NoError(t, idem.Annotate(ctx, idem.Annotation{ExternalRef: "prov-redis"}))
		return 0, idem.Uncertain(errors.New("timeout"))
	}, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	page, err := rs.ListKeys(ctx, idemdriver.KeyFilter{Status: idemdriver.StatusPending})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	rec := page.Records[0]

	support := signIn(t, b, store.RoleSupport)
	_, body := do(t, support, http.MethodGet, srv.URL+"/keys?state=pending", nil)
	require.Contains(t, body, "/keys/"+strconv.FormatInt(rec.ID, 10), "listed from Redis")
	_, body = do(t, support, http.MethodGet, srv.URL+"/", nil)
	require.Contains(t, body, "prov-redis", "the overview's needs-attention list reads Redis")

	path := "/keys/" + strconv.FormatInt(rec.ID, 10)
	_, detail := do(t, support, http.MethodGet, srv.URL+path, nil)
	require.Contains(t, detail, "prov-redis")
	form := url.Values{"acknowledge_rerun": {"yes"}, "version": {strconv.FormatInt(rec.Version, 10)}, "reason": {"the provider has no such charge"},
		"form_key": {formKeyOf(t, detail, path+"/forget")}}
	resp, _ := do(t, support, http.MethodPost, srv.URL+path+"/forget", form)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, ok, err := rs.KeyByID(ctx, rec.ID)
	require.NoError(t, err)
	require.False(t, ok, "forgotten in Redis")

	entries, _, err := b.trail.List(ctx, audit.Filter{TargetKind: "key", TargetID: strconv.FormatInt(rec.ID, 10)})
	require.NoError(t, err)
	require.Len(t, entries, 2, "the intent, then its outcome")
	require.Equal(t, audit.OutcomeApplied, entries[0].Outcome)
	require.Equal(t, ops.OutcomeIntent, entries[1].Outcome)
	require.Equal(t, "support", entries[1].Actor)
}
