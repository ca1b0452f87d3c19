package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/decide"
)

// Problem codes of the HTTP middleware (SPEC H4, H8, H9, H13, K21; the
// `code` member of every application/problem+json rejection).
const (
	CodeInvalidKey = "invalid_idempotency_key"
	CodeKeyMissing = "idempotency_key_missing"
	CodeKeyReused  = "idempotency_key_reused"
	// CodeInProgress answers 409 with Retry-After (the rest of the first
	// request's lease) while the first request with the key still runs
	// (SPEC H9): a retry after that time gets the replay.
	CodeInProgress = "idempotency_request_in_progress"
	// CodePendingReview answers 409 without Retry-After when the outcome
	// of the key's first request is unknown and waits for an operator or a
	// reconciliation (SPEC M4, K21): the record is pending because the
	// request's process died and its recovery escalated the key, a
	// verifier could not tell, or the handler called [MarkUncertain].
	// Resending cannot change the answer until a person or a
	// reconciliation resolves the key, so the answer does not invite it:
	//
	//   - 409, not 202: a 2xx reads as success to generic clients, and
	//     this outcome is unknown — the payment may or may not have been
	//     made. 202 would also need a status resource to point to, which
	//     the library has none of. An API whose contract is asynchronous
	//     can set [MiddlewareConfig].AcceptedWhileInProgress to get 202
	//     with a status document instead.
	//   - no Retry-After: any interval would be a guess (the end is a
	//     person's decision), and a 409 with Retry-After is resent by
	//     clients that follow the draft and by a [Transport] built before
	//     this code existed (it retries any 409 carrying one) until it
	//     gives up. Without it, such a Transport returns the 409 at once.
	//
	// The problem's detail says, in words for an end user, that the
	// outcome is being checked; it names no key, payload or internal
	// reason. A [Transport] does not retry it and returns a
	// *[PendingReviewResponseError]. After the review a repeat runs (the
	// effect did not happen) or gets [CodeResponseUnavailable] (it did).
	CodePendingReview       = "idempotency_outcome_pending_review"
	CodeResponseUnavailable = "idempotent_response_unavailable"
	CodeRequestTooLarge     = "request_too_large"
	CodeMalformedBody       = "malformed_request_body"
	CodeStoreUnavailable    = "idempotency_store_unavailable"
	CodeScopeUnresolved     = "idempotency_scope_unresolved"
)

// HeaderReplayed marks a replayed response (SPEC H7).
const HeaderReplayed = "Idempotent-Replayed"

// DefaultReplayedHeaders are the response headers stored and replayed when
// MiddlewareConfig.ReplayedHeaders is nil. Set-Cookie is never stored,
// whatever the list says (SPEC H12).
var DefaultReplayedHeaders = []string{
	"Content-Type", "Content-Language", "Content-Location", "Location",
	"ETag", "Last-Modified", "Link", "Cache-Control", "Expires",
}

// MiddlewareConfig configures [NewMiddleware]. The zero value is the
// default of every field.
type MiddlewareConfig struct {
	// Methods the middleware handles; others pass untouched (SPEC H1).
	// Default POST and PATCH.
	Methods []string
	// Key bounds the Idempotency-Key (default 16..255 bytes, quoted only).
	Key KeyRules
	// ScopeResolvers are asked in order for the caller's scope (SPEC H5);
	// the first that answers wins. Default: [PrincipalScope],
	// [SignatureScope], [AddressScope].
	ScopeResolvers []ScopeResolver
	// RouteFunc names the route of a request; the route is the record's
	// operation. Default: the ServeMux pattern, else the chi route
	// pattern, else method and path. See [RouteOpts].Name to set it per route.
	RouteFunc func(*http.Request) string
	// ReplayedHeaders lists the response headers stored and replayed.
	// Default [DefaultReplayedHeaders].
	ReplayedHeaders []string
	// StoreServerErrors stores and replays 5xx responses instead of
	// releasing the key (SPEC H10). Default off.
	StoreServerErrors bool
	// DiscardClientErrors releases the key on 4xx instead of storing the
	// response (SPEC H11). Default off: 4xx are stored and replayed.
	DiscardClientErrors bool
	// MaxRequestBytes bounds the request body read for the fingerprint;
	// larger requests get 413. Default 10 MiB.
	MaxRequestBytes int64
	// MaxResponseBytes bounds a stored response body; a larger response is
	// delivered but the key completes unavailable (SPEC H13). Default 1 MiB.
	MaxResponseBytes int
	// WaitInFlight lets a duplicate wait up to this long for the first
	// request to finish before answering 409 (SPEC H9). Default 0, at most
	// 30 s.
	WaitInFlight time.Duration
	// AcceptedWhileInProgress answers a duplicate of a processing request
	// with 202 Accepted, Retry-After and a status document
	// {"status":"processing","retry_after_seconds":n} instead of 409
	// [CodeInProgress], and a repeat of a pending one with 202 and
	// {"status":"pending","code":"idempotency_outcome_pending_review",
	// "detail":…}, without Retry-After, instead of 409 [CodePendingReview]
	// (SPEC H9, K21).
	AcceptedWhileInProgress bool
	// Transactional runs the handler inside a store transaction that the
	// record commits with (SPEC H17); the engine's store must be a
	// [TxStore]. The response is buffered and sent after the commit; a
	// duplicate waits for the commit and gets the replay instead of 409.
	// The handler must write through the transaction only (idempgx.TxFrom,
	// idemsqlite.TxFrom): on PostgreSQL each waiting duplicate holds a pool
	// connection, so a handler that takes a second connection from the same
	// pool can starve behind its own duplicates. Size the pool above the
	// concurrent duplicates you expect. A failed statement aborts the
	// transaction on PostgreSQL: use a savepoint to answer a 4xx after one.
	Transactional bool
	// Recovery is what a request does with a key abandoned by its owner
	// (processing, lease ended: the process crashed or stalled). Nil: the
	// engine's default ([Config].DefaultRecovery, itself [RecoverByEscalating]
	// by default: the record becomes pending for an operator and repeats
	// get 409 [CodePendingReview]). Set per route with [RouteOpts].Recovery.
	Recovery *Recovery
	// OnRejected and OnReplayed are called for each rejection and each
	// replay (SPEC H16). They must not block.
	OnRejected func(*http.Request, RejectedEvent)
	OnReplayed func(*http.Request, ReplayedEvent)
}

// RejectedEvent describes a request answered with a problem.
type RejectedEvent struct {
	Code   string
	Status int
	KeyID  string // safe key id; "" when the key was missing or invalid
	Scope  string
	Route  string
}

// ReplayedEvent describes a replayed response.
type ReplayedEvent struct {
	KeyID  string
	Scope  string
	Route  string
	Status int
}

// Middleware is the idempotency HTTP middleware (SPEC IDEM-H). Build it
// once with [NewMiddleware], then wrap each route with [Middleware.Required]
// or [Middleware.Optional]. Mount it after authentication, so the scope
// resolvers see the principal.
type Middleware struct {
	engine  *Engine
	cfg     MiddlewareConfig
	methods map[string]bool
	replay  map[string]string // the replayed headers, canonical name to itself
	log     *slog.Logger
}

// NewMiddleware validates cfg and returns the middleware. Every error here
// is a configuration error, found at start-up, never at request time.
func NewMiddleware(e *Engine, cfg MiddlewareConfig) (*Middleware, error) {
	if e == nil {
		return nil, errors.New("idem: middleware: nil engine")
	}
	if err := cfg.Key.Validate(); err != nil {
		return nil, fmt.Errorf("idem: middleware: %w", err)
	}
	if cfg.Methods == nil {
		cfg.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if len(cfg.Methods) == 0 {
		return nil, errors.New("idem: middleware: Methods is empty")
	}
	if cfg.ScopeResolvers == nil {
		cfg.ScopeResolvers = []ScopeResolver{PrincipalScope, SignatureScope, AddressScope}
	}
	if cfg.RouteFunc == nil {
		cfg.RouteFunc = defaultRoute
	}
	if cfg.ReplayedHeaders == nil {
		cfg.ReplayedHeaders = DefaultReplayedHeaders
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = 10 << 20
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = 1 << 20
	}
	switch {
	case cfg.MaxRequestBytes < 0:
		return nil, errors.New("idem: middleware: MaxRequestBytes is negative")
	case cfg.MaxResponseBytes < 0:
		return nil, errors.New("idem: middleware: MaxResponseBytes is negative")
	case cfg.WaitInFlight < 0 || cfg.WaitInFlight > 30*time.Second:
		return nil, fmt.Errorf("idem: middleware: WaitInFlight %s is not in [0, 30s]", cfg.WaitInFlight)
	}
	if _, ok := e.store.(idemdriver.TxStore); cfg.Transactional && !ok {
		return nil, errors.New("idem: middleware: Transactional needs a store that implements idemdriver.TxStore")
	}
	m := &Middleware{engine: e, cfg: cfg, methods: map[string]bool{}, replay: map[string]string{}, log: e.log}
	for _, meth := range cfg.Methods {
		m.methods[meth] = true
	}
	for _, h := range cfg.ReplayedHeaders {
		if c := http.CanonicalHeaderKey(h); c != "Set-Cookie" {
			m.replay[c] = c
		}
	}
	return m, nil
}

// RouteOpts are the settings of one route of the middleware. A nil
// *RouteOpts, like the zero value of a field, means the default.
type RouteOpts struct {
	// TTL is how long the route's records are kept (SPEC H15), 60 s to 30
	// days. 0 means [DefaultTTL] (24 h).
	TTL time.Duration
	// Lease is how long a request holds its key, 1 s to 1 day. 0 means
	// [DefaultLease] (60 s). It must outlast the handler's longest run.
	Lease time.Duration
	// Name names the route (the record's operation), 1 to 255 bytes,
	// instead of MiddlewareConfig.RouteFunc. "": RouteFunc names it.
	Name string
	// Recovery is the route's recovery of abandoned keys instead of
	// MiddlewareConfig.Recovery: [RecoverByRerunning] for a handler whose
	// effect is safe to repeat, [RecoverByVerifying] for one whose
	// receiver can be asked. Nil: MiddlewareConfig.Recovery.
	Recovery *Recovery
}

type routeConfig struct {
	ttl      time.Duration
	lease    time.Duration
	name     string
	recovery Recovery
}

// Required returns the middleware for a route on which the key is required:
// a request without one gets 400 idempotency_key_missing (SPEC H4). opts
// may be nil. It panics on an invalid setting, so a bad route fails at
// start-up, as a bad chi pattern does; use [Middleware.Route] to get an
// error instead.
func (m *Middleware) Required(opts *RouteOpts) func(http.Handler) http.Handler {
	return mustRoute(m.Route(true, opts))
}

// Optional returns the middleware for a route on which the key is optional:
// a request without one passes through untouched (SPEC H4). opts may be
// nil. It panics on an invalid setting, like [Middleware.Required].
func (m *Middleware) Optional(opts *RouteOpts) func(http.Handler) http.Handler {
	return mustRoute(m.Route(false, opts))
}

func mustRoute(mw func(http.Handler) http.Handler, err error) func(http.Handler) http.Handler {
	if err != nil {
		panic(err)
	}
	return mw
}

// Route returns the middleware for one route, or an error naming the
// invalid setting of opts (which may be nil).
func (m *Middleware) Route(required bool, opts *RouteOpts) (func(http.Handler) http.Handler, error) {
	rc := routeConfig{ttl: DefaultTTL, lease: DefaultLease, recovery: m.engine.recovery}
	if m.cfg.Recovery != nil {
		rc.recovery = *m.cfg.Recovery
	}
	if opts != nil {
		if err := rc.apply(opts); err != nil {
			return nil, fmt.Errorf("idem: route: %w", err)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !m.methods[r.Method] {
				next.ServeHTTP(w, r)
				return
			}
			m.serve(w, r, next, required, rc)
		})
	}, nil
}

// apply checks the settings of opts and sets the non-zero ones on rc.
func (rc *routeConfig) apply(opts *RouteOpts) error {
	if opts.TTL != 0 {
		if err := ValidateTTL(opts.TTL); err != nil {
			return err
		}
		rc.ttl = opts.TTL
	}
	if opts.Lease != 0 {
		if err := ValidateLease(opts.Lease); err != nil {
			return err
		}
		rc.lease = opts.Lease
	}
	if len(opts.Name) > MaxScopeBytes {
		return &ValidationError{Field: "route", Reason: "must be 1..255 bytes"}
	}
	rc.name = opts.Name
	if opts.Recovery != nil {
		rc.recovery = *opts.Recovery
	}
	return nil
}

// request is one request's view for the middleware.
type request struct {
	route string
	scope string
	id    idemdriver.Ident
	req   decide.Request
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, required bool, rc routeConfig) {
	route := rc.name
	if route == "" {
		route = m.cfg.RouteFunc(r)
	}
	key, err := ParseKeyHeader(r.Header, m.cfg.Key)
	switch {
	case errors.Is(err, ErrKeyMissing) && !required:
		next.ServeHTTP(w, r)
		return
	case errors.Is(err, ErrKeyMissing):
		m.reject(w, r, RejectedEvent{Code: CodeKeyMissing, Status: http.StatusBadRequest, Route: route},
			"This route requires an Idempotency-Key header.", 0)
		return
	case err != nil:
		m.reject(w, r, RejectedEvent{Code: CodeInvalidKey, Status: http.StatusBadRequest, Route: route}, invalidDetail(err), 0)
		return
	}
	scope := m.resolveScope(r)
	if err := checkScope(scope); err != nil {
		if bad := (*ValidationError)(nil); errors.As(err, &bad) {
			m.reject(w, r, RejectedEvent{Code: CodeInvalidScope, Status: http.StatusBadRequest, Route: route},
				"The caller's identity cannot scope an idempotency key ("+bad.Field+": "+bad.Reason+").", 0)
			return
		}
	}
	if scope == "" {
		// A configuration error, not the client's: no resolver answered.
		m.log.Error("idem: no scope resolver answered; check MiddlewareConfig.ScopeResolvers", "route", route)
		m.reject(w, r, RejectedEvent{Code: CodeScopeUnresolved, Status: http.StatusInternalServerError, Route: route},
			"The server could not determine who is calling; nothing was done.", 0)
		return
	}
	if err := validateIdent(key, scope, route); err != nil {
		m.reject(w, r, RejectedEvent{Code: CodeInvalidKey, Status: http.StatusBadRequest, Route: route}, invalidDetail(err), 0)
		return
	}
	fp, body, err := Fingerprint(r, m.cfg.MaxRequestBytes)
	switch {
	case errors.Is(err, ErrBodyTooLarge):
		m.reject(w, r, RejectedEvent{Code: CodeRequestTooLarge, Status: http.StatusRequestEntityTooLarge, Route: route, Scope: scope},
			fmt.Sprintf("The request body exceeds %d bytes.", m.cfg.MaxRequestBytes), 0)
		return
	case err != nil:
		m.reject(w, r, RejectedEvent{Code: CodeMalformedBody, Status: http.StatusBadRequest, Route: route, Scope: scope},
			"The request body cannot be read as its Content-Type says.", 0)
		return
	}
	x := new(exchange) // one allocation for the body reader, the recorder and its buffer
	x.body.Reset(body)
	r.Body = &x.body
	rq := request{route: route, scope: scope, req: decide.Request{Fingerprint: fp, KeyHash: KeyHash(key)},
		id: idemdriver.Ident{Scope: scope, Operation: route, KeyDigest: Digest(scope, route, key)}}

	if m.cfg.Transactional {
		m.serveTx(w, r, next, rq, rc)
		return
	}
	c, err := m.acquireWaiting(r.Context(), m.engine.store, rq, rc)
	if err != nil {
		m.storeFailed(w, r, rq, err)
		return
	}
	if !c.owned() {
		m.answer(w, r, rq, c)
		return
	}
	st := m.engine.newRunState(m.engine.store, c.rec)
	rec := &x.rec
	rec.init(w, m.cfg.MaxResponseBytes, false, m.replay, x.buf[:])
	m.runHandler(rec, r, next, st)
	err = m.finish(r.Context(), st, rec)
	status := rec.statusCode()
	// The stored result may alias x.buf and outlive the request (in a
	// store, in a background recording): drop x's references to the
	// request and the response, so that it keeps nothing else alive.
	x.rec, x.body = recorder{}, bodyReader{}
	switch {
	case errors.Is(err, ErrOutcomeUnrecorded):
		// The response went to the client: the effect ran. Repeats get
		// 409 while the record is written in the background, then the
		// stored response.
		st.logger().Warn("idem: response delivered; its record is being written in the background", "status", status, "error", err.Error())
	case err != nil:
		st.logger().Error("idem: response delivered but not recorded", "status", status, "error", err.Error())
	}
}

// runHandler calls next as the owner of st; a panic releases the key and
// goes on.
func (m *Middleware) runHandler(rec *recorder, r *http.Request, next http.Handler, st *runState) {
	_, _ = callGuarded(withRunState(r.Context(), st), func(ctx context.Context) (struct{}, error) {
		next.ServeHTTP(rec, r.WithContext(ctx))
		return struct{}{}, nil
	}, func() {
		if err := m.engine.release(r.Context(), st); err != nil {
			st.logger().Error("idem: release after panic failed", "error", err.Error())
		}
	})
}

// finish records the handler's response: stored, released, or unavailable.
func (m *Middleware) finish(ctx context.Context, st *runState, rec *recorder) error {
	status := rec.statusCode()
	switch {
	case st.uncertainReason() != "":
		return m.engine.complete(ctx, st, idemdriver.Completion{Status: idemdriver.StatusPending, ResponseCode: status, LastError: st.uncertainReason()})
	case rec.streamed || rec.overflow:
		reason := "response streamed"
		if rec.overflow {
			reason = fmt.Sprintf("response larger than %d bytes", m.cfg.MaxResponseBytes)
		}
		return m.engine.complete(ctx, st, idemdriver.Completion{Status: idemdriver.StatusUnavailable, ResponseCode: status, LastError: reason})
	case status >= 500 && !m.cfg.StoreServerErrors, status >= 400 && status < 500 && m.cfg.DiscardClientErrors:
		return m.engine.release(ctx, st)
	}
	c := idemdriver.Completion{Status: idemdriver.StatusCompleted, ResponseCode: status}
	if status >= 400 {
		c.Status = idemdriver.StatusFailed
	}
	env, err := rec.stored()
	if err == nil {
		c.Result, err = m.engine.sealer.sealInPlace(st.id, st.rec.Fingerprint, env)
	}
	if err != nil {
		// The response went out: the key must never run again.
		c = idemdriver.Completion{Status: idemdriver.StatusUnavailable, ResponseCode: status, LastError: "response not stored: " + shortError(err)}
	}
	return m.engine.complete(ctx, st, c)
}

// StoredResponse is what the middleware seals for a response: the result
// of an HTTP record, as [Engine.OpenResult] returns it in the binary form
// of [StoredResponse.MarshalBinary].
type StoredResponse struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// acquireWaiting acquires the key, waiting up to WaitInFlight for an
// in-flight duplicate to finish.
func (m *Middleware) acquireWaiting(ctx context.Context, s idemdriver.Store, rq request, rc routeConfig) (claim, error) {
	deadline := time.Now().Add(m.cfg.WaitInFlight)
	pause := 25 * time.Millisecond
	for {
		c, err := m.engine.acquire(ctx, s, rq.id, rq.req, rc.ttl, rc.lease, rc.recovery, false)
		if err != nil || c.outcome.Action != decide.ActionWait || c.rec.Status != idemdriver.StatusProcessing {
			return c, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return c, nil
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return c, nil
		case <-t.C:
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// answer responds to a request that does not own the key.
func (m *Middleware) answer(w http.ResponseWriter, r *http.Request, rq request, c claim) {
	ev := RejectedEvent{KeyID: SafeKeyID(rq.id.KeyDigest), Scope: rq.scope, Route: rq.route}
	switch c.outcome.Action {
	case decide.ActionWait:
		if m.cfg.AcceptedWhileInProgress {
			secs := int(c.outcome.RetryAfter / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			writeAccepted(w, map[string]any{"status": c.rec.Status, "retry_after_seconds": secs})
			return
		}
		ev.Code, ev.Status = CodeInProgress, http.StatusConflict
		m.reject(w, r, ev, "A request with this Idempotency-Key is still being processed. Retry after the time given in Retry-After.", c.outcome.RetryAfter)
	case decide.ActionAwaitReview:
		// No Retry-After in either form (see CodePendingReview).
		if m.cfg.AcceptedWhileInProgress {
			writeAccepted(w, map[string]any{"status": idemdriver.StatusPending, "code": CodePendingReview, "detail": pendingReviewDetail})
			return
		}
		ev.Code, ev.Status = CodePendingReview, http.StatusConflict
		m.reject(w, r, ev, pendingReviewDetail, 0)
	case decide.ActionRejectReused:
		ev.Code, ev.Status = CodeKeyReused, http.StatusUnprocessableEntity
		m.reject(w, r, ev, "This Idempotency-Key was already used with a different request.", 0)
	case decide.ActionReplay:
		status, err := m.replayTo(w, c.rec)
		if err != nil {
			ev.Code, ev.Status = CodeResponseUnavailable, http.StatusConflict
			m.reject(w, r, ev, "The request with this Idempotency-Key was processed, but its response cannot be replayed.", 0)
			return
		}
		if m.cfg.OnReplayed != nil {
			m.cfg.OnReplayed(r, ReplayedEvent{KeyID: ev.KeyID, Scope: rq.scope, Route: rq.route, Status: status})
		}
	default:
		ev.Code, ev.Status = CodeResponseUnavailable, http.StatusConflict
		m.reject(w, r, ev, "The request with this Idempotency-Key was processed, but its response cannot be replayed.", 0)
	}
}

// pendingReviewDetail is what a client is told of a key pending review: for
// an end user, with no key, payload or reason in it.
const pendingReviewDetail = "The outcome of your request is being checked. Sending it again will not change this answer until the check is complete."

// writeAccepted answers 202 Accepted with the status document doc.
func writeAccepted(w http.ResponseWriter, doc map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(doc)
}

// replayTo writes the stored response of rec to w; anything that does not
// open and decode cleanly is unavailable (fail closed), and then nothing
// is written.
func (m *Middleware) replayTo(w http.ResponseWriter, rec idemdriver.Record) (status int, err error) {
	plain, err := m.engine.openStored(rec)
	if err != nil {
		return 0, err
	}
	status, err = replayResponse(w, plain, m.replay)
	if err != nil {
		m.log.Warn("idem: stored response cannot be decoded", "key_id", SafeKeyID(rec.KeyDigest), "operation", rec.Operation, "record_id", rec.ID, "error", err.Error())
		return 0, err
	}
	return status, nil
}

func (m *Middleware) storeFailed(w http.ResponseWriter, r *http.Request, rq request, err error) {
	m.log.Error("idem: store unavailable", "key_id", SafeKeyID(rq.id.KeyDigest), "operation", rq.route, "error", err.Error())
	m.reject(w, r, RejectedEvent{Code: CodeStoreUnavailable, Status: http.StatusServiceUnavailable, KeyID: SafeKeyID(rq.id.KeyDigest), Scope: rq.scope, Route: rq.route},
		"The idempotency store cannot be reached; nothing was done. Retry with the same Idempotency-Key.", time.Second)
}

func (m *Middleware) reject(w http.ResponseWriter, r *http.Request, ev RejectedEvent, detail string, retryAfter time.Duration) {
	if m.cfg.OnRejected != nil {
		m.cfg.OnRejected(r, ev)
	}
	m.log.Debug("idem: request rejected", "code", ev.Code, "status", ev.Status, "key_id", ev.KeyID, "route", ev.Route)
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(decide.AtLeastASecond(retryAfter)/time.Second)))
	}
	WriteProblem(w, Problem{Status: ev.Status, Code: ev.Code, Detail: detail})
}

// Problem is an RFC 9457 problem document with a `code` member.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// Field names the invalid input, for validation problems.
	Field string `json:"field,omitempty"`
}

// WriteProblem writes p as application/problem+json. An empty Type becomes
// a URN naming the code; an empty Title the status text.
func WriteProblem(w http.ResponseWriter, p Problem) {
	if p.Type == "" {
		p.Type = "urn:unstuck:problem:" + p.Code
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func invalidDetail(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return fmt.Sprintf("The Idempotency-Key is invalid: %s.", ve.Reason)
	}
	return "The Idempotency-Key is invalid."
}

// exchange is what the middleware keeps for one request, in one
// allocation: the reader over the request body put back for the handler,
// the recorder of its response, and the first bytes of the stored copy
// (a response that fits is encoded and sealed there, in place).
type exchange struct {
	body bodyReader
	rec  recorder
	buf  [512]byte
}

// bodyReader is the request body, read into memory, put back on the
// request.
type bodyReader struct{ bytes.Reader }

// Close does nothing: the body is in memory.
func (*bodyReader) Close() error { return nil }
