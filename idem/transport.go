package idem

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Defaults and limits of the client [Transport] (SPEC IDEM-C1, C2).
const (
	// DefaultMaxAttempts is how many times a request is sent at most,
	// the first attempt included.
	DefaultMaxAttempts = 4
	// MaxAttemptsLimit is the largest [TransportConfig].MaxAttempts.
	MaxAttemptsLimit = 20
	// DefaultInitialBackoff is the ceiling of the first jittered wait.
	DefaultInitialBackoff = 200 * time.Millisecond
	// DefaultMaxBackoff caps the ceiling of every jittered wait.
	DefaultMaxBackoff = 10 * time.Second
	// DefaultMaxRetryAfter is the longest Retry-After the transport waits
	// for; a longer one ends the retries.
	DefaultMaxRetryAfter = 60 * time.Second
)

const (
	transportKeyHeader        = "Idempotency-Key"
	transportRetryAfterHeader = "Retry-After"
	// transportPeekBytes bounds what is read of a response body: to find the
	// problem code of a 409, and to drain a response that will be retried so
	// that its connection can be reused.
	transportPeekBytes = 64 << 10

	transportCodeInProgress  = "idempotency_request_in_progress"
	transportCodeUnavailable = "idempotent_response_unavailable"
	transportCodeKeyReused   = "idempotency_key_reused"
)

// Transport is an [http.RoundTripper] that makes unsafe requests idempotent
// and retries them safely (SPEC IDEM-C1, C2).
//
// For the configured methods (default POST and PATCH) it sends an
// Idempotency-Key header, serialised as an RFC 9651 sf-string, unless the
// request already carries one, which is then kept as it is. The key is the
// one given with [ContextWithKey] on the request's context, else a fresh one from
// the key func (default: a UUIDv7 per call of RoundTrip). Every attempt of
// one RoundTrip carries the same key.
//
// It retries, up to the attempt limit, on transport errors (not when the
// request's context is done), on 5xx, on 429, and on 409 whose problem
// `code` is idempotency_request_in_progress or that carries Retry-After.
// It never retries other statuses, and never a 409 whose code is
// idempotent_response_unavailable or idempotency_key_reused: the server
// has said that a repeat cannot succeed. A 409 whose code is
// [CodePendingReview] (the outcome is unknown and waits for an operator,
// SPEC K21) is not retried either, whatever its headers and on any
// attempt: RoundTrip reads its body, closes it and returns a
// *[PendingReviewResponseError] instead of the response, for the caller
// to tell its user that the request is being checked.
//
// Between attempts it waits for the response's Retry-After (delta-seconds
// or HTTP-date) when one is present; a Retry-After above the configured
// maximum ends the retries and that response is returned. Without one it waits a random time between zero
// and an exponential ceiling (full jitter). A wait ends early with the
// context's error when the request's context is done.
//
// A retry needs a fresh body: a request whose Body is neither nil nor
// [http.NoBody] and whose GetBody is nil is sent once and never retried
// ([http.NewRequest] sets GetBody for bytes and strings readers).
//
// The caller's request is never modified; each attempt sends a clone. The
// returned Response.Request is the clone sent on the last attempt, so
// Response.Request.Header.Get("Idempotency-Key") is the key as sent (in
// sf-string form) — the value to record if the outcome has to be
// reconciled later. When attempts are exhausted the last response (or
// error) is returned as it is. Bodies of responses that are retried are
// drained (up to 64 KiB) and closed. Other methods go to the base
// transport untouched and are never retried.
//
// The transport logs nothing, neither keys nor bodies. A Transport is safe
// for concurrent use; build it with [NewTransport]. The zero value is not
// usable.
type Transport struct {
	base          http.RoundTripper
	maxAttempts   int
	initial, max  time.Duration
	methods       map[string]bool
	maxRetryAfter time.Duration
	keyFunc       func() (string, error)
}

// TransportConfig configures a [Transport] built by [NewTransport], which
// refuses a field out of range. The zero value is the default of every
// field.
type TransportConfig struct {
	// MaxAttempts is how many times a request is sent at most, the first
	// attempt included: 1 turns retries off. 0 means [DefaultMaxAttempts];
	// otherwise it must be within 1..[MaxAttemptsLimit].
	MaxAttempts int
	// InitialBackoff is the ceiling of the first wait without Retry-After,
	// and MaxBackoff the cap of every later ceiling. The ceiling doubles at
	// each retry; the wait is random in [0, ceiling). 0 means
	// [DefaultInitialBackoff] and [DefaultMaxBackoff]; InitialBackoff must
	// not be negative and MaxBackoff must be at least InitialBackoff.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Methods are the methods that get an Idempotency-Key and retries. Nil
	// means POST and PATCH. Methods are matched exactly (case sensitive,
	// as HTTP methods are). A non-nil list must hold at least one, and
	// none may be empty or contain anything but token characters.
	Methods []string
	// MaxRetryAfter is the longest Retry-After the transport honours. A
	// response asking for a longer wait ends the retries and is returned
	// to the caller, who can decide to come back later. 0 means
	// [DefaultMaxRetryAfter]; a negative value is refused.
	MaxRetryAfter time.Duration
	// KeyFunc is the source of keys for requests that carry none and have
	// no key from [ContextWithKey]. It is called once per RoundTrip,
	// possibly from several goroutines at once. Keys must be unique per
	// logical request and unguessable; a key that the middleware's default
	// [KeyRules] would refuse (shorter than 16 bytes, longer than
	// [MaxKeyBytes], or holding bytes outside 0x20–0x7E) makes RoundTrip
	// fail with an error matching [ErrInvalidKey] before anything is sent.
	// Nil makes a UUIDv7.
	KeyFunc func() string
}

type transportKeyCtx struct{}

// ContextWithKey returns a context that makes a [Transport] send key, instead of a
// generated one, on the request made with it — for example the UUID of the
// order the request creates, so that a repeat after a crash carries the
// same key. The key must pass the middleware's default [KeyRules] — 16 to
// [MaxKeyBytes] bytes within 0x20–0x7E — else RoundTrip fails with an error
// matching [ErrInvalidKey] before anything is sent, rather than send a key
// the server refuses with 400. A request that already carries an
// Idempotency-Key header keeps it and ignores this key.
func ContextWithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, transportKeyCtx{}, key)
}

// NewTransport returns a [Transport] that sends through base
// ([http.DefaultTransport] when nil), configured by cfg. It fails when a
// field of cfg is out of range.
func NewTransport(base http.RoundTripper, cfg TransportConfig) (*Transport, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	c := cfg
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.InitialBackoff = cmp.Or(c.InitialBackoff, DefaultInitialBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, DefaultMaxRetryAfter)
	if c.Methods == nil {
		c.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > MaxAttemptsLimit {
		return nil, fmt.Errorf("idem: max attempts %d outside 1..%d", c.MaxAttempts, MaxAttemptsLimit)
	}
	if c.InitialBackoff <= 0 {
		return nil, fmt.Errorf("idem: initial backoff %s must be positive", c.InitialBackoff)
	}
	if c.MaxBackoff < c.InitialBackoff {
		return nil, fmt.Errorf("idem: max backoff %s below initial backoff %s", c.MaxBackoff, c.InitialBackoff)
	}
	if c.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("idem: max retry-after %s is negative", c.MaxRetryAfter)
	}
	if len(c.Methods) == 0 {
		return nil, errors.New("idem: no methods for the transport")
	}
	methods := make(map[string]bool, len(c.Methods))
	for _, m := range c.Methods {
		if !isMethodToken(m) {
			return nil, fmt.Errorf("idem: invalid method %q", m)
		}
		methods[m] = true
	}
	t := &Transport{
		base:          base,
		maxAttempts:   c.MaxAttempts,
		initial:       c.InitialBackoff,
		max:           c.MaxBackoff,
		methods:       methods,
		maxRetryAfter: c.MaxRetryAfter,
		keyFunc:       newV7Key,
	}
	if f := c.KeyFunc; f != nil {
		t.keyFunc = func() (string, error) { return f(), nil }
	}
	return t, nil
}

func newV7Key() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("idem: generate idempotency key: %w", err)
	}
	return id.String(), nil
}

// RoundTrip sends req as described on [Transport]. Like every
// [http.RoundTripper] it closes req.Body, also when it fails. Errors are
// those of the base transport, the context's error when the request's
// context ends during a wait, an error matching [ErrInvalidKey] when the
// key cannot be sent, the error of req.GetBody when the body cannot be
// rewound for a retry, or a *[PendingReviewResponseError] (matching
// [ErrPendingReview]) when the server answers that the request's outcome
// is pending review.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.methods[req.Method] {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	out := req.Clone(ctx)
	if out.Header == nil {
		out.Header = make(http.Header)
	}
	if len(out.Header.Values(transportKeyHeader)) == 0 {
		key, err := t.key(ctx)
		if err != nil {
			if req.Body != nil {
				// The request fails before sending; the body is closed per
				// the RoundTripper contract and its close error adds nothing.
				_ = req.Body.Close()
			}
			return nil, err
		}
		out.Header.Set(transportKeyHeader, sfString(key))
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	retryable := !hasBody || req.GetBody != nil

	for attempt := 1; ; attempt++ {
		r := out
		if attempt > 1 {
			r = out.Clone(ctx)
			if hasBody {
				body, err := req.GetBody()
				if err != nil {
					return nil, fmt.Errorf("idem: rewind request body for retry: %w", err)
				}
				r.Body = body
			}
		}
		resp, err := t.base.RoundTrip(r)
		if resp != nil {
			resp.Request = r
		}
		var code string
		if err == nil {
			var perr *PendingReviewResponseError
			if code, perr = conflictCode(resp); perr != nil {
				return nil, perr
			}
		}
		if attempt >= t.maxAttempts || !retryable {
			return resp, err
		}
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			wait = t.backoff(attempt)
		} else {
			d, again := t.retryDelay(resp, code, attempt)
			if !again {
				return resp, nil
			}
			drainAndClose(resp.Body)
			wait = d
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// CloseIdleConnections closes the idle connections of the base transport
// when it has such a method, so that [http.Client.CloseIdleConnections]
// reaches through this transport.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) key(ctx context.Context) (string, error) {
	key, ok := ctx.Value(transportKeyCtx{}).(string)
	if !ok {
		var err error
		if key, err = t.keyFunc(); err != nil {
			return "", err
		}
	}
	if err := checkKey(key, KeyRules{}); err != nil {
		return "", err
	}
	return key, nil
}

// retryDelay says whether resp, whose problem code is code ("" when it is
// not a 409 or has none), is worth another attempt, and how long to wait
// before it.
func (t *Transport) retryDelay(resp *http.Response, code string, attempt int) (time.Duration, bool) {
	retryAfter := resp.Header.Get(transportRetryAfterHeader)
	switch {
	case resp.StatusCode >= 500 && resp.StatusCode <= 599, resp.StatusCode == http.StatusTooManyRequests:
	case resp.StatusCode == http.StatusConflict:
		switch code {
		case transportCodeUnavailable, transportCodeKeyReused:
			return 0, false
		case transportCodeInProgress:
		default:
			if retryAfter == "" {
				return 0, false
			}
		}
	default:
		return 0, false
	}
	if d, ok := parseRetryAfter(retryAfter, time.Now()); ok {
		if d > t.maxRetryAfter {
			return 0, false
		}
		return d, true
	}
	return t.backoff(attempt), true
}

// backoff is the full-jitter wait after the attempt-th attempt: random in
// [0, min(max, initial·2^(attempt-1))).
func (t *Transport) backoff(attempt int) time.Duration {
	ceil := t.initial
	for i := 1; i < attempt && ceil < t.max; i++ {
		if ceil > t.max/2 {
			ceil = t.max
		} else {
			ceil *= 2
		}
	}
	ceil = min(ceil, t.max)
	return rand.N(ceil)
}

// parseRetryAfter reads delta-seconds or an HTTP-date (RFC 9110 §10.2.3).
// A date in the past means no wait.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// PendingReviewResponseError is what a [Transport] returns instead of a
// response that says the request's outcome is pending review (409 with
// problem code [CodePendingReview], SPEC K21): the server does not know
// whether the request took effect and waits for an operator or a
// reconciliation, so no retry can change the answer and none is made.
// Tell the user that the request is being checked (Detail is the server's
// wording for that), and keep Key to find the request again. It matches
// [ErrPendingReview]; through an [http.Client] it arrives wrapped in a
// *url.Error, which errors.As sees through.
//
// The response's body was read (its first 64 KiB, kept in Body) and
// closed by the transport: the caller has nothing to close.
type PendingReviewResponseError struct {
	StatusCode int    // the response's status: 409
	Code       string // the problem's `code`: CodePendingReview
	Detail     string // the problem's `detail`, meant for an end user; may be empty
	// Key is the Idempotency-Key field as sent (an RFC 9651 sf-string), as
	// Response.Request.Header.Get would have given it.
	Key  string
	Body []byte // the problem document as received, at most 64 KiB
}

func (e *PendingReviewResponseError) Error() string {
	return fmt.Sprintf("idem: the server is checking the outcome of this request (%d %s); it was not sent again", e.StatusCode, e.Code)
}

// Is reports a match with ErrPendingReview.
func (e *PendingReviewResponseError) Is(target error) bool { return target == ErrPendingReview }

// conflictCode reads the problem code of a 409 response ("" for any other
// status, or a 409 without one), leaving its body readable from its start.
// When the code is CodePendingReview it closes the body and returns the
// error that replaces the response.
func conflictCode(resp *http.Response) (string, *PendingReviewResponseError) {
	if resp.StatusCode != http.StatusConflict {
		return "", nil
	}
	p, head := peekProblem(resp)
	if p.Code != CodePendingReview {
		return p.Code, nil
	}
	drainAndClose(resp.Body)
	return p.Code, &PendingReviewResponseError{StatusCode: resp.StatusCode, Code: p.Code, Detail: p.Detail,
		Key: resp.Request.Header.Get(transportKeyHeader), Body: head}
}

// transportProblem is what the transport reads of an RFC 9457 problem.
type transportProblem struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// peekProblem returns the problem in resp's body (zero when there is none)
// and the bytes it read: at most transportPeekBytes. It leaves the body
// readable from its start.
func peekProblem(resp *http.Response) (transportProblem, []byte) {
	var p transportProblem
	if resp.Body == nil || resp.Body == http.NoBody {
		return p, nil
	}
	orig := resp.Body
	head, err := io.ReadAll(io.LimitReader(orig, transportPeekBytes))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), orig), orig}
	if err != nil || json.Unmarshal(head, &p) != nil {
		return transportProblem{}, head
	}
	return p, head
}

// drainAndClose lets the connection of a response that will be retried be
// reused. Errors are of no interest: the response is discarded, and a
// failed drain only costs the connection.
func drainAndClose(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, body, transportPeekBytes)
	_ = body.Close()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// sfString serialises a key of printable ASCII as an RFC 9651 String.
func sfString(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// isMethodToken reports whether s is an RFC 9110 token, the syntax of a method.
func isMethodToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

var _ http.RoundTripper = (*Transport)(nil)
