package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// searchLimit caps the matches of one kind that the search reads.
const searchLimit = 20

// maxSearchBytes bounds the search text: a raw key is at most 255 bytes,
// with its two header quotes.
const maxSearchBytes = 300

// handleSearch answers the header's search box (SPEC K11). It is a POST so
// that a raw key never lands in a URL, the history or an access log; the
// text is not logged and not audited. It looks the text up as a raw key
// (quoted as sent in the header or not, through idem.KeyHash, in every
// scope and operation), a key digest or its short form from a log line, a
// record ID, an operation ID, a correlation ID and
// an external reference. One match is a 303 to its page; several are
// listed; none says so.
func handleSearch(keys keyReader, sagas operationReader, tombs tombstoneReader, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := pageFor(r, "Search", "")
		if r.Method == http.MethodGet {
			// The page itself, for a bookmark or a reload of the results.
			render(w, r, http.StatusOK, page, views.Search(page, views.SearchVM{}))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if err := r.ParseForm(); err != nil {
			writeError(w, r, log, &AppError{Code: EInvalid, Field: "q", Message: "The search form could not be read."})
			return
		}
		q := headerValue(strings.TrimSpace(r.PostForm.Get("q")))
		vm := views.SearchVM{Query: q}
		switch {
		case q == "":
			vm.Error = "Type what to search for: a raw key, a record or operation ID, a correlation ID or an external reference."
		case len(q) > maxSearchBytes || !utf8.ValidString(q) || strings.IndexByte(q, 0) >= 0:
			vm.Query = ""
			vm.Error = "Field \"q\" must be text of at most " + strconv.Itoa(maxSearchBytes) + " bytes."
		}
		if vm.Error != "" {
			vm.FieldErr = "q"
			page.Title = "Search"
			render(w, r, http.StatusBadRequest, page, views.Search(page, vm))
			return
		}
		hits, rawKey, err := search(r.Context(), keys, sagas, tombs, q)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		if len(hits) == 1 {
			http.Redirect(w, r, hits[0].URL, http.StatusSeeOther)
			return
		}
		vm.Hits, vm.RawKey = hits, rawKey
		page.Title = strconv.Itoa(len(hits)) + " found"
		if len(hits) == 0 {
			page.Title = "Nothing found"
		}
		render(w, r, http.StatusOK, page, views.Search(page, vm))
	})
}

// isHexDigits reports whether s is lowercase hex digits only.
func isHexDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// headerValue returns the value of a header line pasted as it was
// e-mailed or logged ("Idempotency-Key: \"order-1\"", the name in any
// case), and q itself when it is not such a line.
func headerValue(q string) string {
	const name = "idempotency-key"
	if len(q) > len(name) && strings.EqualFold(q[:len(name)], name) {
		if rest := strings.TrimLeft(q[len(name):], " \t"); strings.HasPrefix(rest, ":") {
			return strings.TrimSpace(rest[1:])
		}
	}
	return q
}

// unquote strips the quotes of a key given as the header sends it
// ("yourkey-123"); ok is false when q is not quoted.
func unquote(q string) (string, bool) {
	if len(q) >= 2 && q[0] == '"' && q[len(q)-1] == '"' {
		return q[1 : len(q)-1], true
	}
	return q, false
}

// tombstoneReader finds the tombstones of removed key records
// (store.DB.Tombstones); nil finds none.
type tombstoneReader interface {
	Tombstones(ctx context.Context, f store.TombstoneFilter, limit int) ([]store.Tombstone, error)
}

// search looks q up in every way the console can find a record or an
// operation, and a removed key record by its tombstone (SPEC K21); rawKey
// tells whether q was tried as a raw key.
func search(ctx context.Context, keys keyReader, sagas operationReader, tombs tombstoneReader, q string) (hits []views.SearchHit, rawKey bool, err error) {
	seen := map[string]bool{}
	addTombs := func(f store.TombstoneFilter, by string) error {
		if tombs == nil {
			return nil
		}
		list, err := tombs.Tombstones(ctx, f, searchLimit)
		if err != nil {
			return err
		}
		for _, t := range list {
			u := "/keys/" + strconv.FormatInt(t.RecordID, 10)
			if seen[u] {
				continue
			}
			seen[u] = true
			status := "forgotten"
			if t.Action != string(idem.OperatorForget) {
				status = "released"
			}
			hits = append(hits, views.SearchHit{Kind: "Key", ID: strconv.FormatInt(t.RecordID, 10), URL: u, By: by,
				Status: status + " by " + t.Actor, Where: t.Operation + " · " + t.Scope, UpdatedAt: t.At})
		}
		return nil
	}
	addKey := func(rec idemdriver.Record, by string) {
		u := "/keys/" + strconv.FormatInt(rec.ID, 10)
		if seen[u] {
			return
		}
		seen[u] = true
		hits = append(hits, views.SearchHit{Kind: "Key", ID: strconv.FormatInt(rec.ID, 10), URL: u, By: by,
			Status: views.DisplayStatus(rec), Where: rec.Operation + " · " + rec.Scope, UpdatedAt: rec.UpdatedAt})
	}
	addOp := func(op sagadriver.Operation, by string) {
		u := views.OperationURL(op.ID)
		if seen[u] {
			return
		}
		seen[u] = true
		hits = append(hits, views.SearchHit{Kind: "Operation", ID: op.ID, URL: u, By: by,
			Status: string(op.Status), Where: op.Type, UpdatedAt: op.UpdatedAt})
	}
	listKeys := func(f idemdriver.KeyFilter, by string) error {
		f.Limit = searchLimit
		page, err := keys.ListKeys(ctx, f)
		var fe *idemdriver.FieldError
		if errors.As(err, &fe) {
			return nil // not a valid value of this field: no match
		}
		if err != nil {
			return err
		}
		for _, rec := range page.Records {
			addKey(rec, by)
		}
		return nil
	}
	listOps := func(f sagadriver.OperationFilter, by string) error {
		if sagas == nil {
			return nil // a database without sagas (MySQL): keys only
		}
		f.Limit = searchLimit
		page, err := sagas.PageOperations(ctx, f)
		var fe *sagadriver.FieldError
		if errors.As(err, &fe) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, op := range page.Operations {
			addOp(op, by)
		}
		return nil
	}

	// A raw key, as sent (quoted) or bare; a key is at most 255 bytes.
	key, quoted := unquote(q)
	if key != "" && len(key) <= 255 {
		rawKey = true
		if err := listKeys(idemdriver.KeyFilter{KeyHash: idem.KeyHash(key)}, "raw key"); err != nil {
			return nil, rawKey, err
		}
		if err := addTombs(store.TombstoneFilter{KeyHash: idem.KeyHash(key)}, "raw key"); err != nil {
			return nil, rawKey, err
		}
		if quoted {
			// A key whose quotes are part of it (a client that quoted it twice).
			if err := listKeys(idemdriver.KeyFilter{KeyHash: idem.KeyHash(q)}, "raw key"); err != nil {
				return nil, rawKey, err
			}
		}
	}
	q = key
	// A key digest, or the short key ID that logs show (idem.SafeKeyID:
	// its first 12 hex digits), in any scope and operation.
	if d := strings.ToLower(q); len(d) >= idemdriver.ShortDigestLen && len(d) <= 64 && isHexDigits(d) {
		by := "key digest"
		if len(d) < 64 {
			by = "short key ID"
		}
		if err := listKeys(idemdriver.KeyFilter{KeyDigest: d}, by); err != nil {
			return nil, rawKey, err
		}
		if err := addTombs(store.TombstoneFilter{KeyDigest: d}, by); err != nil {
			return nil, rawKey, err
		}
	}
	if id, err := strconv.ParseInt(strings.TrimPrefix(q, "#"), 10, 64); err == nil && id > 0 {
		rec, ok, err := keys.KeyByID(ctx, id)
		if err != nil {
			return nil, rawKey, err
		}
		if ok {
			addKey(rec, "record ID")
		} else if err := addTombs(store.TombstoneFilter{RecordID: id}, "record ID"); err != nil {
			return nil, rawKey, err
		}
	}
	if len(q) <= maxFilterBytes {
		det, ok, err := readOperation(ctx, sagas, q)
		if err != nil && !errors.Is(err, sagadriver.ErrNotFound) {
			var fe *sagadriver.FieldError
			if !errors.As(err, &fe) {
				return nil, rawKey, err
			}
		}
		if ok {
			addOp(det.Operation, "operation ID")
		}
		for _, step := range []func() error{
			func() error { return listKeys(idemdriver.KeyFilter{CorrelationID: q}, "correlation ID") },
			func() error { return listKeys(idemdriver.KeyFilter{ExternalRef: q}, "external reference") },
			func() error { return listOps(sagadriver.OperationFilter{CorrelationID: q}, "correlation ID") },
			func() error { return listOps(sagadriver.OperationFilter{ExternalID: q}, "external ID") },
		} {
			if err := step(); err != nil {
				return nil, rawKey, err
			}
		}
	}
	return hits, rawKey, nil
}
