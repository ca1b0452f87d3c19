//go:build unix

package idempgx

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/benchfloor"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// The benchmarks of this file put idem.Run on this store side by side with
// the LIMIT: the least work PostgreSQL can do for the same outcome, through
// the same pgx pool configuration (whose statement cache prepares every
// statement), without the engine or the store. For a first run that is a raw
// pair of statements: an INSERT of a processing record with a fence from the
// sequence, RETURNING its id, and an UPDATE by id that stores the result.
// For a replay it is one prepared SELECT by digest of what a replay needs
// (status, fingerprint, result). Each round (UNSTUCK_BENCH_ROUNDS, see
// idem/internal/benchround) runs the engine and the limit in alternating order,
// every measured invocation on a fresh schema. They only report; nothing
// fails on timing. Besides ns/op they report cpu-ns/op, the CPU time of this
// process per operation: the client side only, the server's work is not in
// it. The file is built on unix only, for getrusage. See BENCHMARKS.md for
// the commands and the ratios of each round.

// benchGoroutines are the concurrency levels measured. The goroutines are
// started by hand (see benchround.Parallel), so the count is exact whatever
// GOMAXPROCS is.
var benchGoroutines = []int{1, 8}

// benchPoolConns is the pool size of every benchmark: at least one
// connection per goroutine, so no goroutine waits for the pool.
const benchPoolConns = 8

// benchStatsRecords is how many records a benchmark's table holds when it
// is analyzed, before the clock runs.
const benchStatsRecords = 200

// benchReplayKeys is how many completed keys the replay benchmarks cycle
// through.
const benchReplayKeys = 256

const (
	benchScope = "bench-tenant"
	// benchOwner stands for the owner token of the limit: as long as the
	// engine's uuid, but made once.
	benchOwner = "00000000-0000-4000-8000-000000000000"
)

// benchResult is the callback's value: a small struct, as a payment call
// would return.
type benchResult struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

var benchValue = benchResult{ID: "ch_3MqBv2LkdIwHu7ix", Amount: 4200, Currency: "eur"}

func benchCallback(context.Context) (benchResult, error) { return benchValue, nil }

// benchEnv is one migrated schema with a pool of benchPoolConns warm
// connections, an engine on it with the default configuration (sealing with
// a secret), and the length of the sealed envelope of benchValue.
type benchEnv struct {
	pool      *pgxpool.Pool
	engine    *idem.Engine
	sealedLen int
}

func newBenchEnv(b *testing.B) benchEnv {
	b.Helper()
	ctx := context.Background()
	// The schema's pool has pgxpool's default size, max(4, NumCPU): build
	// one with the same configuration and benchPoolConns connections.
	cfg := pgtest.Schema(b).Config()
	cfg.MaxConns = benchPoolConns
	cfg.MinConns = benchPoolConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close) // runs before the schema is dropped
	store := New(pool)
	if err := store.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	// Open every connection now, not while the clock runs.
	conns := make([]*pgxpool.Conn, benchPoolConns)
	for i := range conns {
		if conns[i], err = pool.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range conns {
		c.Release()
	}
	secret := make([]byte, idem.MinSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		b.Fatal(err)
	}
	engine, err := idem.New(store, idem.Config{Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	// The limit writes a blob as long as the engine's envelope.
	if _, err := idem.Run(ctx, engine, "probe", benchScope, benchCallback, nil); err != nil {
		b.Fatal(err)
	}
	rec, ok, err := store.Get(ctx, idemdriver.Ident{Scope: benchScope, Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest(benchScope, idem.DefaultOperation, "probe")})
	if err != nil || !ok {
		b.Fatalf("read probe: ok %v, %v", ok, err)
	}
	// Statistics, as autovacuum gathers on a live table within its first
	// minute: benchStatsRecords records, then ANALYZE. Without them (a
	// table never analyzed, or analyzed while it held one record, which
	// makes every column look unique) PostgreSQL may plan the look-up by
	// ident of Reserve and of the owner writes on the console's operation
	// index, and each connection keeps that plan for its prepared
	// statement while the table grows: a scan that lengthens with every
	// record (BENCHMARKS.md, "A table without statistics"). Both variants
	// run on the same analyzed table shape; the limit's statements read by
	// primary key and would not notice.
	for i := range benchStatsRecords {
		if _, err := idem.Run(ctx, engine, "stats-"+strconv.Itoa(i), benchScope, benchCallback, nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE unstuck_idem_record"); err != nil {
		b.Fatal(err)
	}
	return benchEnv{pool: pool, engine: engine, sealedLen: len(rec.Result)}
}

// limitInsertSQL and limitCompleteSQL are the limit of a first run: the
// record with a fence from the sequence, then its result by id.
const (
	limitInsertSQL = `INSERT INTO unstuck_idem_record (scope, operation, key_digest, status, owner_token, fence,
    lease_expires_at, created_at, updated_at, expires_at)
VALUES ($1, $2, $3, 'processing', $4, nextval('unstuck_idem_fence_seq'),
    now() + interval '1 minute', now(), now(), now() + interval '1 day')
RETURNING id`
	limitCompleteSQL = `UPDATE unstuck_idem_record SET status = 'completed', result = $2, lease_expires_at = NULL
WHERE id = $1`
	// limitReplaySQL is the limit of a replay: what it needs, by digest.
	limitReplaySQL = `SELECT status, fingerprint, result FROM unstuck_idem_record
WHERE scope = $1 AND operation = $2 AND key_digest = $3`
)

// BenchmarkRunFirst measures a first run: idem.Run on a new key, which
// reserves it (while most keys are new, as here, one statement that reads
// and inserts on a miss, reserveLeanSQL), calls back and completes it
// (UPDATE) with the sealed result, against the limit's INSERT and UPDATE.
func BenchmarkRunFirst(b *testing.B) {
	for _, g := range benchGoroutines {
		benchround.RunVariants(b, g, benchround.Variant{Name: "engine", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			prefix := "first-" + benchfloor.RandomHex() + "-"
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, prefix+strconv.Itoa(i), benchScope, benchCallback, nil)
				if err == nil && res.Replayed {
					err = errors.New("first run replayed")
				}
				return err
			})
		}}, benchround.Variant{Name: "limit", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			blob := make([]byte, env.sealedLen)
			prefix := benchfloor.RandomHex()
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				return limitFirst(ctx, env.pool, benchfloor.NumberedDigest(prefix, i), benchOwner, func() ([]byte, error) { return blob, nil })
			})
		}}, benchround.Variant{Name: "floor", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			f := benchfloor.NewTB(b)
			prefix := "floor-" + benchfloor.RandomHex() + "-"
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				return floorFirst(ctx, env.pool, f, prefix+strconv.Itoa(i))
			})
		}})
	}
}

// limitFirst is the limit of a first run of digest under owner token,
// storing what result returns between the insert and the update.
func limitFirst(ctx context.Context, pool *pgxpool.Pool, digest, token string, result func() ([]byte, error)) error {
	var id int64
	if err := pool.QueryRow(ctx, limitInsertSQL, benchScope, idem.DefaultOperation, digest, token).Scan(&id); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	blob, err := result()
	if err != nil {
		return fmt.Errorf("result: %w", err)
	}
	tag, err := pool.Exec(ctx, limitCompleteSQL, id, blob)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return errors.New("complete: no row")
	}
	return nil
}

// floorFirst is the floor of a first run of key: the limit's statements
// with the client work of the contract (see idem/internal/benchfloor).
func floorFirst(ctx context.Context, pool *pgxpool.Pool, f *benchfloor.Floor, key string) error {
	var v benchResult
	err := f.First(benchScope, idem.DefaultOperation, key, func() (any, error) { return benchCallback(ctx) }, &v,
		func(digest, token string, result func() ([]byte, error)) error {
			return limitFirst(ctx, pool, digest, token, result)
		})
	if err == nil && v != benchValue {
		err = fmt.Errorf("floor first: round trip %+v", v)
	}
	return err
}

// limitReplay reads what the limit of a replay reads for digest.
func limitReplay(ctx context.Context, pool *pgxpool.Pool, digest string) ([]byte, error) {
	var status, fp string
	var result []byte
	if err := pool.QueryRow(ctx, limitReplaySQL, benchScope, idem.DefaultOperation, digest).Scan(&status, &fp, &result); err != nil {
		return nil, fmt.Errorf("select: %w", err)
	}
	if status != string(idemdriver.StatusCompleted) || len(result) == 0 {
		return nil, fmt.Errorf("select: status %q, %d bytes", status, len(result))
	}
	return result, nil
}

// BenchmarkRunReplay measures a replay: idem.Run on a key completed
// beforehand. The store's Reserve finds the record with one SELECT (once
// repeats make up most of its traffic, here after 32; see leanCosts); the
// engine decides, opens the envelope and decodes the JSON. The limit is
// one prepared SELECT of status, fingerprint and result by digest.
func BenchmarkRunReplay(b *testing.B) {
	// completed runs the engine on benchReplayKeys new keys and returns
	// the keys and their digests.
	completed := func(b *testing.B, env benchEnv) (keys, digests []string) {
		prefix := "replay-" + benchfloor.RandomHex() + "-"
		keys = make([]string, benchReplayKeys)
		digests = make([]string, benchReplayKeys)
		for i := range keys {
			keys[i] = prefix + strconv.Itoa(i)
			digests[i] = idem.Digest(benchScope, idem.DefaultOperation, keys[i])
		}
		var wg sync.WaitGroup
		errs := make([]error, benchPoolConns)
		for w := range benchPoolConns {
			wg.Go(func() {
				for i := w; i < len(keys); i += benchPoolConns {
					if _, err := idem.Run(context.Background(), env.engine, keys[i], benchScope, benchCallback, nil); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		return keys, digests
	}
	for _, g := range benchGoroutines {
		benchround.RunVariants(b, g, benchround.Variant{Name: "engine", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			keys, _ := completed(b, env)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, keys[i%len(keys)], benchScope, benchCallback, nil)
				if err == nil && !res.Replayed {
					err = errors.New("replay ran the callback")
				}
				return err
			})
		}}, benchround.Variant{Name: "limit", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			_, digests := completed(b, env)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				_, err := limitReplay(ctx, env.pool, digests[i%len(digests)])
				return err
			})
		}}, benchround.Variant{Name: "floor", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			f := benchfloor.NewTB(b)
			prefix := "floor-" + benchfloor.RandomHex() + "-"
			keys := make([]string, benchReplayKeys)
			for i := range keys {
				keys[i] = prefix + strconv.Itoa(i)
				if err := floorFirst(context.Background(), env.pool, f, keys[i]); err != nil {
					b.Fatal(err)
				}
			}
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				var v benchResult
				if err := f.Replay(benchScope, idem.DefaultOperation, keys[i%len(keys)], func(digest string) ([]byte, error) {
					return limitReplay(ctx, env.pool, digest)
				}, &v); err != nil {
					return err
				}
				if v != benchValue {
					return fmt.Errorf("floor replay: %+v", v)
				}
				return nil
			})
		}})
	}
}
