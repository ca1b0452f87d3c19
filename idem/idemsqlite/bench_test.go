//go:build unix

package idemsqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/benchfloor"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
)

// The benchmarks of this file put idem.Run on this store side by side with
// the LIMIT: the least work SQLite can do for the same outcome, through
// database/sql on a handle from the same Open, without the engine or the
// store. For a first run that is a prepared INSERT … RETURNING of a
// processing record, with a fence from an in-process counter, and a prepared
// UPDATE by id that stores the result, each on one writer (a semaphore of
// one, as SQLite has one writer). For a replay it is one prepared SELECT by
// digest of what a replay needs (status, fingerprint, result). Each round
// (UNSTUCK_BENCH_ROUNDS, see idem/internal/benchround) runs the engine and the
// limit in alternating order, every measured invocation on a fresh database
// file. They only report; nothing fails on timing. Besides ns/op they report
// cpu-ns/op, the CPU time of the process per operation, SQLite's work
// included. The file is built on unix only, for getrusage. See BENCHMARKS.md
// for the commands and the ratios of each round.

// benchGoroutines are the concurrency levels measured. The goroutines are
// started by hand (see benchround.Parallel), so the count is exact whatever
// GOMAXPROCS is.
var benchGoroutines = []int{1, 8}

// benchReplayKeys is how many completed keys the replay benchmarks cycle
// through.
const benchReplayKeys = 256

const (
	benchScope = "bench-tenant"
	// benchOwner stands for the owner token of the limit: as long as the
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

// The limit's statements.
const (
	limitInsert = `INSERT INTO unstuck_idem_record (scope, operation, key_digest, status, owner_token, fence,
    lease_expires_at, created_at, updated_at, expires_at)
VALUES (?, ?, ?, 'processing', ?, ?, ?, ?, ?, ?)
RETURNING id`
	limitComplete = `UPDATE unstuck_idem_record SET status = 'completed', result = ?, lease_expires_at = NULL,
    updated_at = ? WHERE id = ?`
	limitReplay = `SELECT status, fingerprint, result FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?`
)

// benchLimit holds the limit's prepared statements, its writer semaphore
// and its fence counter.
type benchLimit struct {
	insert, complete, replay *sql.Stmt
	writer                   chan struct{}
	fence                    atomic.Int64
}

func newBenchLimit(b *testing.B, db *sql.DB) *benchLimit {
	b.Helper()
	l := &benchLimit{writer: make(chan struct{}, 1)}
	l.insert, l.complete, l.replay = prepare(b, db, limitInsert), prepare(b, db, limitComplete), prepare(b, db, limitReplay)
	l.fence.Store(1 << 40) // above the engine's fences in the same file
	return l
}

// prepare prepares query on db for the benchmark's duration.
func prepare(b *testing.B, db *sql.DB, query string) *sql.Stmt {
	b.Helper()
	st, err := db.PrepareContext(context.Background(), query)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// first is the limit of a first run of digest.
func (l *benchLimit) first(ctx context.Context, digest string, blob []byte) error {
	return l.firstAs(ctx, digest, benchOwner, func() ([]byte, error) { return blob, nil })
}

// firstAs is first under owner token, storing what result returns between
// the insert and the update (the floor seals the callback's value there).
func (l *benchLimit) firstAs(ctx context.Context, digest, token string, result func() ([]byte, error)) error {
	now := time.Now().UnixMicro()
	var id int64
	l.writer <- struct{}{}
	err := l.insert.QueryRowContext(ctx, benchScope, idem.DefaultOperation, digest, token, l.fence.Add(1),
		now+benchLease.Microseconds(), now, now, now+benchTTL.Microseconds()).Scan(&id)
	<-l.writer
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	blob, err := result()
	if err != nil {
		return fmt.Errorf("result: %w", err)
	}
	l.writer <- struct{}{}
	res, err := l.complete.ExecContext(ctx, blob, time.Now().UnixMicro(), id)
	<-l.writer
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v", n, err)
	}
	return nil
}

// floorFirst is the floor of a first run of key: the limit's statements
// with the client work of the contract (see idem/internal/benchfloor).
func (l *benchLimit) floorFirst(ctx context.Context, f *benchfloor.Floor, key string) error {
	var v benchResult
	err := f.First(benchScope, idem.DefaultOperation, key, func() (any, error) { return benchCallback(ctx) }, &v,
		func(digest, token string, result func() ([]byte, error)) error {
			return l.firstAs(ctx, digest, token, result)
		})
	if err == nil && v != benchValue {
		err = fmt.Errorf("floor first: round trip %+v", v)
	}
	return err
}

// replayed reads what the limit of a replay reads for digest.
func (l *benchLimit) replayed(ctx context.Context, digest string) ([]byte, error) {
	var status, fp string
	var result []byte
	if err := l.replay.QueryRowContext(ctx, benchScope, idem.DefaultOperation, digest).Scan(&status, &fp, &result); err != nil {
		return nil, fmt.Errorf("select: %w", err)
	}
	if status != string(idemdriver.StatusCompleted) || len(result) == 0 {
		return nil, fmt.Errorf("select: status %q, %d bytes", status, len(result))
	}
	return result, nil
}

// BenchmarkRunFirst measures a first run: idem.Run on a new key, which
// reserves it (a prepared read that misses, then one prepared INSERT …
// RETURNING), calls back and completes it (a prepared UPDATE) with the
// sealed result, against the limit's INSERT and UPDATE.
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
			l := newBenchLimit(b, env.db)
			blob := make([]byte, env.sealedLen)
			prefix := benchfloor.RandomHex()
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				return l.first(ctx, benchfloor.NumberedDigest(prefix, i), blob)
			})
		}}, benchround.Variant{Name: "floor", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			l := newBenchLimit(b, env.db)
			f := benchfloor.NewTB(b)
			prefix := "floor-" + benchfloor.RandomHex() + "-"
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				return l.floorFirst(ctx, f, prefix+strconv.Itoa(i))
			})
		}})
	}
}

// BenchmarkRunReplay measures a replay: idem.Run on a key completed
// beforehand. The store's Reserve finds the record with one prepared read
// and takes no lock; the engine decides, opens the envelope and decodes
// the JSON. The limit is one prepared SELECT of status, fingerprint and
// result by digest.
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
			if _, err := idem.Run(context.Background(), env.engine, keys[i], benchScope, benchCallback, nil); err != nil {
				b.Fatal(err)
			}
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
			l := newBenchLimit(b, env.db)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				_, err := l.replayed(ctx, digests[i%len(digests)])
				return err
			})
		}}, benchround.Variant{Name: "floor", Fn: func(b *testing.B) {
			env := newBenchEnv(b)
			l := newBenchLimit(b, env.db)
			f := benchfloor.NewTB(b)
			prefix := "floor-" + benchfloor.RandomHex() + "-"
			keys := make([]string, benchReplayKeys)
			for i := range keys {
				keys[i] = prefix + strconv.Itoa(i)
				if err := l.floorFirst(context.Background(), f, keys[i]); err != nil {
					b.Fatal(err)
				}
			}
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				var v benchResult
				if err := f.Replay(benchScope, idem.DefaultOperation, keys[i%len(keys)], func(digest string) ([]byte, error) {
					return l.replayed(ctx, digest)
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
