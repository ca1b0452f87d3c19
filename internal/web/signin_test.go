package web_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// behindProxy makes the test server's peer (127.0.0.1) a trusted proxy, so
// that each request's X-Forwarded-For names its client.
func behindProxy(c *web.Config) {
	trusted, err := web.ParseTrustedProxies("127.0.0.1/32")
	if err != nil {
		panic(err)
	}
	c.TrustedProxies = trusted
}

// postLogin signs in as username from the client address from (sent as
// X-Forwarded-For when not empty).
func postLogin(t *testing.T, b *bundle, c *http.Client, from, username, pw string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/login", strings.NewReader(url.Values{"username": {username}, "password": {pw}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if from != "" {
		req.Header.Set("X-Forwarded-For", from)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestSignInFormIsBounded: an oversized form (a 9 MB username) is never
// parsed, looked up or logged whole: it is refused (413/400) before any
// work and before any log line (SPEC K8).
func TestSignInFormIsBounded(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	b := setup(t, func(c *web.Config) { c.Log = slog.New(slog.NewTextHandler(logs, nil)) })
	huge := strings.Repeat("a", 9<<20)

	resp := postLogin(t, b, client(t), "", huge, "whatever-password")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a 9 MB username with its Content-Length")

	// Without a Content-Length (chunked), the body is cut at the bound.
	body := io.MultiReader(strings.NewReader("password=whatever-password&username="), strings.NewReader(huge))
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/login", io.NopCloser(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = client(t).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a chunked 9 MB username")

	for _, tc := range []struct{ username, password, field string }{
		{strings.Repeat("a", 65), "whatever-password", "username"},
		{"ada\nlevel=ERROR msg=forged", "whatever-password", "username"},
		{"ada\x00", "whatever-password", "username"},
		{"oncall", strings.Repeat("p", 257), "password"},
	} {
		resp, body := do(t, client(t), http.MethodPost, b.srv.URL+"/login", url.Values{"username": {tc.username}, "password": {tc.password}})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%.20q", tc.username)
		require.Contains(t, body, "Field &#34;"+tc.field+"&#34;")
	}
	require.Empty(t, logs.String(), "no log line for a refused form")

	// A wrong password logs the username, never more than a bounded,
	// sanitized one.
	resp = postLogin(t, b, client(t), "", "Nobody", "wrong-password-here")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, logs.String(), "username=nobody")
}

// TestParallelWrongPasswordsVerifyAtMostTheLimit: the limiter counts an
// attempt before verifying it, so 15 parallel wrong passwords against a
// limit of 5 verify at most 5 (SPEC K8).
func TestParallelWrongPasswordsVerifyAtMostTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	codes := make(chan int, 15)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 15 {
		wg.Go(func() {
			<-start
			codes <- postLogin(t, b, client(t), "", "auditor", "not-the-password").StatusCode
		})
	}
	close(start)
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	require.LessOrEqual(t, count[http.StatusUnauthorized], 5, "at most 5 verified: %v", count)
	require.Equal(t, 15, count[http.StatusUnauthorized]+count[http.StatusTooManyRequests]+count[http.StatusServiceUnavailable], "%v", count)
}

// TestSignInHashingIsCapped: Argon2id (19 MiB each) runs for a bounded
// number of parallel sign-ins. A sign-in that finds no hashing slot in time
// is answered 503 with Retry-After, and its attempt is not counted.
func TestSignInHashingIsCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, behindProxy, func(c *web.Config) { c.SignInHashes, c.SignInHashWait = 1, time.Nanosecond })
	const from = "198.51.100.1"
	type answer struct {
		code       int
		retryAfter string
	}
	answers := make(chan answer, 12)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			<-start
			resp := postLogin(t, b, client(t), from, "nobody-"+itoa(int64(i)), "not-the-password")
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After")}
		})
	}
	close(start)
	wg.Wait()
	close(answers)
	verified, busy := 0, 0
	for a := range answers {
		switch a.code {
		case http.StatusServiceUnavailable:
			busy++
			require.Equal(t, "1", a.retryAfter)
		case http.StatusUnauthorized:
			verified++
		default:
			t.Fatalf("unexpected status %d", a.code)
		}
	}
	require.Positive(t, busy, "one hashing slot: parallel sign-ins are turned away")
	// Only the verified attempts count against the address's 30.
	for i := range 30 - verified {
		require.Equal(t, http.StatusUnauthorized, postLogin(t, b, client(t), from, "later-"+itoa(int64(i)), "not-the-password").StatusCode,
			"attempt %d after %d verified and %d turned away", i, verified, busy)
	}
	require.Equal(t, http.StatusTooManyRequests, postLogin(t, b, client(t), from, "later-x", "not-the-password").StatusCode)
}

// TestLockoutIsNoWeapon: wrong passwords from one address do not lock
// the account for everyone. The throttle is per account
// and client address, with exponential backoff: the right password from
// another address signs in while one address hammers the account (SPEC
// K8). Behind a trusted proxy the address comes from X-Forwarded-For,
// and the audit trail records it.
func TestLockoutIsNoWeapon(t *testing.T) {
	t.Parallel()
	b := setup(t, behindProxy)
	const attacker, user = "203.0.113.9", "198.51.100.7"
	var last *http.Response
	for range 8 {
		last = postLogin(t, b, client(t), "10.9.9.9, "+attacker, "oncall", "not-the-password")
	}
	require.Equal(t, http.StatusTooManyRequests, last.StatusCode, "the attacker's address waits")
	require.NotEmpty(t, last.Header.Get("Retry-After"))
	resp := postLogin(t, b, client(t), attacker, "oncall", password("oncall"))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "even the right password waits at the attacker's address")

	c := client(t)
	resp = postLogin(t, b, c, user, "oncall", password("oncall"))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the right password from another address signs in")

	// The client address behind the proxy is the audited one.
	admin := client(t)
	require.Equal(t, http.StatusSeeOther, postLogin(t, b, admin, user, "admin", password("admin")).StatusCode)
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/audit/export?format=csv", nil)
	require.NoError(t, err)
	req.Header.Set("X-Forwarded-For", "192.0.2.44")
	resp, err = admin.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	entries, _, err := b.trail.List(context.Background(), audit.Filter{Action: "audit.export"})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "192.0.2.44", entries[0].ClientAddr)
}

// TestForwardedForIsIgnoredWithoutTrustedProxy: a client cannot pick its
// address (and escape its throttle) by sending X-Forwarded-For.
func TestForwardedForIsIgnoredWithoutTrustedProxy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 6 {
		postLogin(t, b, client(t), "203.0.113."+itoa(int64(i)), store.RoleSupport, "not-the-password")
	}
	resp := postLogin(t, b, client(t), "198.51.100.1", store.RoleSupport, password(store.RoleSupport))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "one peer address whatever X-Forwarded-For says")
}

// TestAdminUnlock: an admin clears an account's sign-in
// throttle from /users (a CSRF-protected form, audited as a user change,
// admin only), or with "console user unlock" from another process, which
// moves the account's UpdatedAt (SPEC K5, K6).
func TestAdminUnlock(t *testing.T) {
	t.Parallel()
	b := setup(t, behindProxy)
	const shared = "203.0.113.50" // the attacker and the user behind one NAT
	hammer := func() {
		for range 7 {
			postLogin(t, b, client(t), shared, store.RoleSupport, "not-the-password")
		}
		require.Equal(t, http.StatusTooManyRequests, postLogin(t, b, client(t), shared, store.RoleSupport, password(store.RoleSupport)).StatusCode)
	}
	hammer()

	admin := client(t)
	require.Equal(t, http.StatusSeeOther, postLogin(t, b, admin, "198.51.100.1", store.RoleAdmin, password(store.RoleAdmin)).StatusCode)
	resp, body := do(t, admin, http.MethodGet, b.srv.URL+"/users", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `action="/users/support/unlock"`)

	// Cross-site: refused like every form.
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/users/support/unlock", nil)
	require.NoError(t, err)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = admin.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Not for oncall: 403, audited as denied.
	oncall := signIn(t, b, store.RoleOncall)
	resp, _ = do(t, oncall, http.MethodPost, b.srv.URL+"/users/support/unlock", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	resp, _ = do(t, admin, http.MethodPost, b.srv.URL+"/users/nobody/unlock", url.Values{})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = do(t, admin, http.MethodPost, b.srv.URL+"/users/support/unlock", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/users?unlocked=support", resp.Header.Get("Location"))
	_, body = do(t, admin, http.MethodGet, b.srv.URL+"/users?unlocked=support", nil)
	require.Contains(t, body, "Sign-in of support unlocked")
	require.Equal(t, http.StatusSeeOther, postLogin(t, b, client(t), shared, store.RoleSupport, password(store.RoleSupport)).StatusCode,
		"the user signs in at once after the unlock")

	entries, _, err := b.trail.List(context.Background(), audit.Filter{TargetKind: "user", TargetID: store.RoleSupport})
	require.NoError(t, err)
	var applied, denied int
	for _, e := range entries {
		switch {
		case e.Action == "user.unlock" && e.Outcome == audit.OutcomeApplied && e.Actor == store.RoleAdmin:
			applied++
			require.Equal(t, "127.0.0.1", e.ClientAddr, "the trusted proxy itself, sending no X-Forwarded-For")
		case e.Outcome == audit.OutcomeDenied && e.Actor == store.RoleOncall:
			denied++
		}
	}
	require.Equal(t, 1, applied, "%+v", entries)
	require.Equal(t, 1, denied, "%+v", entries)

	// "console user unlock" runs in another process: it only moves the
	// account's UpdatedAt, which the next attempt compares.
	hammer()
	time.Sleep(2 * time.Millisecond)
	require.NoError(t, b.db.UnlockUser(context.Background(), store.RoleSupport))
	require.Equal(t, http.StatusSeeOther, postLogin(t, b, client(t), shared, store.RoleSupport, password(store.RoleSupport)).StatusCode)
}
