//go:build unix

package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
)

// The benchmarks of this file put idem.Run on this store side by side with
// a baseline that sends the same SQL statements, in the same transactions
// and with the same parameters, through database/sql on a handle from the
// same Open, but without the engine: no key digest, no owner uuid, no
// decision, no sealing, no JSON. The baseline copies the store's way of
// issuing them: the read of the key prepared on the pool, writers queued on
// a semaphore of one, the reservation in BEGIN IMMEDIATE. Every measured
// invocation gets a fresh database file, so the engine and the baseline
// start from the same empty table. They only report; nothing fails on
// timing. Besides ns/op they report cpu-ns/op, the CPU time of the process
// per operation, SQLite's work included. The file is built on unix only,
// for getrusage. See BENCHMARKS.md for the commands and the figures.

// benchGoroutines are the concurrency levels measured. The goroutines are
// started by hand (see benchParallel), so the count is exact whatever
// GOMAXPROCS is.
var benchGoroutines = []int{1, 8}

// benchReplayKeys is how many completed keys the replay benchmarks cycle
// through.
const benchReplayKeys = 256

const (
	benchScope = "bench-tenant"
	// benchOwner stands for the owner token of the baseline: as long as the
	// engine's uuid, but made once.
	benchOwner = "00000000-0000-4000-8000-000000000000"
	benchLease = idem.DefaultLease
	benchTTL   = idem.DefaultTTL
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

// benchEnv is one migrated database file opened with Open (WAL,
// synchronous NORMAL), an engine on it with the default configuration
// (sealing with a secret), and the length of the sealed envelope of
// benchValue.
type benchEnv struct {
	db        *sql.DB
	engine    *idem.Engine
	sealedLen int
}

func newBenchEnv(b *testing.B) benchEnv {
	b.Helper()
	ctx := context.Background()
	db, err := Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	store := New(db)
	if err := store.Migrate(ctx); err != nil {
		b.Fatal(err)
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
	// Open every connection of the pool now, not while the clock runs.
	conns := make([]*sql.Conn, db.Stats().MaxOpenConnections)
	for i := range conns {
		if conns[i], err = db.Conn(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return benchEnv{db: db, engine: engine, sealedLen: len(rec.Result)}
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
	id                              int64
	scope, operation, keyDigest, fp string
	status, resourceIDs             string
	result                          sql.Null[[]byte]
	responseCode, attempts          int64
	correlationID, externalRef      string
	lastError, owner                string
	fence, version                  int64
	lease                           sql.NullInt64
	createdAt, updatedAt, expiresAt int64
}

func (r *benchRow) scan(row *sql.Row) error {
	return row.Scan(&r.id, &r.scope, &r.operation, &r.keyDigest, &r.fp,
		&r.status, &r.result, &r.responseCode, &r.correlationID, &r.externalRef, &r.resourceIDs,
		&r.lastError, &r.owner, &r.fence, &r.lease, &r.attempts, &r.version,
		&r.createdAt, &r.updatedAt, &r.expiresAt)
}

// benchBaseline issues the store's statements by hand: the read of a key
// prepared on the pool, and writes queued on a semaphore of one, as the
// store queues them.
type benchBaseline struct {
	db     *sql.DB
	get    *sql.Stmt
	writer chan struct{}
}

func newBenchBaseline(b *testing.B, db *sql.DB) *benchBaseline {
	b.Helper()
	st, err := db.PrepareContext(context.Background(), queryGet)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return &benchBaseline{db: db, get: st, writer: make(chan struct{}, 1)}
}

// lookup reads digest with the prepared statement; ok is false when there
// is no record.
func (bl *benchBaseline) lookup(ctx context.Context, digest string, r *benchRow) (bool, error) {
	err := r.scan(bl.get.QueryRowContext(ctx, benchScope, idem.DefaultOperation, digest))
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// reserve is the store's Reserve of a new key: a lookup, then under the
// writer semaphore a second lookup and BEGIN IMMEDIATE, a read of the key,
// the next fence, the insert, COMMIT.
func (bl *benchBaseline) reserve(ctx context.Context, digest string, now int64, r *benchRow) error {
	if ok, err := bl.lookup(ctx, digest, r); ok || err != nil {
		return fmt.Errorf("lookup: found %v, %v", ok, err)
	}
	bl.writer <- struct{}{}
	defer func() { <-bl.writer }()
	if ok, err := bl.lookup(ctx, digest, r); ok || err != nil {
		return fmt.Errorf("lookup again: found %v, %v", ok, err)
	}
	conn, err := bl.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	err = func() error {
		err := r.scan(conn.QueryRowContext(ctx, queryGet, benchScope, idem.DefaultOperation, digest))
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("get: want no row, got %v", err)
		}
		var fence int64
		if err := conn.QueryRowContext(ctx, queryNextFence).Scan(&fence); err != nil {
			return err
		}
		return r.scan(conn.QueryRowContext(ctx, queryInsert,
			benchScope, idem.DefaultOperation, digest, "", benchOwner, fence,
			now+benchLease.Microseconds(), now, now+max(benchTTL, benchLease).Microseconds()))
	}()
	if err != nil {
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

// complete is the store's Complete: one UPDATE under the writer semaphore.
func (bl *benchBaseline) complete(ctx context.Context, digest string, fence int64, blob []byte) error {
	bl.writer <- struct{}{}
	defer func() { <-bl.writer }()
	res, err := bl.db.ExecContext(ctx, queryComplete,
		string(idem.StatusCompleted), blob, int64(0), "", time.Now().UnixMicro(),
		benchScope, idem.DefaultOperation, digest, benchOwner, fence)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v", n, err)
	}
	return nil
}

// BenchmarkRunFirst measures a first run: idem.Run on a new key, which
// reserves it (two lookups, then BEGIN IMMEDIATE, read, fence, INSERT,
// COMMIT), calls back and completes it (UPDATE) with the sealed result. The
// baseline sends the same statements.
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
			bl := newBenchBaseline(b, env.db)
			blob := make([]byte, env.sealedLen)
			prefix := benchPrefix(b)
			benchParallel(b, g, func(ctx context.Context, i int) error {
				digest := benchDigest(prefix, i)
				var r benchRow
				if err := bl.reserve(ctx, digest, time.Now().UnixMicro(), &r); err != nil {
					return fmt.Errorf("reserve: %w", err)
				}
				return bl.complete(ctx, digest, r.fence, blob)
			})
		})
	}
}

// BenchmarkRunReplay measures a replay: idem.Run on a key completed
// beforehand. The store's Reserve finds the record with one prepared read
// and takes no lock; the engine decides, opens the envelope and decodes
// the JSON. The baseline sends the same read and scans the same columns.
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
			if _, err := idem.Run(context.Background(), env.engine, keys[i], benchScope, benchCallback); err != nil {
				b.Fatal(err)
			}
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
			bl := newBenchBaseline(b, env.db)
			benchParallel(b, g, func(ctx context.Context, i int) error {
				var r benchRow
				ok, err := bl.lookup(ctx, digests[i%len(digests)], &r)
				if err != nil || !ok {
					return fmt.Errorf("lookup: found %v, %v", ok, err)
				}
				if r.status != string(idem.StatusCompleted) {
					return fmt.Errorf("lookup: status %q", r.status)
				}
				return nil
			})
		})
	}
}
