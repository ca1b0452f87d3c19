//go:build unix

package idem

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
)

// The benchmarks of this file measure the HTTP middleware's own cost, with
// no database: the middleware over benchMemStore, an in-memory store, side
// by side with the handler alone. The handler is called in-process through
// ServeHTTP with an httptest.ResponseRecorder. Every variant builds its
// request the same way, so the difference between a variant and "bare" is
// the middleware (and the fixture store, measured on its own in
// BenchmarkMiddlewareParts). They only report; nothing fails on timing.
// Besides ns/op they report cpu-ns/op, the CPU time of the process per
// operation (getrusage), which other load on a shared machine disturbs much
// less than the elapsed time. Built on unix only, for getrusage. See
// BENCHMARKS.md for the commands and the figures.

// benchMemStore is a BENCHMARK FIXTURE, not a store: a mutex and a map, so
// that the middleware benchmarks measure the middleware and not a database.
// It follows the Store contract closely enough for the paths measured
// (reserve, complete, release, replay) but is not checked by the
// conformance suite and must never be used by tests of behaviour. It judges
// time by time.Now. When it holds benchMemStoreCap records it forgets them
// all, so that a benchmark creating a new key on every operation measures
// neither map growth nor a heap that grows with b.N.
type benchMemStore struct {
	mu     sync.Mutex
	recs   map[idemdriver.Ident]idemdriver.Record
	fence  int64
	nextID int64
}

const benchMemStoreCap = 4096

var errBenchFixture = errors.New("idem: benchMemStore is a benchmark fixture: not implemented")

func newBenchMemStore() *benchMemStore {
	return &benchMemStore{recs: make(map[idemdriver.Ident]idemdriver.Record, benchMemStoreCap)}
}

func benchNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

func (s *benchMemStore) Reserve(_ context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	now := benchNow(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.recs[p.Ident]; ok {
		rec.ReadAt = now
		return rec, false, nil
	}
	if len(s.recs) >= benchMemStoreCap {
		clear(s.recs)
	}
	s.fence++
	s.nextID++
	rec := idemdriver.Record{ID: s.nextID, Ident: p.Ident, Fingerprint: p.Fingerprint, Status: idemdriver.StatusProcessing,
		Owner: idemdriver.Owner{Token: p.Owner, Fence: s.fence}, LeaseExpiresAt: now.Add(p.Lease), Attempts: 1, Version: 1,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(max(p.TTL, p.Lease)), ReadAt: now}
	s.recs[p.Ident] = rec
	return rec, true, nil
}

func (s *benchMemStore) Takeover(_ context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	now := benchNow(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.recs[p.Ident]
	if !ok || rec.Owner != p.Seen || rec.Status == idemdriver.StatusPending {
		return idemdriver.Record{}, idemdriver.ErrFenced
	}
	if rec.ReadAt = now; rec.LeaseLive() {
		return idemdriver.Record{}, idemdriver.ErrFenced
	}
	s.fence++
	rec.Owner = idemdriver.Owner{Token: p.NewOwner, Fence: s.fence}
	rec.Status, rec.LeaseExpiresAt, rec.Attempts = idemdriver.StatusProcessing, now.Add(p.Lease), rec.Attempts+1
	if p.Fresh {
		rec.Fingerprint, rec.Result, rec.Attempts = p.Fingerprint, nil, 1
		rec.CreatedAt, rec.ExpiresAt = now, now.Add(max(p.TTL, p.Lease))
	}
	rec.Version++
	rec.UpdatedAt = now
	s.recs[p.Ident] = rec
	return rec, nil
}

// owned returns the record and whether it is processing under o.
func (s *benchMemStore) owned(id idemdriver.Ident, o idemdriver.Owner) (idemdriver.Record, bool) {
	rec, ok := s.recs[id]
	return rec, ok && rec.Status == idemdriver.StatusProcessing && rec.Owner == o
}

func (s *benchMemStore) Complete(_ context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	now := benchNow(c.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.owned(id, o)
	if !ok {
		return idemdriver.ErrFenced
	}
	rec.Status, rec.Result, rec.ResponseCode, rec.LastError = c.Status, c.Result, c.ResponseCode, c.LastError
	rec.LeaseExpiresAt, rec.UpdatedAt = time.Time{}, now
	rec.Version++
	s.recs[id] = rec
	return nil
}

func (s *benchMemStore) Annotate(_ context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.owned(id, o)
	if !ok {
		return idemdriver.ErrFenced
	}
	if a.CorrelationID != "" {
		rec.CorrelationID = a.CorrelationID
	}
	if a.ExternalRef != "" {
		rec.ExternalRef = a.ExternalRef
	}
	rec.ResourceIDs = append(rec.ResourceIDs, a.ResourceIDs...)
	rec.Version++
	s.recs[id] = rec
	return nil
}

func (s *benchMemStore) Release(_ context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.owned(id, o); !ok {
		return idemdriver.ErrFenced
	}
	delete(s.recs, id)
	return nil
}

func (s *benchMemStore) Get(_ context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.recs[id]
	rec.ReadAt = time.Now()
	return rec, ok, nil
}

func (s *benchMemStore) Delete(_ context.Context, id idemdriver.Ident) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.recs[id]
	delete(s.recs, id)
	return ok, nil
}

func (s *benchMemStore) Settle(context.Context, idemdriver.Ident, idemdriver.Settlement) (idemdriver.Record, bool, error) {
	return idemdriver.Record{}, false, errBenchFixture
}

func (s *benchMemStore) Sweep(context.Context, idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	return idemdriver.SweepResult{}, errBenchFixture
}

func (s *benchMemStore) Extend(context.Context, idemdriver.Ident, idemdriver.Owner, time.Duration, time.Time) (time.Time, error) {
	return time.Time{}, errBenchFixture
}

var _ idemdriver.Store = (*benchMemStore)(nil)

// The request and response of the benchmarks: a small JSON order, as the
// demo shop takes it, answered 201 with a small JSON document.
const (
	benchMWRoute  = "POST /orders"
	benchMWBodyS  = `{"sku":"sku-123","qty":2}`
	benchMWRemote = "192.0.2.1:43210" // httptest.NewRequest's RemoteAddr: scope ip:192.0.2.1
)

var (
	benchMWBody     = []byte(benchMWBodyS)
	benchMWResponse = []byte(`{"id":"ord_8c1f2a","sku":"sku-123","qty":2,"created_at":"2026-11-30T02:27:21Z"}` + "\n")
)

// benchMWHandler is the application handler: it reads and decodes the
// body, and answers 201 with JSON.
func benchMWHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var order struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	if err == nil {
		err = json.Unmarshal(body, &order)
	}
	if err != nil || order.SKU == "" || order.Qty <= 0 {
		http.Error(w, "bad order", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(benchMWResponse)
}

// benchMWRequest is one request reused by every operation of a benchmark,
// so that building it costs (almost) nothing: each operation puts the body
// back and sets the key in place.
type benchMWRequest struct {
	req  *http.Request
	body *bytes.Reader
	rc   io.ReadCloser
	key  []string // the Idempotency-Key field's values, set in place
	buf  []byte
}

func newBenchMWRequest() *benchMWRequest {
	q := &benchMWRequest{body: bytes.NewReader(nil), key: []string{""}}
	q.rc = io.NopCloser(q.body)
	q.req = httptest.NewRequest(http.MethodPost, "/orders", nil)
	q.req.RemoteAddr = benchMWRemote
	q.req.Pattern = benchMWRoute // as http.ServeMux sets it
	q.req.Header.Set("Content-Type", "application/json")
	q.req.Header["Idempotency-Key"] = q.key
	q.req.ContentLength = int64(len(benchMWBody))
	return q
}

// next returns the request with a fresh body and the key of number n: a
// quoted UUID-shaped string of 36 characters. Making the key's string is
// one allocation, paid by every variant alike.
func (q *benchMWRequest) next(n int) *http.Request {
	q.buf = benchAppendKey(q.buf[:0], n)
	q.key[0] = string(q.buf)
	q.body.Reset(benchMWBody)
	q.req.Body = q.rc // the middleware replaced it
	return q.req
}

// benchAppendKey appends `"018f3c2e-7b1a-7000-8000-xxxxxxxxxxxx"`, with n
// in the last 12 hex digits.
func benchAppendKey(b []byte, n int) []byte {
	const hexdigits = "0123456789abcdef"
	b = append(b, `"018f3c2e-7b1a-7000-8000-`...)
	for shift := 44; shift >= 0; shift -= 4 {
		b = append(b, hexdigits[(n>>shift)&0xf])
	}
	return append(b, '"')
}

// benchMWEngine returns an engine over a new benchMemStore with the default
// configuration: results sealed with a random 32-byte secret.
func benchMWEngine(b *testing.B) (*Engine, *benchMemStore) {
	b.Helper()
	secret := make([]byte, MinSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		b.Fatal(err)
	}
	store := newBenchMemStore()
	e, err := New(store, Config{Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	return e, store
}

// benchMWStack returns the handler behind the middleware with its default
// configuration, on a required route.
func benchMWStack(b *testing.B) http.Handler {
	b.Helper()
	e, _ := benchMWEngine(b)
	m, err := NewMiddleware(e, MiddlewareConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return m.Required(nil)(http.HandlerFunc(benchMWHandler))
}

// benchMWServe serves one request and checks the answer: 201, replayed or
// not as expected.
func benchMWServe(h http.Handler, r *http.Request, wantReplayed bool) error {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated {
		return fmt.Errorf("status %d: %s", w.Code, w.Body.Bytes())
	}
	if got := w.Header().Get(HeaderReplayed) == "true"; got != wantReplayed {
		return fmt.Errorf("replayed %v, want %v", got, wantReplayed)
	}
	return nil
}

// benchLoop runs op b.N times on this goroutine and reports cpu-ns/op.
func benchLoop(b *testing.B, op func(i int) error) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchround.CPUTime()
	for i := range b.N {
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(benchround.CPUTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkMiddleware measures one POST through the middleware, in
// process:
//   - bare: the handler alone;
//   - first: the middleware on a new key each time (parse the key, resolve
//     the scope, fingerprint and copy the body, digest, reserve, run the
//     handler through the recorder, encode and seal the response, complete);
//   - replay: the middleware on one key completed beforehand (parse, scope,
//     fingerprint, digest, reserve finds the record, decide, open and
//     decode the stored response, write it);
//   - floor-first, floor-replay: the same answers from the least work the
//     contract asks for (benchMWFloor), the floor of first and replay.
//
// Every variant builds the same request and key string and checks the
// answer the same way, so variant − bare is the middleware plus the fixture
// store.
func BenchmarkMiddleware(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		h := http.HandlerFunc(benchMWHandler)
		q := newBenchMWRequest()
		benchLoop(b, func(i int) error { return benchMWServe(h, q.next(i), false) })
	})
	b.Run("first", func(b *testing.B) {
		h := benchMWStack(b)
		q := newBenchMWRequest()
		benchLoop(b, func(i int) error { return benchMWServe(h, q.next(i+1), false) })
	})
	b.Run("replay", func(b *testing.B) {
		h := benchMWStack(b)
		q := newBenchMWRequest()
		if err := benchMWServe(h, q.next(0), false); err != nil {
			b.Fatal(err)
		}
		benchLoop(b, func(int) error { return benchMWServe(h, q.next(0), true) })
	})
	b.Run("floor-first", func(b *testing.B) {
		f := newBenchMWFloor(b)
		q := newBenchMWRequest()
		h := http.HandlerFunc(f.serveFirst)
		benchLoop(b, func(i int) error { return benchMWServe(h, q.next(i+1), false) })
	})
	b.Run("floor-replay", func(b *testing.B) {
		f := newBenchMWFloor(b)
		q := newBenchMWRequest()
		if err := benchMWServe(http.HandlerFunc(f.serveFirst), q.next(0), false); err != nil {
			b.Fatal(err)
		}
		h := http.HandlerFunc(f.serveReplay)
		benchLoop(b, func(int) error { return benchMWServe(h, q.next(0), true) })
	})
}

// benchMWFloor is the FLOOR of the middleware: the least work
// that the contract asks of an idempotency middleware on top of the
// handler, with none of the middleware's bookkeeping (no run state on the
// context, no decision table, no lease, deadline, metrics or late
// writes), to tell the overhead that the requirements cost from the
// middleware's own. A first request: parse the key (an RFC 8941 string,
// draft-ietf-httpapi-idempotency-key-header), resolve the scope (SPEC H5),
// read the body and fingerprint the request (H6), digest the key (H5) and
// hash it for search (K11), draw an owner token, reserve in the fixture
// store, run the handler through a writer that keeps a copy of the
// response, encode and seal it (H14) and complete. A replay: the same up
// to the reservation, which finds the record, then open the stored
// response and write it with Idempotent-Replayed. It uses the package's
// parts, each measured alone in BenchmarkMiddlewareParts.
type benchMWFloor struct {
	m     *Middleware
	e     *Engine
	store *benchMemStore
	h     http.Handler
}

func newBenchMWFloor(b *testing.B) *benchMWFloor {
	b.Helper()
	e, store := benchMWEngine(b)
	m, err := NewMiddleware(e, MiddlewareConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return &benchMWFloor{m: m, e: e, store: store, h: http.HandlerFunc(benchMWHandler)}
}

// ident does the work both paths share before the reservation.
func (f *benchMWFloor) ident(r *http.Request) (id idemdriver.Ident, fp, keyHash string, err error) {
	key, err := ParseKeyHeader(r.Header, KeyRules{})
	if err != nil {
		return id, "", "", err
	}
	scope := f.m.resolveScope(r)
	fp, body, err := Fingerprint(r, 10<<20)
	if err != nil {
		return id, "", "", err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return idemdriver.Ident{Scope: scope, Operation: r.Pattern, KeyDigest: Digest(scope, r.Pattern, key)}, fp, KeyHash(key), nil
}

// serveFirst answers a first request with the floor's work.
func (f *benchMWFloor) serveFirst(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, fp, keyHash, err := f.ident(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec, created, err := f.store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, KeyHash: keyHash, Fingerprint: fp,
		Owner: newOwnerToken(), Lease: DefaultLease, TTL: DefaultTTL, Lean: true})
	if err != nil || !created {
		http.Error(w, "reserve", http.StatusInternalServerError)
		return
	}
	tee := &benchTee{ResponseWriter: w}
	f.h.ServeHTTP(tee, r)
	kept := http.Header{"Content-Type": w.Header()["Content-Type"]}
	env, err := StoredResponse{Status: tee.status, Header: kept, Body: tee.body.Bytes()}.MarshalBinary()
	var sealed []byte
	if err == nil {
		sealed, err = f.e.sealer.seal(id, fp, env)
	}
	if err == nil {
		err = f.store.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: sealed, ResponseCode: tee.status})
	}
	if err != nil {
		panic(err) // the response is written; a benchmark fixture fails loudly
	}
}

// serveReplay answers a repeat with the floor's work.
func (f *benchMWFloor) serveReplay(w http.ResponseWriter, r *http.Request) {
	id, fp, keyHash, err := f.ident(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec, created, err := f.store.Reserve(r.Context(), idemdriver.ReserveParams{Ident: id, KeyHash: keyHash, Fingerprint: fp,
		Owner: newOwnerToken(), Lease: DefaultLease, TTL: DefaultTTL, Lean: true})
	if err != nil || created || rec.Fingerprint != fp || rec.Status != idemdriver.StatusCompleted {
		http.Error(w, "not a replay", http.StatusInternalServerError)
		return
	}
	plain, err := f.e.sealer.open(id, fp, rec.Result)
	if err == nil {
		_, err = replayResponse(w, plain, f.m.replay)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// benchTee is the least a middleware can wrap the handler's writer with
// to keep the response: the status and a copy of the body.
type benchTee struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (t *benchTee) WriteHeader(code int) {
	t.status = code
	t.ResponseWriter.WriteHeader(code)
}

func (t *benchTee) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	t.body.Write(p)
	return t.ResponseWriter.Write(p)
}

// BenchmarkMiddlewareParts measures the pieces of the middleware's work one
// by one, with the inputs of BenchmarkMiddleware, to tell where its cost
// goes and to take out what is not the middleware's own:
//   - bodycopy: reading the body into memory and putting a reader over the
//     copy back on the request (the "body copy", inside Fingerprint);
//   - fixture-first, fixture-replay: the fixture store's Reserve (+
//     Complete), to subtract from first and replay.
func BenchmarkMiddlewareParts(b *testing.B) {
	const scope = "ip:192.0.2.1"
	q := newBenchMWRequest()
	r := q.next(1)
	key, err := ParseKeyHeader(r.Header, KeyRules{})
	if err != nil {
		b.Fatal(err)
	}
	e, _ := benchMWEngine(b)
	id := idemdriver.Ident{Scope: scope, Operation: benchMWRoute, KeyDigest: Digest(scope, benchMWRoute, key)}
	fp, _, err := Fingerprint(r, 10<<20)
	if err != nil {
		b.Fatal(err)
	}
	resp := StoredResponse{Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: benchMWResponse}
	env, err := resp.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	sealed, err := e.sealer.seal(id, fp, env)
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewMiddleware(e, MiddlewareConfig{})
	if err != nil {
		b.Fatal(err)
	}

	b.Run("keyparse", func(b *testing.B) {
		benchLoop(b, func(int) error {
			_, err := ParseKeyHeader(r.Header, KeyRules{})
			return err
		})
	})
	b.Run("scope", func(b *testing.B) {
		benchLoop(b, func(int) error {
			if m.resolveScope(r) == "" {
				return errors.New("no scope")
			}
			return nil
		})
	})
	b.Run("bodycopy", func(b *testing.B) {
		benchLoop(b, func(int) error {
			q.body.Reset(benchMWBody)
			body, err := readBody(q.rc, r.ContentLength, 10<<20)
			x := new(exchange)
			x.body.Reset(body)
			r.Body = &x.body
			return err
		})
	})
	b.Run("fingerprint", func(b *testing.B) { // includes bodycopy's read
		benchLoop(b, func(int) error {
			q.body.Reset(benchMWBody)
			r.Body = q.rc
			_, _, err := Fingerprint(r, 10<<20)
			return err
		})
	})
	b.Run("digest", func(b *testing.B) {
		benchLoop(b, func(int) error {
			if Digest(scope, benchMWRoute, key) == "" {
				return errors.New("empty digest")
			}
			return nil
		})
	})
	b.Run("token", func(b *testing.B) {
		benchLoop(b, func(int) error {
			if newOwnerToken() == "" {
				return errors.New("empty owner token")
			}
			return nil
		})
	})
	b.Run("envelope-encode", func(b *testing.B) {
		benchLoop(b, func(int) error {
			var x exchange
			x.rec.init(httptest.NewRecorder(), 1<<20, false, m.replay, x.buf[:])
			x.rec.head(http.StatusCreated, resp.Header)
			_, err := x.rec.stored()
			return err
		})
	})
	b.Run("seal", func(b *testing.B) { // in place, as finish does
		buf := make([]byte, 0, 1024)
		benchLoop(b, func(int) error {
			buf = append(append(buf[:0], make([]byte, sealRoom)...), env...)
			_, err := e.sealer.sealInPlace(id, fp, buf)
			return err
		})
	})
	b.Run("open", func(b *testing.B) {
		benchLoop(b, func(int) error {
			_, err := e.sealer.open(id, fp, sealed)
			return err
		})
	})
	b.Run("envelope-decode", func(b *testing.B) {
		benchLoop(b, func(int) error {
			_, err := replayResponse(benchDiscard{}, env, m.replay)
			return err
		})
	})
	b.Run("fixture-first", func(b *testing.B) {
		// Digests made beforehand and cycled; the map is emptied at the
		// start of each cycle, so each Reserve creates a record.
		store := newBenchMemStore()
		ids := make([]idemdriver.Ident, benchMemStoreCap)
		for i := range ids {
			ids[i] = idemdriver.Ident{Scope: scope, Operation: benchMWRoute, KeyDigest: Digest(scope, benchMWRoute, fmt.Sprint(i))}
		}
		ctx := context.Background()
		benchLoop(b, func(i int) error {
			if i%len(ids) == 0 {
				clear(store.recs) // as the store does when full
			}
			rec, created, err := store.Reserve(ctx, idemdriver.ReserveParams{Ident: ids[i%len(ids)], Fingerprint: fp,
				Owner: "00000000-0000-4000-8000-000000000000", Lease: DefaultLease, TTL: DefaultTTL})
			if err != nil || !created {
				return fmt.Errorf("reserve: created %v, %v", created, err)
			}
			return store.Complete(ctx, rec.Ident, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: sealed, ResponseCode: http.StatusCreated})
		})
	})
	b.Run("fixture-replay", func(b *testing.B) {
		store := newBenchMemStore()
		ctx := context.Background()
		p := idemdriver.ReserveParams{Ident: id, Fingerprint: fp, Owner: "00000000-0000-4000-8000-000000000000", Lease: DefaultLease, TTL: DefaultTTL}
		rec, _, _ := store.Reserve(ctx, p)
		if err := store.Complete(ctx, id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: sealed, ResponseCode: http.StatusCreated}); err != nil {
			b.Fatal(err)
		}
		benchLoop(b, func(int) error {
			_, created, err := store.Reserve(ctx, p)
			if err != nil || created {
				return fmt.Errorf("reserve: created %v, %v", created, err)
			}
			return nil
		})
	})
}

// benchDiscard is a ResponseWriter that keeps nothing but one header map.
type benchDiscard struct{}

var benchDiscardHeader = http.Header{}

func (benchDiscard) Header() http.Header         { clear(benchDiscardHeader); return benchDiscardHeader }
func (benchDiscard) Write(p []byte) (int, error) { return len(p), nil }
func (benchDiscard) WriteHeader(int)             {}
