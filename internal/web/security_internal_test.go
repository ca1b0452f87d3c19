package web

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResolveClientAddr: the client address comes from
// X-Forwarded-For only when the peer is a trusted proxy, and then it is the
// rightmost hop that is not one: what is left of it, the client wrote.
func TestResolveClientAddr(t *testing.T) {
	t.Parallel()
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.168.1.7 ,fd00::/8")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer: the header is ignored", "203.0.113.5:4000", []string{"1.2.3.4"}, "203.0.113.5"},
		{"trusted peer, no header", "10.1.1.1:4000", nil, "10.1.1.1"},
		{"one proxy", "10.1.1.1:4000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"a forged hop left of the real one", "10.1.1.1:4000", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7"},
		{"a chain of trusted proxies", "192.168.1.7:80", []string{"198.51.100.7, 10.2.2.2, 10.3.3.3"}, "198.51.100.7"},
		{"every hop trusted: the leftmost", "10.1.1.1:4000", []string{"10.0.0.5, 10.0.0.6"}, "10.0.0.5"},
		{"garbage ends the walk at the last trusted hop", "10.1.1.1:4000", []string{"198.51.100.7, evil\x00, 10.0.0.9"}, "10.0.0.9"},
		{"several header lines", "10.1.1.1:4000", []string{"6.6.6.6", "198.51.100.8, 10.0.0.3"}, "198.51.100.8"},
		{"IPv6 with a port", "[fd00::1]:4000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:10.1.1.1]:4000", []string{"198.51.100.9"}, "198.51.100.9"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		require.Equal(t, tc.want, resolveClientAddr(r, trusted), tc.name)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.1.1:4000"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	require.Equal(t, "10.1.1.1", resolveClientAddr(r, nil), "no trusted proxies: the peer")

	_, err = ParseTrustedProxies("10.0.0.0/8,proxy.example")
	require.ErrorContains(t, err, "proxy.example")
}
