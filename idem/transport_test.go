package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
)

// seenRequest is what the test server saw of one attempt.
type seenRequest struct {
	method string
	keys   []string // the Idempotency-Key field lines
	body   string
}

// transportServer is a real listener whose handler answers attempt n
// (counting from 1) with respond(n, w, r), and records every attempt.
type transportServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func newTransportServer(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *transportServer {
	t.Helper()
	s := &transportServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			body = []byte("read error: " + err.Error())
		}
		s.mu.Lock()
		s.seen = append(s.seen, seenRequest{method: r.Method, keys: r.Header.Values("Idempotency-Key"), body: string(body)})
		n := len(s.seen)
		s.mu.Unlock()
		respond(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *transportServer) attempts() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

// client returns an http.Client whose transport is an idem.Transport over
// the server's own transport, with tiny backoffs so tests are fast.
func (s *transportServer) client(t *testing.T, cfg idem.TransportConfig) *http.Client {
	t.Helper()
	if cfg.InitialBackoff == 0 {
		cfg.InitialBackoff, cfg.MaxBackoff = time.Millisecond, 2*time.Millisecond
	}
	tr, err := idem.NewTransport(s.Client().Transport, cfg)
	require.NoError(t, err)
	return &http.Client{Transport: tr}
}

// unquoteKey parses a field value with the RFC 9651 rules and returns the
// String it holds.
func unquoteKey(t *testing.T, field string) string {
	t.Helper()
	item, err := httpsfv.UnmarshalItem([]string{field})
	require.NoError(t, err, "field %q is not an sf item", field)
	s, ok := item.Value.(string)
	require.True(t, ok, "field %q holds %T, want an sf-string", field, item.Value)
	return s
}

func problem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"about:blank","status":%d,"code":%q}`, status, code)
}

func created(w http.ResponseWriter) {
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, "created")
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer func() { require.NoError(t, resp.Body.Close()) }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestTransportC1AddsAUUIDv7KeyToPOSTAndPATCH(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodPost, http.MethodPatch} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { created(w) })
			c := srv.client(t, idem.TransportConfig{})

			var keys []string
			for range 2 {
				req, err := http.NewRequest(method, srv.URL, strings.NewReader(`{"a":1}`))
				require.NoError(t, err)
				resp, err := c.Do(req)
				require.NoError(t, err)
				require.Equal(t, "created", readBody(t, resp))
				require.Empty(t, req.Header.Values("Idempotency-Key"), "the caller's request must not be modified")

				seen := srv.attempts()
				last := seen[len(seen)-1]
				require.Len(t, last.keys, 1, "one Idempotency-Key field line")
				require.Equal(t, last.keys[0], resp.Request.Header.Get("Idempotency-Key"), "Response.Request carries the key as sent")
				id, err := uuid.Parse(unquoteKey(t, last.keys[0]))
				require.NoError(t, err)
				require.Equal(t, uuid.Version(7), id.Version())
				keys = append(keys, last.keys[0])
			}
			require.NotEqual(t, keys[0], keys[1], "a fresh key per logical request")
		})
	}
}

func TestTransportC1OtherMethodsPassUntouchedAndAreNotRetried(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			req, err := http.NewRequest(method, srv.URL, nil)
			require.NoError(t, err)
			resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
			require.NoError(t, err)
			readBody(t, resp)
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

			seen := srv.attempts()
			require.Len(t, seen, 1, "sent once")
			require.Empty(t, seen[0].keys, "no key on %s", method)
		})
	}
}

func TestTransportC1WithMethodsReplacesTheDefault(t *testing.T) {
	t.Parallel()
	srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { created(w) })
	c := srv.client(t, idem.TransportConfig{Methods: []string{http.MethodPut}})
	for _, tc := range []struct {
		method string
		keyed  bool
	}{{http.MethodPut, true}, {http.MethodPost, false}} {
		req, err := http.NewRequest(tc.method, srv.URL, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		readBody(t, resp)
		seen := srv.attempts()
		require.Equal(t, tc.keyed, len(seen[len(seen)-1].keys) == 1, "%s keyed", tc.method)
	}
}

func TestTransportC1CallerGivenKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, field string
	}{
		{"plain", "order-0193b8e4-1d2c-7f00-8000-000000000001", `"order-0193b8e4-1d2c-7f00-8000-000000000001"`},
		{"escaped", `say "hi" \ and bye`, `"say \"hi\" \\ and bye"`},
		{"space and tilde", " ~ padded to 16 ~ ", `" ~ padded to 16 ~ "`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { created(w) })
			ctx := idem.ContextWithKey(t.Context(), tc.key)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
			require.NoError(t, err)
			resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
			require.NoError(t, err)
			readBody(t, resp)

			seen := srv.attempts()
			require.Len(t, seen, 1)
			require.Equal(t, []string{tc.field}, seen[0].keys)
			require.Equal(t, tc.key, unquoteKey(t, seen[0].keys[0]), "the key parses back with the sf rules")
		})
	}
}

func TestTransportC1InvalidKeyFailsBeforeSending(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ctx  func(context.Context) context.Context
		cfg  idem.TransportConfig
	}{
		{"non-ASCII", func(ctx context.Context) context.Context { return idem.ContextWithKey(ctx, "clé") }, idem.TransportConfig{}},
		{"newline", func(ctx context.Context) context.Context { return idem.ContextWithKey(ctx, "a\nb") }, idem.TransportConfig{}},
		{"DEL", func(ctx context.Context) context.Context { return idem.ContextWithKey(ctx, "a\x7f") }, idem.TransportConfig{}},
		{"empty", func(ctx context.Context) context.Context { return idem.ContextWithKey(ctx, "") }, idem.TransportConfig{}},
		{"6 bytes, below the middleware's 16", func(ctx context.Context) context.Context { return idem.ContextWithKey(ctx, "order7") }, idem.TransportConfig{}},
		{"15 bytes", func(ctx context.Context) context.Context { return idem.ContextWithKey(ctx, strings.Repeat("k", 15)) }, idem.TransportConfig{}},
		{"too long", func(ctx context.Context) context.Context {
			return idem.ContextWithKey(ctx, strings.Repeat("k", idem.MaxKeyBytes+1))
		}, idem.TransportConfig{}},
		{"key func", func(ctx context.Context) context.Context { return ctx },
			idem.TransportConfig{KeyFunc: func() string { return "tab\there-and-more-bytes" }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { created(w) })
			req, err := http.NewRequestWithContext(tc.ctx(t.Context()), http.MethodPost, srv.URL, strings.NewReader("x"))
			require.NoError(t, err)
			_, err = srv.client(t, tc.cfg).Do(req)
			require.ErrorIs(t, err, idem.ErrInvalidKey)
			require.Empty(t, srv.attempts(), "nothing sent")
		})
	}
}

func TestTransportC1KeepsTheCallersHeader(t *testing.T) {
	t.Parallel()
	srv := newTransportServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		created(w)
	})
	req, err := http.NewRequestWithContext(idem.ContextWithKey(t.Context(), "ignored-key"), http.MethodPost, srv.URL, strings.NewReader("x"))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", `"mine-0001"`)
	resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
	require.NoError(t, err)
	readBody(t, resp)

	seen := srv.attempts()
	require.Len(t, seen, 2)
	for _, s := range seen {
		require.Equal(t, []string{`"mine-0001"`}, s.keys)
	}
}

func TestTransportC2RetriesWithTheSameKeyAndBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		respond func(w http.ResponseWriter)
	}{
		{"503", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }},
		{"500", func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }},
		{"429", func(w http.ResponseWriter) { w.WriteHeader(http.StatusTooManyRequests) }},
		{"409 in progress", func(w http.ResponseWriter) {
			problem(w, http.StatusConflict, "idempotency_request_in_progress")
		}},
		{"409 in progress with Retry-After 0", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			problem(w, http.StatusConflict, "idempotency_request_in_progress")
		}},
		{"409 with Retry-After and no code", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
		}},
		{"503 with a past HTTP-date", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT")
			w.WriteHeader(http.StatusServiceUnavailable)
		}},
		{"503 with a large body", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, strings.Repeat("x", 256<<10))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n < 3 {
					tc.respond(w)
					return
				}
				created(w)
			})
			const body = `{"amount":1200,"currency":"EUR"}`
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
			require.NoError(t, err)
			resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			require.Equal(t, "created", readBody(t, resp))

			seen := srv.attempts()
			require.Len(t, seen, 3, "two retries, then success")
			for i, s := range seen {
				require.Len(t, s.keys, 1)
				require.Equal(t, seen[0].keys[0], s.keys[0], "attempt %d: the same key", i+1)
				require.Equal(t, body, s.body, "attempt %d: the same body", i+1)
			}
			require.Equal(t, seen[0].keys[0], resp.Request.Header.Get("Idempotency-Key"))
		})
	}
}

func TestTransportC2StopsAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "attempt %d", n)
			})
			req, err := http.NewRequest(http.MethodPatch, srv.URL, strings.NewReader("x"))
			require.NoError(t, err)
			resp, err := srv.client(t, idem.TransportConfig{MaxAttempts: n}).Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			require.Equal(t, fmt.Sprintf("attempt %d", n), readBody(t, resp), "the last response, body intact")
			require.Len(t, srv.attempts(), n)
		})
	}
}

func TestTransportC2NeverRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		status  int
		code    string
		headers map[string]string
	}{
		{"400 invalid key", http.StatusBadRequest, "invalid_idempotency_key", nil},
		{"422 key reused", http.StatusUnprocessableEntity, "idempotency_key_reused", nil},
		{"409 response unavailable", http.StatusConflict, "idempotent_response_unavailable", nil},
		{"409 response unavailable with Retry-After", http.StatusConflict, "idempotent_response_unavailable", map[string]string{"Retry-After": "0"}},
		{"409 key reused", http.StatusConflict, "idempotency_key_reused", nil},
		{"409 without code or Retry-After", http.StatusConflict, "", nil},
		{"404", http.StatusNotFound, "", nil},
		{"401", http.StatusUnauthorized, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				problem(w, tc.status, tc.code)
			})
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
			require.NoError(t, err)
			resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode)
			require.JSONEq(t, fmt.Sprintf(`{"type":"about:blank","status":%d,"code":%q}`, tc.status, tc.code),
				readBody(t, resp), "the body reaches the caller whole, even after the 409 code was read")
			require.Len(t, srv.attempts(), 1)
		})
	}
}

func TestTransportC2HonoursRetryAfter(t *testing.T) {
	t.Parallel()
	srv := newTransportServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		created(w)
	})
	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	require.NoError(t, err)
	start := time.Now()
	resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "waited for Retry-After: 1, not the 1 ms backoff")
	require.Len(t, srv.attempts(), 2)
}

func TestTransportC2RetryAfterAboveTheCapEndsTheRetries(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"120", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", v)
				problem(w, http.StatusConflict, "idempotency_request_in_progress")
			})
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
			require.NoError(t, err)
			start := time.Now()
			resp, err := srv.client(t, idem.TransportConfig{MaxRetryAfter: 5 * time.Second}).Do(req)
			require.NoError(t, err)
			readBody(t, resp)
			require.Equal(t, http.StatusConflict, resp.StatusCode)
			require.Equal(t, v, resp.Header.Get("Retry-After"), "the caller sees when to come back")
			require.Less(t, time.Since(start), 5*time.Second)
			require.Len(t, srv.attempts(), 1)
		})
	}
}

func TestTransportC2RetriesTransportErrors(t *testing.T) {
	t.Parallel()
	// The first attempt's connection is closed without an answer.
	hangUpFirst := func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_ = conn.Close()
			return
		}
		created(w)
	}

	t.Run("retried", func(t *testing.T) {
		t.Parallel()
		srv := newTransportServer(t, hangUpFirst)
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
		require.NoError(t, err)
		resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
		require.NoError(t, err)
		require.Equal(t, "created", readBody(t, resp))

		seen := srv.attempts()
		require.Len(t, seen, 2)
		require.Equal(t, seen[0].keys, seen[1].keys)
		require.Equal(t, "payload", seen[1].body)
	})

	// Proves that the retry above is this transport's, not net/http's own.
	t.Run("one attempt surfaces the error", func(t *testing.T) {
		t.Parallel()
		srv := newTransportServer(t, hangUpFirst)
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("payload"))
		require.NoError(t, err)
		_, err = srv.client(t, idem.TransportConfig{MaxAttempts: 1}).Do(req)
		require.Error(t, err)
		require.Len(t, srv.attempts(), 1)
	})
}

func TestTransportC2DoesNotRetryWhenTheContextEnds(t *testing.T) {
	t.Parallel()

	t.Run("during the request", func(t *testing.T) {
		t.Parallel()
		arrived := make(chan struct{}, 1)
		srv := newTransportServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-arrived; cancel() }()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
		require.NoError(t, err)
		_, err = srv.client(t, idem.TransportConfig{}).Do(req)
		require.ErrorIs(t, err, context.Canceled)
		require.Len(t, srv.attempts(), 1)
	})

	t.Run("during the wait", func(t *testing.T) {
		t.Parallel()
		answered := make(chan struct{}, 1)
		srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
			answered <- struct{}{}
		})
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-answered; time.Sleep(20 * time.Millisecond); cancel() }()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
		require.NoError(t, err)
		start := time.Now()
		resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
		require.ErrorIs(t, err, context.Canceled)
		require.Nil(t, resp)
		require.Less(t, time.Since(start), 5*time.Second, "returned promptly, not after Retry-After: 30")
		require.Len(t, srv.attempts(), 1)
	})
}

func TestTransportC2BodyWithoutGetBodyIsSentOnce(t *testing.T) {
	t.Parallel()
	srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	req, err := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("once")))
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	resp, err := srv.client(t, idem.TransportConfig{}).Do(req)
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	seen := srv.attempts()
	require.Len(t, seen, 1, "not retried: the body cannot be replayed")
	require.Equal(t, "once", seen[0].body)
	require.Len(t, seen[0].keys, 1, "still keyed")
}

func TestTransportDoesNotModifyTheCallersRequest(t *testing.T) {
	t.Parallel()
	srv := newTransportServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		created(w)
	})
	tr, err := idem.NewTransport(srv.Client().Transport, idem.TransportConfig{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	require.NoError(t, err)

	req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	require.NoError(t, err)
	req.Header.Set("X-Trace", "t1")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, http.Header{"X-Trace": {"t1"}}, req.Header, "no header added to the original")
	require.NotSame(t, req, resp.Request)
	require.NotEmpty(t, resp.Request.Header.Get("Idempotency-Key"))

	// A request without a Header map at all is keyed all the same.
	bare := &http.Request{Method: http.MethodPost, URL: req.URL}
	resp, err = tr.RoundTrip(bare)
	require.NoError(t, err)
	readBody(t, resp)
	require.Nil(t, bare.Header)
	require.NotEmpty(t, resp.Request.Header.Get("Idempotency-Key"))
}

func TestNewTransportRefusesInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  idem.TransportConfig
		msg  string
	}{
		{"negative attempts", idem.TransportConfig{MaxAttempts: -1}, "max attempts"},
		{"too many attempts", idem.TransportConfig{MaxAttempts: idem.MaxAttemptsLimit + 1}, "max attempts"},
		{"negative backoff", idem.TransportConfig{InitialBackoff: -time.Millisecond, MaxBackoff: time.Second}, "initial backoff"},
		{"max below initial", idem.TransportConfig{InitialBackoff: time.Second, MaxBackoff: time.Millisecond}, "max backoff"},
		{"initial above the default max", idem.TransportConfig{InitialBackoff: time.Minute}, "max backoff"},
		{"negative max retry-after", idem.TransportConfig{MaxRetryAfter: -time.Second}, "retry-after"},
		{"no methods", idem.TransportConfig{Methods: []string{}}, "no methods"},
		{"empty method", idem.TransportConfig{Methods: []string{http.MethodPost, ""}}, "invalid method"},
		{"method with a space", idem.TransportConfig{Methods: []string{"PO ST"}}, "invalid method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, err := idem.NewTransport(nil, tc.cfg)
			require.ErrorContains(t, err, tc.msg)
			require.Nil(t, tr)
		})
	}

	tr, err := idem.NewTransport(nil, idem.TransportConfig{MaxAttempts: idem.MaxAttemptsLimit, InitialBackoff: time.Second, MaxBackoff: time.Second})
	require.NoError(t, err, "the bounds themselves are valid")
	require.NotNil(t, tr)
	tr, err = idem.NewTransport(nil, idem.TransportConfig{MaxAttempts: 1})
	require.NoError(t, err, "the bounds themselves are valid")
	require.NotNil(t, tr)
}

func TestTransportKeyFunc(t *testing.T) {
	t.Parallel()
	srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { created(w) })
	c := srv.client(t, idem.TransportConfig{KeyFunc: func() string { return "from-the-key-func" }})
	req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, []string{`"from-the-key-func"`}, srv.attempts()[0].keys)
}

func TestTransportRetriesConcurrentRequestsIndependently(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	failed := map[string]bool{} // keys whose first attempt was answered 503
	srv := newTransportServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		first := !failed[key]
		failed[key] = true
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		created(w)
	})
	c := srv.client(t, idem.TransportConfig{})
	const n = 16
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
			if err != nil {
				statuses <- -1
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				statuses <- -1
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		require.Equal(t, http.StatusCreated, s)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, failed, n, "one key per logical request")
	require.Len(t, srv.attempts(), 2*n, "each retried once with its own key")
}

func ExampleNewTransport() {
	// A server that is briefly unavailable, then creates the order. It
	// prints the Idempotency-Key of each attempt.
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts++
		fmt.Printf("attempt %d: Idempotency-Key: %s\n", attempts, r.Header.Get("Idempotency-Key"))
		if attempts == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	tr, err := idem.NewTransport(nil, idem.TransportConfig{MaxAttempts: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	// Key the request with the order's own ID, so that a repeat after a
	// crash is recognised by the server. Without WithKey, a fresh UUIDv7 is
	// sent.
	ctx := idem.ContextWithKey(context.Background(), "order-0193b8e4-1d2c-7f00-8000-000000000001")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"sku":"A1"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
	fmt.Println("sent key:", resp.Request.Header.Get("Idempotency-Key"))
	// Output:
	// attempt 1: Idempotency-Key: "order-0193b8e4-1d2c-7f00-8000-000000000001"
	// attempt 2: Idempotency-Key: "order-0193b8e4-1d2c-7f00-8000-000000000001"
	// 201 Created
	// sent key: "order-0193b8e4-1d2c-7f00-8000-000000000001"
}

// closeSpy is a base RoundTripper that records whether the bodies of the
// responses it returned were closed.
type closeSpy struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []*spiedBody
}

type spiedBody struct {
	io.ReadCloser
	closed bool
}

func (b *spiedBody) Close() error { b.closed = true; return b.ReadCloser.Close() }

func (s *closeSpy) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err == nil {
		b := &spiedBody{ReadCloser: resp.Body}
		resp.Body = b
		s.mu.Lock()
		s.bodies = append(s.bodies, b)
		s.mu.Unlock()
	}
	return resp, err
}

func (s *closeSpy) allClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bodies {
		if !b.closed {
			return false
		}
	}
	return len(s.bodies) > 0
}

// SPEC K21: a 409 idempotency_outcome_pending_review is sent once, whatever
// its headers and the attempt limit, and comes back as a typed error with
// the response's body read and closed; a 409 in progress is still retried
// (TestTransportC2RetriesWithTheSameKeyAndBody).
func TestTransportK21PendingReviewIsSentOnceAndReturnedAsAnError(t *testing.T) {
	t.Parallel()
	const detail = "The outcome of your request is being checked."
	for _, tc := range []struct {
		name       string
		retryAfter string
		cfg        idem.TransportConfig
		body       func() io.Reader
	}{
		{"without Retry-After", "", idem.TransportConfig{}, nil},
		{"with Retry-After 0", "0", idem.TransportConfig{}, nil},
		{"with a large Retry-After", "3600", idem.TransportConfig{}, nil},
		{"on the last attempt", "", idem.TransportConfig{MaxAttempts: 1}, nil},
		{"with a body that cannot be replayed", "", idem.TransportConfig{}, func() io.Reader { return io.NopCloser(strings.NewReader("x")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newTransportServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusConflict)
				fmt.Fprintf(w, `{"type":"about:blank","status":409,"code":%q,"detail":%q}`, idem.CodePendingReview, detail)
			})
			spy := &closeSpy{base: srv.Client().Transport}
			cfg := tc.cfg
			cfg.InitialBackoff, cfg.MaxBackoff = time.Millisecond, 2*time.Millisecond
			tr, err := idem.NewTransport(spy, cfg)
			require.NoError(t, err)
			body := io.Reader(strings.NewReader("x"))
			if tc.body != nil {
				body = tc.body()
			}
			req, err := http.NewRequestWithContext(idem.ContextWithKey(context.Background(), "order-7-0000000001"), http.MethodPost, srv.URL, body)
			require.NoError(t, err)

			resp, err := (&http.Client{Transport: tr}).Do(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, idem.ErrPendingReview)
			require.False(t, errors.Is(err, idem.ErrInProgress))
			var pr *idem.PendingReviewResponseError
			require.ErrorAs(t, err, &pr)
			require.Equal(t, idem.PendingReviewResponseError{StatusCode: http.StatusConflict, Code: idem.CodePendingReview, Detail: detail, Key: `"order-7-0000000001"`,
				Body: []byte(fmt.Sprintf(`{"type":"about:blank","status":409,"code":%q,"detail":%q}`, idem.CodePendingReview, detail))}, *pr)
			require.Len(t, srv.attempts(), 1, "sent exactly once")
			require.True(t, spy.allClosed(), "the response's body is closed by the transport")
		})
	}
}

// The transport and a middleware with default KeyRules agree on every key:
// a key the transport sends is never refused with 400 invalid_idempotency_key,
// and a key the middleware would refuse (6 bytes, 15, 256) fails in
// RoundTrip before anything is sent.
func TestTransportSendsOnlyKeysTheMiddlewareAccepts(t *testing.T) {
	t.Parallel()
	s := newK21Server(t, idem.MiddlewareConfig{})
	tr, err := idem.NewTransport(s.Client().Transport, idem.TransportConfig{})
	require.NoError(t, err)
	client := &http.Client{Transport: tr}
	for _, key := range []string{"order7", strings.Repeat("k", 15), strings.Repeat("k", 16), ` "quoted" \ key `,
		strings.Repeat("k", idem.MaxKeyBytes), strings.Repeat("k", idem.MaxKeyBytes+1)} {
		req, err := http.NewRequestWithContext(idem.ContextWithKey(t.Context(), key), http.MethodPost, s.URL+"/pay",
			strings.NewReader(`{"amount_cents":1999}`))
		require.NoError(t, err)
		before := s.hits.Load()
		resp, err := client.Do(req)
		if err != nil {
			require.ErrorIs(t, err, idem.ErrInvalidKey, "%d-byte key", len(key))
			require.Equal(t, before, s.hits.Load(), "%d-byte key: nothing sent", len(key))
			require.True(t, len(key) < 16 || len(key) > idem.MaxKeyBytes, "%d-byte key refused by the transport", len(key))
			continue
		}
		body, rerr := io.ReadAll(resp.Body)
		require.NoError(t, errors.Join(rerr, resp.Body.Close()))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%d-byte key: %s", len(key), body)
	}
}
