package idemtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// runHTTPKeys covers which requests the middleware handles and which keys
// it accepts (SPEC H1–H4, H18).
func runHTTPKeys(t *testing.T, h httpHarness) {
	t.Run("H1OtherMethodsPassUntouched", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			key := newKey()
			for i := range 2 {
				resp := b.call(t, httpCall{method: method, key: key})
				require.Equal(t, http.StatusCreated, resp.status, "%s #%d", method, i+1)
				require.Empty(t, resp.header.Get(idem.HeaderReplayed), "%s #%d is not replayed", method, i+1)
			}
		}
		require.EqualValues(t, 6, b.runs.Load(), "the handler ran for every GET, PUT and DELETE")
		require.Empty(t, b.spy.idents(), "other methods never reach the store")

		for _, method := range []string{http.MethodPost, http.MethodPatch} {
			key := newKey()
			first := b.call(t, httpCall{method: method, key: key})
			require.Equal(t, http.StatusCreated, first.status, method)
			requireReplay(t, first, b.call(t, httpCall{method: method, key: key}))
		}
		require.EqualValues(t, 8, b.runs.Load(), "POST and PATCH ran once each")
		require.Len(t, b.spy.idents(), 2)
	})

	t.Run("H1CustomMethods", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{Methods: []string{http.MethodPut}}})
		key := newKey()
		first := b.call(t, httpCall{method: http.MethodPut, key: key})
		requireReplay(t, first, b.call(t, httpCall{method: http.MethodPut, key: key}))
		require.EqualValues(t, 1, b.runs.Load())

		key = newKey()
		for range 2 {
			resp := b.call(t, httpCall{key: key})
			require.Equal(t, http.StatusCreated, resp.status)
			require.Empty(t, resp.header.Get(idem.HeaderReplayed), "POST is not configured")
		}
		require.EqualValues(t, 3, b.runs.Load())
		require.Len(t, b.spy.idents(), 1, "only the PUT reached the store")
	})

	t.Run("H2QuotedKeyIsAcceptedAndParametersIgnored", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		first := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusCreated, first.status)
		require.Empty(t, first.header.Get(idem.HeaderReplayed), "a first response is not a replay")
		again := b.call(t, httpCall{header: http.Header{"Idempotency-Key": {quote(key) + ";v=1"}}})
		requireReplay(t, first, again)
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H2UnquotedKeyRejectedUnlessAcceptUnquoted", func(t *testing.T) {
		t.Parallel()
		strict := h.setup(t, httpOpts{})
		key := newKey()
		resp := strict.call(t, httpCall{header: http.Header{"Idempotency-Key": {key}}})
		requireProblem(t, resp, http.StatusBadRequest, idem.CodeInvalidKey)
		require.Zero(t, strict.runs.Load(), "the handler did not run")
		require.Empty(t, strict.spy.idents(), "nothing stored")

		lax := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{Key: idem.KeyRules{AcceptUnquoted: true}}})
		first := lax.call(t, httpCall{header: http.Header{"Idempotency-Key": {key}}})
		require.Equal(t, http.StatusCreated, first.status)
		requireReplay(t, first, lax.call(t, httpCall{key: key}))
		require.EqualValues(t, 1, lax.runs.Load(), `"k" and k are the same key`)
		resp = lax.call(t, httpCall{header: http.Header{"Idempotency-Key": {quote(key) + ", " + quote(newKey())}}})
		requireProblem(t, resp, http.StatusBadRequest, idem.CodeInvalidKey)
	})

	t.Run("H4InvalidKeysAre400", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		k1, k2 := newKey(), newKey()
		cases := map[string][]string{
			"two field lines":  {quote(k1), quote(k2)},
			"the same twice":   {quote(k1), quote(k1)},
			"a list":           {quote(k1) + ", " + quote(k2)},
			"15 bytes":         {quote(strings.Repeat("a", 15))},
			"256 bytes":        {quote(strings.Repeat("b", 256))},
			"empty":            {""},
			"empty string":     {`""`},
			"an integer":       {"12345678901234567"},
			"a byte sequence":  {":" + "YWJjZGVmZ2hpamtsbW5vcHFy" + ":"},
			"unterminated":     {`"` + k1},
			"non-ASCII string": {`"` + k1 + "é\""},
		}
		for name, lines := range cases {
			resp := b.call(t, httpCall{header: http.Header{"Idempotency-Key": lines}})
			requireProblem(t, resp, http.StatusBadRequest, idem.CodeInvalidKey)
			require.NotContains(t, resp.body, k1, "%s: the problem never echoes the key", name)
		}
		require.Zero(t, b.runs.Load(), "the handler never ran")
		require.Empty(t, b.spy.idents(), "nothing stored")
	})

	t.Run("H3KeyLengthBounds", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		for _, n := range []int{16, 255} {
			resp := b.call(t, httpCall{key: strings.Repeat("c", n)})
			require.Equal(t, http.StatusCreated, resp.status, "%d bytes", n)
		}
		for _, n := range []int{15, 256} {
			resp := b.call(t, httpCall{key: strings.Repeat("d", n)})
			requireProblem(t, resp, http.StatusBadRequest, idem.CodeInvalidKey)
		}
		require.EqualValues(t, 2, b.runs.Load(), "only 16 and 255 bytes ran")
		require.Len(t, b.spy.idents(), 2)

		narrow := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{Key: idem.KeyRules{MinLength: 20, MaxLength: 30}}})
		requireProblem(t, narrow.call(t, httpCall{key: strings.Repeat("e", 19)}), http.StatusBadRequest, idem.CodeInvalidKey)
		requireProblem(t, narrow.call(t, httpCall{key: strings.Repeat("e", 31)}), http.StatusBadRequest, idem.CodeInvalidKey)
		require.Equal(t, http.StatusCreated, narrow.call(t, httpCall{key: strings.Repeat("e", 20)}).status)
		require.Equal(t, http.StatusCreated, narrow.call(t, httpCall{key: strings.Repeat("f", 30)}).status)
	})

	t.Run("H4MissingKeyOnRequiredRouteIs400", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		for _, path := range []string{"/r", "/r2", "/d/1"} {
			resp := b.call(t, httpCall{path: path, body: `{"a":1}`})
			requireProblem(t, resp, http.StatusBadRequest, idem.CodeKeyMissing)
		}
		require.Zero(t, b.runs.Load(), "the handler did not run")
		require.Empty(t, b.spy.idents(), "nothing stored")
	})

	t.Run("H4MissingKeyOnOptionalRoutePassesThrough", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		for i := range 3 {
			resp := b.call(t, httpCall{path: "/o", body: `{"a":1}`})
			require.Equal(t, http.StatusCreated, resp.status)
			require.Empty(t, resp.header.Get(idem.HeaderReplayed))
			require.Equal(t, i+1, decodeCreated(t, resp).Run, "the handler runs every time")
			require.NotEmpty(t, resp.header.Values("Set-Cookie"), "a pass-through response is untouched")
		}
		require.Empty(t, b.spy.idents(), "nothing stored")

		// An optional route still honours a key that is sent, and refuses a
		// bad one.
		key := newKey()
		first := b.call(t, httpCall{path: "/o", key: key})
		requireReplay(t, first, b.call(t, httpCall{path: "/o", key: key}))
		_, ok := b.record(t, b.scope, routeO, key)
		require.True(t, ok)
		requireProblem(t, b.call(t, httpCall{path: "/o", header: http.Header{"Idempotency-Key": {"short"}}}),
			http.StatusBadRequest, idem.CodeInvalidKey)
		require.EqualValues(t, 4, b.runs.Load())
	})

	t.Run("H3H18ConfigErrorsAtStartUp", func(t *testing.T) {
		t.Parallel()
		s := h.newStore(t)
		e := newEngine(t, s, idem.Config{})

		_, err := idem.NewMiddleware(e, idem.MiddlewareConfig{Key: idem.KeyRules{MinLength: 20, MaxLength: 10}})
		require.Error(t, err, "H3: MinLength above MaxLength")
		_, err = idem.NewMiddleware(e, idem.MiddlewareConfig{Key: idem.KeyRules{MaxLength: 10}})
		require.Error(t, err, "H3: MaxLength below the default MinLength")
		_, err = idem.NewMiddleware(e, idem.MiddlewareConfig{Key: idem.KeyRules{MaxLength: 256}})
		require.Error(t, err, "H3: MaxLength above 255")
		_, err = idem.NewMiddleware(e, idem.MiddlewareConfig{WaitInFlight: 31 * time.Second})
		require.Error(t, err, "H9: WaitInFlight above 30s")
		_, err = idem.NewMiddleware(e, idem.MiddlewareConfig{WaitInFlight: 30 * time.Second})
		require.NoError(t, err, "H9: WaitInFlight of 30s")
		_, err = idem.NewMiddleware(e, idem.MiddlewareConfig{Methods: []string{}})
		require.Error(t, err, "H1: no method at all")
		_, err = idem.NewMiddleware(nil, idem.MiddlewareConfig{})
		require.Error(t, err, "nil engine")

		// H17: transactional mode needs a TxStore; a store that hides it is
		// refused.
		plain := newEngine(t, struct{ idemdriver.Store }{s}, idem.Config{})
		_, err = idem.NewMiddleware(plain, idem.MiddlewareConfig{Transactional: true})
		require.Error(t, err, "H17: Transactional over a store that is not an idemdriver.TxStore")
		if _, ok := s.(idemdriver.TxStore); ok {
			_, err = idem.NewMiddleware(e, idem.MiddlewareConfig{Transactional: true})
			require.NoError(t, err, "H17: Transactional over an idemdriver.TxStore")
		}

		// H18: per-route options are validated when the route is declared.
		m, err := idem.NewMiddleware(e, idem.MiddlewareConfig{})
		require.NoError(t, err)
		require.Panics(t, func() { m.Required(&idem.RouteOpts{TTL: 10 * time.Second}) }, "H15: TTL below 60s")
		require.Panics(t, func() { m.Optional(&idem.RouteOpts{TTL: 31 * 24 * time.Hour}) }, "H15: TTL above 30 days")
		for name, opt := range map[string]*idem.RouteOpts{
			"ttl":   {TTL: 59 * time.Second},
			"lease": {Lease: -time.Second},
			"route": {Name: string(make([]byte, idem.MaxScopeBytes+1))},
		} {
			mw, err := m.Route(true, opt)
			want := idem.ErrInvalidKey
			if name == "ttl" || name == "lease" {
				want = idem.ErrInvalidOption
			}
			require.ErrorIs(t, err, want, name)
			var ve *idem.ValidationError
			require.ErrorAs(t, err, &ve, name)
			require.Equal(t, name, ve.Field)
			require.Nil(t, mw, name)
		}
		mw, err := m.Route(false, &idem.RouteOpts{TTL: idem.MinTTL, Lease: idem.MaxLease, Name: "orders"})
		require.NoError(t, err, "bounds are inclusive")
		require.NotNil(t, mw)
		require.NotPanics(t, func() { m.Required(&idem.RouteOpts{TTL: idem.MaxTTL, Lease: idem.MinLease}) })
	})
}
