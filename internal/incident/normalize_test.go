package incident

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// SPEC K14: messages that differ only in their variable parts are one
// group; the pattern keeps none of those parts.
func TestNormalizeK14(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"email with sub-address", "mailbox bob+17@example.com does not exist", "mailbox <email> does not exist"},
		{"numbers", "timeout after 30.5s on attempt 3", "timeout after <n>s on attempt <n>"},
		{"uuid", "order 3f2b8c1e-9a4d-4e7b-8c2a-1b2c3d4e5f60 not found", "order <uuid> not found"},
		{"hex id", "tx 0xDEADBEEF42 reverted, block a3f9c2e17b", "tx <hex> reverted, block <hex>"},
		{"quoted", `field "customer_email" rejected: 'x@y'`, "field <q> rejected: <q>"},
		{"url path and query go, host stays", "POST https://api.pay.example.com/v1/charges/ch_123?x=1 timed out",
			"POST https://api.pay.example.com/<url> timed out"},
		{"url credentials go", "GET https://user:s3cret@pay.example.com/x failed", "GET https://pay.example.com/<url> failed"},
		{"prefixed ids", "payment pay_8F3k2 declined for ord-77aa", "payment pay_<id> declined for ord-<id>"},
		{"words stay", "accepted deadbeef feed", "accepted deadbeef feed"},
		{"white space and controls", "a\tb\n\n c\x00d", "a b c d"},
		{"invalid utf-8 dropped", "bad \xff\xfe byte", "bad byte"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, Normalize(tc.in))
		})
	}
}

// The example: bob+17 and alice+3 are one group.
func TestNormalizeSameGroupK14(t *testing.T) {
	t.Parallel()
	a := Fields{Kind: KindKey, State: "failed", Operation: "POST /signups", Class: "failed",
		Message: Normalize("mailbox bob+17@example.com does not exist")}
	b := a
	b.Message = Normalize("mailbox alice+3@example.com does not exist")
	require.Equal(t, a.Key(), b.Key())
	c := a
	c.Message = Normalize("mailbox alice+3@example.com is full")
	require.NotEqual(t, a.Key(), c.Key(), "another message is another group")
	require.True(t, ValidKey(a.Key()))
	require.False(t, ValidKey("not-a-key"))
}

func TestNormalizeBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é word ", 2000)
	got := Normalize(long)
	require.LessOrEqual(t, len(got), MaxMessage)
	require.True(t, utf8.ValidString(got))
}

// 10,000 distinct messages of a few shapes make a bounded number of
// groups, and no pattern keeps an e-mail address, a number or an ID of
// its message (bad input and safety).
func TestNormalizeCardinalityK14(t *testing.T) {
	t.Parallel()
	shapes := []string{
		"mailbox user%d+%d@example.com does not exist",
		"provider timed out after %dms (attempt %d)",
		"order ord_%dx%d not found",
		"charge %08x-0000-4000-8000-%012d declined",
		`customer "cus-%d" has %d open disputes`,
		"GET https://api.example.com/v1/accounts/%d/%d returned 502",
	}
	groups := map[string]bool{}
	for i := range 10000 {
		msg := fmt.Sprintf(shapes[i%len(shapes)], i, i*7919)
		pat := Normalize(msg)
		require.NotContains(t, pat, fmt.Sprint(i*7919), "a number of the message is in its pattern %q", pat)
		require.NotContains(t, pat, "@example.com")
		groups[pat] = true
	}
	require.Len(t, groups, len(shapes), "one group per shape: %v", groups)
}
