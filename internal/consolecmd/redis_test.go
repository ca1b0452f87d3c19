package consolecmd

import (
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
)

// redisPending makes a pending record under prefix p on the Redis server
// at addr and returns it.
func redisPending(t *testing.T, addr, p, key string) idemdriver.Record {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	s, err := idemredis.New(t.Context(), c, idemredis.Config{Prefix: p})
	require.NoError(t, err)
	id := idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", key)}
	rec, _, err := s.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, s.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusPending, LastError: "timeout"}))
	rec, _, err = s.Get(t.Context(), id)
	require.NoError(t, err)
	return rec
}

// TestRedisKeys: with --keys the console reads the key records
// from Redis and decides on them with an intent and an outcome in its own
// trail; an intent a stop interrupted is resolved when it starts again.
func TestRedisKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	addr := redistest.Server(t)
	p := "console" + rand.Text()[:8] + ":"
	keysURL := "redis://" + addr + "?prefix=" + p
	rec := redisPending(t, addr, p, "k1")
	stuck := redisPending(t, addr, p, "k2")

	ring, err := audit.NewKeyring([]byte(testAuditKey))
	require.NoError(t, err)
	open := func() *database {
		db, err := openDatabase(ctx, "sqlite:"+filepath.Join(t.TempDir(), "..", "console.db"))
		require.NoError(t, err)
		db.useAuditKeys(ring)
		require.NoError(t, db.useRedisKeys(ctx, keysURL, slog.New(slog.DiscardHandler)))
		return db
	}
	db := open()
	got, ok, err := db.Records.KeyByID(ctx, rec.ID)
	require.NoError(t, err)
	require.True(t, ok, "the console reads the Redis record")
	require.Equal(t, rec.Ident, got.Ident)

	engine, err := idem.New(db.Store, idem.Config{Secret: []byte("serve-test-secret-0123456789abcdef")})
	require.NoError(t, err)
	keys, err := db.keyDecisions(engine, nil)
	require.NoError(t, err)
	actor := ops.Actor{Username: "ada", Role: "admin"}
	_, err = keys.Decide(ctx, actor, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version, Action: idem.OperatorForget, Reason: "the customer asked for it", AcknowledgeRerun: true})
	require.NoError(t, err)
	_, ok, err = db.Records.KeyByID(ctx, rec.ID)
	require.NoError(t, err)
	require.False(t, ok, "forgotten in Redis")
	hist, err := db.Trail.History(ctx, "key", strconv.FormatInt(rec.ID, 10), 0)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, audit.OutcomeApplied, hist[0].Outcome)
	require.Equal(t, ops.OutcomeIntent, hist[1].Outcome)

	// A stop between an intent and its outcome: the intent alone.
	before, _ := json.Marshal(map[string]any{"id": stuck.ID, "version": stuck.Version})
	_, err = db.Trail.Append(ctx, audit.Entry{Actor: "ada", Role: "admin", Action: "key.confirm_happened", TargetKind: "key",
		TargetID: strconv.FormatInt(stuck.ID, 10), Reason: "the provider shows it", Before: before,
		After: json.RawMessage(`{"action":"confirm_happened","external_ref":"ch_9"}`), Outcome: ops.OutcomeIntent})
	require.NoError(t, err)
	db.Close()

	db = open() // the next start resolves it
	defer db.Close()
	hist, err = db.Trail.History(ctx, "key", strconv.FormatInt(stuck.ID, 10), 0)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, audit.OutcomeConflict, hist[0].Outcome, "not applied: the record is at the intent's version")
	require.Equal(t, ops.ResolverActor, hist[0].Actor)
}

// TestServeRedisKeys: serve starts with --keys on a usable server and
// refuses one that may evict records or lose acknowledged writes (unless
// durability=risk), or a URL it cannot use, naming why.
func TestServeRedisKeys(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "serve.db")
	env := map[string]string{"UNSTUCK_DB": db, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_AUDIT_KEY": testAuditKey}

	lru := redistest.StartServer(t, "--maxmemory-policy", "allkeys-lru")
	_, _, err := runConsole(t, env, "serve", "--addr", "127.0.0.1:0", "--keys", "redis://"+lru.Addr)
	require.ErrorContains(t, err, "maxmemory-policy allkeys-lru")
	// A server that may lose acknowledged writes in a crash: refused,
	// naming the setting and the URL's parameter; accepted with it, with
	// a warning.
	everysec := redistest.StartServer(t, "--appendfsync", "everysec")
	_, _, err = runConsole(t, env, "serve", "--addr", "127.0.0.1:0", "--keys", "redis://"+everysec.Addr)
	require.ErrorContains(t, err, "appendfsync is everysec")
	require.ErrorContains(t, err, "durability=risk accepts the risk")
	_, _, err = runConsole(t, env, "serve", "--addr", "127.0.0.1:0", "--keys", "redis://"+everysec.Addr+"?durability=maybe")
	require.ErrorContains(t, err, `durability="maybe": use risk`)
	var logs strings.Builder
	s, closeRedis, err := openRedisKeys(t.Context(), "redis://"+everysec.Addr+"?durability=risk&prefix=risk:", slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	require.Equal(t, "risk:", s.Prefix())
	closeRedis()
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "appendfsync is everysec")

	_, _, err = runConsole(t, env, "serve", "--addr", "127.0.0.1:0", "--keys", "memcached://u:secret@host")
	require.ErrorContains(t, err, "--keys must start with redis://")
	require.NotContains(t, err.Error(), "secret")

	env["UNSTUCK_KEYS"] = "redis://" + redistest.Server(t) + "?prefix=serve" + rand.Text()[:8] + ":"
	base, stop := startServe(t, env)
	resp, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	stop()
}
