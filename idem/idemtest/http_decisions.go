package idemtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// runHTTPDecisions covers what a request with a valid key gets: every row
// of the decision table, over HTTP (SPEC H5–H16).
func runHTTPDecisions(t *testing.T, h httpHarness) {
	t.Run("H5PrincipalsWithTheSameKeyHaveSeparateRecords", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		alice := b.call(t, httpCall{key: key, header: http.Header{headerUser: {"alice"}}})
		bob := b.call(t, httpCall{key: key, header: http.Header{headerUser: {"bob"}}})
		require.Equal(t, http.StatusCreated, alice.status)
		require.Equal(t, http.StatusCreated, bob.status)
		require.Empty(t, bob.header.Get(idem.HeaderReplayed), "no replay across principals")
		require.Equal(t, 1, decodeCreated(t, alice).Run)
		require.Equal(t, 2, decodeCreated(t, bob).Run)

		for _, scope := range []string{"user:web:alice", "user:web:bob"} {
			rec, ok := b.record(t, scope, routeR, key)
			require.True(t, ok, scope)
			require.Equal(t, idemdriver.StatusCompleted, rec.Status, scope)
		}
		_, ok := b.record(t, b.scope, routeR, key)
		require.False(t, ok, "an authenticated request is not scoped by address")
		requireReplay(t, alice, b.call(t, httpCall{key: key, header: http.Header{headerUser: {"alice"}}}))
		require.EqualValues(t, 2, b.runs.Load())
	})

	t.Run("H5SignatureScopeWhenNoPrincipal", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		signed := b.call(t, httpCall{key: key, header: http.Header{headerSigner: {"k1"}}})
		require.Equal(t, http.StatusCreated, signed.status)
		_, ok := b.record(t, "sig:partners:k1", routeR, key)
		require.True(t, ok, "scoped by the verified signature")

		both := b.call(t, httpCall{key: key, header: http.Header{headerSigner: {"k1"}, headerUser: {"carol"}}})
		require.Equal(t, http.StatusCreated, both.status)
		require.Empty(t, both.header.Get(idem.HeaderReplayed), "the principal wins over the signature")
		_, ok = b.record(t, "user:web:carol", routeR, key)
		require.True(t, ok)
		require.EqualValues(t, 2, b.runs.Load())
	})

	t.Run("H5AddressScopeWhenNoPrincipal", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		first := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusCreated, first.status)
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok, "scoped by the client address %s", b.scope)
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)
		require.Equal(t, idem.Digest(b.scope, routeR, key), rec.KeyDigest, "the stored key is a digest of scope, route and key")
		require.NotContains(t, rec.KeyDigest, key)
	})

	t.Run("H5SameKeyOnTwoRoutesHasTwoRecords", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		r1 := b.call(t, httpCall{path: "/r", key: key})
		r2 := b.call(t, httpCall{path: "/r2", key: key})
		require.Equal(t, http.StatusCreated, r1.status)
		require.Equal(t, http.StatusCreated, r2.status)
		require.Empty(t, r2.header.Get(idem.HeaderReplayed))
		require.EqualValues(t, 2, b.runs.Load())
		for _, route := range []string{routeR, routeR2} {
			_, ok := b.record(t, b.scope, route, key)
			require.True(t, ok, route)
		}
	})

	t.Run("H5DefaultRouteIsThePatternNotThePath", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{path: "/d/1", key: newKey()}).status)
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{path: "/d/2", key: newKey()}).status)
		ids := b.spy.idents()
		require.Len(t, ids, 2)
		require.Equal(t, ids[0].Operation, ids[1].Operation, "one route, whatever the path parameter")
		require.Contains(t, ids[0].Operation, "/d/{id}", "the chi route pattern names the route")
	})

	t.Run("H6WhitespaceInJSONBodyIsAnotherRequest", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{key: key, body: `{"amount":100}`}).status)
		resp := b.call(t, httpCall{key: key, body: `{"amount": 100}`})
		requireProblem(t, resp, http.StatusUnprocessableEntity, idem.CodeKeyReused)
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H6OtherQueryIsAnotherRequest", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{path: "/r?currency=eur", key: key}).status)
		requireProblem(t, b.call(t, httpCall{path: "/r?currency=usd", key: key}), http.StatusUnprocessableEntity, idem.CodeKeyReused)
		requireProblem(t, b.call(t, httpCall{path: "/r", key: key}), http.StatusUnprocessableEntity, idem.CodeKeyReused)
		requireProblem(t, b.call(t, httpCall{path: "/r?currency=eur", key: key, contentType: "text/plain"}),
			http.StatusUnprocessableEntity, idem.CodeKeyReused)
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H6MultipartIsHashedByFieldsAndFiles", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		form := func(boundary, content string) (body, contentType string) {
			var buf bytes.Buffer
			w := multipart.NewWriter(&buf)
			require.NoError(t, w.SetBoundary(boundary))
			require.NoError(t, w.WriteField("note", "invoice for march"))
			fw, err := w.CreateFormFile("doc", "invoice.pdf")
			require.NoError(t, err)
			_, err = io.WriteString(fw, content)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			return buf.String(), w.FormDataContentType()
		}
		key := newKey()
		body, ct := form("boundary-one", "%PDF-1.7 content")
		first := b.call(t, httpCall{key: key, body: body, contentType: ct})
		require.Equal(t, http.StatusCreated, first.status)
		require.Equal(t, len(body), decodeCreated(t, first).Len, "the handler read the whole body")

		body, ct = form("another-boundary-two", "%PDF-1.7 content")
		requireReplay(t, first, b.call(t, httpCall{key: key, body: body, contentType: ct}))

		body, ct = form("boundary-one", "%PDF-1.7 contenT")
		requireProblem(t, b.call(t, httpCall{key: key, body: body, contentType: ct}), http.StatusUnprocessableEntity, idem.CodeKeyReused)
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H6HandlerReadsTheWholeBody", func(t *testing.T) {
		t.Parallel()
		notes := make(chan string, 2)
		b := h.setup(t, httpOpts{handler: func(w http.ResponseWriter, r *http.Request, run int) {
			if err := r.ParseMultipartForm(1 << 20); err == nil {
				notes <- r.FormValue("note")
			}
			respondCreated(w, r, run)
		}})
		body := strings.Repeat("x", 200_000)
		resp := b.call(t, httpCall{key: newKey(), body: body, contentType: "text/plain"})
		require.Equal(t, len(body), decodeCreated(t, resp).Len)

		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		require.NoError(t, mw.WriteField("note", "hello"))
		require.NoError(t, mw.Close())
		resp = b.call(t, httpCall{key: newKey(), body: buf.String(), contentType: mw.FormDataContentType()})
		require.Equal(t, http.StatusCreated, resp.status)
		require.Len(t, notes, 1, "only the multipart request parses as a form")
		require.Equal(t, "hello", <-notes, "the handler parses the multipart form the middleware hashed")
	})

	t.Run("H7H12ReplayIsTheStoredResponseWithoutCookies", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		first := b.call(t, httpCall{key: key, body: `{"amount":100}`})
		require.Equal(t, http.StatusCreated, first.status)
		require.Equal(t, "application/json", first.header.Get("Content-Type"))
		require.Equal(t, `"v1"`, first.header.Get("ETag"))
		require.Equal(t, "node-7", first.header.Get("X-Internal"))
		require.NotEmpty(t, first.header.Values("Set-Cookie"), "the first response is the handler's own")
		require.Empty(t, first.header.Get(idem.HeaderReplayed))

		b.clock.Advance(time.Hour)
		again := b.call(t, httpCall{key: key, body: `{"amount":100}`})
		requireReplay(t, first, again)
		require.Equal(t, "application/json", again.header.Get("Content-Type"))
		require.Equal(t, `"v1"`, again.header.Get("ETag"))
		require.Empty(t, again.header.Get("X-Internal"), "a header not in ReplayedHeaders is not replayed")
		require.Empty(t, again.header.Values("Set-Cookie"), "H12: Set-Cookie is never replayed")
		require.EqualValues(t, 1, b.runs.Load(), "the handler ran once")

		_, replayed := b.hooks.events()
		require.Len(t, replayed, 1, "one replayed event")
		ev := replayed[0]
		require.Equal(t, idem.SafeKeyID(idem.Digest(b.scope, routeR, key)), ev.KeyID, "the event carries the safe key id")
		require.NotContains(t, fmt.Sprintf("%+v", ev), key, "never the raw key")
		require.Equal(t, b.scope, ev.Scope)
		require.Equal(t, routeR, ev.Route)
		require.Equal(t, http.StatusCreated, ev.Status)
	})

	t.Run("H12SetCookieNeverStoredEvenWhenListed", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{ReplayedHeaders: []string{"content-type", "set-cookie", "x-internal"}}})
		key := newKey()
		first := b.call(t, httpCall{key: key})
		again := b.call(t, httpCall{key: key})
		requireReplay(t, first, again)
		require.Equal(t, "node-7", again.header.Get("X-Internal"), "a listed header is replayed")
		require.Empty(t, again.header.Get("ETag"), "an unlisted header is not")
		require.Empty(t, again.header.Values("Set-Cookie"), "Set-Cookie never, whatever the list says")
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.NotContains(t, string(rec.Result), "s3cr3t")
	})

	t.Run("H7ResponseWithoutBodyReplaysItsHeaders", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{handler: func(w http.ResponseWriter, r *http.Request, run int) {
			// No WriteHeader, no Write: net/http sends 200 with these headers.
			w.Header().Set("Location", fmt.Sprintf("/orders/%d", run))
			w.Header().Set("ETag", `"empty"`)
		}})
		key := newKey()
		first := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusOK, first.status)
		require.Equal(t, "/orders/1", first.header.Get("Location"))
		again := b.call(t, httpCall{key: key})
		requireReplay(t, first, again)
		require.Equal(t, "/orders/1", again.header.Get("Location"), "Location is replayed")
		require.Equal(t, `"empty"`, again.header.Get("ETag"), "ETag is replayed")
	})

	t.Run("H8ReusedKeyChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		first := b.call(t, httpCall{key: key, body: `{"amount":100}`})
		require.Equal(t, http.StatusCreated, first.status)
		before, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)

		b.clock.Advance(time.Minute)
		resp := b.call(t, httpCall{key: key, body: `{"amount":999}`})
		requireProblem(t, resp, http.StatusUnprocessableEntity, idem.CodeKeyReused)
		require.EqualValues(t, 1, b.runs.Load(), "nothing ran")
		after, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		before.ReadAt, after.ReadAt = time.Time{}, time.Time{}
		require.Equal(t, before, after, "the record is unchanged")
		requireReplay(t, first, b.call(t, httpCall{key: key, body: `{"amount":100}`}))
	})

	t.Run("H9DuplicateWhileRunningIs409WithRetryAfter", func(t *testing.T) {
		t.Parallel()
		g := newGate(t)
		b := h.setup(t, httpOpts{route: idem.RouteOpts{Lease: 20 * time.Second},
			handler: g.holdFirst})
		key := newKey()
		pending := b.start(t, httpCall{key: key})
		g.waitEntered(t)

		// The first request holds the key: an owner token and a lease.
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusProcessing, rec.Status)
		require.NotEmpty(t, rec.Token)
		require.True(t, start.Add(20*time.Second).Equal(rec.LeaseExpiresAt), "lease: got %s", rec.LeaseExpiresAt)

		dup := b.call(t, httpCall{key: key})
		requireProblem(t, dup, http.StatusConflict, idem.CodeInProgress)
		require.Equal(t, 20, requireRetryAfter(t, dup), "Retry-After is the rest of the lease")
		b.clock.Advance(15 * time.Second)
		dup = b.call(t, httpCall{key: key})
		requireProblem(t, dup, http.StatusConflict, idem.CodeInProgress)
		require.Equal(t, 5, requireRetryAfter(t, dup))

		g.open()
		first := await(t, pending)
		require.Equal(t, http.StatusCreated, first.status)
		requireReplay(t, first, b.call(t, httpCall{key: key}))
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H9WaitInFlightGetsTheReplay", func(t *testing.T) {
		t.Parallel()
		g := newGate(t)
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{WaitInFlight: 2 * time.Second},
			handler: g.holdFirst})
		key := newKey()
		pending := b.start(t, httpCall{key: key})
		g.waitEntered(t)
		timer := time.AfterFunc(100*time.Millisecond, g.open)
		t.Cleanup(func() { timer.Stop() })
		began := time.Now()
		dup := b.call(t, httpCall{key: key})
		waited := time.Since(began)
		first := await(t, pending)
		require.Equal(t, http.StatusCreated, first.status)
		requireReplay(t, first, dup)
		require.Less(t, waited, 2*time.Second, "the duplicate stopped waiting once the first finished")
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H9AcceptedWhileInProgressIs202", func(t *testing.T) {
		t.Parallel()
		g := newGate(t)
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{AcceptedWhileInProgress: true},
			handler: g.holdFirst})
		key := newKey()
		pending := b.start(t, httpCall{key: key})
		g.waitEntered(t)
		dup := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusAccepted, dup.status, "body %s", dup.body)
		require.Equal(t, int(idem.DefaultLease/time.Second), requireRetryAfter(t, dup))
		var body map[string]any
		require.NoError(t, json.Unmarshal([]byte(dup.body), &body))
		require.Equal(t, string(idemdriver.StatusProcessing), body["status"])
		g.open()
		require.Equal(t, http.StatusCreated, await(t, pending).status)
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("S1LeaseTakeoverFencesTheStuckRequest", func(t *testing.T) {
		t.Parallel()
		b, g, key, stuck, held := stuckRequest(t, h, new(idem.RecoverByRerunning()))
		successor := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusCreated, successor.status)
		require.Empty(t, successor.header.Get(idem.HeaderReplayed), "the expired lease is taken over and the handler runs")
		require.Equal(t, 2, decodeCreated(t, successor).Run)
		taken, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, taken.Status)
		require.Equal(t, 2, taken.Attempts)
		require.Greater(t, taken.Fence, held.Fence)
		require.True(t, held.CreatedAt.Equal(taken.CreatedAt), "the first-seen time is kept")

		g.open()
		late := await(t, stuck)
		require.Equal(t, http.StatusCreated, late.status, "the stuck request's response still reaches its client")
		require.Equal(t, 1, decodeCreated(t, late).Run)
		after, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, taken.Version, after.Version, "the stuck request's completion is fenced out")
		requireReplay(t, successor, b.call(t, httpCall{key: key}))
		require.EqualValues(t, 2, b.runs.Load())
	})

	t.Run("R8K21StuckRequestIsEscalatedByDefault", func(t *testing.T) {
		t.Parallel()
		b, g, key, stuck, held := stuckRequest(t, h, nil)
		successor := b.call(t, httpCall{key: key})
		requireProblem(t, successor, http.StatusConflict, idem.CodePendingReview)
		require.Empty(t, successor.header.Values("Retry-After"), "K21: a key waiting for an operator does not invite a retry")
		escalated, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusPending, escalated.Status, "the abandoned key waits for an operator")
		require.Equal(t, idemdriver.AbandonedReason(held.LeaseExpiresAt, "escalate"), escalated.LastError)

		g.open()
		late := await(t, stuck)
		require.Equal(t, http.StatusCreated, late.status, "the stuck request's response still reaches its client")
		after, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusPending, after.Status, "the stuck request's completion is fenced out")
		requireProblem(t, b.call(t, httpCall{key: key}), http.StatusConflict, idem.CodePendingReview)
		require.EqualValues(t, 1, b.runs.Load(), "the handler never ran twice")
	})

	t.Run("H10ServerErrorReleasesTheKey", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		fail := http.Header{headerStatus: {"500"}}
		require.Equal(t, http.StatusInternalServerError, b.call(t, httpCall{key: key, header: fail}).status)
		b.requireNoRecord(t, key, "H10: a 5xx releases the key")
		again := b.call(t, httpCall{key: key, header: fail})
		require.Equal(t, http.StatusInternalServerError, again.status)
		require.Empty(t, again.header.Get(idem.HeaderReplayed))
		require.EqualValues(t, 2, b.runs.Load(), "the retry ran again")

		// 503 too, and the key is then free for a request that succeeds.
		key = newKey()
		require.Equal(t, http.StatusServiceUnavailable, b.call(t, httpCall{key: key, header: http.Header{headerStatus: {"503"}}}).status)
		b.requireNoRecord(t, key, "H10: 503")
	})

	t.Run("H10StoreServerErrorsReplays5xx", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{StoreServerErrors: true}})
		key := newKey()
		fail := http.Header{headerStatus: {"500"}}
		first := b.call(t, httpCall{key: key, header: fail})
		require.Equal(t, http.StatusInternalServerError, first.status)
		requireReplay(t, first, b.call(t, httpCall{key: key, header: fail}))
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H11ClientErrorsAreStoredAndReplayed", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		for _, status := range []string{"409", "404", "402"} {
			key := newKey()
			hdr := http.Header{headerStatus: {status}}
			first := b.call(t, httpCall{key: key, header: hdr})
			require.Equal(t, status, fmt.Sprint(first.status))
			requireReplay(t, first, b.call(t, httpCall{key: key, header: hdr}))
			rec, ok := b.record(t, b.scope, routeR, key)
			require.True(t, ok)
			require.Equal(t, first.status, rec.ResponseCode, "the status is kept in clear for the console")
		}
		require.EqualValues(t, 3, b.runs.Load())
	})

	t.Run("H11DiscardClientErrorsReleases", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{DiscardClientErrors: true}})
		key := newKey()
		hdr := http.Header{headerStatus: {"409"}}
		require.Equal(t, http.StatusConflict, b.call(t, httpCall{key: key, header: hdr}).status)
		b.requireNoRecord(t, key, "H11: DiscardClientErrors")
		again := b.call(t, httpCall{key: key, header: hdr})
		require.Empty(t, again.header.Get(idem.HeaderReplayed))
		require.EqualValues(t, 2, b.runs.Load())
		// 2xx are still stored.
		key = newKey()
		first := b.call(t, httpCall{key: key})
		requireReplay(t, first, b.call(t, httpCall{key: key}))
	})

	t.Run("H13StreamedResponseIsDeliveredThenUnavailable", func(t *testing.T) {
		t.Parallel()
		flushed := make(chan error, 4)
		b := h.setup(t, httpOpts{handler: func(w http.ResponseWriter, r *http.Request, run int) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "part-1;")
			flushed <- http.NewResponseController(w).Flush()
			_, _ = io.WriteString(w, "part-2")
		}})
		key := newKey()
		first := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusOK, first.status)
		require.Equal(t, "part-1;part-2", first.body, "the client gets the whole streamed body")
		require.NoError(t, <-flushed, "Flush through http.ResponseController")

		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusUnavailable, rec.Status)
		for range 2 {
			requireProblem(t, b.call(t, httpCall{key: key}), http.StatusConflict, idem.CodeResponseUnavailable)
		}
		require.EqualValues(t, 1, b.runs.Load(), "the handler never runs again")
	})

	t.Run("H13ResponseOverMaxResponseBytesIsDeliveredThenUnavailable", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{MaxResponseBytes: 64},
			handler: func(w http.ResponseWriter, r *http.Request, run int) {
				size := 64
				if r.URL.Query().Has("big") {
					size = 1000
				}
				for range size / 8 {
					_, _ = io.WriteString(w, "abcdefgh")
				}
			}})
		key := newKey()
		big := b.call(t, httpCall{path: "/r?big", key: key})
		require.Equal(t, http.StatusOK, big.status)
		require.Len(t, big.body, 1000, "delivered whole")
		requireProblem(t, b.call(t, httpCall{path: "/r?big", key: key}), http.StatusConflict, idem.CodeResponseUnavailable)
		require.EqualValues(t, 1, b.runs.Load(), "the handler never runs again")

		key = newKey()
		exact := b.call(t, httpCall{key: key})
		require.Len(t, exact.body, 64)
		requireReplay(t, exact, b.call(t, httpCall{key: key}))
	})

	t.Run("H13FailedCompletionIsRecordedLateNeverRerun", func(t *testing.T) {
		t.Parallel()
		logs := &syncBuffer{}
		b := h.setup(t, httpOpts{engine: &idem.Config{Secret: Secret, Logger: slog.New(slog.NewTextHandler(logs, nil))}})
		b.spy.completesDown.Store(true)
		key := newKey()
		first := b.call(t, httpCall{key: key})
		require.Equal(t, http.StatusCreated, first.status, "the response was delivered")
		require.Contains(t, logs.String(), "its record is being written in the background")
		require.NotContains(t, logs.String(), key, "M5: no raw key in the log")
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusProcessing, rec.Status, "the owner keeps the key while it writes the record")
		second := b.call(t, httpCall{key: key})
		requireProblem(t, second, http.StatusConflict, idem.CodeInProgress)
		require.NotEmpty(t, second.header.Get("Retry-After"))

		b.spy.completesDown.Store(false)
		ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second)
		defer cancel()
		require.NoError(t, b.engine.Shutdown(ctx))
		rec, ok = b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)
		requireReplay(t, first, b.call(t, httpCall{key: key}))
		require.EqualValues(t, 1, b.runs.Load(), "one 201, never a second different one")
		require.Equal(t, int64(1), b.engine.Counters().OutcomesRecordedLate)
	})

	t.Run("H14StoredResponseIsSealed", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		first := b.call(t, httpCall{key: key, body: `{"card":"4242"}`})
		require.Equal(t, http.StatusCreated, first.status)
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, rec.Status)
		require.Equal(t, http.StatusCreated, rec.ResponseCode)
		require.NotEmpty(t, rec.Result)
		for _, clear := range []string{first.body, base64.StdEncoding.EncodeToString([]byte(first.body)), "application/json", `"v1"`} {
			require.NotContains(t, string(rec.Result), clear, "the stored response is sealed")
		}
		require.NotContains(t, rec.Fingerprint, "4242")
	})

	t.Run("H14MovedFlippedOrPlantedResponseIsNeverReplayed", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{})
		key := newKey()
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{key: key}).status)
		src, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)

		// The same request under another key has the same fingerprint, so
		// only the seal's binding to the key can refuse it.
		moved := newKey()
		b.plant(t, moved, src.Fingerprint, src.Result)
		flipped := newKey()
		bad := bytes.Clone(src.Result)
		bad[len(bad)-1] ^= 1
		b.plant(t, flipped, src.Fingerprint, bad)
		garbage := newKey()
		b.plant(t, garbage, src.Fingerprint, []byte("not an envelope"))

		// A plaintext response written by a middleware with sealing off,
		// on the same store.
		planted := newKey()
		plain := h.setup(t, httpOpts{store: b.store, engine: &idem.Config{DisableSealing: true}})
		require.Equal(t, http.StatusCreated, plain.call(t, httpCall{key: planted}).status)
		prec, ok := b.record(t, b.scope, routeR, planted)
		require.True(t, ok)
		require.Contains(t, string(prec.Result), "application/json", "sealing off stores in clear")

		for name, k := range map[string]string{"moved": moved, "flipped": flipped, "garbage": garbage, "planted": planted} {
			resp := b.call(t, httpCall{key: k})
			requireProblem(t, resp, http.StatusConflict, idem.CodeResponseUnavailable)
			require.NotContains(t, resp.body, `"run"`, name)
		}
		require.EqualValues(t, 1, b.runs.Load(), "the handler never ran for a tampered record")
	})

	t.Run("H14RotatedSecretStillReplaysWithPreviousSecrets", func(t *testing.T) {
		t.Parallel()
		rotated := []byte("idemtest-rotated-0123456789abcdef")
		old := h.setup(t, httpOpts{})
		key := newKey()
		first := old.call(t, httpCall{key: key})
		require.Equal(t, http.StatusCreated, first.status)

		next := h.setup(t, httpOpts{store: old.store, engine: &idem.Config{Secret: rotated, PreviousSecrets: [][]byte{Secret}}})
		requireReplay(t, first, next.call(t, httpCall{key: key}))
		forgot := h.setup(t, httpOpts{store: old.store, engine: &idem.Config{Secret: rotated}})
		requireProblem(t, forgot.call(t, httpCall{key: key}), http.StatusConflict, idem.CodeResponseUnavailable)
		require.Zero(t, next.runs.Load()+forgot.runs.Load(), "never a guess, never a second run")
	})

	t.Run("H15RouteTTLCountsFromFirstSeen", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{route: idem.RouteOpts{TTL: 2 * time.Hour}})
		key := newKey()
		first := b.call(t, httpCall{key: key})
		rec, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.True(t, start.Equal(rec.CreatedAt), "created: got %s", rec.CreatedAt)
		require.True(t, start.Add(2*time.Hour).Equal(rec.ExpiresAt), "expires: got %s", rec.ExpiresAt)

		b.clock.Advance(time.Hour)
		requireReplay(t, first, b.call(t, httpCall{key: key}))
		rec, ok = b.record(t, b.scope, routeR, key)
		require.True(t, ok)
		require.True(t, start.Add(2*time.Hour).Equal(rec.ExpiresAt), "a replay does not extend the retention")

		b.clock.Advance(time.Hour + time.Second)
		again := b.call(t, httpCall{key: key})
		require.Empty(t, again.header.Get(idem.HeaderReplayed), "after the TTL the key is new")
		require.Equal(t, 2, decodeCreated(t, again).Run)
	})

	t.Run("H15LiveLeaseOutlivesTheTTL", func(t *testing.T) {
		t.Parallel()
		g := newGate(t)
		b := h.setup(t, httpOpts{route: idem.RouteOpts{TTL: time.Minute, Lease: 2 * time.Minute},
			handler: g.holdFirst})
		key := newKey()
		pending := b.start(t, httpCall{key: key})
		g.waitEntered(t)
		b.clock.Advance(90 * time.Second)
		_, err := b.engine.Sweep(t.Context())
		require.NoError(t, err)
		_, ok := b.record(t, b.scope, routeR, key)
		require.True(t, ok, "sweep never removes a live lease")
		dup := b.call(t, httpCall{key: key})
		requireProblem(t, dup, http.StatusConflict, idem.CodeInProgress)
		require.Equal(t, 30, requireRetryAfter(t, dup))
		g.open()
		require.Equal(t, http.StatusCreated, await(t, pending).status)
		require.EqualValues(t, 1, b.runs.Load())
	})

	t.Run("H16RejectionsFireEventsWithoutTheKey", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, httpOpts{cfg: idem.MiddlewareConfig{MaxRequestBytes: 1000}})
		key := newKey()
		require.Equal(t, http.StatusCreated, b.call(t, httpCall{key: key, body: "a"}).status)
		type want struct {
			status int
			code   string
			keyID  bool
		}
		calls := []struct {
			c    httpCall
			want want
		}{
			{httpCall{}, want{http.StatusBadRequest, idem.CodeKeyMissing, false}},
			{httpCall{header: http.Header{"Idempotency-Key": {key}}}, want{http.StatusBadRequest, idem.CodeInvalidKey, false}},
			{httpCall{header: http.Header{"Idempotency-Key": {quote(key), quote(key)}}}, want{http.StatusBadRequest, idem.CodeInvalidKey, false}},
			{httpCall{key: key, body: "b"}, want{http.StatusUnprocessableEntity, idem.CodeKeyReused, true}},
			{httpCall{key: newKey(), body: strings.Repeat("z", 1001)}, want{http.StatusRequestEntityTooLarge, idem.CodeRequestTooLarge, false}},
			{httpCall{key: newKey(), body: "junk", contentType: "multipart/form-data; boundary=xyz"}, want{http.StatusBadRequest, idem.CodeMalformedBody, false}},
		}
		for i, c := range calls {
			resp := b.call(t, c.c)
			requireProblem(t, resp, c.want.status, c.want.code)
			require.NotContains(t, resp.body, key, "call %d: the problem never carries the raw key", i)
		}
		rejected, _ := b.hooks.events()
		require.Len(t, rejected, len(calls), "one rejected event per rejection")
		for i, ev := range rejected {
			require.Equal(t, calls[i].want.code, ev.Code, "event %d", i)
			require.Equal(t, calls[i].want.status, ev.Status, "event %d", i)
			require.Equal(t, routeR, ev.Route, "event %d", i)
			require.NotContains(t, fmt.Sprintf("%+v", ev), key, "event %d never carries the raw key", i)
			if calls[i].want.keyID {
				require.Equal(t, idem.SafeKeyID(idem.Digest(b.scope, routeR, key)), ev.KeyID, "event %d", i)
				require.Equal(t, b.scope, ev.Scope)
			}
		}
	})
}

// stuckRequest starts a request whose handler is held (a stalled owner)
// on a route with a 5 s lease and the given recovery (nil: the
// middleware's), and moves the clock past its lease. It returns the held record as it was before.
func stuckRequest(t *testing.T, h httpHarness, recovery *idem.Recovery) (b *httpBundle, g *gate, key string, stuck <-chan callResult, held idemdriver.Record) {
	t.Helper()
	g = newGate(t)
	b = h.setup(t, httpOpts{route: idem.RouteOpts{Lease: 5 * time.Second, Recovery: recovery},
		handler: g.holdFirst})
	key = newKey()
	stuck = b.start(t, httpCall{key: key})
	g.waitEntered(t)
	held, ok := b.record(t, b.scope, routeR, key)
	require.True(t, ok)
	b.clock.Advance(6 * time.Second)
	return b, g, key, stuck, held
}
