package idem

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/dunglas/httpsfv"
)

// keyHeader is the field that carries the idempotency key
// (draft-ietf-httpapi-idempotency-key-header).
const keyHeader = "Idempotency-Key"

// defaultMinKeyLength is the shortest key accepted when KeyRules.MinLength
// is zero: 16 bytes, enough for 96 bits of random text and short enough for
// any UUID or Stripe-style key (draft §5 asks servers to refuse low-entropy
// keys).
const defaultMinKeyLength = 16

// ErrKeyMissing means the request has no Idempotency-Key field line at all.
// A field line that is present but empty is not missing: it is invalid.
var ErrKeyMissing = errors.New("idem: idempotency key missing")

// KeyRules bound an Idempotency-Key (SPEC H2, H3). Zero values mean the
// defaults: MinLength 16 and MaxLength 255 bytes ([MaxKeyBytes]), strict
// RFC 9651 String syntax. Validate them once, when the middleware is built.
type KeyRules struct {
	// MinLength is the shortest key accepted, in bytes; 0 means 16.
	MinLength int
	// MaxLength is the longest key accepted, in bytes; 0 means 255, and
	// more than 255 is refused (keys are stored in 255-byte columns).
	MaxLength int
	// AcceptUnquoted also accepts a raw, unquoted key such as a bare UUID
	// or "abc_123-XYZ", as Stripe clients send it. See [ParseKeyHeader].
	AcceptUnquoted bool
}

// bounds returns the effective length bounds, defaults applied.
func (r KeyRules) bounds() (minLen, maxLen int) {
	minLen, maxLen = r.MinLength, r.MaxLength
	if minLen == 0 {
		minLen = defaultMinKeyLength
	}
	if maxLen == 0 {
		maxLen = MaxKeyBytes
	}
	return minLen, maxLen
}

// Validate reports whether the rules are usable, with an error naming the
// offending field: a negative length, MaxLength above 255, or a MinLength
// (after defaults) above MaxLength (after defaults) — so MaxLength 10 with
// MinLength 0 is refused, because the default minimum is 16. The error does
// not match [ErrInvalidKey]: it is a configuration error, not a bad request.
func (r KeyRules) Validate() error {
	switch {
	case r.MinLength < 0:
		return fmt.Errorf("idem: key rules: MinLength %d is negative", r.MinLength)
	case r.MaxLength < 0:
		return fmt.Errorf("idem: key rules: MaxLength %d is negative", r.MaxLength)
	case r.MaxLength > MaxKeyBytes:
		return fmt.Errorf("idem: key rules: MaxLength %d is above %d", r.MaxLength, MaxKeyBytes)
	}
	if minLen, maxLen := r.bounds(); minLen > maxLen {
		return fmt.Errorf("idem: key rules: MinLength %d is above MaxLength %d (zero means the default)", minLen, maxLen)
	}
	return nil
}

// ParseKeyHeader returns the idempotency key of a request's header h under
// the rules r (SPEC H2–H4).
//
// The draft defines the field as an RFC 9651 Item whose bare value MUST be a
// String, so by default:
//   - no field line at all → [ErrKeyMissing];
//   - more than one field line → invalid ("repeated"), even when the lines
//     joined with ", " (RFC 9651 §4.2) would parse as one String, as in the
//     suite's "two lines string": a key is one value, sent once;
//   - a value that is not a valid Item → invalid; this includes a List such
//     as `"a", "b"`, an empty value and anything the structured-field-tests
//     mark must_fail;
//   - a valid Item whose bare value is not a String (a Token, Integer,
//     Decimal, Boolean, Byte Sequence, Date or Display String) → invalid;
//   - SP around the value is ignored (RFC 9651 §4.2; net/http has already
//     trimmed OWS from a received field);
//   - parameters on the Item are ignored, since the draft defines none:
//     `"abc";x=1` is the key "abc";
//   - the decoded String (escapes removed) must be 1+ bytes and within
//     MinLength..MaxLength bytes, else invalid with a reason naming the bound.
//
// The suite's can_fail cases (SHOULD-level) end as follows: "two lines string"
// and "two lines display string" are two field lines, so repeated and
// invalid; "bad padding" and "non-zero pad bits" (Byte Sequences), and the
// out-of-range Dates, are invalid whether the parser accepts them or not,
// because they are not Strings.
//
// With r.AcceptUnquoted, a value that is not a valid String Item is tried as
// a raw key: the single field value, trimmed of OWS (SP and HTAB), is
// accepted when it is 1+ bytes of visible ASCII (0x21–0x7E) with no '"', ','
// ';' or '\', and passes the same length rule. So a bare UUID, `abc_123-XYZ`
// and the Token `foo` are accepted as is, `"foo"` and `foo` are the same key,
// and a List, a parameterised Token or anything with spaces stays invalid. The
// raw fallback also accepts some values RFC 9651 rejects (such as `1.` or `?T`) — it
// is an opt-in for clients that do not quote. Repeated lines stay invalid.
//
// An invalid key is a *[ValidationError] with Field "Idempotency-Key",
// matching [ErrInvalidKey]. Invalid rules return the error of
// [KeyRules.Validate], which does not match ErrInvalidKey.
func ParseKeyHeader(h http.Header, r KeyRules) (key string, err error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	lines := h.Values(keyHeader)
	switch {
	case len(lines) == 0:
		return "", ErrKeyMissing
	case len(lines) > 1:
		return "", invalidKey(fmt.Sprintf("repeated: %d field lines, one allowed", len(lines)))
	}
	raw := lines[0]
	if k, ok := plainSFString(raw); ok {
		return checkKeyLength(k, r)
	}
	item, perr := httpsfv.UnmarshalItem(lines)
	if perr == nil {
		if s, ok := item.Value.(string); ok {
			return checkKeyLength(s, r)
		}
	}
	if r.AcceptUnquoted {
		if k := strings.Trim(raw, " \t"); isRawKey(k) {
			return checkKeyLength(k, r)
		}
	}
	switch {
	case strings.Trim(raw, " \t") == "":
		return "", invalidKey("empty")
	case perr != nil:
		return "", invalidKey(fmt.Sprintf("not a structured field item: %v", perr))
	default:
		return "", invalidKey(bareItemKind(item.Value) + ", not a string")
	}
}

// plainSFString returns the content of v when v is exactly an RFC 9651
// String without escapes or parameters: '"', then printable ASCII (0x20–0x7E)
// other than '"' and '\', then '"'. Such a value parses as that String and
// nothing else, so this is the parser's answer without the parser's
// allocations; any other value goes to the parser.
func plainSFString(v string) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	for i := range len(inner) {
		if c := inner[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", false
		}
	}
	return inner, true
}

// checkKeyLength applies the length rule of ParseKeyHeader to a decoded key.
func checkKeyLength(key string, r KeyRules) (string, error) {
	minLen, maxLen := r.bounds()
	switch {
	case key == "":
		return "", invalidKey("empty")
	case len(key) < minLen:
		return "", invalidKey(fmt.Sprintf("%d bytes, at least %d (MinLength) required", len(key), minLen))
	case len(key) > maxLen:
		return "", invalidKey(fmt.Sprintf("%d bytes, at most %d (MaxLength) allowed", len(key), maxLen))
	}
	return key, nil
}

// checkKey applies to a key a client is about to send the rule the
// middleware applies to a decoded key under r: bytes an RFC 9651 String can
// hold (printable ASCII, 0x20–0x7E), then the length rule of
// [ParseKeyHeader]. The [Transport] checks its keys with the default rules,
// so a key it sends is one a middleware with default [KeyRules] accepts.
func checkKey(key string, r KeyRules) error {
	for i := range len(key) {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return invalidKey(fmt.Sprintf("byte 0x%02x at %d is not printable ASCII", c, i))
		}
	}
	_, err := checkKeyLength(key, r)
	return err
}

// isRawKey reports whether k is acceptable as an unquoted key: 1+ bytes of
// visible ASCII without the delimiters '"', ',', ';' and '\'.
func isRawKey(k string) bool {
	if k == "" {
		return false
	}
	for i := range len(k) {
		switch c := k[i]; {
		case c < 0x21 || c > 0x7e:
			return false
		case c == '"' || c == ',' || c == ';' || c == '\\':
			return false
		}
	}
	return true
}

// bareItemKind names the RFC 9651 type of a parsed bare item, with its
// article, for an error message.
func bareItemKind(v any) string {
	switch v.(type) {
	case httpsfv.Token:
		return "a token"
	case int64:
		return "an integer"
	case float64:
		return "a decimal"
	case bool:
		return "a boolean"
	case []byte:
		return "a byte sequence"
	case httpsfv.DisplayString:
		return "a display string"
	default:
		// time.Time, the only other bare item type.
		return "a date"
	}
}

func invalidKey(reason string) error {
	return &ValidationError{Field: keyHeader, Reason: reason}
}
