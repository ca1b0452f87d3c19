package idem

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// ScopeResolver returns the scope of a request, or ok = false to let the
// next resolver answer (SPEC H5).
type ScopeResolver func(r *http.Request) (scope string, ok bool)

type principalKey struct{}
type signatureKey struct{}

// WithPrincipal records the authenticated principal of a request, for
// [PrincipalScope]. Authentication middleware calls it before the
// idempotency middleware runs.
func WithPrincipal(ctx context.Context, guard, id string) context.Context {
	return context.WithValue(ctx, principalKey{}, "user:"+guard+":"+id)
}

// WithVerifiedSignature records that an HTTP message signature by keyID of
// key ring ring was verified on the request, for [SignatureScope].
func WithVerifiedSignature(ctx context.Context, ring, keyID string) context.Context {
	return context.WithValue(ctx, signatureKey{}, "sig:"+ring+":"+keyID)
}

// PrincipalScope answers "user:<guard>:<id>" for a request that carries a
// principal set with [WithPrincipal].
func PrincipalScope(r *http.Request) (string, bool) {
	s, ok := r.Context().Value(principalKey{}).(string)
	return s, ok && s != ""
}

// SignatureScope answers "sig:<ring>:<keyid>" for a request whose signature
// was verified ([WithVerifiedSignature]).
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

func (m *Middleware) resolveScope(r *http.Request) string {
	for _, resolve := range m.cfg.ScopeResolvers {
		if s, ok := resolve(r); ok {
			return s
		}
	}
	return ""
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
