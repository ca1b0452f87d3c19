package sso

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Errors of a sign-in, matched with errors.Is. Each is a kind of
// [*Error]; their messages never hold a token or a code.
var (
	// ErrUnavailable: the provider could not be reached or answered
	// nonsense (discovery, keys or token endpoint).
	ErrUnavailable = errors.New("identity provider unavailable")
	// ErrState: the callback does not belong to a sign-in this browser
	// started (a wrong, missing or used state).
	ErrState = errors.New("sign-in state does not match")
	// ErrDenied: the provider answered the authorization request with an
	// error (the user cancelled, or may not use this client).
	ErrDenied = errors.New("identity provider refused the sign-in")
	// ErrCode: the provider refused to exchange the code (used before,
	// expired, or the PKCE verifier does not match).
	ErrCode = errors.New("authorization code refused")
	// ErrIDToken: the ID token failed verification (signature, issuer,
	// audience, expiry, nonce) or lacks a subject.
	ErrIDToken = errors.New("ID token refused")
)

// Error is a failed sign-in step: Kind is one of the Err… values above,
// Err the cause (for logs).
type Error struct {
	Kind error
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "sso: " + e.Kind.Error()
	}
	return "sso: " + e.Kind.Error() + ": " + e.Err.Error()
}

// Unwrap matches Kind and the cause.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

func fail(kind, err error) error { return &Error{Kind: kind, Err: err} }

// DefaultGroupsClaim is the ID token claim that carries the user's groups
// when Config.GroupsClaim is empty.
const DefaultGroupsClaim = "groups"

// Config configures a [Client].
type Config struct {
	// Issuer is the provider's issuer URL, as its discovery document
	// states it (https://login.example.com/realms/ops).
	Issuer string
	// ClientID and ClientSecret are the console's credentials at the
	// provider; the secret comes from the environment or a file, never a
	// flag.
	ClientID     string
	ClientSecret string
	// RedirectURL is the console's callback, registered at the provider:
	// https://console.example.com/login/sso/callback.
	RedirectURL string
	// Scopes are requested beside "openid"; nil asks "profile" and
	// "email".
	Scopes []string
	// GroupsClaim names the claim that carries the groups;
	// DefaultGroupsClaim when empty.
	GroupsClaim string
	// HTTPClient reaches the provider; nil uses one with a 10 s timeout.
	HTTPClient *http.Client
	// NowFunc is the clock that judges the ID token's expiry; time.Now
	// when nil.
	NowFunc func() time.Time
}

// Client signs users in with one provider. It is safe for concurrent use.
type Client struct {
	cfg Config
	hc  *http.Client

	mu sync.Mutex
	p  *discovered // nil until a discovery succeeds

	used replayCache // logout tokens accepted, by jti
}

// discovered is what the provider's discovery document gave.
type discovered struct {
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	// logout verifies logout tokens: the ID token's checks but the
	// expiry, which VerifyLogoutToken judges itself (exp is optional in
	// some providers' logout tokens).
	logout     *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
}

// New checks cfg and returns a client; it does not reach the provider.
func New(cfg Config) (*Client, error) {
	for _, f := range []struct{ name, v string }{{"issuer", cfg.Issuer}, {"client ID", cfg.ClientID}, {"client secret", cfg.ClientSecret}, {"redirect URL", cfg.RedirectURL}} {
		if strings.TrimSpace(f.v) == "" {
			return nil, fmt.Errorf("sso: the %s is required", f.name)
		}
	}
	for _, f := range []struct{ name, v string }{{"issuer", cfg.Issuer}, {"redirect URL", cfg.RedirectURL}} {
		if err := CheckURL(f.v); err != nil {
			return nil, fmt.Errorf("sso: the %s %w", f.name, err)
		}
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"profile", "email"}
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{cfg: cfg, hc: hc}, nil
}

// CheckURL accepts an issuer or redirect URL: https, or plain http only
// on a loopback host (localhost and its subdomains, 127.0.0.0/8, ::1),
// where nothing crosses a network. Over plain http to another host the
// authorization code, the ID token and the session cookie could be read
// or changed on the way. The error starts with the URL and says what to
// change.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL: give an absolute https:// URL", raw)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("%q uses plain http on %s, which is not loopback: use https://%s (plain http is only for 127.0.0.1, ::1 or localhost)",
			raw, u.Hostname(), u.Host+u.EscapedPath())
	}
	return nil
}

// loopbackHost reports whether host (without its port) always names this
// machine: localhost or a name under it (RFC 6761), or a loopback address.
func loopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// Issuer is the provider's issuer URL.
func (c *Client) Issuer() string { return c.cfg.Issuer }

// discover returns the provider's endpoints and keys, reading its
// discovery document the first time (and after a failure).
func (c *Client) discover(ctx context.Context) (*discovered, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p != nil {
		return c.p, nil
	}
	// go-oidc keeps this context, without its deadline, as the HTTP client
	// of later key fetches (whose timeout bounds each).
	dctx, cancel := context.WithTimeout(ctx, c.hc.Timeout+time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(dctx, c.hc), c.cfg.Issuer)
	if err != nil {
		return nil, fail(ErrUnavailable, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&extra); err != nil {
		return nil, fail(ErrUnavailable, err)
	}
	d := &discovered{provider: p, endSession: extra.EndSession,
		verifier: p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID, Now: c.cfg.NowFunc}),
		logout:   p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID, Now: c.cfg.NowFunc, SkipExpiryCheck: true}),
		oauth: oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, RedirectURL: c.cfg.RedirectURL,
			Endpoint: p.Endpoint(), Scopes: append([]string{oidc.ScopeOpenID}, c.cfg.Scopes...)}}
	c.p = d
	return d, nil
}

// Pending is a started sign-in, kept server-side (in the session) until
// its callback and used once: the state the callback must carry, the nonce
// the ID token must hold, and the PKCE verifier of the code.
type Pending struct {
	State    string
	Nonce    string
	Verifier string
}

// Begin starts a sign-in: it returns the provider's authorization URL to
// send the browser to, and what the callback must match. It fails with
// ErrUnavailable when the provider cannot be reached.
func (c *Client) Begin(ctx context.Context) (string, Pending, error) {
	d, err := c.discover(ctx)
	if err != nil {
		return "", Pending{}, err
	}
	p := Pending{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier()}
	u := d.oauth.AuthCodeURL(p.State, oidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier))
	return u, p, nil
}

// Identity is the user the provider signed in.
type Identity struct {
	Subject string
	Email   string
	// EmailVerified is the email_verified claim: true only when the
	// provider says so (a JSON true, or the string "true" that some
	// providers send); absent or anything else is false.
	EmailVerified     bool
	Name              string
	PreferredUsername string
	// Groups are the values of the groups claim; nil when it is absent.
	Groups []string
}

// Finish completes the sign-in p started with the callback's query: the
// state must equal p's, the code is exchanged with p's verifier, and the
// ID token must verify and carry p's nonce. The caller must have removed p
// from the session already, so that it is used once whatever the outcome.
func (c *Client) Finish(ctx context.Context, p Pending, query url.Values) (Identity, error) {
	if p.State == "" || query.Get("state") != p.State {
		return Identity{}, fail(ErrState, nil)
	}
	if e := query.Get("error"); e != "" {
		return Identity{}, fail(ErrDenied, fmt.Errorf("%s: %s", e, query.Get("error_description")))
	}
	code := query.Get("code")
	if code == "" {
		return Identity{}, fail(ErrCode, errors.New("the callback has no code"))
	}
	d, err := c.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := d.oauth.Exchange(oidc.ClientContext(ctx, c.hc), code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok && re.Response != nil && re.Response.StatusCode < 500 {
			return Identity{}, fail(ErrCode, fmt.Errorf("%s %s", re.ErrorCode, re.ErrorDescription))
		}
		return Identity{}, fail(ErrUnavailable, err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, fail(ErrIDToken, errors.New("the token response has no id_token"))
	}
	idt, err := d.verifier.Verify(oidc.ClientContext(ctx, c.hc), raw)
	if err != nil {
		return Identity{}, fail(ErrIDToken, err)
	}
	if idt.Nonce != p.Nonce {
		return Identity{}, fail(ErrIDToken, errors.New("the nonce does not match"))
	}
	if idt.Subject == "" {
		return Identity{}, fail(ErrIDToken, errors.New("no subject"))
	}
	var claims map[string]json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fail(ErrIDToken, err)
	}
	id := Identity{Subject: idt.Subject}
	for name, dst := range map[string]*string{"email": &id.Email, "name": &id.Name, "preferred_username": &id.PreferredUsername} {
		if v, ok := claims[name]; ok {
			_ = json.Unmarshal(v, dst) // a claim of another type is ignored
		}
	}
	id.EmailVerified = claimTrue(claims["email_verified"])
	id.Groups = groupsOf(claims[c.cfg.GroupsClaim])
	return id, nil
}

// claimTrue reads a boolean claim: true for a JSON true or the string
// "true", false for anything else (absent included).
func claimTrue(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	return v == true || v == "true"
}

// groupsOf reads a groups claim: an array of strings, or one string.
// Anything else is no groups.
func groupsOf(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var list []any
	if err := json.Unmarshal(raw, &list); err == nil {
		var gs []string
		for _, v := range list {
			if s, ok := v.(string); ok && s != "" && !slices.Contains(gs, s) {
				gs = append(gs, s)
			}
		}
		return gs
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil && one != "" {
		return []string{one}
	}
	return nil
}

// EndSessionURL returns the provider's end_session_endpoint with this
// client's ID and postLogout (registered at the provider) as where to come
// back; ok is false when the provider offers none or cannot be reached
// (its discovery document is read if it was not yet).
func (c *Client) EndSessionURL(ctx context.Context, postLogout string) (string, bool) {
	d, err := c.discover(ctx)
	if err != nil || d.endSession == "" {
		return "", false
	}
	u, err := url.Parse(d.endSession)
	if err != nil {
		return "", false
	}
	q := u.Query()
	q.Set("client_id", c.cfg.ClientID)
	if postLogout != "" {
		q.Set("post_logout_redirect_uri", postLogout)
	}
	u.RawQuery = q.Encode()
	return u.String(), true
}

// randomString is 32 random bytes, base64url.
func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}
