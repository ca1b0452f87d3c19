package idemredis_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

func TestMain(m *testing.M) { redistest.RunMain(m) }

// prefix returns a key prefix no other test uses.
func prefix() string { return "t" + rand.Text()[:12] + ":" }

// singleClient returns a client of the process's throwaway server.
func singleClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redistest.Server(t)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clusterClient returns a client of the process's throwaway 3-master
// cluster.
func clusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.SharedCluster(t).Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newStore returns a store under a fresh prefix on c.
// newStore returns a store on c with cfg, under a fresh prefix unless cfg
// sets one.
func newStore(t testing.TB, c redis.UniversalClient, cfg idemredis.Config) *idemredis.Store {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = prefix()
	}
	s, err := idemredis.New(context.Background(), c, cfg)
	require.NoError(t, err)
	return s
}

func TestConformanceSingle(t *testing.T) {
	t.Parallel()
	c := singleClient(t)
	idemtest.Run(t, func(t *testing.T) idemdriver.Store { return newStore(t, c, idemredis.Config{}) })
}

func TestAdminConformanceSingle(t *testing.T) {
	t.Parallel()
	c := singleClient(t)
	idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
		s := newStore(t, c, idemredis.Config{})
		return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
	})
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := clusterClient(t)
	idemtest.Run(t, func(t *testing.T) idemdriver.Store {
		s := newStore(t, c, idemredis.Config{})
		require.True(t, s.Cluster())
		return s
	})
}

func TestAdminConformanceCluster(t *testing.T) {
	t.Parallel()
	c := clusterClient(t)
	idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
		s := newStore(t, c, idemredis.Config{})
		return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
	})
}

// TestNewRefusesUnsafeServers: a server that can evict records, a cluster
// node reached by a plain client and a prefix with a hash tag are refused
// at start-up with an error that says what to change.
func TestNewRefusesUnsafeServers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	lru := redistest.StartServer(t, "--maxmemory-policy", "allkeys-lru")
	c := redis.NewClient(&redis.Options{Addr: lru.Addr})
	t.Cleanup(func() { _ = c.Close() })
	_, err := idemredis.New(ctx, c, idemredis.Config{})
	require.ErrorIs(t, err, idemredis.ErrUnsupported)
	require.ErrorContains(t, err, "maxmemory-policy allkeys-lru")
	require.ErrorContains(t, err, "noeviction")

	var logs bytes.Buffer
	s, err := idemredis.New(ctx, c, idemredis.Config{EvictionAllowed: true, Prefix: prefix(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err, "allowed explicitly")
	require.NotNil(t, s)
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "allkeys-lru")

	node := redis.NewClient(&redis.Options{Addr: redistest.SharedCluster(t).Masters[0].Addr})
	t.Cleanup(func() { _ = node.Close() })
	_, err = idemredis.New(ctx, node, idemredis.Config{})
	require.ErrorIs(t, err, idemredis.ErrUnsupported)
	require.ErrorContains(t, err, "NewClusterClient")

	_, err = idemredis.New(ctx, singleClient(t), idemredis.Config{Prefix: "a{b}:"})
	require.ErrorContains(t, err, "prefix")
}

// TestTransactionalModeRefused: the store is no TxStore, so the
// middleware's transactional mode refuses it when it is built.
func TestTransactionalModeRefused(t *testing.T) {
	t.Parallel()
	s := newStore(t, singleClient(t), idemredis.Config{})
	var _ idemdriver.Store = s
	_, isTx := any(s).(idemdriver.TxStore)
	require.False(t, isTx)
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	_, err = idem.NewMiddleware(e, idem.MiddlewareConfig{Transactional: true})
	require.ErrorContains(t, err, "Transactional needs a store that implements idemdriver.TxStore")
}

// TestOneSlotPerRecord: a record's hash carries a hash tag, so that each
// script touches one slot; the index keys share one slot of their own.
func TestOneSlotPerRecord(t *testing.T) {
	t.Parallel()
	c := clusterClient(t)
	p := prefix()
	s := newStore(t, c, idemredis.Config{Prefix: p})
	id := idemdriver.Ident{Scope: "tenant:{é}", Operation: "op\x00bin", KeyDigest: idem.Digest("s", "o", "k")}
	rec, created, err := s.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.True(t, created)
	var keys []string
	require.NoError(t, c.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error {
		k, err := m.Keys(ctx, p+"*").Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	}))
	slots := map[int64]bool{}
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, p))
		require.Contains(t, k, "{", "key %q has a hash tag", k)
		n, err := c.ClusterKeySlot(t.Context(), k).Result()
		require.NoError(t, err)
		slots[n] = true
	}
	require.Len(t, slots, 2, "one slot for the record, one for the indexes: %v", keys)
	got, ok, err := s.KeyByID(t.Context(), rec.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, id, got.Ident, "binary and Unicode idents round-trip")
}

var mu sync.Mutex

// TestValuesRoundTrip: binary results, Unicode and empty values are
// stored as given.
func TestValuesRoundTrip(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]redis.UniversalClient{"single": singleClient(t), "cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, c, idemredis.Config{})
			ctx := t.Context()
			id := idemdriver.Ident{Scope: "ünïcode ✓", Operation: "op", KeyDigest: idem.Digest("a", "b", "c")}
			rec, _, err := s.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: time.Hour})
			require.NoError(t, err)
			blob := []byte{0, 1, 2, 0xff, 0xfe, '\r', '\n', 0}
			require.NoError(t, s.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{ExternalRef: "ref ✓", ResourceIDs: []string{"a\"b", "ü/"}}))
			require.NoError(t, s.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{ResourceIDs: []string{"c"}}))
			require.NoError(t, s.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: blob, ResponseCode: 201}))
			got, ok, err := s.Get(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, blob, got.Result)
			require.Equal(t, "ref ✓", got.ExternalRef)
			require.Equal(t, []string{"a\"b", "ü/", "c"}, got.ResourceIDs)
		})
	}
}

// TestNativeExpiry: a finished record carries a native expiry at its
// retention end plus the grace; a processing or pending one none, so
// that Sweep can escalate it.
func TestNativeExpiry(t *testing.T) {
	t.Parallel()
	c := singleClient(t)
	p := prefix()
	s := newStore(t, c, idemredis.Config{Prefix: p, ExpiryGrace: time.Hour})
	ctx := t.Context()
	keyOf := func() string {
		k, err := c.Keys(ctx, p+"{*}").Result()
		require.NoError(t, err)
		var rec []string
		for _, x := range k {
			if !strings.Contains(x, "idx}") {
				rec = append(rec, x)
			}
		}
		require.Len(t, rec, 1)
		return rec[0]
	}
	id := idemdriver.Ident{Scope: "s", Operation: "o", KeyDigest: "d"}
	rec, _, err := s.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	k := keyOf()
	ttl, err := c.PTTL(ctx, k).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "processing: no native expiry")
	require.NoError(t, s.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusPending, LastError: "timeout"}))
	ttl, _ = c.PTTL(ctx, k).Result()
	require.Equal(t, time.Duration(-1), ttl, "pending: no native expiry")
	got, _, err := s.Get(ctx, id)
	require.NoError(t, err)
	_, _, err = s.Settle(ctx, id, idemdriver.Settlement{Version: got.Version, Status: idemdriver.StatusCompleted})
	require.NoError(t, err)
	ttl, _ = c.PTTL(ctx, k).Result()
	require.InDelta(t, (2 * time.Hour).Seconds(), ttl.Seconds(), 5, "finished: retention (1h) + grace (1h)")

	// Once Redis removed it, the overview no longer claims exact counts
	// for the finished statuses... (simulated: the key is gone, the
	// retention and grace have passed)
	s2 := newStore(t, c, idemredis.Config{ExpiryGrace: time.Millisecond})
	id2 := idemdriver.Ident{Scope: "s", Operation: "o", KeyDigest: "d2"}
	r2, _, err := s2.Reserve(ctx, idemdriver.ReserveParams{Ident: id2, Owner: "o", Lease: time.Millisecond, TTL: time.Millisecond, Now: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	require.NoError(t, s2.Complete(ctx, id2, r2.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r")}))
	_, ok, err := s2.Get(ctx, id2)
	require.NoError(t, err)
	require.False(t, ok, "expired natively")
	o, err := s2.KeyOverview(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), o.Count(idemdriver.StatusCompleted).Count, "the index still has it")
	require.False(t, o.Count(idemdriver.StatusCompleted).Exact, "an upper bound, flagged")
	require.True(t, o.Count(idemdriver.StatusPending).Exact, "pending records never expire natively")
	// ...until a read or a sweep repairs the index.
	page, err := s2.ListKeys(ctx, idemdriver.KeyFilter{})
	require.NoError(t, err)
	require.Empty(t, page.Records)
	o, err = s2.KeyOverview(ctx)
	require.NoError(t, err)
	require.Equal(t, idemdriver.StatusCount{Status: idemdriver.StatusCompleted, Exact: true}, o.Count(idemdriver.StatusCompleted))
}

// TestIndexRepairedOnRead: on a cluster an index step that never ran (a
// crash between the two steps) leaves the record unlisted until a read
// finds the entry stale; a record deleted behind the store's back is
// dropped from the index by the read that meets it.
func TestIndexRepairedOnRead(t *testing.T) {
	t.Parallel()
	c := clusterClient(t)
	p := prefix()
	s := newStore(t, c, idemredis.Config{Prefix: p})
	ctx := t.Context()
	old := time.Now().Add(-time.Hour)
	var recs []idemdriver.Record
	for i := range 3 {
		id := idemdriver.Ident{Scope: "s", Operation: "o", KeyDigest: fmt.Sprint("d", i)}
		r, _, err := s.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: 2 * time.Hour, Now: old})
		require.NoError(t, err)
		recs = append(recs, r)
	}
	// A write whose index step was lost: the record says completed, the
	// index still processing.
	rk := recordKey(t, c, p, recs[0].ID)
	require.NoError(t, c.HSet(ctx, rk, "st", "completed", "ua", strconv.FormatInt(old.Add(time.Second).UnixMicro(), 10)).Err())
	// A record gone behind the store's back.
	require.NoError(t, c.Del(ctx, recordKey(t, c, p, recs[1].ID)).Err())

	page, err := s.ListKeys(ctx, idemdriver.KeyFilter{Status: idemdriver.StatusProcessing})
	require.NoError(t, err)
	require.Equal(t, []int64{recs[2].ID}, ids(page.Records), "stale entries are not listed")
	page, err = s.ListKeys(ctx, idemdriver.KeyFilter{Status: idemdriver.StatusCompleted})
	require.NoError(t, err)
	require.Equal(t, []int64{recs[0].ID}, ids(page.Records), "repaired: listed where its record says")
	o, err := s.KeyOverview(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), o.Count(idemdriver.StatusProcessing).Count)
	require.Equal(t, int64(1), o.Count(idemdriver.StatusCompleted).Count)
}

func ids(recs []idemdriver.Record) []int64 {
	out := []int64{}
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

// recordKey finds the key of record id through the store's ID index.
func recordKey(t *testing.T, c redis.UniversalClient, p string, id int64) string {
	t.Helper()
	k, err := c.HGet(t.Context(), p+"{"+p+"idx}:k", strconv.FormatInt(id, 10)).Result()
	require.NoError(t, err)
	return k
}

// TestWaitNeedsReplicas: Config.WaitReplicas makes a write fail loudly when fewer
// replicas than asked acknowledged it.
func TestWaitNeedsReplicas(t *testing.T) {
	t.Parallel()
	s := newStore(t, singleClient(t), idemredis.Config{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	p := idemdriver.ReserveParams{Ident: idemdriver.Ident{Scope: "s", Operation: "o", KeyDigest: "d"},
		Owner: "o", Lease: time.Minute, TTL: time.Hour}
	_, _, err := s.Reserve(t.Context(), p)
	require.ErrorContains(t, err, "0 of 1 replicas acknowledged")
	// A call that writes nothing does not wait: a repeat (whole or lean)
	// and a read answer without replicas.
	for _, lean := range []bool{false, true} {
		p.Lean = lean
		_, created, err := s.Reserve(t.Context(), p)
		require.NoError(t, err, "lean %v", lean)
		require.False(t, created)
	}
	_, ok, err := s.Get(t.Context(), p.Ident)
	require.NoError(t, err)
	require.True(t, ok)
}

// TestFailoverKeepsAcknowledgedKeys: on a cluster of 3 masters with a
// replica each, a store with WaitReplicas 1 acknowledges a write once a
// replica has it; after a master is killed (-9) and its replica promoted,
// every acknowledged key still replays: none runs twice.
func TestFailoverKeepsAcknowledgedKeys(t *testing.T) {
	slowtest.Skip(t, slowtest.Fault)
	t.Parallel()
	t0 := time.Now()
	cl := redistest.StartCluster(t, 3, 1)
	t.Logf("cluster started in %s", time.Since(t0))
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), MaxRedirects: 16})
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	s := newStore(t, c, idemredis.Config{WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	t0 = time.Now()
	e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	runs := map[string]int{}
	do := func(key string) (string, error) {
		res, err := idem.Run(ctx, e, key, "tenant", func(ctx context.Context) (string, error) {
			runs[key]++
			return "done " + key, nil
		}, nil)
		return res.Value, err
	}
	var acked []string
	for i := range 60 {
		key := fmt.Sprint("key-", i)
		if _, err := do(key); err == nil {
			acked = append(acked, key)
		}
	}
	require.Len(t, acked, 60, "every write acknowledged before the failover")
	t.Logf("60 keys run in %s", time.Since(t0))

	t0 = time.Now()
	cl.Masters[0].Kill()
	cl.WaitFailover(t, cl.Masters[0])
	t.Logf("failover in %s", time.Since(t0))
	// A process that starts after the failover (the cluster client of a
	// running one learns the new map from its next errors, meanwhile
	// failing calls, never running a key again).
	c2 := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()[1:]})
	t.Cleanup(func() { _ = c2.Close() })
	s2, err := idemredis.New(ctx, c2, idemredis.Config{Prefix: s.Prefix(), WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	require.NoError(t, err)
	e, err = idem.New(s2, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	for _, key := range acked {
		out, err := do(key)
		require.NoError(t, err, key)
		if key == acked[0] {
			t.Logf("first replay after the failover at %s", time.Since(t0))
		}
		require.Equal(t, "done "+key, out)
		require.Equal(t, 1, runs[key], "key %s ran once", key)
	}
}

// TestBadInputSameAsSQL: keys, scopes and operations at and past their
// limits, binary and Unicode keys, and leases and TTLs of 0, negative or
// beyond the maximum get the same answer from the Redis store as from
// the SQL stores (SQLite here, as the reference that needs no server):
// the same validation error naming the same field, or the same success.
func TestBadInputSameAsSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	engines := map[string]*idem.Engine{}
	rs := newStore(t, singleClient(t), idemredis.Config{})
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "ref.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ss := idemsqlite.New(db)
	require.NoError(t, ss.Migrate(ctx))
	for name, s := range map[string]idemdriver.Store{"redis": rs, "sqlite": ss} {
		e, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
		require.NoError(t, err)
		engines[name] = e
	}
	long := strings.Repeat("k", idem.MaxKeyBytes)
	cases := []struct {
		name, key, scope string
		opts             *idem.RunOpts
		field            string // "" for success
	}{
		{"empty key", "", "s", nil, "key"},
		{"key at the limit", long, "s", nil, ""},
		{"key past the limit", long + "k", "s", nil, "key"},
		{"binary key", "\x00\xff\xfe{}\r\n", "s", nil, ""},
		{"unicode key and scope", "clé-✓-日本", "tenant:ü", nil, ""},
		{"empty scope", "k", "", nil, "scope"},
		{"scope past the limit", "k", strings.Repeat("s", idem.MaxScopeBytes+1), nil, "scope"},
		{"ttl 0 is the default", "k-ttl-0", "s", &idem.RunOpts{TTL: 0}, ""},
		{"ttl negative", "k", "s", &idem.RunOpts{TTL: -time.Hour}, "ttl"},
		{"ttl beyond the maximum", "k", "s", &idem.RunOpts{TTL: idem.MaxTTL + time.Second}, "ttl"},
		{"ttl at the maximum", "k-max", "s", &idem.RunOpts{TTL: idem.MaxTTL}, ""},
		{"lease 0 is the default", "k-lease-0", "s", &idem.RunOpts{Lease: 0}, ""},
		{"lease negative", "k", "s", &idem.RunOpts{Lease: -time.Second}, "lease"},
	}
	for _, c := range cases {
		answers := map[string]string{}
		for name, e := range engines {
			for i := range 2 { // the second call replays a success
				res, err := idem.Run(ctx, e, c.key, c.scope, func(context.Context) (string, error) { return fmt.Sprintf("v:%x", c.key), nil }, c.opts)
				if c.field == "" {
					require.NoError(t, err, "%s on %s", c.name, name)
					require.Equal(t, fmt.Sprintf("v:%x", c.key), res.Value)
					require.Equal(t, i == 1, res.Replayed, "%s on %s, call %d", c.name, name, i)
					continue
				}
				var ve *idem.ValidationError
				require.ErrorAs(t, err, &ve, "%s on %s", c.name, name)
				require.Equal(t, c.field, ve.Field, "%s on %s", c.name, name)
				answers[name] = err.Error()
			}
		}
		require.Equal(t, answers["sqlite"], answers["redis"], c.name)
	}
}
