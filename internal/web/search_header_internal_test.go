package web

import "testing"

// A header line pasted as e-mailed or logged searches for its value.
func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		`Idempotency-Key: "order-1"`: `"order-1"`,
		`idempotency-key:order-1`:    `order-1`,
		`IDEMPOTENCY-KEY :  "a b" `:  `"a b"`,
		`order-1`:                    `order-1`,
		`Idempotency-Keys: x`:        `Idempotency-Keys: x`,
		`Idempotency-Key`:            `Idempotency-Key`,
	} {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}
