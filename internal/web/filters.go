package web

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxFilterBytes bounds a text filter of the list pages: no stored name is
// longer.
const maxFilterBytes = 256

// textFilters checks the named text filters of q, the one validation of
// every list page (keys, operations, audit): each must be valid UTF-8
// without NUL bytes, of at most maxFilterBytes. PostgreSQL refuses the
// others with an error (a 500 before); here they are a 400 naming the
// field.
func textFilters(q url.Values, names ...string) *AppError {
	for _, name := range names {
		v := q.Get(name)
		if len(v) > maxFilterBytes || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return &AppError{Code: EInvalid, Field: name, Message: "Field " + strconv.Quote(name) +
				" must be text of at most " + strconv.Itoa(maxFilterBytes) + " bytes."}
		}
	}
	return nil
}

// listURL is path with q without its empty parameters: a list's links
// carry only the filters in use.
func listURL(path string, q url.Values) string {
	for k, vs := range q {
		if len(vs) == 0 || (len(vs) == 1 && vs[0] == "") {
			q.Del(k)
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
