package idempgx_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/unstucktest/faultproxy"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// blackhole accepts connections and never answers, like a server behind a
// dead link: without a deadline a call waits for TCP to give up.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// Every store call the engine makes is bounded by its
// store timeout, whatever the caller's context: a blackholed database
// makes Run, Forget and Sweep fail within the bound instead of hanging.
func TestStoreCallsAreBoundedByTheStoreTimeout(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@"+blackhole(t)+"/nowhere?sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const bound = 300 * time.Millisecond
	e, err := idem.New(idempgx.New(pool), idem.Config{DisableSealing: true, StoreTimeout: bound})
	require.NoError(t, err)

	ctx := context.Background() // no deadline of its own
	for name, call := range map[string]func() error{
		"run": func() error {
			_, err := idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
			return err
		},
		"forget": func() error { _, err := e.Forget(ctx, "k", "s"); return err },
		"sweep":  func() error { _, err := e.Sweep(ctx); return err },
	} {
		began := time.Now()
		err := call()
		took := time.Since(began)
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
		require.Less(t, took, 10*bound, "%s: returned after %s, bound %s", name, took, bound)
	}
}

// sleepyStore runs a statement that outlasts the store timeout, under the
// context the engine gives Reserve, before reserving.
type sleepyStore struct {
	*idempgx.Store
	pool *pgxpool.Pool
}

func (s sleepyStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	if _, err := s.pool.Exec(ctx, "SELECT pg_sleep(30)"); err != nil {
		return idemdriver.Record{}, false, err
	}
	return s.Store.Reserve(ctx, p)
}

// A caller whose context can never be cancelled gets a deadline
// shared with other calls (no timer per call); pgx still cancels a
// statement running on the server when it ends.
func TestSharedDeadlineCancelsARunningStatement(t *testing.T) {
	t.Parallel()
	pool := pgtest.Schema(t)
	store := idempgx.New(pool)
	require.NoError(t, store.Migrate(context.Background()))
	const bound = 500 * time.Millisecond
	e, err := idem.New(sleepyStore{store, pool}, idem.Config{DisableSealing: true, StoreTimeout: bound})
	require.NoError(t, err)
	for _, ctx := range []context.Context{context.Background(), context.WithoutCancel(t.Context())} {
		began := time.Now()
		_, err = idem.Run(ctx, e, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
		took := time.Since(began)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, took, 10*bound, "returned after %s, bound %s", took, bound)
		require.GreaterOrEqual(t, took, bound-bound/64)
	}
}

// A call whose context nothing but the engine's shared deadline
// ends runs with that deadline on its connection's socket instead of a
// context pgx watches (idemdriver.DeadlineOnly). Through a proxy that
// goes silent mid-flight, such a call must still fail at the store
// timeout with context.DeadlineExceeded — as must a call whose caller can
// cancel (a context pgx watches) — the silenced connection must not come
// back from the pool, and a connection the engine used must go back
// without its deadline: the application's own statement on it, after the
// deadline has passed, succeeds.
func TestSocketDeadlineCutsASilentConnection(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t)
	require.NoError(t, idempgx.New(schema).Migrate(context.Background()))
	cfg := schema.Config()
	p, err := faultproxy.Listen(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	host, port, err := net.SplitHostPort(p.Addr())
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(n)
	cfg.MaxConns, cfg.MinConns = 1, 0 // one connection: every call reuses it
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const bound = 400 * time.Millisecond
	e, err := idem.New(idempgx.New(pool), idem.Config{DisableSealing: true, StoreTimeout: bound})
	require.NoError(t, err)
	run := func(ctx context.Context, key string) error {
		_, err := idem.Run(ctx, e, key, "s", func(context.Context) (int, error) { return 1, nil }, nil)
		return err
	}
	// patient is the same store with room to dial a new connection on a
	// loaded machine: it judges whether the pool still works, not the bound.
	patient, err := idem.New(idempgx.New(pool), idem.Config{DisableSealing: true, StoreTimeout: time.Minute})
	require.NoError(t, err)

	// The engine's calls leave no deadline on the connection they used.
	require.NoError(t, run(context.Background(), "warm"))
	time.Sleep(bound + bound/2)
	var one int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT 1").Scan(&one), "the application's statement on the engine's connection")

	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, ctx := range []context.Context{context.Background(), cancellable} {
		p.SetBlackhole(true)
		began := time.Now()
		err := run(ctx, "silent-"+strconv.Itoa(i))
		took := time.Since(began)
		p.SetBlackhole(false)
		require.ErrorIs(t, err, context.DeadlineExceeded, "call %d", i)
		require.GreaterOrEqual(t, took, bound-bound/64, "call %d ended before the store timeout", i)
		require.Less(t, took, 10*bound, "call %d: returned after %s, bound %s", i, took, bound)
		// The cut connection was closed, not handed out again: the next
		// call works on a new one.
		_, err = idem.Run(context.Background(), patient, "after-"+strconv.Itoa(i), "s", func(context.Context) (int, error) { return 1, nil }, nil)
		require.NoError(t, err, "call %d", i)
	}
}

// Complete refuses a status that is not final before the database is
// touched, also on the socket-deadline path, which takes a connection of
// its own: on a closed pool the answer is the status, not the pool.
func TestCompleteRefusesAStatusBeforeTakingAConnection(t *testing.T) {
	t.Parallel()
	pool := pgtest.Schema(t)
	store := idempgx.New(pool)
	pool.Close()
	bounded, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deadlineOnly := context.WithValue(bounded, idemdriver.DeadlineOnlyKey, bounded.Done())
	require.True(t, idemdriver.DeadlineOnly(deadlineOnly))
	id := idemdriver.Ident{Scope: "s", Operation: "run", KeyDigest: idem.Digest("s", "run", "k")}
	for _, ctx := range []context.Context{context.Background(), deadlineOnly} {
		err := store.Complete(ctx, id, idemdriver.Owner{Token: "t", Fence: 1}, idemdriver.Completion{Status: idemdriver.StatusProcessing})
		require.ErrorContains(t, err, "is not a final status")
	}
}
