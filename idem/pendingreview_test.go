package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// SPEC K21: a key waiting for an operator answers apart from a
// key whose first request still runs, and nothing invites a retry loop.

const (
	k21Scope = "tenant:k21"
	k21Route = "pay"
	k21Lease = 5 * time.Second
)

// k21Server is the middleware on a real SQLite store under a settable
// clock. Its handler answers 201; a request with X-Hold waits in the
// handler until hold is closed, one with X-Uncertain marks its outcome
// uncertain (a provider timed out after the charge).
type k21Server struct {
	*httptest.Server
	store   idemdriver.Store
	clock   *idemtest.Clock
	hits    atomic.Int32 // requests that reached the middleware
	runs    atomic.Int32 // requests that reached the handler
	entered chan struct{}
	hold    chan struct{}
}

func newK21Server(t *testing.T, cfg idem.MiddlewareConfig) *k21Server {
	t.Helper()
	store, _ := newSQLiteStore(t)
	s := &k21Server{store: store, clock: idemtest.NewClock(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC)),
		entered: make(chan struct{}, 4), hold: make(chan struct{})}
	e, err := idem.New(store, idem.Config{Secret: idemtest.Secret, Now: s.clock.Now})
	require.NoError(t, err)
	cfg.ScopeResolvers = []idem.ScopeResolver{func(*http.Request) (string, bool) { return k21Scope, true }}
	m, err := idem.NewMiddleware(e, cfg)
	require.NoError(t, err)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.runs.Add(1)
		if r.Header.Get("X-Hold") != "" {
			s.entered <- struct{}{}
			<-s.hold
		}
		if r.Header.Get("X-Uncertain") != "" {
			status := http.StatusGatewayTimeout
			if idem.MarkUncertain(r.Context(), "provider timed out after charge ch_secret_42") != nil {
				status = http.StatusInternalServerError // fails the test's status check
			}
			w.WriteHeader(status)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"pay_1"}`)
	})
	mw := m.Required(&idem.RouteOpts{Name: k21Route, Lease: k21Lease})(handler)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		mw.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() {
		select {
		case <-s.hold:
		default:
			close(s.hold)
		}
	})
	return s
}

type k21Answer struct {
	status int
	header http.Header
	body   string
	err    error
}

// do sends key's request with the extra headers given in pairs.
func (s *k21Server) do(key string, extra ...string) k21Answer {
	req, err := http.NewRequest(http.MethodPost, s.URL+"/pay", strings.NewReader(`{"amount_cents":1999}`))
	if err != nil {
		return k21Answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", strconv.Quote(key))
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		return k21Answer{err: err}
	}
	body, err := io.ReadAll(resp.Body)
	return k21Answer{status: resp.StatusCode, header: resp.Header, body: string(body), err: errors.Join(err, resp.Body.Close())}
}

func (s *k21Server) post(t *testing.T, key string, extra ...string) k21Answer {
	t.Helper()
	got := s.do(key, extra...)
	require.NoError(t, got.err)
	return got
}

// start sends a held request for key and waits until its handler runs.
func (s *k21Server) start(t *testing.T, key string) <-chan k21Answer {
	t.Helper()
	done := make(chan k21Answer, 1)
	go func() { done <- s.do(key, "X-Hold", "1") }()
	select {
	case <-s.entered:
	case got := <-done:
		t.Fatalf("the held request ended before reaching the handler: %d %s %v", got.status, got.body, got.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the held request never reached the handler")
	}
	return done
}

func (s *k21Server) record(t *testing.T, key string) idemdriver.Record {
	t.Helper()
	rec, ok, err := s.store.Get(context.Background(), idemdriver.Ident{Scope: k21Scope, Operation: k21Route, KeyDigest: idem.Digest(k21Scope, k21Route, key)})
	require.NoError(t, err)
	require.True(t, ok, "record of %s", key)
	return rec
}

// requirePendingReview checks the answer for a key waiting for an
// operator: the distinct code, no Retry-After, words for an end user and
// nothing of the key, the payload or the internal reason.
func requirePendingReview(t *testing.T, accepted bool, got k21Answer, key string) {
	t.Helper()
	require.Empty(t, got.header.Values("Retry-After"), "K21: no Retry-After invites a loop; body %s", got.body)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(got.body), &doc), got.body)
	if accepted {
		require.Equal(t, http.StatusAccepted, got.status, got.body)
		require.Equal(t, "pending", doc["status"])
	} else {
		require.Equal(t, http.StatusConflict, got.status, got.body)
		require.Equal(t, "application/problem+json", got.header.Get("Content-Type"))
		require.EqualValues(t, http.StatusConflict, doc["status"])
	}
	require.Equal(t, idem.CodePendingReview, doc["code"])
	require.Contains(t, doc["detail"], "The outcome of your request is being checked")
	for _, secret := range []string{key, "1999", "provider", "ch_secret_42", "abandoned", "lease"} {
		require.NotContains(t, got.body, secret, "no key, payload or internals in the answer")
	}
}

func TestK21MiddlewareAnswersAKeyWaitingForAnOperatorApartFromARunningOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		accepted bool
	}{
		{"409", false},
		{"202 with AcceptedWhileInProgress", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newK21Server(t, idem.MiddlewareConfig{AcceptedWhileInProgress: tc.accepted})
			const crashed, running, uncertain = "k21-crashed-key-0001", "k21-running-key-0002", "k21-uncertain-key-003"

			// The first request for crashed stalls past its lease: its
			// owner counts as dead.
			stuck := s.start(t, crashed)
			held := s.record(t, crashed)
			s.clock.Advance(k21Lease + time.Second)
			live := s.start(t, running)

			// R8: the repeat escalates the abandoned key for an operator.
			got := s.post(t, crashed)
			requirePendingReview(t, tc.accepted, got, crashed)
			rec := s.record(t, crashed)
			require.Equal(t, idemdriver.StatusPending, rec.Status)
			require.Equal(t, idemdriver.AbandonedReason(held.LeaseExpiresAt, "escalate"), rec.LastError)
			// Later repeats find the pending record: the same answer.
			requirePendingReview(t, tc.accepted, s.post(t, crashed), crashed)

			// H9 unchanged: the running key is in progress, with Retry-After.
			dup := s.post(t, running)
			require.Equal(t, strconv.Itoa(int(k21Lease/time.Second)), dup.header.Get("Retry-After"), dup.body)
			if tc.accepted {
				require.Equal(t, http.StatusAccepted, dup.status, dup.body)
				require.JSONEq(t, `{"status":"processing","retry_after_seconds":5}`, dup.body)
			} else {
				require.Equal(t, http.StatusConflict, dup.status, dup.body)
				require.Contains(t, dup.body, `"code":"`+idem.CodeInProgress+`"`)
			}

			// M4: a handler that marks its outcome uncertain leaves the key
			// pending; its repeats wait for an operator too.
			require.Equal(t, http.StatusGatewayTimeout, s.post(t, uncertain, "X-Uncertain", "1").status)
			requirePendingReview(t, tc.accepted, s.post(t, uncertain), uncertain)

			close(s.hold)
			require.Equal(t, http.StatusCreated, (<-stuck).status, "the stalled request's own client gets its response")
			require.Equal(t, http.StatusCreated, (<-live).status)
			require.Equal(t, idemdriver.StatusPending, s.record(t, crashed).Status, "the stalled request's completion is fenced out")
			require.Equal(t, "true", s.post(t, running).header.Get(idem.HeaderReplayed))
			require.EqualValues(t, 3, s.runs.Load(), "each key's handler ran once")
		})
	}
}

// The client side against the real middleware: a Transport sends the
// repeat of an escalated key once and returns the typed error.
func TestK21TransportSendsOnceToAKeyWaitingForAnOperator(t *testing.T) {
	t.Parallel()
	s := newK21Server(t, idem.MiddlewareConfig{})
	const key = "k21-transport-key-0001"
	stuck := s.start(t, key)
	s.clock.Advance(k21Lease + time.Second)

	tr, err := idem.NewTransport(s.Client().Transport, idem.TransportConfig{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(idem.ContextWithKey(context.Background(), key), http.MethodPost, s.URL+"/pay",
		strings.NewReader(`{"amount_cents":1999}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	before := s.hits.Load()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.Nil(t, resp)
	require.ErrorIs(t, err, idem.ErrPendingReview)
	require.False(t, errors.Is(err, idem.ErrInProgress), "the client is not told to wait and resend")
	var pr *idem.PendingReviewResponseError
	require.ErrorAs(t, err, &pr)
	require.Equal(t, http.StatusConflict, pr.StatusCode)
	require.Equal(t, idem.CodePendingReview, pr.Code)
	require.Contains(t, pr.Detail, "The outcome of your request is being checked")
	require.Equal(t, strconv.Quote(key), pr.Key, "the key as sent, to look the request up")
	require.EqualValues(t, 1, s.hits.Load()-before, "exactly one request reached the server")
	require.Equal(t, idemdriver.StatusPending, s.record(t, key).Status)

	close(s.hold)
	require.Equal(t, http.StatusCreated, (<-stuck).status)
}

// Run's side: a key waiting for an operator returns *PendingReviewError
// (ErrPendingReview), which still matches ErrInProgress and holds an
// *InProgressError, for callers written before K21 (package idemriver
// snoozes on it); a key held by a live owner is in progress and not
// pending review.
func TestK21RunReturnsPendingReviewForAKeyWaitingForAnOperator(t *testing.T) {
	t.Parallel()
	store, _ := newSQLiteStore(t)
	clock := idemtest.NewClock(time.Date(2031, 3, 14, 9, 0, 0, 0, time.UTC))
	e, err := idem.New(store, idem.Config{Secret: idemtest.Secret, Now: clock.Now, PendingRetryAfter: 45 * time.Second})
	require.NoError(t, err)
	ctx := context.Background()
	ran := 0
	fn := func(context.Context) (int, error) { ran++; return 1, nil }

	requirePendingReviewErr := func(t *testing.T, err error) {
		t.Helper()
		var pr *idem.PendingReviewError
		require.ErrorAs(t, err, &pr)
		require.ErrorIs(t, err, idem.ErrPendingReview)
		require.Equal(t, 45*time.Second, pr.RetryAfter, "the pending interval, not a lease")
		require.ErrorIs(t, err, idem.ErrInProgress, "backward compatible")
		var ip *idem.InProgressError
		require.ErrorAs(t, err, &ip)
		require.Equal(t, idem.InProgressError{RetryAfter: 45 * time.Second, Status: idemdriver.StatusPending}, *ip)
	}

	// A crashed owner's key, past its lease: escalated, then pending.
	id := idemdriver.Ident{Scope: "s", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("s", idem.DefaultOperation, "crashed")}
	_, created, err := store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "crashed", Lease: idem.MinLease, TTL: idem.DefaultTTL, Now: clock.Now()})
	require.NoError(t, err)
	require.True(t, created)
	clock.Advance(2 * time.Second)
	_, err = idem.Run(ctx, e, "crashed", "s", fn, nil)
	requirePendingReviewErr(t, err)
	_, err = idem.Run(ctx, e, "crashed", "s", fn, &idem.RunOpts{Recovery: new(idem.RecoverByRerunning())})
	requirePendingReviewErr(t, err)

	// An uncertain outcome: pending until reconciled.
	_, err = idem.Run(ctx, e, "uncertain", "s", func(context.Context) (int, error) { return 0, idem.Uncertain(errors.New("timeout")) }, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	_, err = idem.Run(ctx, e, "uncertain", "s", fn, nil)
	requirePendingReviewErr(t, err)
	require.Zero(t, ran, "nothing ran again")

	// A live owner: in progress, never pending review.
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.Run(ctx, e, "running", "s", func(context.Context) (int, error) { close(entered); <-release; return 1, nil }, &idem.RunOpts{Lease: 30 * time.Second})
		done <- err
	}()
	<-entered
	_, err = idem.Run(ctx, e, "running", "s", fn, nil)
	var ip *idem.InProgressError
	require.ErrorAs(t, err, &ip)
	require.Equal(t, idem.InProgressError{RetryAfter: 30 * time.Second, Status: idemdriver.StatusProcessing}, *ip)
	require.False(t, errors.Is(err, idem.ErrPendingReview))
	close(release)
	require.NoError(t, <-done)
}
