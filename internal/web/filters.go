package web

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/unstuckhq/unstuck/internal/views"
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

// listOrder reads a list's order from the URL parameter "order":
// "newest" or "oldest", and when it is absent oldest first if the list
// shows what is stuck (defaultOldest), else newest first. A bad value is
// an error naming the field.
func listOrder(q url.Values, defaultOldest bool) (order string, err *AppError) {
	switch o := q.Get("order"); o {
	case "newest", "oldest":
		return o, nil
	case "":
		if defaultOldest {
			return "oldest", nil
		}
		return "newest", nil
	default:
		return "newest", &AppError{Code: EInvalid, Field: "order", Message: "Unknown order " + strconv.Quote(o) + ": newest or oldest."}
	}
}

// orderURLs returns the list's first page in each order, the other
// filters kept.
func orderURLs(path string, q url.Values) views.SortVM {
	at := func(o string) string {
		u := url.Values{}
		for k, vs := range q {
			u[k] = vs
		}
		u.Del("after")
		u.Del("before")
		u.Set("order", o)
		return listURL(path, u)
	}
	return views.SortVM{NewestURL: at("newest"), OldestURL: at("oldest")}
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
