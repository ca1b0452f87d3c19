package idemtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// runHTTPTx covers transactional mode (SPEC H17) as far as the store's
// seam shows it: the record commits with the handler's transaction, or not
// at all. Each subtest is skipped when the store is not an [idemdriver.TxStore].
// The application's own writes through the transaction need the driver's
// accessor (idempgx.TxFrom, idemsqlite.TxFrom): [RunTransactional] tests
// those, with the driver's [TxHarness].
func runHTTPTx(t *testing.T, h httpHarness) {
	txOpts := func(handler func(w http.ResponseWriter, r *http.Request, run int)) httpOpts {
		return httpOpts{cfg: idem.MiddlewareConfig{Transactional: true}, handler: handler}
	}

	t.Run("H17CommittedResponseIsReplayed", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, txOpts(nil))
		key := newKey()
		first := b.call(t, httpCall{key: key, body: `{"amount":100}`})
		require.Equal(t, http.StatusCreated, first.status)
		require.Equal(t, `"v1"`, first.header.Get("ETag"))
		require.NotEmpty(t, first.header.Values("Set-Cookie"), "the buffered response is the handler's own")
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok, "the record is committed")
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)

		again := b.call(t, httpCall{key: key, body: `{"amount":100}`})
		requireReplay(t, first, again)
		require.Empty(t, again.header.Values("Set-Cookie"), "H12")
		requireProblem(t, b.call(t, httpCall{key: key, body: `{"amount":1}`}), http.StatusUnprocessableEntity, idem.CodeKeyReused)
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H17ServerErrorRollsTheRecordBack", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, txOpts(nil))
		key := newKey()
		fail := http.Header{headerStatus: {"500"}}
		first := b.call(t, httpCall{key: key, header: fail})
		require.Equal(t, http.StatusInternalServerError, first.status, "the handler's response is delivered")
		require.Equal(t, 1, decodeCreated(t, first).Run)
		b.requireNoRecord(t, key, "H10/H17: the reservation is rolled back with the handler's writes")
		again := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusCreated, again.status, "the retry runs")
		require.Equal(t, 2, decodeCreated(t, again).Run)
		requireReplay(t, again, b.call(t, httpCall{key: key}))
	})

	t.Run("H17PanicRollsBackAndPropagates", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, txOpts(func(w http.ResponseWriter, r *http.Request, run int) {
			if run == 1 {
				panic(handlerPanic)
			}
			respondCreated(w, r, run)
		}))
		key := newKey()
		_, err := b.send(t.Context(), httpCall{key: key})
		require.Error(t, err, "the server recovered the panic and broke the connection")
		require.Contains(t, b.serverLog.String(), handlerPanic)
		b.requireNoRecord(t, key, "a panic rolls the reservation back")
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{key: key}).status)
	})

	t.Run("H17DuplicateWaitsForTheCommitThenReplays", func(t *testing.T) {
		t.Parallel()
		g := newGate(t)
		b := h.setup(t, txOpts(g.holdFirst))
		key := newKey()
		pending := b.start(t, httpCall{key: key})
		g.waitEntered(t)
		dup := b.start(t, httpCall{key: key})
		select {
		case r := <-dup:
			t.Fatalf("the duplicate was answered while the first transaction was open: %+v (error %v)", r.resp, r.err)
		case <-time.After(200 * time.Millisecond):
		}
		g.open()
		first := await(t, pending)
		require.Equal(t, http.StatusCreated, first.status)
		requireReplay(t, first, await(t, dup))
		require.EqualValues(t, 1, b.runs.Load(), "the duplicate never ran")
	})
}
