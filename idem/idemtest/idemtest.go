// Package idemtest is the conformance suite every [idemdriver.Store] passes: ours
// (idem/idempgx, idem/idemsqlite, idem/idemmysql, idem/idemredis, the
// in-memory idem/idemmem) and any store an application writes. [Run] needs
// only the required contract; the other suites test optional capabilities.
//
//	func TestConformance(t *testing.T) {
//		idemtest.Run(t, func(t *testing.T) idemdriver.Store {
//			return newMigratedStoreOnFreshTables(t)
//		})
//	}
//
// The suite checks every primitive of the Store contract, then the engine's
// guarantees on top of the store: exactly one execution per key under 64
// concurrent callers, fenced takeover, expiry that never removes a live
// lease, and sealed results that cannot be moved or forged.
//
// [RunAdmin] is the conformance suite of the admin/read contract
// ([idemdriver.Admin], and [idemdriver.Seeder] when the store has one):
// every filter, keyset paging through ties, refused filters and cursors
// naming their field, look-ups by ID and digest, the overview's exact and
// estimated counts, the needs-attention order, and iteration under
// concurrent writes.
//
//	func TestAdminConformance(t *testing.T) {
//		idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
//			s := newMigratedStoreOnFreshTables(t)
//			return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
//		})
//	}
//
// [RunTransactional] is the conformance suite of transactional mode (SPEC
// H17) for an [idemdriver.TxStore]: the application's own writes, made
// through the driver's transaction, commit with the record or not at all,
// through WithinTx, a caller-owned transaction and the HTTP middleware.
// The driver gives a [TxHarness]: the application's two tables in its
// dialect and the few calls the suite cannot make without it.
//
//	func TestTransactionalConformance(t *testing.T) {
//		idemtest.RunTransactional(t, func(t *testing.T) idemtest.TxHarness {
//			return newTxHarnessOnFreshTables(t)
//		})
//	}
package idemtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Run runs the conformance suite against stores made by newStore. Each call
// of newStore must return a store over fresh, empty, migrated tables that
// no other test touches; subtests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) idemdriver.Store) {
	t.Helper()
	t.Run("Primitives", func(t *testing.T) { runPrimitives(t, newStore) })
	t.Run("Engine", func(t *testing.T) { runEngine(t, newStore) })
	t.Run("Concurrency", func(t *testing.T) { runConcurrency(t, newStore) })
	t.Run("Operator", func(t *testing.T) { runOperator(t, newStore) })
	t.Run("HTTP", func(t *testing.T) { runHTTP(t, newStore) })
}

// Secret is a fixed 32-byte secret for tests.
var Secret = []byte("idemtest-secret-0123456789abcdef")

// Clock is a settable clock for [idem.Config].Now. Safe for concurrent use.
type Clock struct {
	ch chan time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock {
	c := &Clock{ch: make(chan time.Time, 1)}
	c.ch <- t.UTC().Truncate(time.Microsecond)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	t := <-c.ch
	c.ch <- t
	return t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	t := <-c.ch
	c.ch <- t.Add(d)
}

// start is a fixed point in time far from the wall clock, so a store that
// ignores the Now override fails the suite.
var start = time.Date(2031, 3, 14, 9, 26, 53, 0, time.UTC)

// newEngine builds an engine over s with cfg, sealed with [Secret] unless
// cfg sets a secret or turns sealing off.
func newEngine(t *testing.T, s idemdriver.Store, cfg idem.Config) *idem.Engine {
	t.Helper()
	if cfg.Secret == nil && !cfg.DisableSealing {
		cfg.Secret = Secret
	}
	e, err := idem.New(s, cfg)
	require.NoError(t, err)
	return e
}

func ident(name string) idemdriver.Ident {
	return idemdriver.Ident{Scope: "tenant:" + name, Operation: "run", KeyDigest: idem.Digest("tenant:"+name, "run", name)}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
