package faultproxy_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/unstucktest/faultproxy"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

// setup returns a pool on a fresh schema that holds table t (n int), a
// proxy in front of its server, and a function that opens a connection to
// the same schema through the proxy.
func setup(t *testing.T) (*pgxpool.Pool, *faultproxy.Proxy, func(mode pgx.QueryExecMode) *pgx.Conn) {
	t.Helper()
	pool := pgtest.Schema(t)
	_, err := pool.Exec(t.Context(), "CREATE TABLE t (n int)")
	require.NoError(t, err)
	cc := pool.Config().ConnConfig
	p, err := faultproxy.Listen(net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	host, port, err := net.SplitHostPort(p.Addr())
	require.NoError(t, err)
	connect := func(mode pgx.QueryExecMode) *pgx.Conn {
		cfg := cc.Copy()
		cfg.Host = host
		n, err := strconv.Atoi(port)
		require.NoError(t, err)
		cfg.Port = uint16(n)
		cfg.DefaultQueryExecMode = mode
		conn, err := pgx.ConnectConfig(t.Context(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	return pool, p, connect
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM t").Scan(&n))
	return n
}

func isInsert(sql string) bool { return strings.HasPrefix(sql, "INSERT INTO t") }

func TestForwardsAndDropsAll(t *testing.T) {
	pool, p, connect := setup(t)
	conn := connect(pgx.QueryExecModeCacheStatement)
	_, err := conn.Exec(t.Context(), "INSERT INTO t VALUES ($1)", 1)
	require.NoError(t, err)
	require.Equal(t, 1, count(t, pool))

	require.Equal(t, 1, p.DropAll())
	_, err = conn.Exec(t.Context(), "INSERT INTO t VALUES ($1)", 2)
	require.Error(t, err, "the dropped connection is dead")

	conn2 := connect(pgx.QueryExecModeCacheStatement)
	_, err = conn2.Exec(t.Context(), "INSERT INTO t VALUES ($1)", 3)
	require.NoError(t, err, "a new connection works")
	require.Equal(t, 2, count(t, pool))
	st := p.Stats()
	require.GreaterOrEqual(t, st.Accepted, int64(2))
	require.EqualValues(t, 1, st.DropAll)
}

// A cut before the server: the client gets an error and the server never
// saw the statement. Prepared statements are matched at Bind by the SQL of
// their Parse, also once cached; simple queries by their text.
func TestCutBeforeServer(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			pool, p, connect := setup(t)
			conn := connect(mode)
			_, err := conn.Exec(t.Context(), "INSERT INTO t VALUES ($1)", 1) // prepares and caches
			require.NoError(t, err)
			_, err = conn.Exec(t.Context(), "SELECT count(*) FROM t")
			require.NoError(t, err)

			p.SetCut(&faultproxy.Cut{Match: isInsert, P: 1})
			_, err = conn.Exec(t.Context(), "SELECT 1") // not a target
			require.NoError(t, err)
			_, err = conn.Exec(t.Context(), "INSERT INTO t VALUES ($1)", 2)
			require.Error(t, err)
			require.Equal(t, 1, count(t, pool), "the server never saw the cut statement")
			require.EqualValues(t, 1, p.Stats().CutBefore)

			p.SetCut(nil)
			conn = connect(mode)
			_, err = conn.Exec(t.Context(), "INSERT INTO t VALUES ($1)", 3)
			require.NoError(t, err)
			require.Equal(t, 2, count(t, pool))
		})
	}
}

// A cut after the server: the statement committed, the client never hears.
func TestCutAfterServer(t *testing.T) {
	pool, p, connect := setup(t)
	conn := connect(pgx.QueryExecModeCacheStatement)
	p.SetCut(&faultproxy.Cut{Match: isInsert, P: 1, After: true})
	_, err := conn.Exec(t.Context(), "INSERT INTO t VALUES ($1)", 1)
	require.Error(t, err, "the client never hears of the commit")
	require.Equal(t, 1, count(t, pool), "the server committed it")
	require.EqualValues(t, 1, p.Stats().CutAfter)
}

func TestCutProbabilityZeroCutsNothing(t *testing.T) {
	pool, p, connect := setup(t)
	conn := connect(pgx.QueryExecModeCacheStatement)
	p.SetCut(&faultproxy.Cut{Match: isInsert, P: 0})
	for i := range 20 {
		_, err := conn.Exec(t.Context(), "INSERT INTO t VALUES ($1)", i)
		require.NoError(t, err)
	}
	require.Equal(t, 20, count(t, pool))
	require.Zero(t, p.Stats().Faults())
}

func TestRandomDrops(t *testing.T) {
	_, p, connect := setup(t)
	conn := connect(pgx.QueryExecModeCacheStatement)
	p.SetDropProbability(1)
	_, err := conn.Exec(t.Context(), "SELECT 1")
	require.Error(t, err)
	require.EqualValues(t, 1, p.Stats().RandomDrops)
	p.Clear()
	_, err = connect(pgx.QueryExecModeCacheStatement).Exec(t.Context(), "SELECT 1")
	require.NoError(t, err)
}

func TestDelayHoldsMessages(t *testing.T) {
	_, p, connect := setup(t)
	conn := connect(pgx.QueryExecModeSimpleProtocol)
	const d = 200 * time.Millisecond
	p.SetDelay(d, 1)
	start := time.Now()
	_, err := conn.Exec(t.Context(), "SELECT 1")
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), d, "the message was held at least d")
	require.EqualValues(t, 1, p.Stats().Delayed)
}

// A blackhole holds traffic of open and new connections, without closing
// them, until it is lifted; then what was held flows.
func TestBlackholeHoldsUntilLifted(t *testing.T) {
	pool, p, connect := setup(t)
	conn := connect(pgx.QueryExecModeCacheStatement)
	p.SetBlackhole(true)

	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(context.Background(), "INSERT INTO t VALUES ($1)", 1)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	cc := pool.Config().ConnConfig.Copy()
	host, port, err := net.SplitHostPort(p.Addr())
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	cc.Host, cc.Port = host, uint16(n)
	_, err = pgx.ConnectConfig(ctx, cc)
	require.Error(t, err, "a new connection gets no answer")
	select {
	case err := <-done:
		t.Fatalf("a statement went through the blackhole: %v", err)
	default:
	}
	require.Equal(t, 0, count(t, pool))

	p.SetBlackhole(false)
	require.NoError(t, <-done, "the held statement completes once lifted")
	require.Equal(t, 1, count(t, pool))
}
