package sso

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// BackChannelLogoutEvent is the member of a logout token's events claim
// that makes it one (OpenID Connect Back-Channel Logout 1.0, section 2.4).
const BackChannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// Bounds of a logout token's iat: VerifyLogoutToken refuses one issued
// more than LogoutTokenMaxAge ago, or more than LogoutTokenSkew ahead of
// this clock. A provider sends the token as the user signs out, so a
// token older than that is a replay, or a provider whose clock is off.
const (
	LogoutTokenMaxAge = 5 * time.Minute
	LogoutTokenSkew   = time.Minute
)

// maxUsedLogoutTokens bounds the replay cache: beyond it (once expired
// entries are dropped) logout tokens are refused as ErrUnavailable rather
// than accepted unchecked.
const maxUsedLogoutTokens = 100_000

// Errors of a logout token, matched with errors.Is; each is the Kind of an
// [*Error] whose Err says which check failed (never the token).
var (
	// ErrLogoutToken: not a valid logout token of this provider for this
	// client (signature, issuer, audience, events claim, a nonce, iat,
	// exp, jti, neither sub nor sid).
	ErrLogoutToken = errors.New("logout token refused")
	// ErrLogoutReplayed: a valid logout token that was accepted before.
	ErrLogoutReplayed = errors.New("logout token already used")
	// ErrLogoutNoSubject: a valid logout token that names a provider
	// session (sid) but no user (sub). The console keeps no provider
	// session IDs, so it cannot tell whose sessions to end.
	ErrLogoutNoSubject = errors.New("logout token names no subject")
)

// LogoutToken is a verified logout token: the provider asks to end the
// sessions of the user Subject (SessionID, when set, names the one
// provider session that ended).
type LogoutToken struct {
	Subject   string
	SessionID string
	// ID is the token's jti; IssuedAt its iat.
	ID       string
	IssuedAt time.Time
}

// VerifyLogoutToken checks raw, a logout token the provider POSTed to the
// console's back-channel logout endpoint, as section 2.6 of the
// specification asks: signed with one of the provider's keys (its JWKS,
// as ID tokens are), iss the configured issuer, aud holding the client
// ID, an events claim with [BackChannelLogoutEvent] holding a JSON
// object, no nonce, a jti, an iat within [LogoutTokenMaxAge] and
// [LogoutTokenSkew] of now, an exp not passed when there is one, and a sub
// (a sid alone is ErrLogoutNoSubject). A token that passes is remembered
// by its jti until its iat is LogoutTokenMaxAge old: the same jti again is
// ErrLogoutReplayed. It fails with ErrUnavailable when the provider's
// discovery document cannot be read.
func (c *Client) VerifyLogoutToken(ctx context.Context, raw string) (LogoutToken, error) {
	if raw == "" {
		return LogoutToken{}, fail(ErrLogoutToken, errors.New("no logout_token"))
	}
	d, err := c.discover(ctx)
	if err != nil {
		return LogoutToken{}, err
	}
	idt, err := d.logout.Verify(oidc.ClientContext(ctx, c.hc), raw)
	if err != nil {
		return LogoutToken{}, fail(ErrLogoutToken, err)
	}
	var claims map[string]json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return LogoutToken{}, fail(ErrLogoutToken, err)
	}
	bad := func(msg string) (LogoutToken, error) { return LogoutToken{}, fail(ErrLogoutToken, errors.New(msg)) }
	if _, ok := claims["nonce"]; ok {
		return bad("it holds a nonce (an ID token, or a forged logout token)")
	}
	var events map[string]json.RawMessage
	if err := json.Unmarshal(claims["events"], &events); err != nil || events == nil {
		return bad("no events claim")
	}
	var event map[string]any
	if err := json.Unmarshal(events[BackChannelLogoutEvent], &event); err != nil || event == nil {
		return bad("its events claim has no " + BackChannelLogoutEvent + " object")
	}
	t := LogoutToken{Subject: idt.Subject, IssuedAt: idt.IssuedAt}
	if json.Unmarshal(claims["jti"], &t.ID) != nil || t.ID == "" {
		return bad("no jti")
	}
	if v, ok := claims["sid"]; ok && json.Unmarshal(v, &t.SessionID) != nil {
		return bad("its sid is not a string")
	}
	now := c.cfg.NowFunc()
	switch {
	case t.IssuedAt.IsZero():
		return bad("no iat")
	case t.IssuedAt.Before(now.Add(-LogoutTokenMaxAge)):
		return LogoutToken{}, fail(ErrLogoutToken, fmt.Errorf("issued %s ago, more than %s", now.Sub(t.IssuedAt).Round(time.Second), LogoutTokenMaxAge))
	case t.IssuedAt.After(now.Add(LogoutTokenSkew)):
		return LogoutToken{}, fail(ErrLogoutToken, fmt.Errorf("issued %s in the future", t.IssuedAt.Sub(now).Round(time.Second)))
	case !idt.Expiry.IsZero() && idt.Expiry.Add(LogoutTokenSkew).Before(now):
		return bad("expired")
	case t.Subject == "" && t.SessionID == "":
		return bad("neither sub nor sid")
	case t.Subject == "":
		return LogoutToken{}, fail(ErrLogoutNoSubject, nil)
	}
	switch c.used.use(t.ID, t.IssuedAt.Add(LogoutTokenMaxAge), now) {
	case useReplayed:
		return LogoutToken{}, fail(ErrLogoutReplayed, nil)
	case useFull:
		return LogoutToken{}, fail(ErrUnavailable, errors.New("too many logout tokens to remember: try again later"))
	}
	return t, nil
}

// ForgetLogoutToken lets t's jti be used again: call it when the logout t
// asked for could not be carried out, so that the provider's retry is not
// refused as a replay.
func (c *Client) ForgetLogoutToken(t LogoutToken) { c.used.forget(t.ID) }

// replayCache remembers the jti of accepted logout tokens until the tokens
// are too old to be accepted anyway. It is in memory: each console
// process refuses the replays it saw.
type replayCache struct {
	mu   sync.Mutex
	seen map[string]time.Time // jti → when it may be forgotten
}

type useResult int

const (
	useFirst useResult = iota
	useReplayed
	useFull
)

// use records jti until until, and reports whether it was new.
func (r *replayCache) use(jti string, until, now time.Time) useResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]time.Time{}
	}
	if t, ok := r.seen[jti]; ok && now.Before(t) {
		return useReplayed
	}
	if len(r.seen) >= maxUsedLogoutTokens {
		for k, t := range r.seen {
			if !now.Before(t) {
				delete(r.seen, k)
			}
		}
		if len(r.seen) >= maxUsedLogoutTokens {
			return useFull
		}
	}
	r.seen[jti] = until
	return useFirst
}

func (r *replayCache) forget(jti string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, jti)
}
