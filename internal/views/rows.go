package views

import (
	"context"
	"html"
	"io"
	"strconv"
	"time"

	"github.com/a-h/templ"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// The components of this file are written in Go, not templ, because every
// row of a list renders them: templ formats each expression through
// fmt.Sprint and a class attribute's expression through its CSS-class
// machinery, which together cost a 51-row list page more than its
// database round trip (BenchmarkKeysPage, BENCHMARKS.md). Each appends its
// HTML to a buffer, escaping every value as templ does (html.EscapeString),
// and writes the buffer once.

// StatusChip renders a status as a labelled chip:
// <span class="chip chip-{status}">{status}</span>.
func StatusChip(status string) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b [96]byte
		_, err := w.Write(appendStatusChip(b[:0], status))
		return err
	})
}

// Time renders a time as relative age with the absolute UTC time:
// <time datetime="{ISO}" title="{UTC}">{Ago}</time>, or <span>—</span> for
// the zero time.
func Time(now, t time.Time) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b [128]byte
		_, err := w.Write(appendTime(b[:0], now, t))
		return err
	})
}

// resolvedManuallyHTML marks an operation an operator closed with Resolve:
// its status is the one the operator chose, not one the engine reached.
const resolvedManuallyHTML = `<span class="chip chip-resolved" data-testid="resolved-manually">resolved manually</span>`

func resolvedManually() templ.Component { return templ.Raw(resolvedManuallyHTML) }

// keyRows renders the rows of the keys list: ID (a link), state, operation,
// scope, external reference, attempts, updated. On a phone the row shows
// what identifies and explains the key (ID, state, operation, external
// reference, updated); scope and attempts are behind the row's "More".
func keyRows(now time.Time, rs []idemdriver.Record) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b [1024]byte
		for _, r := range rs {
			buf := append(b[:0], `<tr><td class="row-id"><a href="/keys/`...)
			buf = strconv.AppendInt(buf, r.ID, 10)
			buf = append(buf, `" aria-label="Key `...)
			buf = strconv.AppendInt(buf, r.ID, 10)
			buf = append(buf, `">`...)
			buf = strconv.AppendInt(buf, r.ID, 10)
			buf = append(buf, `</a>`...)
			buf = appendRowMore(buf)
			buf = append(buf, `</td><td>`...)
			buf = appendStatusChip(buf, DisplayStatus(r))
			buf = appendCell(buf, r.Operation)
			buf = appendExtraCell(buf, "Scope", r.Scope)
			buf = appendCell(buf, r.ExternalRef)
			buf = append(buf, `</td><td class="num extra" data-label="Attempts">`...)
			buf = strconv.AppendInt(buf, int64(r.Attempts), 10)
			buf = append(buf, `</td><td>`...)
			buf = appendTime(buf, now, r.UpdatedAt)
			buf = append(buf, `</td></tr>`...)
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}

// operationRows renders the rows of the operations list: ID (a link),
// status (and whether an operator resolved it), type, current step,
// correlation ID, why, updated. On a phone the ID is shortened with a
// copy button for the whole of it, and current step and correlation ID
// are behind the row's "More".
func operationRows(now time.Time, ops []sagadriver.Operation) templ.Component {
	return templ.ComponentFunc(func(_ context.Context, w io.Writer) error {
		var b [1024]byte
		for _, op := range ops {
			id := html.EscapeString(op.ID)
			buf := append(b[:0], `<tr><td class="row-id"><a href="`...)
			buf = append(buf, html.EscapeString(OperationURL(op.ID))...)
			buf = append(buf, `"><code>`...)
			buf = append(buf, id...)
			buf = append(buf, `</code></a><button type="button" class="copy row-copy" data-copy="`...)
			buf = append(buf, id...)
			buf = append(buf, `" aria-label="Copy operation ID `...)
			buf = append(buf, id...)
			buf = append(buf, `">Copy</button>`...)
			buf = appendRowMore(buf)
			buf = append(buf, `</td><td>`...)
			buf = appendStatusChip(buf, string(op.Status))
			if op.Resolution != "" {
				buf = append(buf, `<br/>`+resolvedManuallyHTML...)
			}
			buf = appendCell(buf, op.Type)
			buf = appendExtraCell(buf, "Current step", op.CurrentStep)
			buf = appendExtraCell(buf, "Correlation ID", op.CorrelationID)
			buf = appendCell(buf, operationWhy(op))
			buf = append(buf, `</td><td>`...)
			buf = appendTime(buf, now, op.UpdatedAt)
			buf = append(buf, `</td></tr>`...)
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}

// rowMoreHTML is a list row's disclosure of its other fields: shown on a
// phone only, where the cells marked "extra" are hidden until it is
// pressed (static/app.js toggles the row's "open" class and the button's
// aria-expanded).
const rowMoreHTML = `<button type="button" class="row-more" data-row-more aria-expanded="false">More</button>`

func appendRowMore(buf []byte) []byte { return append(buf, rowMoreHTML...) }

// RowMore renders rowMoreHTML for the lists written in templ.
func RowMore() templ.Component { return templ.Raw(rowMoreHTML) }

// appendExtraCell closes the open cell and appends a cell a phone shows
// only behind the row's "More", labelled there with the column's name.
func appendExtraCell(buf []byte, label, text string) []byte {
	buf = append(buf, `</td><td class="extra" data-label="`...)
	buf = append(buf, label...)
	buf = append(buf, `">`...)
	return append(buf, html.EscapeString(text)...)
}

// appendCell closes the open cell and appends a new one holding text.
func appendCell(buf []byte, text string) []byte {
	buf = append(buf, `</td><td>`...)
	return append(buf, html.EscapeString(text)...)
}

func appendStatusChip(buf []byte, status string) []byte {
	esc := html.EscapeString(status)
	buf = append(buf, `<span class="chip chip-`...)
	buf = append(buf, esc...)
	buf = append(buf, `">`...)
	buf = append(buf, esc...)
	return append(buf, `</span>`...)
}

// appendTime appends what Time renders. The formatted times are digits,
// "-:.TZ" and a space, and Ago's text digits and letters: nothing to
// escape.
func appendTime(buf []byte, now, t time.Time) []byte {
	if t.IsZero() {
		return append(buf, "<span>—</span>"...)
	}
	u := t.UTC()
	buf = append(buf, `<time datetime="`...)
	iso := len(buf)
	buf = u.AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, `" title="`...)
	if y := u.Year(); y >= 0 && y <= 9999 {
		// "2006-01-02 15:04:05Z" is the datetime's first 19 bytes with a
		// space for the T, then Z: copied, not formatted again.
		title := len(buf)
		buf = append(buf, buf[iso:iso+19]...)
		buf[title+10] = ' '
		buf = append(buf, 'Z')
	} else {
		buf = u.AppendFormat(buf, "2006-01-02 15:04:05Z")
	}
	buf = append(buf, `">`...)
	buf = append(buf, Ago(now, t)...)
	return append(buf, "</time>"...)
}
