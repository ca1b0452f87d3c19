//go:build unix

package idemredis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
)

// The benchmarks of this file put idem.Run on this store side by side with
// the LIMIT: the least work Redis can do for the same outcome, through the
// same go-redis client, without the engine or the store. For a first run
// that is one SET … NX PX of a processing marker (insert-if-absent with a
// lease) and one SET of the result; for a replay one GET of a value as
// long as the stored envelope. Each round (UNSTUCK_BENCH_ROUNDS, see
// idem/internal/benchround) runs the engine and the limit in alternating order,
// on the process's throwaway server (BenchmarkRun…) or 3-master cluster
// (BenchmarkRun…Cluster), both without persistence (appendonly no, so
// the store runs with AcceptDurabilityRisk): the ratios are of the client's
// work. They only report; nothing fails on timing. See BENCHMARKS.md for
// the commands and the ratios.

var benchGoroutines = []int{1, 8}

const (
	benchScope      = "bench-tenant"
	benchReplayKeys = 256
)

type benchResult struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

var benchValue = benchResult{ID: "ch_3MqBv2LkdIwHu7ix", Amount: 4200, Currency: "eur"}

func benchCallback(context.Context) (benchResult, error) { return benchValue, nil }

// benchEnv is a store under a fresh prefix, an engine on it, and the
// length of the sealed envelope of benchValue.
type benchEnv struct {
	c         redis.UniversalClient
	prefix    string
	engine    *idem.Engine
	sealedLen int
}

func newBenchEnv(b *testing.B, c redis.UniversalClient) benchEnv {
	b.Helper()
	ctx := context.Background()
	p := prefix()
	s, err := idemredis.New(ctx, c, idemredis.Config{Prefix: p, AcceptDurabilityRisk: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	secret := make([]byte, idem.MinSecretBytes)
	_, _ = rand.Read(secret)
	e, err := idem.New(s, idem.Config{Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := idem.Run(ctx, e, "probe", benchScope, benchCallback, nil); err != nil {
		b.Fatal(err)
	}
	rec, ok, err := s.Get(ctx, idemdriver.Ident{Scope: benchScope, Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest(benchScope, idem.DefaultOperation, "probe")})
	if err != nil || !ok {
		b.Fatalf("read probe: ok %v, %v", ok, err)
	}
	return benchEnv{c: c, prefix: p, engine: e, sealedLen: len(rec.Result)}
}

// limitKey is the limit's key of key i: one hash tag per key, as the
// store's records.
func (env benchEnv) limitKey(i int) string { return env.prefix + "limit{" + strconv.Itoa(i) + "}" }

func benchFirst(b *testing.B, c redis.UniversalClient) {
	for _, g := range benchGoroutines {
		benchround.Run(b, g, func(b *testing.B) {
			env := newBenchEnv(b, c)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, "first-"+strconv.Itoa(i), benchScope, benchCallback, nil)
				if err == nil && res.Replayed {
					err = errors.New("first run replayed")
				}
				return err
			})
		}, func(b *testing.B) {
			env := newBenchEnv(b, c)
			blob := make([]byte, env.sealedLen)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				k := env.limitKey(i)
				ok, err := c.SetNX(ctx, k, "processing", idem.DefaultLease).Result()
				if err != nil || !ok {
					return fmt.Errorf("set nx: %v, %v", ok, err)
				}
				return c.Set(ctx, k, blob, idem.DefaultTTL).Err()
			})
		})
	}
}

func benchReplay(b *testing.B, c redis.UniversalClient) {
	for _, g := range benchGoroutines {
		benchround.Run(b, g, func(b *testing.B) {
			env := newBenchEnv(b, c)
			for i := range benchReplayKeys {
				if _, err := idem.Run(context.Background(), env.engine, "replay-"+strconv.Itoa(i), benchScope, benchCallback, nil); err != nil {
					b.Fatal(err)
				}
			}
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, "replay-"+strconv.Itoa(i%benchReplayKeys), benchScope, benchCallback, nil)
				if err == nil && !res.Replayed {
					err = errors.New("replay ran the callback")
				}
				return err
			})
		}, func(b *testing.B) {
			env := newBenchEnv(b, c)
			blob := make([]byte, env.sealedLen)
			for i := range benchReplayKeys {
				if err := c.Set(context.Background(), env.limitKey(i), blob, idem.DefaultTTL).Err(); err != nil {
					b.Fatal(err)
				}
			}
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				v, err := c.Get(ctx, env.limitKey(i%benchReplayKeys)).Bytes()
				if err != nil || len(v) != len(blob) {
					return fmt.Errorf("get: %d bytes, %v", len(v), err)
				}
				return nil
			})
		})
	}
}

// BenchmarkRunFirst: idem.Run on a new key (one script that reserves,
// then one that completes) against SET NX PX + SET, single server.
func BenchmarkRunFirst(b *testing.B) { benchFirst(b, volatileClient(b)) }

// BenchmarkRunReplay: idem.Run on a completed key (one script that finds
// the record) against one GET, single server.
func BenchmarkRunReplay(b *testing.B) { benchReplay(b, volatileClient(b)) }

// BenchmarkRunFirstCluster is BenchmarkRunFirst on the 3-master cluster,
// where a reservation takes 3 round trips (script, fence, index) and a
// completion 2 (script, index).
func BenchmarkRunFirstCluster(b *testing.B) { benchFirst(b, volatileClusterClient(b)) }

// BenchmarkRunReplayCluster is BenchmarkRunReplay on the cluster: still
// one script.
func BenchmarkRunReplayCluster(b *testing.B) { benchReplay(b, volatileClusterClient(b)) }

// volatileClient returns a client of the process's throwaway server
// without persistence.
func volatileClient(b *testing.B) *redis.Client {
	b.Helper()
	c := redis.NewClient(&redis.Options{Addr: redistest.VolatileServer(b)})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// volatileClusterClient returns a client of the process's throwaway
// 3-master cluster without persistence.
func volatileClusterClient(b *testing.B) *redis.ClusterClient {
	b.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.VolatileCluster(b).Addrs()})
	b.Cleanup(func() { _ = c.Close() })
	return c
}
