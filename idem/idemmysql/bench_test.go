//go:build unix

package idemmysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
)

// The benchmarks of this file put idem.Run on this store side by side with
// the LIMIT: the least work MySQL can do for the same outcome, through
// database/sql on a handle from the same Open, without the engine or the
// store. For a first run that is a prepared INSERT of a processing record
// (its fence from an in-process counter, its id from the insert's result)
// and a prepared UPDATE by id that stores the result, each in autocommit.
// For a replay it is one prepared SELECT by digest of what a replay needs
// (status, fingerprint, result). Each round (UNSTUCK_BENCH_ROUNDS, see
// idem/internal/benchround) runs the engine and the limit in alternating order,
// every measured invocation on a fresh database. They only report; nothing
// fails on timing. cpu-ns/op is this process's CPU only (the server's work
// is not in it). See BENCHMARKS.md for the command and the ratios.

var benchGoroutines = []int{1, 8}

const (
	benchReplayKeys = 256
	benchScope      = "bench-tenant"
	benchOwner      = "00000000-0000-4000-8000-000000000000"
	benchLease      = idem.DefaultLease
	benchTTL        = idem.DefaultTTL
)

type benchResult struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

var benchValue = benchResult{ID: "ch_3MqBv2LkdIwHu7ix", Amount: 4200, Currency: "eur"}

func benchCallback(context.Context) (benchResult, error) { return benchValue, nil }

// benchEnv is one migrated database of its own opened with Open, an
// engine on it with the default configuration (sealing with a secret),
// and the length of the sealed envelope of benchValue.
type benchEnv struct {
	db        *sql.DB
	engine    *idem.Engine
	sealedLen int
}

func newBenchEnv(b *testing.B) benchEnv {
	b.Helper()
	ctx := context.Background()
	db, err := idemmysql.Open(mysqltest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	store := idemmysql.New(db)
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
	if _, err := idem.Run(ctx, engine, "probe", benchScope, benchCallback, nil); err != nil {
		b.Fatal(err)
	}
	rec, ok, err := store.Get(ctx, idemdriver.Ident{Scope: benchScope, Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest(benchScope, idem.DefaultOperation, "probe")})
	if err != nil || !ok {
		b.Fatalf("read probe: ok %v, %v", ok, err)
	}
	// Open the connections the benchmark will use now, not while the
	// clock runs.
	conns := make([]*sql.Conn, 16)
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
	limitInsert = `INSERT INTO unstuck_idem_record (scope, operation, key_digest, fingerprint, status, response_code,
    correlation_id, external_ref, resource_ids, last_error, owner_token, fence,
    lease_expires_at, attempts, version, created_at, updated_at, expires_at)
VALUES (?, ?, ?, '', 'processing', 0, '', '', '[]', '', ?, ?, ?, 1, 1, ?, ?, ?)`
	limitComplete = `UPDATE unstuck_idem_record SET status = 'completed', result = ?, lease_expires_at = NULL,
    updated_at = ? WHERE id = ?`
	limitReplay = `SELECT status, fingerprint, result FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?`
)

// benchLimit holds the limit's prepared statements and its fence counter.
type benchLimit struct {
	insert, complete, replay *sql.Stmt
	fence                    atomic.Int64
}

func newBenchLimit(b *testing.B, db *sql.DB) *benchLimit {
	b.Helper()
	l := &benchLimit{}
	for _, p := range []struct {
		st    **sql.Stmt
		query string
	}{{&l.insert, limitInsert}, {&l.complete, limitComplete}, {&l.replay, limitReplay}} {
		st, err := db.PrepareContext(context.Background(), p.query)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		*p.st = st
	}
	l.fence.Store(1 << 40)
	return l
}

// first is the limit of a first run of digest.
func (l *benchLimit) first(ctx context.Context, digest string, blob []byte) error {
	now := timeNowMicro()
	res, err := l.insert.ExecContext(ctx, benchScope, idem.DefaultOperation, digest, benchOwner, l.fence.Add(1),
		now+benchLease.Microseconds(), now, now, now+benchTTL.Microseconds())
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	res, err = l.complete.ExecContext(ctx, blob, timeNowMicro(), id)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v", n, err)
	}
	return nil
}

// benchKey returns a key unique to i under prefix.
func benchKey(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// BenchmarkRunFirst measures a first run: idem.Run on a new key, which
// reserves it (a prepared read that misses and reads the clock, a fence,
// a prepared INSERT), calls back and completes it (a prepared UPDATE) with
// the sealed result, against the limit's INSERT and UPDATE.
func BenchmarkRunFirst(b *testing.B) {
	for _, g := range benchGoroutines {
		benchround.Run(b, g, func(b *testing.B) {
			env := newBenchEnv(b)
			prefix := "first-" + rand.Text() + "-"
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, benchKey(prefix, i), benchScope, benchCallback, nil)
				if err == nil && res.Replayed {
					err = errors.New("first run replayed")
				}
				return err
			})
		}, func(b *testing.B) {
			env := newBenchEnv(b)
			l := newBenchLimit(b, env.db)
			blob := make([]byte, env.sealedLen)
			prefix := "first-" + rand.Text() + "-"
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				return l.first(ctx, idem.Digest(benchScope, idem.DefaultOperation, benchKey(prefix, i)), blob)
			})
		})
	}
}

// BenchmarkRunReplay measures a replay: idem.Run on a key completed
// beforehand. The store's Reserve finds the record with one prepared read
// and takes no lock; the engine decides, opens the envelope and decodes
// the JSON. The limit is one prepared SELECT of status, fingerprint and
// result by digest.
func BenchmarkRunReplay(b *testing.B) {
	completed := func(b *testing.B, env benchEnv) (keys, digests []string) {
		prefix := "replay-" + rand.Text() + "-"
		keys = make([]string, benchReplayKeys)
		digests = make([]string, benchReplayKeys)
		for i := range keys {
			keys[i] = benchKey(prefix, i)
			digests[i] = idem.Digest(benchScope, idem.DefaultOperation, keys[i])
			if _, err := idem.Run(context.Background(), env.engine, keys[i], benchScope, benchCallback, nil); err != nil {
				b.Fatal(err)
			}
		}
		return keys, digests
	}
	for _, g := range benchGoroutines {
		benchround.Run(b, g, func(b *testing.B) {
			env := newBenchEnv(b)
			keys, _ := completed(b, env)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				res, err := idem.Run(ctx, env.engine, keys[i%len(keys)], benchScope, benchCallback, nil)
				if err == nil && !res.Replayed {
					err = errors.New("replay ran the callback")
				}
				return err
			})
		}, func(b *testing.B) {
			env := newBenchEnv(b)
			_, digests := completed(b, env)
			l := newBenchLimit(b, env.db)
			benchround.Parallel(b, g, func(ctx context.Context, i int) error {
				var status, fp string
				var result []byte
				if err := l.replay.QueryRowContext(ctx, benchScope, idem.DefaultOperation,
					digests[i%len(digests)]).Scan(&status, &fp, &result); err != nil {
					return fmt.Errorf("select: %w", err)
				}
				if status != string(idemdriver.StatusCompleted) || len(result) == 0 {
					return fmt.Errorf("select: status %q, %d bytes", status, len(result))
				}
				return nil
			})
		})
	}
}

func timeNowMicro() int64 { return time.Now().UnixMicro() }
