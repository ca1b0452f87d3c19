package audit

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// BenchmarkAppend measures appends per second on PostgreSQL with 8
// concurrent appenders (8 operators deciding at once), in a decision's
// transaction (AppendPgxTx in a READ COMMITTED transaction) and in their own
// (Append), with the server's synchronous_commit and with it off for
// comparison: the append lock is held until COMMIT returns, so with
// synchronous_commit on, appends run one WAL flush at a time.
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 5s ./internal/audit/
func BenchmarkAppend(b *testing.B) {
	for _, syncCommit := range []string{"on", "off"} {
		for _, mode := range []string{"AppendPgxTx", "Append"} {
			for _, workers := range []int{1, 8} {
				name := fmt.Sprintf("sync_commit=%s/%s/workers=%d", syncCommit, mode, workers)
				b.Run(name, func(b *testing.B) {
					pool := benchPool(b, syncCommit, int32(workers))
					trail := NewPostgres(pool, WithKeys(testKeys))
					require.NoError(b, trail.Migrate(context.Background()))
					appendOne := func(ctx context.Context, e Entry) error {
						if mode == "Append" {
							_, err := trail.Append(ctx, e)
							return err
						}
						return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
							_, err := trail.AppendPgxTx(ctx, tx, e)
							return err
						})
					}
					runWorkers(b, workers, func(ctx context.Context, w int) error {
						return appendOne(ctx, entry(entryOpts{Actor: fmt.Sprintf("op%d", w)}))
					})
				})
			}
		}
	}
}

// runWorkers calls fn b.N times in all from workers goroutines and reports
// calls per second.
func runWorkers(b *testing.B, workers int, fn func(ctx context.Context, worker int) error) {
	b.Helper()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, workers)
	)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := fn(ctx, w); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
}

// benchPool is a pool on a fresh schema with maxConns connections and the
// given synchronous_commit.
func benchPool(b *testing.B, syncCommit string, maxConns int32) *pgxpool.Pool {
	b.Helper()
	cfg := pgtest.Schema(b).Config()
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = syncCommit
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	return pool
}

// BenchmarkVerify measures Verify over a trail of 100 000 entries, and of
// 1 000 000 unless -short or AUDIT_BENCH_VERIFY_SIZES says otherwise
// (comma-separated sizes). The trail is seeded once per size with COPY,
// hashed in Go; seeding is not timed.
//
//	go test -run '^$' -bench BenchmarkVerify -benchtime 3x ./internal/audit/
func BenchmarkVerify(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	if env := os.Getenv("AUDIT_BENCH_VERIFY_SIZES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(f)
			require.NoError(b, err, "AUDIT_BENCH_VERIFY_SIZES")
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			pool := pgtest.Schema(b)
			trail := NewPostgres(pool, WithKeys(testKeys))
			require.NoError(b, trail.Migrate(context.Background()))
			seeded := time.Now()
			seedPostgres(b, pool, n)
			b.Logf("seeded %d entries in %v", n, time.Since(seeded).Round(time.Millisecond))
			b.ResetTimer()
			for b.Loop() {
				v, err := trail.Verify(context.Background())
				require.NoError(b, err)
				require.True(b, v.OK)
				require.Equal(b, int64(n), v.Checked)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
