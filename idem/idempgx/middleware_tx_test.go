package idempgx_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/internal/pgtest"
)

// These tests drive the HTTP middleware in transactional mode (SPEC H17)
// over PostgreSQL with an application handler that writes its own rows
// through idempgx.TxFrom: those writes happen exactly once per key, commit
// with the record or not at all, and the client hears of them only after
// the commit.

// The application's tables. orders.customer_id is checked at COMMIT only
// (DEFERRABLE INITIALLY DEFERRED), so that a request naming an unknown
// customer fails when the middleware commits, not in the handler.
const mtxSchema = `
CREATE TABLE customers (id text PRIMARY KEY);
CREATE TABLE orders (
	id          bigserial PRIMARY KEY,
	note        text NOT NULL,
	customer_id text REFERENCES customers (id) DEFERRABLE INITIALLY DEFERRED
);`

const (
	mtxRoute = "orders"
	mtxScope = "user:web:alice" // idem.PrincipalScope of the test authentication
)

// mtxApp is one test server: chi, a test authentication, the idempotency
// middleware in transactional mode, and the application handler, over a
// migrated store on a schema of its own.
type mtxApp struct {
	pool      *pgxpool.Pool
	store     *idempgx.Store
	srv       *httptest.Server
	client    *http.Client
	runs      atomic.Int32 // handler calls, from 1
	serverLog *mtxBuffer

	mu       sync.Mutex
	rejected []idem.RejectedEvent
}

// mtxHandler is the application handler; run counts its calls, from 1.
type mtxHandler func(w http.ResponseWriter, r *http.Request, run int)

func mtxSetup(t *testing.T, handler mtxHandler) *mtxApp {
	t.Helper()
	pool := pgtest.Schema(t)
	store := idempgx.New(pool)
	require.NoError(t, store.Migrate(t.Context()))
	_, err := pool.Exec(t.Context(), mtxSchema)
	require.NoError(t, err)

	a := &mtxApp{pool: pool, store: store, serverLog: &mtxBuffer{}}
	e, err := idem.New(store, idem.WithSecret([]byte("0123456789abcdef0123456789abcdef")))
	require.NoError(t, err)
	m, err := idem.NewMiddleware(e, idem.MiddlewareConfig{
		Transactional: true,
		OnRejected: func(_ *http.Request, ev idem.RejectedEvent) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.rejected = append(a.rejected, ev)
		},
	})
	require.NoError(t, err)

	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler { // the application's authentication
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(idem.ContextWithPrincipal(r.Context(), "web", "alice")))
		})
	})
	r.With(m.Required(idem.RouteName(mtxRoute))).Post("/orders", func(w http.ResponseWriter, r *http.Request) {
		handler(w, r, int(a.runs.Add(1)))
	})
	a.srv = httptest.NewUnstartedServer(r)
	a.srv.Config.ErrorLog = log.New(a.serverLog, "", 0) // a handler's panic is logged here
	a.srv.Start()
	// No keep-alive: net/http's transport retries a request that carries an
	// Idempotency-Key on its own when a reused connection breaks, which
	// would hide the broken connection of a panic.
	tr := &http.Transport{DisableKeepAlives: true}
	a.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		a.srv.CloseClientConnections()
		a.srv.Close()
	})
	return a
}

type mtxResponse struct {
	status int
	header http.Header
	body   string
}

// send posts body to /orders with key as the Idempotency-Key.
func (a *mtxApp) send(ctx context.Context, key, body string) (mtxResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.srv.URL+"/orders", strings.NewReader(body))
	if err != nil {
		return mtxResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := a.client.Do(req)
	if err != nil {
		return mtxResponse{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return mtxResponse{}, fmt.Errorf("read response: %w", err)
	}
	return mtxResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

func (a *mtxApp) call(t *testing.T, key, body string) mtxResponse {
	t.Helper()
	resp, err := a.send(t.Context(), key, body)
	require.NoError(t, err)
	return resp
}

// start sends from a goroutine: firstByte is closed when the first byte of
// the response reaches the client, and done gets the result.
func (a *mtxApp) start(t *testing.T, key, body string) (firstByte <-chan struct{}, done <-chan mtxResult) {
	first, ch := make(chan struct{}), make(chan mtxResult, 1)
	var once sync.Once
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { once.Do(func() { close(first) }) },
	})
	go func() {
		resp, err := a.send(ctx, key, body)
		ch <- mtxResult{resp, err}
	}()
	return first, ch
}

// mtxNotYet fails t if the client gets a byte of the response within
// 200 ms.
func mtxNotYet(t *testing.T, firstByte <-chan struct{}, done <-chan mtxResult, why string) {
	t.Helper()
	select {
	case <-firstByte:
		t.Fatalf("the client got the first byte of a response %s", why)
	case r := <-done:
		t.Fatalf("the client got an answer %s: %+v (error %v)", why, r.resp, r.err)
	case <-time.After(200 * time.Millisecond):
	}
}

type mtxResult struct {
	resp mtxResponse
	err  error
}

func mtxAwait(t *testing.T, ch <-chan mtxResult) mtxResponse {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.resp
	case <-time.After(30 * time.Second):
		t.Fatal("no response within 30s")
		return mtxResponse{}
	}
}

// orders counts the committed orders, as any other connection sees them.
func (a *mtxApp) orders(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT count(*) FROM orders").Scan(&n))
	return n
}

// record reads key's record through the store, outside any transaction.
func (a *mtxApp) record(t *testing.T, key string) (idemdriver.Record, bool) {
	t.Helper()
	rec, ok, err := a.store.Get(t.Context(), idemdriver.Ident{Scope: mtxScope, Operation: mtxRoute, KeyDigest: idem.Digest(mtxScope, mtxRoute, key)})
	require.NoError(t, err)
	return rec, ok
}

func (a *mtxApp) rejections() []idem.RejectedEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]idem.RejectedEvent(nil), a.rejected...)
}

func mtxKey() string { return "k" + rand.Text() }

// mtxPad makes a response body larger than net/http's write buffer (4 KiB)
// and smaller than MaxResponseBytes (1 MiB), so it is stored.
var mtxPad = strings.Repeat("x", 64<<10)

// mtxInsert is the application's write: one order, from the request's
// JSON body, through the transaction of the request's context.
func mtxInsert(r *http.Request) (int64, error) {
	var in struct {
		Note     string  `json:"note"`
		Customer *string `json:"customer"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return 0, fmt.Errorf("decode: %w", err)
	}
	tx, ok := idempgx.TxFrom(r.Context())
	if !ok {
		return 0, errors.New("no transaction in the request's context")
	}
	var id int64
	err := tx.QueryRow(r.Context(), "INSERT INTO orders (note, customer_id) VALUES ($1, $2) RETURNING id", in.Note, in.Customer).Scan(&id)
	return id, err
}

// mtxRespond writes the application's answer about order id.
func mtxRespond(w http.ResponseWriter, status int, id int64, run int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/orders/%d", id))
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"id":%d,"run":%d}`, id, run)
}

// mtxCreate inserts the order and answers 201, or 500 naming the error.
func mtxCreate(w http.ResponseWriter, r *http.Request, run int) {
	id, err := mtxInsert(r)
	if err != nil {
		http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
		return
	}
	mtxRespond(w, http.StatusCreated, id, run)
}

func mtxRequireReplay(t *testing.T, first, again mtxResponse) {
	t.Helper()
	require.Equal(t, first.status, again.status, "replayed status")
	require.Equal(t, first.body, again.body, "replayed body")
	require.Equal(t, first.header.Get("Location"), again.header.Get("Location"), "replayed Location")
	require.Equal(t, "true", again.header.Get(idem.HeaderReplayed))
}

func mtxRequireProblem(t *testing.T, resp mtxResponse, status int, code string) {
	t.Helper()
	require.Equal(t, status, resp.status, "status (body %s)", resp.body)
	require.Equal(t, "application/problem+json", resp.header.Get("Content-Type"))
	var p struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.body), &p), "problem body %q", resp.body)
	require.Equal(t, code, p.Code)
	require.Equal(t, status, p.Status)
	require.Empty(t, resp.header.Get(idem.HeaderReplayed), "a rejection is not a replay")
}

// TestMiddlewareTxConcurrentDuplicates sends one key 20 times at once: the
// handler runs once, one order is written, and every other request waits
// for the first one's commit and replays its answer. In transactional mode
// a duplicate's Reserve waits on the unique index for the first
// transaction to end, and then finds a completed record: it never sees the
// key processing, so no 409 can appear.
func TestMiddlewareTxConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	a := mtxSetup(t, func(w http.ResponseWriter, r *http.Request, run int) {
		id, err := mtxInsert(r)
		if err != nil {
			http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
			return
		}
		time.Sleep(100 * time.Millisecond) // keep the transaction open while the duplicates arrive
		mtxRespond(w, http.StatusCreated, id, run)
	})
	key := mtxKey()
	const n = 20
	results := make([]mtxResult, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := a.send(t.Context(), key, `{"note":"duplicate"}`)
			results[i] = mtxResult{resp, err}
		})
	}
	close(start)
	wg.Wait()

	var first *mtxResponse
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
			mtxRequireReplay(t, *first, r.resp)
		}
	}
	require.EqualValues(t, 1, a.runs.Load(), "the handler ran once")
	require.Equal(t, 1, a.orders(t), "exactly one order")
	rec, ok := a.record(t, key)
	require.True(t, ok)
	require.Equal(t, idemdriver.StatusCompleted, rec.Status)
	require.Equal(t, http.StatusCreated, rec.ResponseCode)
	require.Empty(t, a.rejections())
}

// TestMiddlewareTxServerErrorRollsBack: the handler writes an order, then
// answers 500: the order goes with the reservation, the client gets the
// 500, and the retry with the same key runs again and commits one order.
func TestMiddlewareTxServerErrorRollsBack(t *testing.T) {
	t.Parallel()
	a := mtxSetup(t, func(w http.ResponseWriter, r *http.Request, run int) {
		id, err := mtxInsert(r)
		if err != nil {
			http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
			return
		}
		status := http.StatusCreated
		if run == 1 {
			status = http.StatusInternalServerError
		}
		mtxRespond(w, status, id, run)
	})
	key := mtxKey()
	first := a.call(t, key, `{"note":"n"}`)
	require.Equal(t, http.StatusInternalServerError, first.status, "the handler's own 500 is delivered")
	require.Contains(t, first.body, `"run":1`)
	require.Zero(t, a.orders(t), "the order is rolled back")
	_, ok := a.record(t, key)
	require.False(t, ok, "the key is released")

	again := a.call(t, key, `{"note":"n"}`)
	require.Equal(t, http.StatusCreated, again.status, "the retry runs (body %s)", again.body)
	require.Contains(t, again.body, `"run":2`)
	require.Empty(t, again.header.Get(idem.HeaderReplayed))
	require.Equal(t, 1, a.orders(t))

	mtxRequireReplay(t, again, a.call(t, key, `{"note":"n"}`))
	require.Equal(t, 1, a.orders(t))
	require.EqualValues(t, 2, a.runs.Load())
}

// TestMiddlewareTxPanicRollsBack: the handler writes an order, then
// panics: the order and the reservation are rolled back, the panic goes on
// to net/http (which breaks the connection), and the retry runs.
func TestMiddlewareTxPanicRollsBack(t *testing.T) {
	t.Parallel()
	a := mtxSetup(t, func(w http.ResponseWriter, r *http.Request, run int) {
		id, err := mtxInsert(r)
		if err != nil {
			http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if run == 1 {
			panic("mtx: handler panic after its write")
		}
		mtxRespond(w, http.StatusCreated, id, run)
	})
	key := mtxKey()
	_, err := a.send(t.Context(), key, `{"note":"n"}`)
	require.Error(t, err, "the server recovered the panic and broke the connection")
	require.Contains(t, a.serverLog.String(), "mtx: handler panic after its write")
	require.Zero(t, a.orders(t), "the order is rolled back")
	_, ok := a.record(t, key)
	require.False(t, ok, "the key is released")

	again := a.call(t, key, `{"note":"n"}`)
	require.Equal(t, http.StatusCreated, again.status, "body %s", again.body)
	require.Contains(t, again.body, `"run":2`)
	require.Equal(t, 1, a.orders(t))
	require.Zero(t, a.pool.Stat().AcquiredConns(), "every transaction's connection went back to the pool")
}

// TestMiddlewareTxClientErrorCommits: a 4xx is the application's business
// answer and is stored (SPEC H11), so the writes the handler made before
// answering commit with it: the order exists once, and the replay gives
// the same 422 without running the handler again.
func TestMiddlewareTxClientErrorCommits(t *testing.T) {
	t.Parallel()
	a := mtxSetup(t, func(w http.ResponseWriter, r *http.Request, run int) {
		id, err := mtxInsert(r)
		if err != nil {
			http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
			return
		}
		mtxRespond(w, http.StatusUnprocessableEntity, id, run) // e.g. a rejected order, kept for audit
	})
	key := mtxKey()
	first := a.call(t, key, `{"note":"n"}`)
	require.Equal(t, http.StatusUnprocessableEntity, first.status, "body %s", first.body)
	require.Equal(t, 1, a.orders(t), "the 4xx's write is committed")
	rec, ok := a.record(t, key)
	require.True(t, ok)
	require.Equal(t, idemdriver.StatusFailed, rec.Status, "a stored 4xx")
	require.Equal(t, http.StatusUnprocessableEntity, rec.ResponseCode)

	mtxRequireReplay(t, first, a.call(t, key, `{"note":"n"}`))
	require.Equal(t, 1, a.orders(t))
	require.EqualValues(t, 1, a.runs.Load())
}

// TestMiddlewareTxDeferredConstraintFailsAtCommit is the decision-table row
// "transactional mode, PostgreSQL deferred constraint fails at COMMIT → 500,
// never replayed" (idempotency-anchors §5.3, Sentinel O-26). The handler's
// write is valid when made, so the handler answers 201; the deferred
// foreign key fails at COMMIT. The client must get 500
// idempotency_transaction_failed, not the 201 whose writes were lost, and
// nothing is kept: a retry runs again, fails again the same way, and
// succeeds once the violation is gone.
func TestMiddlewareTxDeferredConstraintFailsAtCommit(t *testing.T) {
	t.Parallel()
	a := mtxSetup(t, mtxCreate)
	key := mtxKey()
	const body = `{"note":"n","customer":"c-1"}` // no such customer yet

	for run := 1; run <= 2; run++ {
		resp := a.call(t, key, body)
		mtxRequireProblem(t, resp, http.StatusInternalServerError, idem.CodeTransactionFailed)
		require.NotContains(t, resp.body, `"run"`, "the handler's 201 is never delivered")
		require.Empty(t, resp.header.Get("Location"))
		require.EqualValues(t, run, a.runs.Load(), "the retry is not a replay: the handler ran again")
		require.Zero(t, a.orders(t))
		_, ok := a.record(t, key)
		require.False(t, ok, "no record after a failed commit")
	}
	require.Zero(t, a.pool.Stat().AcquiredConns(), "a failed COMMIT gives its connection back to the pool")
	ev := a.rejections()
	require.Len(t, ev, 2)
	require.Equal(t, idem.CodeTransactionFailed, ev[0].Code)
	require.Equal(t, mtxScope, ev[0].Scope)

	_, err := a.pool.Exec(t.Context(), "INSERT INTO customers (id) VALUES ('c-1')")
	require.NoError(t, err)
	ok := a.call(t, key, body)
	require.Equal(t, http.StatusCreated, ok.status, "body %s", ok.body)
	require.Contains(t, ok.body, `"run":3`)
	require.Empty(t, ok.header.Get(idem.HeaderReplayed))
	require.Equal(t, 1, a.orders(t))
	mtxRequireReplay(t, ok, a.call(t, key, body))
	require.EqualValues(t, 3, a.runs.Load())
	require.Equal(t, 1, a.orders(t))
}

// TestMiddlewareTxResponseAfterCommit holds the handler after it has
// written its order and its whole 201, larger than net/http's write
// buffer so that a response passed through would reach the client at once:
// the response is buffered, so the client has no byte of it yet and nobody
// else sees the order or the record; once the handler returns and the
// transaction commits, the client gets the 201 and the order is there.
func TestMiddlewareTxResponseAfterCommit(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	a := mtxSetup(t, func(w http.ResponseWriter, r *http.Request, run int) {
		id, err := mtxInsert(r)
		if err != nil {
			http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%d,"run":%d,"pad":%q}`, id, run, mtxPad) // the whole response, before the wait
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	key := mtxKey()
	firstByte, pending := a.start(t, key, `{"note":"n"}`)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run within 10s")
	}
	require.Zero(t, a.orders(t), "the order is not visible before the commit")
	_, found := a.record(t, key)
	require.False(t, found, "the reservation is not visible before the commit")
	mtxNotYet(t, firstByte, pending, "before the commit")

	close(release)
	resp := mtxAwait(t, pending)
	require.Equal(t, http.StatusCreated, resp.status, "body %.200s", resp.body)
	require.Contains(t, resp.body, mtxPad)
	require.Equal(t, 1, a.orders(t), "the order is visible once the client has the answer")
	_, found = a.record(t, key)
	require.True(t, found)
}

// TestMiddlewareTxResponseWaitsForSlowCommit makes the COMMIT itself slow:
// a deferred constraint trigger on orders waits, at COMMIT, for an
// advisory lock that the test holds. The handler has returned its 201, but
// the client must not get it while COMMIT is still running, since COMMIT
// could still fail.
func TestMiddlewareTxResponseWaitsForSlowCommit(t *testing.T) {
	t.Parallel()
	a := mtxSetup(t, mtxCreate)
	lockKey := mrand.Int64() // advisory locks are per database: one of its own
	_, err := a.pool.Exec(t.Context(), `
CREATE FUNCTION orders_commit_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(TG_ARGV[0]::bigint);
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER orders_commit_gate AFTER INSERT ON orders
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
	EXECUTE FUNCTION orders_commit_gate('`+fmt.Sprint(lockKey)+`');`)
	require.NoError(t, err)

	holder, err := a.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer holder.Release()
	var pid int32
	require.NoError(t, holder.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid))
	_, err = holder.Exec(t.Context(), "SELECT pg_advisory_lock($1)", lockKey)
	require.NoError(t, err)
	locked := true
	defer func() {
		if locked {
			_, _ = holder.Exec(context.WithoutCancel(t.Context()), "SELECT pg_advisory_unlock($1)", lockKey)
		}
	}()

	key := mtxKey()
	firstByte, pending := a.start(t, key, `{"note":"n"}`)
	var waiting string
	require.Eventually(t, func() bool {
		err := a.pool.QueryRow(t.Context(),
			"SELECT query FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid).Scan(&waiting)
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "the request's COMMIT waits for the test's lock")
	require.Equal(t, "commit", strings.ToLower(strings.TrimSpace(waiting)), "it is the COMMIT that waits")
	require.EqualValues(t, 1, a.runs.Load(), "the handler ran once; it has returned, since COMMIT runs after it")
	mtxNotYet(t, firstByte, pending, "while COMMIT was running")
	require.Zero(t, a.orders(t))

	_, err = holder.Exec(t.Context(), "SELECT pg_advisory_unlock($1)", lockKey)
	require.NoError(t, err)
	locked = false
	resp := mtxAwait(t, pending)
	require.Equal(t, http.StatusCreated, resp.status, "body %s", resp.body)
	require.Equal(t, 1, a.orders(t))
}

// mtxBuffer is an io.Writer safe for concurrent use.
type mtxBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *mtxBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *mtxBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
