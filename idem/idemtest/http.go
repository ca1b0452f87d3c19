package idemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// runHTTP drives the HTTP middleware (SPEC IDEM-H) black-box: a real
// listener, a chi router with a test authentication middleware mounted
// before the idempotency middleware, and the store under test. There is one
// subtest per rule of SPEC §1.3 and per row of the decision table that the
// research notes (idempotency-anchors §5.3) take from Sentinel's tests.
func runHTTP(t *testing.T, newStore func(t *testing.T) idemdriver.Store) {
	h := httpHarness{newStore: newStore}
	t.Run("Keys", func(t *testing.T) { runHTTPKeys(t, h) })
	t.Run("Decisions", func(t *testing.T) { runHTTPDecisions(t, h) })
	t.Run("Failures", func(t *testing.T) { runHTTPFailures(t, h) })
	t.Run("Transactional", func(t *testing.T) { runHTTPTx(t, h) })
}

// Headers the test routes understand.
const (
	headerUser   = "X-Test-User"   // the test authentication sets this principal
	headerSigner = "X-Test-Signer" // … or this verified signature key id
	headerStatus = "X-Status"      // the default handler answers this status
)

// Route names of the test router; a route's name is its records' operation.
const (
	routeR  = "r"  // POST /r: key required
	routeR2 = "r2" // POST /r2: key required, another route
	routeO  = "o"  // POST /o: key optional
)

type httpHarness struct {
	newStore func(t *testing.T) idemdriver.Store
}

// httpOpts configures one test server. The zero value is a server with the
// default middleware configuration, sealing under [Secret], and
// respondCreated as the handler.
type httpOpts struct {
	cfg idem.MiddlewareConfig
	// route are the settings of every route; setup sets their Name.
	route idem.RouteOpts
	// engine replaces the default engine configuration (Secret: [Secret]);
	// the bundle's clock is always set.
	engine *idem.Config
	// handler is the application handler; run counts its calls, from 1.
	handler func(w http.ResponseWriter, r *http.Request, run int)
	// store shares another bundle's store instead of a fresh one.
	store idemdriver.Store
}

// httpBundle is one test server over one store.
type httpBundle struct {
	store  idemdriver.Store // the store under test, not wrapped
	spy    *storeSpy        // sees every call the engine makes
	engine *idem.Engine
	mw     *idem.Middleware
	clock  *Clock
	srv    *httptest.Server
	client *http.Client
	// scope is the address scope the middleware gives the test client.
	scope     string
	runs      atomic.Int32
	hooks     *hookLog
	serverLog *syncBuffer
}

func (h httpHarness) setup(t *testing.T, o httpOpts) *httpBundle {
	t.Helper()
	s := o.store
	if s == nil {
		s = h.newStore(t)
	}
	if _, ok := s.(idemdriver.TxStore); o.cfg.Transactional && !ok {
		t.Skip("H17: the store does not implement idemdriver.TxStore; transactional mode is tested once it does")
	}
	b := &httpBundle{store: s, spy: &storeSpy{}, clock: NewClock(start), hooks: &hookLog{}, serverLog: &syncBuffer{}}
	ecfg := idem.Config{Secret: Secret}
	if o.engine != nil {
		ecfg = *o.engine
	}
	ecfg.Now = b.clock.Now
	e, err := idem.New(b.spy.wrap(s), ecfg)
	require.NoError(t, err)
	b.engine = e

	cfg := o.cfg
	if cfg.OnRejected == nil {
		cfg.OnRejected = b.hooks.rejectedHook
	}
	if cfg.OnReplayed == nil {
		cfg.OnReplayed = b.hooks.replayedHook
	}
	b.mw, err = idem.NewMiddleware(e, cfg)
	require.NoError(t, err)

	handler := o.handler
	if handler == nil {
		handler = respondCreated
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler(w, r, int(b.runs.Add(1)))
	})
	route := func(name string) *idem.RouteOpts {
		r := o.route
		r.Name = name
		return &r
	}
	r := chi.NewRouter()
	r.Use(testAuth)
	r.With(b.mw.Required(route(routeR))).HandleFunc("/r", app)
	r.With(b.mw.Required(route(routeR2))).HandleFunc("/r2", app)
	r.With(b.mw.Optional(route(routeO))).HandleFunc("/o", app)
	r.With(b.mw.Required(route(""))).HandleFunc("/d/{id}", app) // named by the default RouteFunc

	b.srv = httptest.NewUnstartedServer(r)
	// A handler's panic is logged by the server; keep it for the test.
	b.srv.Config.ErrorLog = log.New(b.serverLog, "", 0)
	b.srv.Start()
	// No keep-alive: net/http's transport silently retries a request that
	// carries an Idempotency-Key when a reused connection breaks, which
	// would hide a panic's broken connection.
	tr := &http.Transport{DisableKeepAlives: true}
	b.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		b.srv.CloseClientConnections() // a handler still held ends with its request's context
		b.srv.Close()
	})
	host, _, err := net.SplitHostPort(b.srv.Listener.Addr().String())
	require.NoError(t, err)
	b.scope = "ip:" + host
	return b
}

// testAuth is the application's authentication, mounted before the
// idempotency middleware (SPEC H5).
func testAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if u := r.Header.Get(headerUser); u != "" {
			ctx = idem.ContextWithPrincipal(ctx, "web", u)
		}
		if k := r.Header.Get(headerSigner); k != "" {
			ctx = idem.ContextWithVerifiedSignature(ctx, "partners", k)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// respondCreated is the default application handler. It reads the whole
// body and answers 201 (or the status in X-Status) with a JSON body naming
// its run and the body length it read, plus headers that are replayed
// (Content-Type, ETag) and headers that must not be (X-Internal,
// Set-Cookie).
func respondCreated(w http.ResponseWriter, r *http.Request, run int) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	status := http.StatusCreated
	if n, err := strconv.Atoi(r.Header.Get(headerStatus)); err == nil {
		status = n
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, run))
	w.Header().Set("X-Internal", "node-7")
	http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cr3t"})
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"run":%d,"len":%d}`, run, len(body))
}

// created is what respondCreated wrote.
type created struct {
	Run int `json:"run"`
	Len int `json:"len"`
}

func decodeCreated(t *testing.T, resp httpResponse) created {
	t.Helper()
	var c created
	require.NoError(t, json.Unmarshal([]byte(resp.body), &c), "body %q", resp.body)
	return c
}

// newKey returns a fresh idempotency key: 27 bytes, a valid RFC 9651 Token
// (it starts with a letter), so it can be sent quoted or not.
func newKey() string { return "k" + rand.Text() }

// quote returns key as an RFC 9651 String.
func quote(key string) string { return `"` + key + `"` }

// httpCall is one request to the test server.
type httpCall struct {
	method      string // default POST
	path        string // default /r
	key         string // sent quoted as Idempotency-Key when not empty
	body        string
	contentType string // default application/json
	header      http.Header
}

type httpResponse struct {
	status int
	header http.Header
	body   string
}

func (b *httpBundle) send(ctx context.Context, c httpCall) (httpResponse, error) {
	method, path, ct := c.method, c.path, c.contentType
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = "/r"
	}
	if ct == "" {
		ct = "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, strings.NewReader(c.body))
	if err != nil {
		return httpResponse{}, err
	}
	req.Header.Set("Content-Type", ct)
	if c.key != "" {
		req.Header.Set("Idempotency-Key", quote(c.key))
	}
	for k, v := range c.header {
		req.Header[k] = append(req.Header[k], v...)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return httpResponse{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpResponse{}, fmt.Errorf("read response: %w", err)
	}
	return httpResponse{status: resp.StatusCode, header: resp.Header, body: string(body)}, nil
}

// call sends c and fails the test on a transport error.
func (b *httpBundle) call(t *testing.T, c httpCall) httpResponse {
	t.Helper()
	resp, err := b.send(t.Context(), c)
	require.NoError(t, err)
	return resp
}

type callResult struct {
	resp httpResponse
	err  error
}

// start sends c from a goroutine, which exits when the response is in;
// collect the result with await.
func (b *httpBundle) start(t *testing.T, c httpCall) <-chan callResult {
	ch := make(chan callResult, 1)
	ctx := t.Context()
	go func() {
		resp, err := b.send(ctx, c)
		ch <- callResult{resp, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan callResult) httpResponse {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.resp
	case <-time.After(30 * time.Second):
		t.Fatal("no response within 30s")
		return httpResponse{}
	}
}

// httpIdent is the record identity of key sent by scope to the named route.
func httpIdent(scope, route, key string) idemdriver.Ident {
	return idemdriver.Ident{Scope: scope, Operation: route, KeyDigest: idem.Digest(scope, route, key)}
}

// record reads the record of key sent by scope to route.
func (b *httpBundle) record(t *testing.T, scope, route, key string) (idemdriver.Record, bool) {
	t.Helper()
	rec, ok, err := b.store.Get(t.Context(), httpIdent(scope, route, key))
	require.NoError(t, err)
	return rec, ok
}

// requireNoRecord says that key has no record on route /r for the test
// client.
func (b *httpBundle) requireNoRecord(t *testing.T, key, msg string) {
	t.Helper()
	_, ok := b.record(t, b.scope, routeR, key)
	require.False(t, ok, "%s: no record expected", msg)
}

// plant writes a completed record for key, as if the middleware had stored
// result for a request with fingerprint, through the store's primitives.
func (b *httpBundle) plant(t *testing.T, key, fingerprint string, result []byte) {
	t.Helper()
	ctx := t.Context()
	id := httpIdent(b.scope, routeR, key)
	rec, created, err := b.store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Fingerprint: fingerprint, Owner: "planter",
		Lease: time.Minute, TTL: time.Hour, Now: b.clock.Now()})
	require.NoError(t, err)
	require.True(t, created)
	require.NoError(t, b.store.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: result,
		ResponseCode: http.StatusCreated, Now: b.clock.Now()}))
}

// requireProblem asserts an RFC 9457 rejection (SPEC H16).
func requireProblem(t *testing.T, resp httpResponse, status int, code string) {
	t.Helper()
	require.Equal(t, status, resp.status, "status (body %s)", resp.body)
	require.Equal(t, "application/problem+json", resp.header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(resp.body), &p), "problem body %q", resp.body)
	for _, member := range []string{"type", "title", "detail", "code"} {
		s, ok := p[member].(string)
		require.True(t, ok && s != "", "problem member %q: got %v", member, p[member])
	}
	require.Equal(t, float64(status), p["status"], "problem status member")
	require.Equal(t, code, p["code"])
	require.Empty(t, resp.header.Get(idem.HeaderReplayed), "a rejection is not a replay")
}

// requireRetryAfter asserts a Retry-After of whole seconds, at least 1, and
// returns it.
func requireRetryAfter(t *testing.T, resp httpResponse) int {
	t.Helper()
	v := resp.header.Get("Retry-After")
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "Retry-After %q must be whole seconds", v)
	require.GreaterOrEqual(t, n, 1, "Retry-After")
	return n
}

// requireReplay asserts that again is a replay of first (SPEC H7).
func requireReplay(t *testing.T, first, again httpResponse) {
	t.Helper()
	require.Equal(t, first.status, again.status, "replayed status")
	require.Equal(t, first.body, again.body, "replayed body")
	require.Equal(t, "true", again.header.Get(idem.HeaderReplayed), "Idempotent-Replayed")
}

// gate holds a handler until the test opens it.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{entered: make(chan struct{}, 16), release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

// hold is called by a handler: it signals entry, then waits for open or for
// the request's end.
func (g *gate) hold(r *http.Request) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-r.Context().Done():
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// holdFirst is respondCreated with its first run held at g.
func (g *gate) holdFirst(w http.ResponseWriter, r *http.Request, run int) {
	if run == 1 {
		g.hold(r)
	}
	respondCreated(w, r, run)
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start within 10s")
	}
}

// hookLog records the middleware's events (SPEC H16).
type hookLog struct {
	mu       sync.Mutex
	rejected []idem.RejectedEvent
	replayed []idem.ReplayedEvent
}

func (h *hookLog) rejectedHook(_ *http.Request, ev idem.RejectedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rejected = append(h.rejected, ev)
}

func (h *hookLog) replayedHook(_ *http.Request, ev idem.ReplayedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.replayed = append(h.replayed, ev)
}

func (h *hookLog) events() ([]idem.RejectedEvent, []idem.ReplayedEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]idem.RejectedEvent(nil), h.rejected...), append([]idem.ReplayedEvent(nil), h.replayed...)
}

// storeSpy sees the engine's store calls and can make them fail.
type storeSpy struct {
	mu       sync.Mutex
	reserved map[idemdriver.Ident]int
	// failReserve makes every Reserve fail: the store is down.
	failReserve atomic.Bool
	// failCompletes makes that many next Complete calls fail.
	failCompletes atomic.Int32
	// completesDown makes every Complete fail while it is set.
	completesDown atomic.Bool
}

var errStoreDown = errors.New("idemtest: store down")

// wrap returns s seen by the spy; a TxStore stays a TxStore.
func (sp *storeSpy) wrap(s idemdriver.Store) idemdriver.Store {
	if txs, ok := s.(idemdriver.TxStore); ok {
		return spyTxStore{spyStore: spyStore{Store: s, spy: sp}, tx: txs}
	}
	return spyStore{Store: s, spy: sp}
}

// idents returns the idents Reserve was called for, each once.
func (sp *storeSpy) idents() []idemdriver.Ident {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := make([]idemdriver.Ident, 0, len(sp.reserved))
	for id := range sp.reserved {
		out = append(out, id)
	}
	return out
}

type spyStore struct {
	idemdriver.Store
	spy *storeSpy
}

func (s spyStore) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	s.spy.mu.Lock()
	if s.spy.reserved == nil {
		s.spy.reserved = map[idemdriver.Ident]int{}
	}
	s.spy.reserved[p.Ident]++
	s.spy.mu.Unlock()
	if s.spy.failReserve.Load() {
		return idemdriver.Record{}, false, errStoreDown
	}
	return s.Store.Reserve(ctx, p)
}

func (s spyStore) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if s.spy.failCompletes.Add(-1) >= 0 || s.spy.completesDown.Load() {
		return errStoreDown
	}
	return s.Store.Complete(ctx, id, o, c)
}

type spyTxStore struct {
	spyStore
	tx idemdriver.TxStore
}

func (s spyTxStore) WithinTx(ctx context.Context, fn func(ctx context.Context, tx idemdriver.Store) error) error {
	return s.tx.WithinTx(ctx, func(ctx context.Context, tx idemdriver.Store) error {
		return fn(ctx, spyStore{Store: tx, spy: s.spy})
	})
}

// syncBuffer is an io.Writer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
