package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestConcurrentAppends is reliability scenario 13's setup: many appenders
// at once, half in a decision's transaction (AppendPgxTx or
// AppendSQLiteTx), half in their own (Append). The chain must come out whole:
// seq 1..N with no gap, no fork (every prev_hash distinct), Verify OK.
func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		setup             func(testing.TB) testBundle
		appenders, perOne int
	}{
		{DialectPostgres, setupPostgres, 32, 1000},
		{DialectSQLite, setupSQLite, 8, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.setup(t)
			appenders, perOne := tc.appenders, tc.perOne
			if b.pool != nil {
				b = fastCommits(t, b, int32(appenders))
			}
			if testing.Short() {
				appenders, perOne = min(appenders, 8), min(perOne, 50)
			}
			ctx := t.Context()
			started := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, appenders)
			for g := range appenders {
				wg.Go(func() {
					for i := range perOne {
						e := entry(entryOpts{Actor: fmt.Sprintf("op%02d", g), TargetID: fmt.Sprint(i)})
						var err error
						if g%2 == 0 {
							err = b.withinTx(ctx, func(appendTx func(Entry) (Entry, error)) error {
								_, err := appendTx(e)
								return err
							})
						} else {
							_, err = b.trail.Append(ctx, e)
						}
						if err != nil {
							errs <- fmt.Errorf("appender %d, entry %d: %w", g, i, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			n := int64(appenders * perOne)
			appendTime := time.Since(started)

			started = time.Now()
			v, err := b.trail.Verify(ctx)
			require.NoError(t, err)
			verifyTime := time.Since(started)
			t.Logf("%d appenders × %d: appended in %v (%.0f/s), verified in %v",
				appenders, perOne, appendTime.Round(time.Millisecond), float64(n)/appendTime.Seconds(), verifyTime.Round(time.Millisecond))
			require.True(t, v.OK, "chain verified: %+v", v)
			require.Equal(t, n, v.Checked)
			require.Equal(t, n, v.HeadSeq)
			require.Equal(t, n, b.count(t, `SELECT count(*) FROM unstuck_audit_entry`))
			require.Equal(t, n, b.count(t, `SELECT max(seq) FROM unstuck_audit_entry`), "seq 1..N, no gap")
			require.Equal(t, n, b.count(t, `SELECT count(DISTINCT prev_hash) FROM unstuck_audit_entry`), "no fork")
			require.Equal(t, int64(perOne), b.count(t, `SELECT count(*) FROM unstuck_audit_entry WHERE actor = 'op00'`))
			require.Less(t, verifyTime, 5*time.Second, "scenario 13: 32 000 entries verified in under 5 s")
		})
	}
}

// fastCommits returns b on a pool of its own with maxConns connections
// (every appender then waits on the append lock, not on the pool) and
// synchronous_commit off. The append lock is held until COMMIT returns, so
// with the WAL flushed at each commit appends run one fsync at a time
// (about 300/s on a VM disk): 32 000 of them would take minutes. Without
// the flush the lock changes hands as fast as the CPUs allow, which
// stresses the serialisation more, not less; visibility at commit, which
// the chain relies on, is the same.
func fastCommits(t *testing.T, b testBundle, maxConns int32) testBundle {
	t.Helper()
	cfg := b.pool.Config()
	cfg.MaxConns = maxConns
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return testBundle{trail: NewPostgres(pool, WithKeys(testKeys)), pool: pool}
}

// seedPostgres writes n entries after the current head of an empty trail,
// hashed in Go as Append would hash them, with COPY in batches: a fast
// way to a big valid chain for benchmarks and paging tests. Times are one
// microsecond apart from an hour ago.
func seedPostgres(tb testing.TB, pool *pgxpool.Pool, n int) {
	tb.Helper()
	const batch = 20000
	ctx := context.Background()
	var (
		seq  int64
		head []byte
		rows = make([][]any, 0, batch)
	)
	start := time.Now().Add(-time.Hour)
	cols := []string{"seq", "at", "actor", "role", "action", "target_kind", "target_id", "reason", "before_state",
		"after_state", "outcome", "request_id", "client_addr", "user_agent", "prev_hash", "hash", "key_id"}
	flush := func() {
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"unstuck_audit_entry"}, cols, pgx.CopyFromRows(rows))
		require.NoError(tb, err)
		rows = rows[:0]
	}
	for i := range n {
		e := entry(entryOpts{Actor: fmt.Sprintf("op%02d", i%8), TargetID: fmt.Sprint(i % 1000)})
		e, err := (&Trail{keys: testKeys}).normalize(e)
		require.NoError(tb, err)
		e = chain(e, seq, head, start.Add(time.Duration(i)*time.Microsecond), testKeys)
		seq, head = e.Seq, e.Hash
		rows = append(rows, []any{e.Seq, e.At, e.Actor, e.Role, e.Action, e.TargetKind, e.TargetID, e.Reason,
			nullText(e.Before), nullText(e.After), e.Outcome, e.RequestID, e.ClientAddr, e.UserAgent, e.PrevHash, e.Hash, e.KeyID})
		if len(rows) == batch {
			flush()
		}
	}
	if len(rows) > 0 {
		flush()
	}
	_, err := pool.Exec(ctx, `ANALYZE unstuck_audit_entry`)
	require.NoError(tb, err)
}
