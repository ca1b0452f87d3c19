package web

import (
	"cmp"
	"errors"
	"net/url"
	"slices"
	"sync"

	"github.com/unstuckhq/unstuck/internal/views"
)

// pageAndCount reads a list's page and its count at once, on two
// connections: two round trips in the time of one. The page's
// error comes first.
func pageAndCount[P, C any](page func() (P, error), count func() (C, error)) (P, C, error) {
	var (
		p          P
		n          C
		perr, cerr error
	)
	_ = concurrently( // each error is kept apart: the page's comes first
		func() error { p, perr = page(); return nil },
		func() error { n, cerr = count(); return nil })
	return p, n, cmp.Or(perr, cerr)
}

// concurrently runs fns at once (each on a connection of its own when it
// reads a database) and returns their errors joined, in fns' order.
func concurrently(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns[1:] {
		wg.Go(func() { errs[i+1] = fn() })
	}
	errs[0] = fns[0]()
	wg.Wait()
	return errors.Join(errs...)
}

// pageCursor reads a list's paging parameter: after (a Next page link, the
// list read forward from a position) or before (a Previous page link, read
// backward from one), never both. backward is true for before.
func pageCursor(q url.Values) (cursor string, backward bool, err *AppError) {
	after, before := q.Get("after"), q.Get("before")
	switch {
	case after != "" && before != "":
		return "", false, &AppError{Code: EInvalid, Field: "before", Message: "A page link has either \"after\" or \"before\", not both: start from the first page."}
	case before != "":
		return before, true, nil
	default:
		return after, false, nil
	}
}

// paged puts one page of a list into list order and returns its links. A
// page read backward (from a before cursor) was read in the reversed
// order: its items come reversed, and more tells whether earlier ones
// exist. cursor(item, reversed) is the item's position in the list's order
// (reversed false) or in the reversed one. Keyset paging both ways: no
// offset, a page costs the same at any depth.
func paged[T any](path string, q url.Values, items []T, more, backward bool, cursor func(item T, reversed bool) string) ([]T, views.PagerVM) {
	link := func(param, value string) string {
		u := url.Values{}
		for k, vs := range q {
			u[k] = vs
		}
		u.Del("after")
		u.Del("before")
		if param != "" {
			u.Set(param, value)
		}
		return listURL(path, u)
	}
	var p views.PagerVM
	if backward {
		items = slices.Clone(items)
		slices.Reverse(items)
		if more && len(items) > 0 {
			p.PrevURL = link("before", cursor(items[0], true))
			p.FirstURL = link("", "")
		}
		if len(items) > 0 {
			// The page the reader came back from follows this one.
			p.NextURL = link("after", cursor(items[len(items)-1], false))
		}
		return items, p
	}
	if q.Get("after") != "" {
		p.FirstURL = link("", "")
		if len(items) > 0 {
			p.PrevURL = link("before", cursor(items[0], true))
		}
	}
	if more && len(items) > 0 {
		p.NextURL = link("after", cursor(items[len(items)-1], false))
	}
	return items, p
}
