package idemtest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
)

// handlerPanic is what the panicking test handler panics with.
const handlerPanic = "idemtest: handler panicked on purpose"

// runHTTPFailures covers a handler that panics, a store that is down and
// request bodies the middleware cannot fingerprint.
func runHTTPFailures(t *testing.T, h httpHarness) {
	t.Run("HandlerPanicPropagatesAndReleasesTheKey", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{handler: func(w http.ResponseWriter, r *http.Request, run int) {
			if run == 1 {
				panic(handlerPanic)
			}
			respondCreated(w, r, run)
		}})
		key := newKey()
		_, err := b.send(t.Context(), httpCall{key: key})
		require.Error(t, err, "the server recovered the panic and broke the connection")
		require.Contains(t, b.serverLog.String(), handlerPanic, "the panic reached the http.Server")
		b.requireNoRecord(t, key, "a panic releases the key")

		again := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusCreated, again.status, "the next request runs")
		require.Equal(t, 2, decodeCreated(t, again).Run)
		requireReplay(t, again, b.call(t, httpCall{key: key}))
	})

	t.Run("StoreDownIs503WithRetryAfter", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		b.spy.failReserve.Store(true)
		key := newKey()
		resp := b.call(t, httpCall{key: key})
		requireProblem(t, resp, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
		requireRetryAfter(t, resp)
		require.Zero(t, b.runs.Load(), "fail closed: the handler did not run")
		rejected, _ := b.hooks.events()
		require.Len(t, rejected, 1)
		require.Equal(t, idem.CodeStoreUnavailable, rejected[0].Code)

		b.spy.failReserve.Store(false)
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{key: key}).status, "the retry with the same key runs")
	})

	t.Run("RequestTooLargeIs413", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{MaxRequestBytes: 100}})
		resp := b.call(t, httpCall{key: newKey(), body: strings.Repeat("a", 100)})
		require.Equal(t, http.StatusCreated, resp.status, "a body of MaxRequestBytes is accepted")
		require.Equal(t, 100, decodeCreated(t, resp).Len)

		key := newKey()
		requireProblem(t, b.call(t, httpCall{key: key, body: strings.Repeat("a", 101)}), http.StatusRequestEntityTooLarge, idem.CodeRequestTooLarge)
		require.EqualValues(t, 1, b.runs.Load(), "the handler did not run")
		require.Len(t, b.spy.idents(), 1, "nothing stored for the large request")
	})

	t.Run("MalformedMultipartIs400", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		for name, c := range map[string]httpCall{
			"not multipart":        {body: "junk", contentType: "multipart/form-data; boundary=xyz"},
			"no boundary":          {body: "--xyz\r\n\r\nv\r\n--xyz--\r\n", contentType: "multipart/form-data"},
			"no close delimiter":   {body: "--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n", contentType: "multipart/form-data; boundary=xyz"},
			"bad disposition":      {body: "--xyz\r\nContent-Disposition: form-data; name=\r\n\r\nv\r\n--xyz--\r\n", contentType: "multipart/form-data; boundary=xyz"},
			"no part at all":       {body: "--xyz--\r\n", contentType: "multipart/form-data; boundary=xyz"},
			"empty multipart body": {body: "", contentType: "multipart/form-data; boundary=xyz"},
		} {
			c.key = newKey()
			resp := b.call(t, c)
			require.Equal(t, http.StatusBadRequest, resp.status, "%s: body %s", name, resp.body)
			requireProblem(t, resp, http.StatusBadRequest, idem.CodeMalformedBody)
		}
		require.Zero(t, b.runs.Load(), "the handler did not run")
		require.Empty(t, b.spy.idents(), "nothing stored")
	})
}
