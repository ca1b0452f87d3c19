//go:build unix

package pgxv5

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/pgtest"
)

// The benchmarks of this file put idem.Run on this store side by side with
// a baseline that sends the same SQL statements, with the same parameters,
// through the same pgx pool configuration, but without the engine: no key
// digest, no owner uuid, no decision, no sealing, no JSON. Every measured
// invocation gets a fresh schema, so the engine and the baseline start from
// the same empty table. They only report; nothing fails on timing. Besides
// ns/op they report cpu-ns/op, the CPU time of this process per operation:
// the client side only, the server's work is not in it. The file is built
// on unix only, for getrusage. See BENCHMARKS.md for the commands and the
// figures.

// benchGoroutines are the concurrency levels measured. The goroutines are
// started by hand (see benchParallel), so the count is exact whatever
// GOMAXPROCS is.
var benchGoroutines = []int{1, 8}

// benchPoolConns is the pool size of every benchmark: at least one
// connection per goroutine, so no goroutine waits for the pool.
const benchPoolConns = 8

// benchReplayKeys is how many completed keys the replay benchmarks cycle
// through.
const benchReplayKeys = 256

const (
	benchScope = "bench-tenant"
	// benchOwner stands for the owner token of the baseline: as long as the
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
	engine, err := idem.New(store, idem.WithSecret(secret))
	if err != nil {
		b.Fatal(err)
	}
	// The baseline writes a blob as long as the engine's envelope.
	if _, err := idem.Run(ctx, engine, "probe", benchScope, benchCallback); err != nil {
		b.Fatal(err)
	}
	rec, ok, err := store.Get(ctx, idem.Ident{Scope: benchScope, Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest(benchScope, idem.DefaultOperation, "probe")})
	if err != nil || !ok {
		b.Fatalf("read probe: ok %v, %v", ok, err)
	}
	return benchEnv{pool: pool, engine: engine, sealedLen: len(rec.Result)}
}

// benchParallel runs op b.N times in total on exactly g goroutines, which
// take indexes 0..b.N-1 from a shared counter. The first error stops the
// benchmark.
func benchParallel(b *testing.B, g int, op func(ctx context.Context, i int) error) {
	b.Helper()
	ctx := context.Background()
	var (
		next   atomic.Int64
		failed atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		first  error
	)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchCPUTime()
	for range g {
		wg.Go(func() {
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(ctx, int(i)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(benchCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// benchCPUTime returns the user and system CPU time this process has used
// so far, on all its threads. Per operation it is a measure of cost that
// other load on the machine disturbs much less than the elapsed time.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPrefix returns 48 random hex digits, the fixed part of the key
// digests of one baseline invocation.
func benchPrefix(b *testing.B) string {
	var r [24]byte
	if _, err := rand.Read(r[:]); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(r[:])
}

// benchDigest returns a 64-digit key digest unique to i: prefix followed by
// i in 16 hex digits.
func benchDigest(prefix string, i int) string {
	var buf [64]byte
	var n [8]byte
	copy(buf[:48], prefix)
	binary.BigEndian.PutUint64(n[:], uint64(i))
	hex.Encode(buf[48:], n[:])
	return string(buf[:])
}

// benchRow receives the columns scanned by scanRecord, with the same
// destination types, without turning them into an idem.Record.
type benchRow struct {
	id                                   int64
	scope, operation, keyDigest, fp      string
	status                               string
	result                               []byte
	responseCode                         int
	correlationID, externalRef           string
	resourceIDs                          []string
	lastError, owner                     string
	fence                                int64
	lease                                *time.Time
	attempts                             int
	version                              int64
	createdAt, updatedAt, expiresAt, now time.Time
}

func (r *benchRow) scan(row pgx.Row) error {
	return row.Scan(&r.id, &r.scope, &r.operation, &r.keyDigest, &r.fp, &r.status, &r.result,
		&r.responseCode, &r.correlationID, &r.externalRef, &r.resourceIDs, &r.lastError,
		&r.owner, &r.fence, &r.lease, &r.attempts, &r.version,
		&r.createdAt, &r.updatedAt, &r.expiresAt, &r.now)
}

// The parameters the engine passes by default: lease 60 s, TTL 24 h, no
// fingerprint, the database's clock.
var (
	benchLease = idem.DefaultLease.Microseconds()
	benchTTL   = idem.DefaultTTL.Microseconds()
)

// BenchmarkRunFirst measures a first run: idem.Run on a new key, which
// reserves it (INSERT … RETURNING), calls back and completes it (UPDATE)
// with the sealed result. The baseline sends the same two statements.
func BenchmarkRunFirst(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run("engine/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			prefix := "first-" + benchPrefix(b) + "-"
			benchParallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, prefix+strconv.Itoa(i), benchScope, benchCallback)
				if err == nil && res.Replayed {
					err = errors.New("first run replayed")
				}
				return err
			})
		})
		b.Run("baseline/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			blob := make([]byte, env.sealedLen)
			prefix := benchPrefix(b)
			benchParallel(b, g, func(ctx context.Context, i int) error {
				digest := benchDigest(prefix, i)
				var r benchRow
				if err := r.scan(env.pool.QueryRow(ctx, reserveSQL,
					benchScope, idem.DefaultOperation, digest, "", benchOwner,
					benchLease, benchTTL, nil)); err != nil {
					return fmt.Errorf("reserve: %w", err)
				}
				tag, err := env.pool.Exec(ctx, completeSQL,
					benchScope, idem.DefaultOperation, digest, r.owner, r.fence,
					string(idem.StatusCompleted), blob, 0, "", nil)
				if err != nil {
					return fmt.Errorf("complete: %w", err)
				}
				if tag.RowsAffected() != 1 {
					return errors.New("complete: no row")
				}
				return nil
			})
		})
	}
}

// BenchmarkRunReplay measures a replay: idem.Run on a key completed
// beforehand. The store's Reserve meets the record (INSERT … ON CONFLICT DO
// NOTHING returns no row) and reads it (SELECT); the engine decides, opens
// the envelope and decodes the JSON. The baseline sends the same two
// statements and scans the same columns.
func BenchmarkRunReplay(b *testing.B) {
	// completed runs the engine on benchReplayKeys new keys and returns
	// the keys and their digests.
	completed := func(b *testing.B, env benchEnv) (keys, digests []string) {
		prefix := "replay-" + benchPrefix(b) + "-"
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
					if _, err := idem.Run(context.Background(), env.engine, keys[i], benchScope, benchCallback); err != nil {
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
		b.Run("engine/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			keys, _ := completed(b, env)
			benchParallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, keys[i%len(keys)], benchScope, benchCallback)
				if err == nil && !res.Replayed {
					err = errors.New("replay ran the callback")
				}
				return err
			})
		})
		b.Run("baseline/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			_, digests := completed(b, env)
			benchParallel(b, g, func(ctx context.Context, i int) error {
				digest := digests[i%len(digests)]
				var r benchRow
				err := r.scan(env.pool.QueryRow(ctx, reserveSQL,
					benchScope, idem.DefaultOperation, digest, "", benchOwner,
					benchLease, benchTTL, nil))
				if !errors.Is(err, pgx.ErrNoRows) {
					return fmt.Errorf("reserve: want no row, got %v", err)
				}
				if err := r.scan(env.pool.QueryRow(ctx, getSQL,
					benchScope, idem.DefaultOperation, digest, nil)); err != nil {
					return fmt.Errorf("get: %w", err)
				}
				if r.status != string(idem.StatusCompleted) {
					return fmt.Errorf("get: status %q", r.status)
				}
				return nil
			})
		})
	}
}
