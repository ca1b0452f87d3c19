package idemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// TxHarness is what a driver gives [RunTransactional]: a migrated
// [idemdriver.TxStore] over fresh tables, and the application's side of
// its transactions, written in the driver's dialect. The application has
// two tables beside the store's, created by the harness:
//
//	customers (id text PRIMARY KEY)
//	orders    (id integer, generated, PRIMARY KEY;
//	           note text NOT NULL;
//	           customer_id text REFERENCES customers (id) DEFERRABLE INITIALLY DEFERRED)
//
// The foreign key is checked at COMMIT only, so that a write naming an
// unknown customer succeeds in the handler and fails when the transaction
// commits.
type TxHarness struct {
	// Store is the store under test.
	Store idemdriver.TxStore
	// Name is the driver's package name, with which its errors begin
	// ("idempgx": "idempgx: within tx: …").
	Name string
	// InsertOrder inserts an order through the transaction that the
	// driver's TxFrom finds in ctx, and returns its id; it fails when ctx
	// carries none.
	InsertOrder func(ctx context.Context, note string, customer *string) (int64, error)
	// Orders counts the committed orders with note, or all of them when
	// note is empty, as any other connection sees them.
	Orders func(ctx context.Context, note string) (int, error)
	// AddCustomer commits a customer, outside any transaction.
	AddCustomer func(ctx context.Context, id string) error
	// ConnsInUse is the number of the database handle's connections that
	// are taken out of its pool.
	ConnsInUse func() int
	// ErrTxDone is what the tx of WithinTx's fn wraps when it is called
	// after fn has returned (pgx.ErrTxClosed, sql.ErrTxDone).
	ErrTxDone error
	// ErrAppTxDone, when set, is what InsertOrder wraps when called with a
	// context kept past the end of WithinTx; otherwise any error will do.
	ErrAppTxDone error
	// OtherStore returns another handle on the store's database (another
	// Store value, another connection pool or file handle).
	OtherStore func(t *testing.T) idemdriver.Store
	// Waiters, when set, counts the database sessions that wait for the
	// transaction carried by txCtx; the suite then sees an outsider wait
	// rather than supposing it from 200 ms of silence.
	Waiters func(ctx, txCtx context.Context) (int, error)
	// BeginCaller begins a transaction that the caller owns, on the
	// store's database, with the store's primitives on it (Store.Tx).
	BeginCaller func(ctx context.Context) (CallerTx, error)
	// HoldCommit, when set, makes the COMMIT of every transaction that
	// inserted an order wait until release is called; committing reports
	// whether such a COMMIT is waiting now. Without it the subtest
	// Middleware/ResponseWaitsForSlowCommit is skipped.
	HoldCommit func(t *testing.T) (committing func() bool, release func())
	// NoDeferredConstraints, when set, says why the database has no
	// constraint checked at COMMIT (MySQL's InnoDB checks every one at
	// once); the subtest Middleware/DeferredConstraintFailsAtCommit is
	// then skipped with that reason. The application's foreign key is
	// then immediate.
	NoDeferredConstraints string
}

// CallerTx is a transaction the application began and owns, with the
// store's primitives on it.
type CallerTx struct {
	// Store runs the store's primitives inside the transaction.
	Store idemdriver.Store
	// InsertOrder inserts an order with note through the transaction.
	InsertOrder func(ctx context.Context, note string) error
	// Commit and Rollback end the transaction.
	Commit, Rollback func(ctx context.Context) error
}

// RunTransactional is the conformance suite of transactional mode (SPEC
// H17) with the application's own writes: through the store's WithinTx and
// the HTTP middleware, those writes and the record commit together or not
// at all, and the client hears of them only after the commit; a deferred
// constraint failing at COMMIT answers 500 and is never replayed;
// duplicates wait for the first transaction; the store's calls are
// refused once the transaction has ended; connections go back to the
// pool. Each call of newHarness must return a harness over fresh tables
// that no other test touches; subtests run in parallel.
func RunTransactional(t *testing.T, newHarness func(t *testing.T) TxHarness) {
	t.Helper()
	t.Run("WithinTx", func(t *testing.T) { runWithinTx(t, newHarness) })
	t.Run("Middleware", func(t *testing.T) { runMiddlewareTx(t, newHarness) })
}

// txOrders counts h's committed orders with note ("" = all).
func txOrders(t *testing.T, h TxHarness, note string) int {
	t.Helper()
	n, err := h.Orders(t.Context(), note)
	require.NoError(t, err)
	return n
}

func txReserveParams(id idemdriver.Ident, owner string) idemdriver.ReserveParams {
	return idemdriver.ReserveParams{Ident: id, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour}
}

func txRequireGone(t *testing.T, s idemdriver.Store, id idemdriver.Ident) {
	t.Helper()
	_, ok, err := s.Get(t.Context(), id)
	require.NoError(t, err)
	require.False(t, ok, "record %v exists", id)
}

func txGet(t *testing.T, s idemdriver.Store, id idemdriver.Ident) idemdriver.Record {
	t.Helper()
	rec, ok, err := s.Get(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok, "record %v missing", id)
	return rec
}

// txWriteOrder inserts an order with note through the transaction in ctx.
func txWriteOrder(ctx context.Context, h TxHarness, note string) error {
	_, err := h.InsertOrder(ctx, note, nil)
	return err
}

func runWithinTx(t *testing.T, newHarness func(t *testing.T) TxHarness) {
	t.Run("Commits", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		id := ident(newKey())
		err := h.Store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
			rec, created, err := tx.Reserve(ctx, txReserveParams(id, "owner-1"))
			require.NoError(t, err)
			require.True(t, created)
			require.NoError(t, txWriteOrder(ctx, h, "order-1"))
			require.NoError(t, tx.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{ResourceIDs: []string{"order-1"}}))
			require.NoError(t, tx.Complete(ctx, id, rec.Owner, idemdriver.Completion{
				Status: idemdriver.StatusCompleted, Result: []byte("sealed"), ResponseCode: 201}))

			got, ok, err := tx.Get(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "the transaction reads its own writes")
			require.Equal(t, idemdriver.StatusCompleted, got.Status)

			// Readers elsewhere go on and see nothing before the commit.
			txRequireGone(t, h.Store, id)
			require.Zero(t, txOrders(t, h, "order-1"))
			return nil
		})
		require.NoError(t, err)

		got := txGet(t, h.Store, id)
		require.Equal(t, idemdriver.StatusCompleted, got.Status)
		require.Equal(t, []byte("sealed"), got.Result)
		require.Equal(t, []string{"order-1"}, got.ResourceIDs)
		require.Equal(t, 1, txOrders(t, h, "order-1"))
	})

	t.Run("RollsBack", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		id := ident(newKey())
		errApp := errors.New("the application failed")
		err := h.Store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
			_, created, err := tx.Reserve(ctx, txReserveParams(id, "owner-1"))
			require.NoError(t, err)
			require.True(t, created)
			require.NoError(t, txWriteOrder(ctx, h, "order-1"))
			return errApp
		})
		require.ErrorIs(t, err, errApp)
		require.Equal(t, errApp, err, "fn's error is returned as is")
		txRequireGone(t, h.Store, id)
		require.Zero(t, txOrders(t, h, "order-1"))
	})

	t.Run("RollsBackOnPanic", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		id := ident(newKey())
		require.PanicsWithValue(t, "boom", func() {
			_ = h.Store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
				_, _, err := tx.Reserve(ctx, txReserveParams(id, "owner-1"))
				require.NoError(t, err)
				require.NoError(t, txWriteOrder(ctx, h, "order-1"))
				panic("boom")
			})
		})
		txRequireGone(t, h.Store, id)
		require.Zero(t, txOrders(t, h, "order-1"))
		require.Zero(t, h.ConnsInUse(), "the transaction's connection went back to the pool")

		// Its locks were let go: the key can be reserved again at once.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, created, err := h.Store.Reserve(ctx, txReserveParams(id, "owner-2"))
		require.NoError(t, err)
		require.True(t, created)
	})

	// A plain Reserve of a key that an open WithinTx reserved, by the same
	// Store and by another handle on the database, returns only once the
	// transaction has ended: with the committed record, or with one it
	// created after the rollback.
	t.Run("OutsiderWaits", func(t *testing.T) {
		t.Parallel()
		for _, commit := range []bool{true, false} {
			for _, otherHandle := range []bool{false, true} {
				name := map[bool]string{true: "Commit", false: "Rollback"}[commit] +
					map[bool]string{true: "/OtherHandle", false: "/SameStore"}[otherHandle]
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					h := newHarness(t)
					var outsiderStore idemdriver.Store = h.Store
					if otherHandle {
						outsiderStore = h.OtherStore(t)
					}
					runOutsiderWaits(t, h, outsiderStore, commit)
				})
			}
		}
	})

	t.Run("RefusesCallsAfterFn", func(t *testing.T) {
		t.Parallel()
		for _, commit := range []bool{true, false} {
			h := newHarness(t)
			id := ident(newKey())
			var kept idemdriver.Store
			var keptCtx context.Context
			var rec idemdriver.Record
			errApp := errors.New("the application failed")
			err := h.Store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
				kept, keptCtx = tx, ctx
				var err error
				rec, _, err = tx.Reserve(ctx, txReserveParams(id, "owner-1"))
				require.NoError(t, err)
				if !commit {
					return errApp
				}
				return nil
			})
			if commit {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errApp)
			}

			ctx := t.Context()
			_, _, err = kept.Reserve(ctx, txReserveParams(ident(newKey()), "late"))
			require.ErrorIs(t, err, h.ErrTxDone, "reserve")
			require.ErrorContains(t, err, "the transaction of WithinTx has ended")
			_, err = kept.Takeover(ctx, idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: "late", Lease: time.Minute})
			require.ErrorIs(t, err, h.ErrTxDone, "takeover")
			err = kept.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted})
			require.ErrorIs(t, err, h.ErrTxDone, "complete")
			err = kept.Annotate(ctx, id, rec.Owner, idemdriver.Annotation{CorrelationID: "c"})
			require.ErrorIs(t, err, h.ErrTxDone, "annotate")
			err = kept.Release(ctx, id, rec.Owner)
			require.ErrorIs(t, err, h.ErrTxDone, "release")
			_, _, err = kept.Get(ctx, id)
			require.ErrorIs(t, err, h.ErrTxDone, "get")
			_, err = kept.Delete(ctx, id)
			require.ErrorIs(t, err, h.ErrTxDone, "delete")
			_, err = kept.Sweep(ctx, idemdriver.SweepParams{})
			require.ErrorIs(t, err, h.ErrTxDone, "sweep")
			require.True(t, strings.HasPrefix(err.Error(), h.Name+": sweep: "), err.Error())

			err = txWriteOrder(keptCtx, h, "late")
			require.Error(t, err, "the transaction in a kept context is closed too")
			if h.ErrAppTxDone != nil {
				require.ErrorIs(t, err, h.ErrAppTxDone)
			}

			// Nothing the late calls tried happened.
			if commit {
				got := txGet(t, h.Store, id)
				require.Equal(t, idemdriver.StatusProcessing, got.Status)
				require.Equal(t, rec.Owner, got.Owner)
			} else {
				txRequireGone(t, h.Store, id)
			}
			require.Zero(t, txOrders(t, h, "late"))
		}
	})

	// Calls inside a transaction judge leases by a params struct's Now, as
	// the Store's do: at t0 + 59 s the lease from t0 is live, at t0 + 61 s
	// it has ended.
	t.Run("ClockByNow", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		t0 := start
		err := h.Store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
			rec, _, err := tx.Reserve(ctx, idemdriver.ReserveParams{
				Ident: ident(newKey()), Owner: "o", Lease: time.Minute, TTL: time.Hour, Now: t0})
			require.NoError(t, err)
			require.Equal(t, t0, rec.ReadAt)
			require.Equal(t, t0, rec.CreatedAt)
			require.Equal(t, t0.Add(time.Minute), rec.LeaseExpiresAt)
			_, err = tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o2", Lease: time.Minute, Now: t0.Add(59 * time.Second)})
			require.ErrorIs(t, err, idemdriver.ErrFenced, "lease live by Now")
			taken, err := tx.Takeover(ctx, idemdriver.TakeoverParams{Ident: rec.Ident, Seen: rec.Owner, NewOwner: "o2", Lease: time.Minute, Now: t0.Add(61 * time.Second)})
			require.NoError(t, err)
			require.Equal(t, t0.Add(61*time.Second), taken.ReadAt)
			return nil
		})
		require.NoError(t, err)
	})

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		id := ident(newKey())
		ctx, cancel := context.WithCancel(t.Context())
		err := h.Store.WithinTx(ctx, func(ctx context.Context, tx idemdriver.Store) error {
			_, _, err := tx.Reserve(ctx, txReserveParams(id, "o"))
			require.NoError(t, err)
			require.NoError(t, txWriteOrder(ctx, h, "order-1"))
			cancel()
			return txWriteOrder(ctx, h, "order-2")
		})
		require.ErrorIs(t, err, context.Canceled)
		txRequireGone(t, h.Store, id)
		require.Zero(t, txOrders(t, h, ""))
		require.Zero(t, h.ConnsInUse(), "the connection went back to the pool")

		err = h.Store.WithinTx(ctx, func(context.Context, idemdriver.Store) error {
			t.Fatal("fn called with a cancelled context")
			return nil
		})
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, strings.HasPrefix(err.Error(), h.Name+": within tx: "), err.Error())

		// No connection was left inside a transaction.
		for range 10 {
			_, created, err := h.Store.Reserve(t.Context(), txReserveParams(ident(newKey()), "o"))
			require.NoError(t, err)
			require.True(t, created)
		}
	})

	// The primitives of a caller-owned transaction (Store.Tx) run inside it
	// and never end it: what they wrote is invisible outside until the
	// caller commits, and gone when it rolls back; after its end the
	// transaction refuses them.
	t.Run("CallerOwnsTheTransaction", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx := t.Context()
		for _, commit := range []bool{false, true} {
			id := ident(newKey())
			ct, err := h.BeginCaller(ctx)
			require.NoError(t, err)
			rec, created, err := ct.Store.Reserve(ctx, txReserveParams(id, "owner-1"))
			require.NoError(t, err)
			require.True(t, created)
			require.NoError(t, ct.InsertOrder(ctx, id.KeyDigest))
			require.NoError(t, ct.Store.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("sealed"), ResponseCode: 201}))
			got, ok, err := ct.Store.Get(ctx, id)
			require.NoError(t, err)
			require.True(t, ok, "the transaction reads its own writes")
			require.Equal(t, idemdriver.StatusCompleted, got.Status)
			txRequireGone(t, h.Store, id) // not committed yet: the calls did not commit

			if commit {
				require.NoError(t, ct.Commit(ctx))
				txGet(t, h.Store, id) // the record commits with the caller's transaction
				require.Equal(t, 1, txOrders(t, h, id.KeyDigest))
			} else {
				require.NoError(t, ct.Rollback(ctx))
				txRequireGone(t, h.Store, id)
				require.Zero(t, txOrders(t, h, id.KeyDigest))
			}
			_, _, err = ct.Store.Get(ctx, id)
			require.ErrorIs(t, err, h.ErrTxDone, "a call after the caller's transaction ended")
		}
	})
}

func runOutsiderWaits(t *testing.T, h TxHarness, outsiderStore idemdriver.Store, commit bool) {
	id := ident(newKey())
	errApp := errors.New("the application failed")
	type outcome struct {
		rec     idemdriver.Record
		created bool
		err     error
	}
	outsider := make(chan outcome, 1)

	err := h.Store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
		rec, created, err := tx.Reserve(ctx, txReserveParams(id, "insider"))
		require.NoError(t, err)
		require.True(t, created)
		require.NoError(t, txWriteOrder(ctx, h, "order-1"))

		go func() {
			rec, created, err := outsiderStore.Reserve(t.Context(), txReserveParams(id, "outsider"))
			outsider <- outcome{rec, created, err}
		}()
		if h.Waiters != nil {
			require.Eventually(t, func() bool {
				n, err := h.Waiters(t.Context(), ctx)
				return err == nil && n == 1
			}, 10*time.Second, 5*time.Millisecond, "the outsider waits for this transaction")
		}
		select {
		case o := <-outsider:
			t.Fatalf("the outsider returned before the transaction ended: %+v", o)
		case <-time.After(200 * time.Millisecond):
		}

		require.NoError(t, tx.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: []byte("r")}))
		if !commit {
			return errApp
		}
		return nil
	})
	o := <-outsider
	require.NoError(t, o.err)
	if commit {
		require.NoError(t, err)
		require.False(t, o.created, "the outsider finds the committed record")
		require.Equal(t, idemdriver.StatusCompleted, o.rec.Status)
		require.Equal(t, "insider", o.rec.Token)
		require.Equal(t, []byte("r"), o.rec.Result)
		require.Equal(t, 1, txOrders(t, h, "order-1"))
		return
	}
	require.ErrorIs(t, err, errApp)
	require.True(t, o.created, "the outsider creates the record after the rollback")
	require.Equal(t, idemdriver.StatusProcessing, o.rec.Status)
	require.Equal(t, "outsider", o.rec.Token)
	require.Zero(t, txOrders(t, h, "order-1"))
}

// runMiddlewareTx drives the HTTP middleware in transactional mode with an
// application handler that writes its own orders through the store's
// transaction: those writes happen exactly once per key, commit with the
// record or not at all, and the client hears of them only after the
// commit.
func runMiddlewareTx(t *testing.T, newHarness func(t *testing.T) TxHarness) {
	// setup starts a test server over a fresh harness whose handler is
	// app; insert is the application's write, from the request's JSON body.
	setup := func(t *testing.T, app func(h TxHarness) func(w http.ResponseWriter, r *http.Request, run int)) (*httpBundle, TxHarness) {
		t.Helper()
		h := newHarness(t)
		b := httpHarness{}.setup(t, httpOpts{cfg: idem.MiddlewareConfig{Transactional: true}, store: h.Store, handler: app(h)})
		return b, h
	}
	// ordering is the application handler: it inserts the order, or
	// answers 500 naming the error, then calls then with the order's id.
	ordering := func(then func(w http.ResponseWriter, r *http.Request, id int64, run int)) func(h TxHarness) func(w http.ResponseWriter, r *http.Request, run int) {
		return func(h TxHarness) func(w http.ResponseWriter, r *http.Request, run int) {
			return func(w http.ResponseWriter, r *http.Request, run int) {
				id, err := txInsert(h, r)
				if err != nil {
					http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
					return
				}
				then(w, r, id, run)
			}
		}
	}
	// create answers status(run) about the order.
	create := func(status func(run int) int) func(h TxHarness) func(w http.ResponseWriter, r *http.Request, run int) {
		return ordering(func(w http.ResponseWriter, _ *http.Request, id int64, run int) { txRespond(w, status(run), id, run) })
	}
	// padded answers 201 with the order and more than net/http's write
	// buffer, then calls wait.
	padded := func(wait func(r *http.Request)) func(h TxHarness) func(w http.ResponseWriter, r *http.Request, run int) {
		return ordering(func(w http.ResponseWriter, r *http.Request, id int64, run int) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"id":%d,"run":%d,"pad":%q}`, id, run, txPad) // the whole response, before the wait
			wait(r)
		})
	}
	created := func(int) int { return http.StatusCreated }
	body := `{"note":"n"}`
	call := func(t *testing.T, b *httpBundle, key, body string) httpResponse {
		t.Helper()
		return b.call(t, httpCall{key: key, body: body})
	}

	// One key sent 20 times at once: the handler runs once, one order is
	// written, and every other request waits for the first one's commit
	// and replays its answer. A duplicate's Reserve waits for the first
	// transaction to end (on the unique index, or for the write lock), and
	// then finds a completed record: it never sees the key processing, so
	// no 409 can appear.
	t.Run("ConcurrentDuplicates", func(t *testing.T) {
		t.Parallel()
		b, h := setup(t, ordering(func(w http.ResponseWriter, _ *http.Request, id int64, run int) {
			time.Sleep(100 * time.Millisecond) // keep the transaction open while the duplicates arrive
			txRespond(w, http.StatusCreated, id, run)
		}))
		key := newKey()
		const n = 20
		results := make([]callResult, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				resp, err := b.send(t.Context(), httpCall{key: key, body: `{"note":"duplicate"}`})
				results[i] = callResult{resp, err}
			})
		}
		close(start)
		wg.Wait()

		var first *httpResponse
		for i, r := range results {
			require.NoError(t, r.err, "request %d", i)
			require.Equal(t, http.StatusCreated, r.resp.status, "request %d: every answer is the 201 or its replay, never a 409 (body %s)", i, r.resp.body)
			if r.resp.header.Get(idem.HeaderReplayed) == "" {
				require.Nil(t, first, "only one answer is not a replay")
				first = &results[i].resp
			}
		}
		require.NotNil(t, first, "one request ran")
		for i, r := range results {
			if &results[i].resp != first {
				txRequireReplay(t, *first, r.resp)
			}
		}
		require.EqualValues(t, 1, b.runs.Load(), "the handler ran once")
		require.Equal(t, 1, txOrders(t, h, ""), "exactly one order")
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)
		require.Equal(t, http.StatusCreated, rec.ResponseCode)
		rejected, _ := b.hooks.events()
		require.Empty(t, rejected)
	})

	// The handler writes an order, then answers 500: the order goes with
	// the reservation, the client gets the 500, and the retry with the same
	// key runs again and commits one order.
	t.Run("ServerErrorRollsBack", func(t *testing.T) {
		t.Parallel()
		b, h := setup(t, create(func(run int) int {
			if run == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusCreated
		}))
		key := newKey()
		first := call(t, b, key, body)
		require.Equal(t, http.StatusInternalServerError, first.status, "the handler's own 500 is delivered")
		require.Contains(t, first.body, `"run":1`)
		require.Zero(t, txOrders(t, h, ""), "the order is rolled back")
		b.requireNoRecord(t, key, "the key is released")

		again := call(t, b, key, body)
		require.Equal(t, http.StatusCreated, again.status, "the retry runs (body %s)", again.body)
		require.Contains(t, again.body, `"run":2`)
		require.Empty(t, again.header.Get(idem.HeaderReplayed))
		require.Equal(t, 1, txOrders(t, h, ""))

		txRequireReplay(t, again, call(t, b, key, body))
		require.Equal(t, 1, txOrders(t, h, ""))
		require.EqualValues(t, 2, b.runs.Load())
	})

	// The handler writes an order, then panics: the order and the
	// reservation are rolled back, the panic goes on to net/http (which
	// breaks the connection), and the retry runs.
	t.Run("PanicRollsBack", func(t *testing.T) {
		t.Parallel()
		const msg = "idemtest: handler panic after its write"
		b, h := setup(t, ordering(func(w http.ResponseWriter, _ *http.Request, id int64, run int) {
			if run == 1 {
				panic(msg)
			}
			txRespond(w, http.StatusCreated, id, run)
		}))
		key := newKey()
		_, err := b.send(t.Context(), httpCall{key: key, body: body})
		require.Error(t, err, "the server recovered the panic and broke the connection")
		require.Contains(t, b.serverLog.String(), msg)
		require.Zero(t, txOrders(t, h, ""), "the order is rolled back")
		b.requireNoRecord(t, key, "the key is released")

		again := call(t, b, key, body)
		require.Equal(t, http.StatusCreated, again.status, "body %s", again.body)
		require.Contains(t, again.body, `"run":2`)
		require.Equal(t, 1, txOrders(t, h, ""))
		require.Zero(t, h.ConnsInUse(), "every transaction's connection went back to the pool")
	})

	// A 4xx is the application's business answer and is stored (SPEC H11),
	// so the writes the handler made before answering commit with it: the
	// order exists once, and the replay gives the same 422 without running
	// the handler again.
	t.Run("ClientErrorCommits", func(t *testing.T) {
		t.Parallel()
		b, h := setup(t, create(func(int) int { return http.StatusUnprocessableEntity }))
		key := newKey()
		first := call(t, b, key, body)
		require.Equal(t, http.StatusUnprocessableEntity, first.status, "body %s", first.body)
		require.Equal(t, 1, txOrders(t, h, ""), "the 4xx's write is committed")
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusFailed, rec.Status, "a stored 4xx")
		require.Equal(t, http.StatusUnprocessableEntity, rec.ResponseCode)

		txRequireReplay(t, first, call(t, b, key, body))
		require.Equal(t, 1, txOrders(t, h, ""))
		require.EqualValues(t, 1, b.runs.Load())
	})

	// The decision-table row "transactional mode, deferred constraint fails
	// at COMMIT → 500, never replayed" (idempotency-anchors §5.3, Sentinel
	// O-26). The handler's write is valid when made, so the handler answers
	// 201; the deferred foreign key fails at COMMIT. The client must get 500
	// idempotency_transaction_failed, not the 201 whose writes were lost,
	// and nothing is kept: a retry runs again, fails again the same way,
	// and succeeds once the violation is gone. A failed COMMIT gives its
	// connection back (SQLite leaves the transaction open: the store must
	// roll it back and let go of the write lock).
	t.Run("DeferredConstraintFailsAtCommit", func(t *testing.T) {
		t.Parallel()
		b, h := setup(t, create(created))
		if h.NoDeferredConstraints != "" {
			t.Skip(h.NoDeferredConstraints)
		}
		key := newKey()
		const body = `{"note":"n","customer":"c-1"}` // no such customer yet

		for run := 1; run <= 2; run++ {
			resp := call(t, b, key, body)
			requireProblem(t, resp, http.StatusInternalServerError, idem.CodeTransactionFailed)
			require.NotContains(t, resp.body, `"run"`, "the handler's 201 is never delivered")
			require.Empty(t, resp.header.Get("Location"))
			require.EqualValues(t, run, b.runs.Load(), "the retry is not a replay: the handler ran again")
			require.Zero(t, txOrders(t, h, ""))
			b.requireNoRecord(t, key, "no record after a failed commit")
		}
		require.Zero(t, h.ConnsInUse(), "a failed COMMIT gives its connection back to the pool")
		rejected, _ := b.hooks.events()
		require.Len(t, rejected, 2)
		require.Equal(t, idem.CodeTransactionFailed, rejected[0].Code)
		require.Equal(t, b.scope, rejected[0].Scope)

		require.NoError(t, h.AddCustomer(t.Context(), "c-1"))
		ok := call(t, b, key, body)
		require.Equal(t, http.StatusCreated, ok.status, "body %s", ok.body)
		require.Contains(t, ok.body, `"run":3`)
		require.Empty(t, ok.header.Get(idem.HeaderReplayed))
		require.Equal(t, 1, txOrders(t, h, ""))
		txRequireReplay(t, ok, call(t, b, key, body))
		require.EqualValues(t, 3, b.runs.Load())
		require.Equal(t, 1, txOrders(t, h, ""))
	})

	// The handler is held after it has written its order and its whole 201,
	// larger than net/http's write buffer so that a response passed
	// through would reach the client at once: the response is buffered, so
	// the client has no byte of it yet and nobody else sees the order or
	// the record; once the handler returns and the transaction commits, the
	// client gets the 201 and the order is there.
	t.Run("ResponseAfterCommit", func(t *testing.T) {
		t.Parallel()
		entered, release := make(chan struct{}), make(chan struct{})
		b, h := setup(t, padded(func(r *http.Request) {
			close(entered)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		key := newKey()
		firstByte, pending := b.startTraced(t, httpCall{key: key, body: body})
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler did not run within 10s")
		}
		require.Zero(t, txOrders(t, h, ""), "the order is not visible before the commit")
		b.requireNoRecord(t, key, "the reservation is not visible before the commit")
		requireNoResponseYet(t, firstByte, pending, "before the commit")

		close(release)
		resp := await(t, pending)
		require.Equal(t, http.StatusCreated, resp.status, "body %.200s", resp.body)
		require.Contains(t, resp.body, txPad)
		require.Equal(t, 1, txOrders(t, h, ""), "the order is visible once the client has the answer")
		_, found := b.record(t, b.scope, routeR, key)
		require.True(t, found)
	})

	// The COMMIT itself is slow: the handler has returned its 201, but the
	// client must not get it while COMMIT is still running, since COMMIT
	// could still fail. The response is larger than net/http's write
	// buffer, so that one delivered before the COMMIT would reach the
	// client at once.
	t.Run("ResponseWaitsForSlowCommit", func(t *testing.T) {
		t.Parallel()
		b, h := setup(t, padded(func(*http.Request) {}))
		if h.HoldCommit == nil {
			t.Skip("the driver cannot hold a COMMIT (TxHarness.HoldCommit)")
		}
		committing, release := h.HoldCommit(t)
		firstByte, pending := b.startTraced(t, httpCall{key: newKey(), body: body})
		require.Eventually(t, committing, 10*time.Second, 5*time.Millisecond, "the request's COMMIT waits")
		require.EqualValues(t, 1, b.runs.Load(), "the handler ran once; it has returned, since COMMIT runs after it")
		requireNoResponseYet(t, firstByte, pending, "while COMMIT was running")
		require.Zero(t, txOrders(t, h, ""))

		release()
		resp := await(t, pending)
		require.Equal(t, http.StatusCreated, resp.status, "body %s", resp.body)
		require.Equal(t, 1, txOrders(t, h, ""))
	})
}

// txPad makes a response body larger than net/http's write buffer (4 KiB)
// and smaller than MaxResponseBytes (1 MiB), so it is stored.
var txPad = strings.Repeat("x", 64<<10)

// txInsert is the application's write: one order, from the request's JSON
// body, through the transaction of the request's context.
func txInsert(h TxHarness, r *http.Request) (int64, error) {
	var in struct {
		Note     string  `json:"note"`
		Customer *string `json:"customer"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return 0, fmt.Errorf("decode: %w", err)
	}
	return h.InsertOrder(r.Context(), in.Note, in.Customer)
}

// txRespond writes the application's answer about order id.
func txRespond(w http.ResponseWriter, status int, id int64, run int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/orders/%d", id))
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"id":%d,"run":%d}`, id, run)
}

// txRequireReplay asserts that again is a replay of first, Location too.
func txRequireReplay(t *testing.T, first, again httpResponse) {
	t.Helper()
	requireReplay(t, first, again)
	require.Equal(t, first.header.Get("Location"), again.header.Get("Location"), "replayed Location")
}

// startTraced sends c from a goroutine, like start: firstByte is closed
// when the first byte of the response reaches the client.
func (b *httpBundle) startTraced(t *testing.T, c httpCall) (firstByte <-chan struct{}, done <-chan callResult) {
	first, ch := make(chan struct{}), make(chan callResult, 1)
	var once sync.Once
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { once.Do(func() { close(first) }) },
	})
	go func() {
		resp, err := b.send(ctx, c)
		ch <- callResult{resp, err}
	}()
	return first, ch
}

// requireNoResponseYet fails t if the client gets a byte of the response
// within 200 ms.
func requireNoResponseYet(t *testing.T, firstByte <-chan struct{}, done <-chan callResult, why string) {
	t.Helper()
	select {
	case <-firstByte:
		t.Fatalf("the client got the first byte of a response %s", why)
	case r := <-done:
		t.Fatalf("the client got an answer %s: %+v (error %v)", why, r.resp, r.err)
	case <-time.After(200 * time.Millisecond):
	}
}
