package idem

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"
)

// ScopeResolver returns the scope of a request, or ok = false to let the
// next resolver answer (SPEC H5).
type ScopeResolver func(r *http.Request) (scope string, ok bool)

type principalKey struct{}
type signatureKey struct{}

// ContextWithPrincipal records the authenticated principal of a request, for
// [PrincipalScope]. Authentication middleware calls it before the
// idempotency middleware runs.
func ContextWithPrincipal(ctx context.Context, guard, id string) context.Context {
	return context.WithValue(ctx, principalKey{}, "user:"+guard+":"+id)
}

// ContextWithVerifiedSignature records that an HTTP message signature by keyID of
// key ring ring was verified on the request, for [SignatureScope].
func ContextWithVerifiedSignature(ctx context.Context, ring, keyID string) context.Context {
	return context.WithValue(ctx, signatureKey{}, "sig:"+ring+":"+keyID)
}

// PrincipalScope answers "user:<guard>:<id>" for a request that carries a
// principal set with [ContextWithPrincipal].
func PrincipalScope(r *http.Request) (string, bool) {
	s, ok := r.Context().Value(principalKey{}).(string)
	return s, ok && s != ""
}

// SignatureScope answers "sig:<ring>:<keyid>" for a request whose signature
// was verified ([ContextWithVerifiedSignature]).
func SignatureScope(r *http.Request) (string, bool) {
	s, ok := r.Context().Value(signatureKey{}).(string)
	return s, ok && s != ""
}

// AddressScope answers "ip:<client address>" from r.RemoteAddr. Behind a
// proxy, set RemoteAddr from a trusted forwarding header first (for example
// chi's middleware.RealIP); never trust such a header from the internet.
func AddressScope(r *http.Request) (string, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host == "" {
		return "", false
	}
	return "ip:" + host, true
}

// CodeInvalidScope is the problem code of a request whose scope, as the
// first resolver that answered gave it, cannot be stored: not valid UTF-8,
// holding a NUL byte, or longer than [MaxScopeBytes]. The scope comes from
// what the caller sent (a bearer token's name, a signature's key ID), so it
// is answered 400, before the store is touched.
const CodeInvalidScope = "invalid_idempotency_scope"

func (m *Middleware) resolveScope(r *http.Request) string {
	for _, resolve := range m.cfg.ScopeResolvers {
		if s, ok := resolve(r); ok {
			return s
		}
	}
	return ""
}

// checkScope returns a *[ValidationError] for Field "scope" when a
// resolver's answer cannot be stored, or nil. PostgreSQL's text refuses
// invalid UTF-8 and NUL; reporting that as the store's failure (503) would
// tell the caller to retry what can never succeed.
func checkScope(scope string) error {
	switch {
	case len(scope) > MaxScopeBytes:
		return &ValidationError{Field: "scope", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(scope), MaxScopeBytes)}
	case !utf8.ValidString(scope):
		return &ValidationError{Field: "scope", Reason: "not valid UTF-8"}
	case strings.IndexByte(scope, 0) >= 0:
		return &ValidationError{Field: "scope", Reason: "holds a NUL byte"}
	}
	return nil
}

// defaultRoute names a request's route: the router's pattern (ServeMux and
// chi both set r.Pattern), prefixed with the method when the pattern has
// none, else method and path.
func defaultRoute(r *http.Request) string {
	switch {
	case r.Pattern == "":
		return r.Method + " " + r.URL.EscapedPath()
	case strings.Contains(r.Pattern, " "):
		return r.Pattern // "POST /orders" or "POST host/orders"
	default:
		return r.Method + " " + r.Pattern
	}
}
