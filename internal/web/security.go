package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/a-h/templ"
)

// secureHeaders sets the security headers of every response and a fresh
// CSP nonce for the page's script tags (SPEC CON K8).
func secureHeaders(hsts bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b := make([]byte, 18)
			_, _ = rand.Read(b)
			nonce := base64.RawStdEncoding.EncodeToString(b)
			h := w.Header()
			h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'self'; img-src 'self' data:; "+
				"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "same-origin")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Cache-Control", "no-store")
			if hsts {
				h.Set("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
			}
			next.ServeHTTP(w, r.WithContext(templ.WithNonce(r.Context(), nonce)))
		})
	}
}

// ParseTrustedProxies reads a comma-separated list of CIDR prefixes or
// single addresses ("10.0.0.0/8, 192.168.1.7") of the reverse proxies
// whose X-Forwarded-For is believed. An empty list trusts no proxy.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not an address or a CIDR prefix", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

type clientAddrKey struct{}

// clientAddresses resolves each request's client address once, for the
// sign-in limiter, the audit entries and the logs (see [resolveClientAddr]).
func clientAddresses(trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			addr := resolveClientAddr(r, trusted)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientAddrKey{}, addr)))
		})
	}
}

// clientAddr is the request's client address as resolved by
// clientAddresses, or its peer's address.
func clientAddr(r *http.Request) string {
	if a, ok := r.Context().Value(clientAddrKey{}).(string); ok {
		return a
	}
	return peerHost(r.RemoteAddr)
}

func peerHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// maxForwardedHops bounds how many X-Forwarded-For entries are read.
const maxForwardedHops = 32

// resolveClientAddr returns the peer's address, unless the peer is a
// trusted proxy: then the rightmost X-Forwarded-For entry that is not a
// trusted proxy (each proxy appends the address it got the request from,
// so entries to the left of an untrusted one are the client's to forge).
// When every entry is trusted, the leftmost one; an entry that is not an
// address ends the walk at the last trusted hop.
func resolveClientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer := peerHost(r.RemoteAddr)
	ip, err := netip.ParseAddr(peer)
	if err != nil || len(trusted) == 0 || !isTrusted(ip, trusted) {
		return peer
	}
	addr := ip.Unmap()
	values := r.Header.Values("X-Forwarded-For")
	hops := 0
	for i := len(values) - 1; i >= 0; i-- {
		rest := values[i]
		for rest != "" {
			if hops++; hops > maxForwardedHops {
				return addr.String()
			}
			cut := strings.LastIndexByte(rest, ',')
			hop := strings.TrimSpace(rest[cut+1:])
			rest = rest[:max(cut, 0)]
			if hop == "" {
				continue
			}
			a, err := netip.ParseAddr(hop)
			if err != nil {
				ap, perr := netip.ParseAddrPort(hop)
				if perr != nil {
					return addr.String()
				}
				a = ap.Addr()
			}
			addr = a.Unmap()
			if !isTrusted(addr, trusted) {
				return addr.String()
			}
		}
	}
	return addr.String()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
