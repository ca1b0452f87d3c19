package idem

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"
	"github.com/stretchr/testify/require"
)

// sfTest is one record of httpwg/structured-field-tests (see
// testdata/structured-field-tests/README.md).
type sfTest struct {
	Name       string          `json:"name"`
	Raw        []string        `json:"raw"`
	HeaderType string          `json:"header_type"`
	Expected   json.RawMessage `json:"expected"`
	MustFail   bool            `json:"must_fail"`
	CanFail    bool            `json:"can_fail"`
}

// sfFile is a test record with the file it came from.
type sfFile struct {
	sfTest
	File string
}

func loadStructuredFieldTests(tb testing.TB) []sfFile {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "structured-field-tests", "*.json"))
	require.NoError(tb, err)
	require.Len(tb, files, 20, "the parse-test files of structured-field-tests @ 1e280c3")
	var all []sfFile
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(tb, err)
		var tests []sfTest
		require.NoError(tb, json.Unmarshal(data, &tests), f)
		for _, t := range tests {
			all = append(all, sfFile{sfTest: t, File: filepath.Base(f)})
		}
	}
	return all
}

func keyHeaderOf(lines ...string) http.Header {
	return http.Header{"Idempotency-Key": append([]string(nil), lines...)}
}

// sfItemString returns the bare value of an expected Item when it is a
// String: the suite writes Strings as JSON strings and every other bare type
// as a number, a boolean or a {"__type": …} object.
func sfItemString(tb testing.TB, expected json.RawMessage) (string, bool) {
	tb.Helper()
	var item []json.RawMessage
	require.NoError(tb, json.Unmarshal(expected, &item))
	require.Len(tb, item, 2, "an item is [bare, params]")
	var s string
	if err := json.Unmarshal(item[0], &s); err != nil {
		return "", false
	}
	return s, true
}

// sfListSingleString returns the String of a List whose only member is a
// String Item.
func sfListSingleString(tb testing.TB, expected json.RawMessage) (string, bool) {
	tb.Helper()
	var members []json.RawMessage
	require.NoError(tb, json.Unmarshal(expected, &members))
	if len(members) != 1 {
		return "", false
	}
	var member []json.RawMessage
	require.NoError(tb, json.Unmarshal(members[0], &member))
	var inner []json.RawMessage
	if json.Unmarshal(member[0], &inner) == nil {
		return "", false // an inner list
	}
	return sfItemString(tb, members[0])
}

// requireRawFallback checks that a key accepted only thanks to
// AcceptUnquoted is the trimmed raw field value, made of visible ASCII
// without the delimiters.
func requireRawFallback(t *testing.T, tc sfFile, key string) {
	t.Helper()
	require.Len(t, tc.Raw, 1, "%s/%s: a raw key comes from one field line", tc.File, tc.Name)
	require.Equal(t, strings.Trim(tc.Raw[0], " \t"), key, "%s/%s", tc.File, tc.Name)
	require.True(t, isRawKey(key), "%s/%s: %q", tc.File, tc.Name, key)
}

// TestParseKeyHeaderStructuredFieldTests runs every parse vector of
// httpwg/structured-field-tests through ParseKeyHeader (SPEC H2;
// reliability-anchors §7a item 15). MinLength 1 so that short Strings count.
//
// can_fail cases: "two lines string" is rejected as repeated (two field
// lines); "two lines display string", "bad padding", "non-zero pad bits" and
// the out-of-range dates are rejected as not Strings (or not items). None of
// them is accepted without AcceptUnquoted; with it, the two byte sequences
// and the two dates pass as raw keys like any other single visible-ASCII
// value.
//
// With AcceptUnquoted the only other acceptances allowed are raw keys: one
// field line whose trimmed value is visible ASCII without '"', ',', ';' and
// '\'. In the pinned suite that admits 93 must_fail items (such as `1.`,
// `?T` and tokens starting with a digit), 366 valid non-String items (tokens,
// numbers, booleans, byte sequences, dates) and 287 list or dictionary
// values (such as `a=1`); the counts are logged.
func TestParseKeyHeaderStructuredFieldTests(t *testing.T) {
	t.Parallel()
	strict := KeyRules{MinLength: 1}
	loose := KeyRules{MinLength: 1, AcceptUnquoted: true}

	var (
		mustFailRejected, mustFailRawAccepted         int
		stringsAccepted, stringsTooLong, stringsEmpty int
		stringsRepeated                               int
		nonStringsRejected, nonStringsRawAccepted     int
		otherRejected, otherAccepted, otherRawAccept  int
		canFail                                       []string
	)
	for _, tc := range loadStructuredFieldTests(t) {
		h := keyHeaderOf(tc.Raw...)
		key, err := ParseKeyHeader(h, strict)
		looseKey, looseErr := ParseKeyHeader(h, loose)
		if tc.CanFail {
			canFail = append(canFail, tc.File+"/"+tc.Name)
			require.ErrorIs(t, err, ErrInvalidKey, "%s/%s: can_fail cases are rejected", tc.File, tc.Name)
		}
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidKey, "%s/%s", tc.File, tc.Name)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve))
			require.Equal(t, "Idempotency-Key", ve.Field)
		}

		switch {
		case tc.HeaderType == "item" && tc.MustFail:
			require.Error(t, err, "%s/%s: must_fail accepted as %q", tc.File, tc.Name, key)
			mustFailRejected++
			if looseErr == nil {
				requireRawFallback(t, tc, looseKey)
				mustFailRawAccepted++
			}

		case tc.HeaderType == "item":
			s, isString := sfItemString(t, tc.Expected)
			if !isString {
				require.Error(t, err, "%s/%s: a non-String item accepted as %q", tc.File, tc.Name, key)
				nonStringsRejected++
				if looseErr == nil {
					requireRawFallback(t, tc, looseKey)
					nonStringsRawAccepted++
				}
				continue
			}
			switch {
			case len(tc.Raw) > 1:
				require.True(t, tc.CanFail, "%s/%s", tc.File, tc.Name)
				require.ErrorContains(t, err, "repeated")
				require.ErrorContains(t, looseErr, "repeated")
				stringsRepeated++
			case s == "":
				require.ErrorContains(t, err, "empty", "%s/%s", tc.File, tc.Name)
				require.Error(t, looseErr)
				stringsEmpty++
			case len(s) > MaxKeyBytes:
				require.ErrorContains(t, err, "MaxLength", "%s/%s", tc.File, tc.Name)
				require.Error(t, looseErr)
				stringsTooLong++
			default:
				require.NoError(t, err, "%s/%s", tc.File, tc.Name)
				require.Equal(t, s, key, "%s/%s", tc.File, tc.Name)
				require.NoError(t, looseErr, "%s/%s", tc.File, tc.Name)
				require.Equal(t, s, looseKey, "%s/%s", tc.File, tc.Name)
				stringsAccepted++
			}

		default: // list and dictionary
			single := ""
			isSingle := false
			if !tc.MustFail && tc.HeaderType == "list" {
				single, isSingle = sfListSingleString(t, tc.Expected)
			}
			if isSingle && len(tc.Raw) == 1 && single != "" && len(single) <= MaxKeyBytes {
				require.NoError(t, err, "%s/%s", tc.File, tc.Name)
				require.Equal(t, single, key)
				otherAccepted++
				continue
			}
			require.Error(t, err, "%s/%s: a %s accepted as %q", tc.File, tc.Name, tc.HeaderType, key)
			otherRejected++
			if looseErr == nil {
				requireRawFallback(t, tc, looseKey)
				otherRawAccept++
			}
		}
	}

	t.Logf("item must_fail rejected: %d (with AcceptUnquoted, %d accepted as raw keys)", mustFailRejected, mustFailRawAccepted)
	t.Logf("item Strings accepted with the exact value: %d; rejected: %d empty, %d over 255 bytes, %d on two field lines (can_fail)",
		stringsAccepted, stringsEmpty, stringsTooLong, stringsRepeated)
	t.Logf("item non-Strings rejected: %d (with AcceptUnquoted, %d accepted as raw keys)", nonStringsRejected, nonStringsRawAccepted)
	t.Logf("list/dictionary rejected: %d, accepted as a single String item: %d (with AcceptUnquoted, %d raw keys)", otherRejected, otherAccepted, otherRawAccept)
	t.Logf("can_fail cases, all rejected without AcceptUnquoted: %s", strings.Join(canFail, ", "))

	// The figures of reliability-anchors §3 for the pinned copy (1e280c3).
	require.Equal(t, 357, mustFailRejected)
	require.Equal(t, 104, stringsAccepted+stringsEmpty+stringsTooLong+stringsRepeated)
	require.Equal(t, 379, nonStringsRejected)
	require.Equal(t, 99, stringsAccepted)
}

func TestParseKeyHeader(t *testing.T) {
	t.Parallel()
	const uuid = "550e8400-e29b-41d4-a716-446655440000"
	tests := []struct {
		name    string
		header  http.Header
		rules   KeyRules
		want    string
		wantErr string // "" for success; "missing" for ErrKeyMissing; else a substring of an invalid-key reason
	}{
		{"H2: quoted uuid", keyHeaderOf(`"` + uuid + `"`), KeyRules{}, uuid, ""},
		{"H2: escapes decoded", keyHeaderOf(`"abc\"def\\ghi-0123456"`), KeyRules{}, `abc"def\ghi-0123456`, ""},
		{"H2: surrounding spaces", keyHeaderOf(`  "` + uuid + `"  `), KeyRules{}, uuid, ""},
		{"H2: parameters ignored", keyHeaderOf(`"abc";x=1`), KeyRules{MinLength: 1}, "abc", ""},
		{"H2: parameters ignored, several", keyHeaderOf(`"abc";x=1;y="z";w`), KeyRules{MinLength: 1}, "abc", ""},
		{"H2: unquoted uuid refused by default", keyHeaderOf(uuid), KeyRules{}, "", "not a structured field item"},
		{"H2: unquoted uuid with AcceptUnquoted", keyHeaderOf(uuid), KeyRules{AcceptUnquoted: true}, uuid, ""},
		{"H2: stripe-style token refused by default", keyHeaderOf("abc_123-XYZ"), KeyRules{MinLength: 1}, "", "a token, not a string"},
		{"H2: stripe-style with AcceptUnquoted", keyHeaderOf("abc_123-XYZ"), KeyRules{MinLength: 1, AcceptUnquoted: true}, "abc_123-XYZ", ""},
		{"H2: AcceptUnquoted trims OWS", keyHeaderOf(" \t" + uuid + "\t "), KeyRules{AcceptUnquoted: true}, uuid, ""},
		{"H2: AcceptUnquoted keeps the quoted form", keyHeaderOf(`"` + uuid + `"`), KeyRules{AcceptUnquoted: true}, uuid, ""},
		{"H2: AcceptUnquoted refuses a parameterised token", keyHeaderOf("abc;x=1"), KeyRules{MinLength: 1, AcceptUnquoted: true}, "", "a token, not a string"},
		{"H2: AcceptUnquoted refuses spaces", keyHeaderOf("abc def"), KeyRules{MinLength: 1, AcceptUnquoted: true}, "", "not a structured field item"},
		{"H2: AcceptUnquoted refuses a backslash", keyHeaderOf(`abc\def`), KeyRules{MinLength: 1, AcceptUnquoted: true}, "", "not a structured field item"},
		{"H2: AcceptUnquoted refuses non-ASCII", keyHeaderOf("abcé"), KeyRules{MinLength: 1, AcceptUnquoted: true}, "", "not a structured field item"},
		{"H2: AcceptUnquoted applies lengths", keyHeaderOf("abc"), KeyRules{AcceptUnquoted: true}, "", "at least 16 (MinLength)"},
		{"H2: integer", keyHeaderOf("123456789012345"), KeyRules{MinLength: 1}, "", "an integer, not a string"},
		{"H2: decimal", keyHeaderOf("-12.5"), KeyRules{MinLength: 1}, "", "a decimal, not a string"},
		{"H2: date", keyHeaderOf("@1659578233"), KeyRules{MinLength: 1}, "", "a date, not a string"},
		{"H2: byte sequence", keyHeaderOf(":YWJjZGVmZ2hpamtsbW5vcA==:"), KeyRules{}, "", "a byte sequence, not a string"},
		{"H2: display string", keyHeaderOf(`%"abcdefghijklmnop"`), KeyRules{}, "", "a display string, not a string"},
		{"H2: boolean", keyHeaderOf("?1"), KeyRules{MinLength: 1}, "", "a boolean, not a string"},
		{"H2: unterminated", keyHeaderOf(`"abc`), KeyRules{MinLength: 1}, "", "not a structured field item"},
		{"H2: control character", keyHeaderOf("\"abc\x01def\""), KeyRules{MinLength: 1}, "", "not a structured field item"},
		{"H2: a list of two", keyHeaderOf(`"a", "b"`), KeyRules{MinLength: 1}, "", "not a structured field item"},
		{"H2: a list of two with AcceptUnquoted", keyHeaderOf(`"a", "b"`), KeyRules{MinLength: 1, AcceptUnquoted: true}, "", "not a structured field item"},
		{"H4: two field lines", keyHeaderOf(`"`+uuid+`"`, `"`+uuid+`"`), KeyRules{}, "", "repeated"},
		{"H4: two field lines with AcceptUnquoted", keyHeaderOf(uuid, uuid), KeyRules{AcceptUnquoted: true}, "", "repeated"},
		{"H4: missing", http.Header{}, KeyRules{}, "", "missing"},
		{"H4: missing, other headers", http.Header{"Idempotency-Keys": {`"x"`}}, KeyRules{}, "", "missing"},
		{"H4: present but empty", keyHeaderOf(""), KeyRules{}, "", "empty"},
		{"H4: present but blank with AcceptUnquoted", keyHeaderOf("  "), KeyRules{AcceptUnquoted: true}, "", "empty"},
		{"H4: empty string", keyHeaderOf(`""`), KeyRules{MinLength: 1}, "", "empty"},
		{"H3: 15 bytes by default", keyHeaderOf(`"` + strings.Repeat("k", 15) + `"`), KeyRules{}, "", "15 bytes, at least 16 (MinLength) required"},
		{"H3: 16 bytes by default", keyHeaderOf(`"` + strings.Repeat("k", 16) + `"`), KeyRules{}, strings.Repeat("k", 16), ""},
		{"H3: 255 bytes by default", keyHeaderOf(`"` + strings.Repeat("k", 255) + `"`), KeyRules{}, strings.Repeat("k", 255), ""},
		{"H3: 256 bytes by default", keyHeaderOf(`"` + strings.Repeat("k", 256) + `"`), KeyRules{}, "", "256 bytes, at most 255 (MaxLength) allowed"},
		{"H3: length counts decoded bytes", keyHeaderOf(`"` + strings.Repeat(`\\`, 16) + `"`), KeyRules{}, strings.Repeat(`\`, 16), ""},
		{"H3: custom bounds, below", keyHeaderOf(`"abcd"`), KeyRules{MinLength: 5, MaxLength: 8}, "", "at least 5"},
		{"H3: custom bounds, at min", keyHeaderOf(`"abcde"`), KeyRules{MinLength: 5, MaxLength: 8}, "abcde", ""},
		{"H3: custom bounds, at max", keyHeaderOf(`"abcdefgh"`), KeyRules{MinLength: 5, MaxLength: 8}, "abcdefgh", ""},
		{"H3: custom bounds, above", keyHeaderOf(`"abcdefghi"`), KeyRules{MinLength: 5, MaxLength: 8}, "", "at most 8 (MaxLength)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseKeyHeader(tt.header, tt.rules)
			switch tt.wantErr {
			case "":
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
			case "missing":
				require.ErrorIs(t, err, ErrKeyMissing)
				require.NotErrorIs(t, err, ErrInvalidKey)
				require.Empty(t, got)
			default:
				require.ErrorIs(t, err, ErrInvalidKey)
				require.NotErrorIs(t, err, ErrKeyMissing)
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, "Idempotency-Key")
				require.Empty(t, got)
			}
		})
	}
}

func TestKeyRulesValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		rules   KeyRules
		wantErr string
	}{
		{"zero value: defaults 16..255", KeyRules{}, ""},
		{"min 1", KeyRules{MinLength: 1}, ""},
		{"min equals max", KeyRules{MinLength: 32, MaxLength: 32}, ""},
		{"max 255", KeyRules{MaxLength: 255}, ""},
		{"min 255 with default max", KeyRules{MinLength: 255}, ""},
		{"H3: min above max", KeyRules{MinLength: 40, MaxLength: 32}, "MinLength 40 is above MaxLength 32"},
		{"H3: default min above max", KeyRules{MaxLength: 10}, "MinLength 16 is above MaxLength 10"},
		{"H3: min above default max", KeyRules{MinLength: 256}, "MinLength 256 is above MaxLength 255"},
		{"negative min", KeyRules{MinLength: -1}, "MinLength -1 is negative"},
		{"negative max", KeyRules{MaxLength: -1}, "MaxLength -1 is negative"},
		{"max above 255", KeyRules{MaxLength: 256}, "MaxLength 256 is above 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.rules.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.NotErrorIs(t, err, ErrInvalidKey, "a configuration error is not a bad request")

			_, err = ParseKeyHeader(keyHeaderOf(`"`+strings.Repeat("k", 20)+`"`), tt.rules)
			require.ErrorContains(t, err, tt.wantErr, "ParseKeyHeader refuses invalid rules")
			require.NotErrorIs(t, err, ErrInvalidKey)
		})
	}
}

// FuzzParseKeyHeader checks ParseKeyHeader on arbitrary field values: it never
// panics, an accepted key is within the rules' bounds, and an accepted key
// serialised again as an sf-string parses back to the same key (SPEC H2, H3;
// reliability-anchors §3). Seeds: every raw value of structured-field-tests.
func FuzzParseKeyHeader(f *testing.F) {
	for _, tc := range loadStructuredFieldTests(f) {
		f.Add(strings.Join(tc.Raw, ", "), "", uint8(1), uint8(0), false)
		if len(tc.Raw) > 1 {
			f.Add(tc.Raw[0], tc.Raw[1], uint8(1), uint8(0), true)
		}
	}
	f.Add(`"550e8400-e29b-41d4-a716-446655440000"`, "", uint8(0), uint8(0), false)
	f.Add("550e8400-e29b-41d4-a716-446655440000", "", uint8(0), uint8(0), true)
	f.Add("abc_123-XYZ", "", uint8(1), uint8(20), true)
	f.Add(`"abc";x=1`, "", uint8(1), uint8(3), false)
	f.Add(`"a\"b\\c"`, "", uint8(1), uint8(255), true)
	f.Add(" \t abc \t ", "", uint8(3), uint8(3), true)
	f.Add(`"a", "b"`, "", uint8(1), uint8(0), true)

	f.Fuzz(func(t *testing.T, line, second string, minLen, maxLen uint8, unquoted bool) {
		rules := KeyRules{MinLength: int(minLen), MaxLength: int(maxLen), AcceptUnquoted: unquoted}
		lines := []string{line}
		if second != "" {
			lines = append(lines, second)
		}
		key, err := ParseKeyHeader(keyHeaderOf(lines...), rules)
		if rules.Validate() != nil {
			require.Error(t, err)
			require.NotErrorIs(t, err, ErrInvalidKey)
			return
		}
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidKey)
			require.Empty(t, key)
			return
		}
		require.Len(t, lines, 1, "repeated lines are never accepted")
		lo, hi := rules.bounds()
		require.GreaterOrEqual(t, len(key), max(lo, 1))
		require.LessOrEqual(t, len(key), hi)

		ser, err := httpsfv.Marshal(httpsfv.NewItem(key))
		require.NoError(t, err, "an accepted key is a valid sf-string: %q", key)
		again, err := ParseKeyHeader(keyHeaderOf(ser), KeyRules{MinLength: int(minLen), MaxLength: int(maxLen)})
		require.NoError(t, err, "re-serialised %q", ser)
		require.Equal(t, key, again)

		if !unquoted {
			item, err := httpsfv.UnmarshalItem(lines)
			require.NoError(t, err)
			require.Equal(t, key, item.Value, "strict keys are exactly the String of the item")
		}
	})
}
