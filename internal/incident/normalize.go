package incident

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessage bounds a normalized message, in bytes: a group's message is
// at most this long whatever the error said.
const MaxMessage = 200

// Placeholders that [Normalize] puts in place of variable parts.
const (
	PlaceURL    = "<url>"
	PlaceEmail  = "<email>"
	PlaceUUID   = "<uuid>"
	PlaceHex    = "<hex>"
	PlaceNumber = "<n>"
	PlaceQuoted = "<q>"
	PlaceID     = "<id>"
)

var (
	// An URL keeps its scheme and host; its user info, path, query and
	// fragment go.
	urlRe = regexp.MustCompile(`\b([a-zA-Z][a-zA-Z0-9+.-]*://)(?:[^/\s@"'<>]*@)?([^/\s?#"'<>@]+)[^\s"'<>]*`)
	// E-mail addresses, including sub-addressing (bob+17@…).
	emailRe = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`)
	uuidRe  = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	// Quoted values: "…", '…' and `…`, short enough to be a value.
	quotedRe = regexp.MustCompile("\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|`[^`\n]{0,200}`")
	// Hex IDs: 0x… or a run of 8+ hex digits that has a digit in it
	// (so that "deadbeef" words… still go, but "accepted" stays).
	hexRe = regexp.MustCompile(`\b0[xX][0-9a-fA-F]+\b|\b[0-9a-fA-F]*[0-9][0-9a-fA-F]*\b`)
	// Any run of digits, also inside a token ("order-123", "v2"),
	// with its decimals.
	numberRe = regexp.MustCompile(`[0-9]+(?:[.,][0-9]+)*`)
	// Tokens mixing letters and digits with separators that look like IDs
	// ("ord_8F3k2", "pay-77aa"): a letter run followed by _ or - and then
	// something with a digit.
	idRe   = regexp.MustCompile(`\b[A-Za-z]{1,12}[_-][A-Za-z0-9]*[0-9][A-Za-z0-9_-]*\b`)
	spaceR = regexp.MustCompile(`\s+`)
)

// Normalize returns the pattern of an error message: variable parts
// replaced by placeholders (see the Place… constants), control characters
// and runs of white space made one space, invalid UTF-8 dropped, and the
// result cut to at most MaxMessage bytes at a rune boundary. Equal
// patterns are one incident group. It never returns a raw e-mail address,
// UUID, long hex ID or number of the input, so a pattern is fit for a
// page; metrics labels never carry it anyway.
func Normalize(msg string) string {
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "")
	}
	if len(msg) > 4*MaxMessage {
		// Bound the regexp work; the tail of a long message is never
		// part of a group's pattern anyway.
		msg = cut(msg, 4*MaxMessage)
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, msg)
	msg = urlRe.ReplaceAllString(msg, "${1}${2}/"+PlaceURL)
	msg = emailRe.ReplaceAllString(msg, PlaceEmail)
	msg = uuidRe.ReplaceAllString(msg, PlaceUUID)
	msg = quotedRe.ReplaceAllString(msg, PlaceQuoted)
	msg = hexRe.ReplaceAllStringFunc(msg, func(s string) string {
		if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") || len(s) >= 8 && hasHexLetter(s) {
			return PlaceHex
		}
		return s
	})
	msg = idRe.ReplaceAllStringFunc(msg, func(s string) string {
		i := strings.IndexAny(s, "_-")
		return s[:i+1] + PlaceID
	})
	msg = numberRe.ReplaceAllString(msg, PlaceNumber)
	msg = strings.TrimSpace(spaceR.ReplaceAllString(msg, " "))
	return cut(msg, MaxMessage)
}

func hasHexLetter(s string) bool {
	return strings.ContainsAny(s, "abcdefABCDEF")
}

// cut returns at most n bytes of s, ending at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
