package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/views"
)

// keyReader is what the key pages need of the engine's driver: its
// idemdriver.Admin.
type keyReader interface {
	ListKeys(ctx context.Context, f idemdriver.KeyFilter) (idemdriver.KeyPage, error)
	KeyByID(ctx context.Context, id int64) (idemdriver.Record, bool, error)
	KeyOverview(ctx context.Context) (idemdriver.KeyOverview, error)
	NeedsAttention(ctx context.Context, limit int) ([]idemdriver.Record, error)
	CountKeys(ctx context.Context, f idemdriver.KeyFilter, upTo int) (idemdriver.KeyCount, error)
}

// resultOpener opens stored results for roles allowed to see them.
type resultOpener interface {
	OpenResult(rec idemdriver.Record) ([]byte, error)
}

func handleOverview(keys keyReader, sagas operationReader, sagasUnavailable string, trends IncidentStore, now func() time.Time, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The four reads at once, on four connections: the page waits for
		// the slowest, not for their sum. Each writes its own
		// fields of vm.
		ctx := r.Context()
		vm := views.OverviewVM{ReviewExact: true}
		var ov idemdriver.KeyOverview
		err := concurrently(
			func() (err error) { ov, err = keys.KeyOverview(ctx); return err },
			func() (err error) { vm.Attention, err = keys.NeedsAttention(ctx, 20); return err },
			func() error {
				if sagas == nil {
					vm.OperationsUnavailable = sagasUnavailable
					return nil
				}
				return operationsOverview(ctx, sagas, &vm)
			},
			func() error {
				if trends == nil {
					return nil
				}
				return overviewTrends(ctx, trends, now().UTC(), &vm)
			})
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		vm.StuckProcessing, vm.StuckExact = ov.StuckProcessing, ov.StuckExact
		vm.AttentionCount, vm.AttentionExact = ov.StuckProcessing, ov.StuckExact
		exact := true
		for _, c := range ov.Counts {
			if c.Status == idemdriver.StatusPending || c.Status == idemdriver.StatusUnavailable {
				vm.AttentionCount += c.Count
				vm.AttentionExact = vm.AttentionExact && c.Exact
			}
			vm.Keys = append(vm.Keys, views.StatusCount{Status: string(c.Status), Count: c.Count, Exact: c.Exact, Oldest: c.Oldest,
				Href: "/keys?state=" + url.QueryEscape(string(c.Status))})
			exact = exact && c.Exact
		}
		if !exact {
			vm.AsOf = ov.AsOf
		}
		page := pageFor(r, "Overview", "overview")
		if n := vm.NeedsHuman(); n > 0 {
			// The tab says how many need a human ("(3) Overview · unstuck").
			page.Title = "(" + strconv.FormatInt(n, 10) + ") Overview"
		}
		render(w, r, http.StatusOK, page, views.Overview(page, vm))
	})
}

// keyStates are the states the key list filters by; "stuck" is processing
// past its lease.
var keyStates = []string{"processing", "stuck", "pending", "unavailable", "failed", "completed"}

func handleKeyList(keys keyReader, countBudget time.Duration, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		fvm := views.KeyFilterVM{State: q.Get("state"), Scope: q.Get("scope"), Operation: q.Get("operation"),
			CorrelationID: q.Get("correlation_id"), ExternalRef: q.Get("external_ref"), From: q.Get("from"), To: q.Get("to"),
			Live: q.Get("live") == "1"}
		vm := views.KeysVM{Filter: fvm, States: keyStates, SelfURL: r.URL.RequestURI(), Sort: orderURLs("/keys", q)}
		if id, err := strconv.ParseInt(q.Get("released"), 10, 64); err == nil && id > 0 {
			vm.Notice = "Key " + strconv.FormatInt(id, 10) + " confirmed not to have happened and recorded in the audit trail: the next request with its key runs."
		}
		page := pageFor(r, "Keys", "keys")
		page.Results = true
		f, ferr := keyFilter(q)
		if ferr == nil {
			// Anything stuck is listed the longest waiting first.
			var order string
			order, ferr = listOrder(q, q.Get("state") == "stuck")
			f.Order = idemdriver.Order(order)
			vm.Sort.Oldest = f.Order.Oldest()
			if ferr == nil {
				vm.Filter.Order = q.Get("order") // kept by the filter form
			}
		}
		var backward bool
		if ferr == nil {
			f.After, backward, ferr = pageCursor(q)
		}
		if ferr == nil && q.Get("console") != "1" {
			// The console's own decision records (idempotency of its
			// forms) are not customers' keys: left out unless asked for
			// by the query, so that pages stay full
			// and counts true.
			f.SkipOperationPrefix = ConsoleOperationPrefix
		}
		status := http.StatusOK
		if ferr != nil {
			vm.Error, vm.FieldErr, status = ferr.Message, ferr.Field, http.StatusBadRequest
		} else {
			read := f
			if backward {
				read.Order = f.Order.Reversed()
			}
			var all idemdriver.KeyCount
			count := budgetedCount(r.Context(), keys, countBudget)
			res, total, err := pageAndCount(func() (idemdriver.KeyPage, error) { return keys.ListKeys(r.Context(), read) },
				func() (idemdriver.KeyCount, error) { return count.keys(f) })
			if err == nil && f.SkipOperationPrefix != "" && total.Exact {
				// Past the cap the difference says nothing: not counted.
				unfiltered := f
				unfiltered.SkipOperationPrefix = ""
				all, err = count.keys(unfiltered)
			}
			count.done()
			switch {
			case errors.Is(err, idemdriver.ErrInvalidCursor):
				field := "after"
				if backward {
					field = "before"
				}
				vm.Error, vm.FieldErr, status = "The page link is not valid; start from the first page.", field, http.StatusBadRequest
			case err != nil:
				writeError(w, r, log, err)
				return
			default:
				vm.Records, vm.Pager = paged("/keys", q, res.Records, res.Next != "", backward, func(rec idemdriver.Record, rev bool) string {
					if rev {
						return idemdriver.EncodeCursor(rec, f.Order.Reversed())
					}
					return idemdriver.EncodeCursor(rec, f.Order)
				})
				vm.Total = views.CountVM{N: total.N, Exact: total.Exact, Known: true}
				if count.stopped {
					vm.Total = views.CountVM{N: int64(len(vm.Records)), Known: true, Stopped: true}
				}
				if hidden := all.N - total.N; hidden > 0 && !count.stopped {
					vm.HiddenConsole, vm.HiddenExact = hidden, all.Exact
					show := r.URL.Query()
					show.Del("after")
					show.Del("before")
					show.Set("console", "1")
					vm.ShowConsoleURL = listURL("/keys", show)
				}
			}
		}
		if apiRequest(r) {
			writeList(w, r, status, vm.Error, vm.FieldErr, vm.Records, vm.Total, vm.Pager, keyOf)
			return
		}
		render(w, r, status, page, views.Keys(page, vm), "results")
	})
}

// keyFilter reads the list's filters from the URL; an invalid one is an
// error naming its field.
func keyFilter(q url.Values) (idemdriver.KeyFilter, *AppError) {
	f := idemdriver.KeyFilter{Scope: q.Get("scope"), Operation: q.Get("operation"), CorrelationID: q.Get("correlation_id"),
		ExternalRef: q.Get("external_ref"), After: q.Get("after")}
	if err := textFilters(q, "scope", "operation", "correlation_id", "external_ref", "key"); err != nil {
		return f, err
	}
	switch s := q.Get("state"); s {
	case "":
	case "stuck":
		f.Stuck = true
	default:
		if !idemdriver.Status(s).Valid() {
			return f, &AppError{Code: EInvalid, Field: "state", Message: "Unknown state " + strconv.Quote(s) + "."}
		}
		f.Status = idemdriver.Status(s)
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		v := q.Get(tf.name)
		if v == "" {
			continue
		}
		t, err := parseFormTime(v)
		if err != nil {
			return f, &AppError{Code: EInvalid, Field: tf.name, Message: "Field " + strconv.Quote(tf.name) + " must be a date and time like 2026-11-30T14:05 (UTC)."}
		}
		*tf.dst = t
	}
	if q.Get("key") != "" {
		// A raw key in a URL ends up in the history and access logs: the
		// search box takes it by POST (handleSearch).
		return f, &AppError{Code: EInvalid, Field: "key", Message: "A raw key is not taken in a URL: use Search at the top of the page, which sends it by POST."}
	}
	return f, nil
}

func parseFormTime(v string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("bad time")
}

func handleKeyDetail(keys keyReader, decider KeyDecider, opener resultOpener, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			writeError(w, r, log, appError(ENotFound, "There is no key with this ID."))
			return
		}
		renderKeyDetail(w, r, http.StatusOK, id, keys, decider, opener, log, func(vm *views.KeyVM) {
			switch r.URL.Query().Get("done") {
			case "confirmed":
				vm.Notice = "Confirmed it happened and recorded in the audit trail: the key is never run again."
			case "verify":
				vm.Notice = "Verification requested and recorded in the audit trail: the application's verifier answers in a moment, and its answer is applied in your name."
			}
		})
	})
}

// renderKeyDetail renders the current state of key id, with the viewer's
// actions and the key's audit history; adjust sets a notice or an error.
func renderKeyDetail(w http.ResponseWriter, r *http.Request, status int, id int64, keys keyReader, decider KeyDecider, opener resultOpener, log *slog.Logger, adjust func(*views.KeyVM)) {
	rec, ok, err := keys.KeyByID(r.Context(), id)
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	if !ok {
		renderKeyRemoved(w, r, status, id, decider, log)
		return
	}
	vm := views.KeyVM{Record: rec, TraceURL: traceLink(r.Context(), rec.TraceID)}
	v := viewerFrom(r.Context())
	switch {
	case apiRequest(r):
		// The API reads state: a stored response is read on the page,
		// where its viewing is audited.
	case !v.Can("response", "view"):
		vm.ResponseNote = "Your role may not see stored responses."
	case len(rec.Result) == 0:
		vm.ResponseNote = "No response is stored for this record."
	default:
		vm.Response, vm.ResponseNote = openForView(opener, rec, log)
		if vm.Response != nil && decider != nil {
			// Showing a stored response is a read of possibly personal
			// data: it is audited, and not shown if it cannot be.
			if err := decider.ResponseViewed(r.Context(), actorOf(r), id); err != nil {
				log.Error("audit of a response view failed", "error", err.Error())
				vm.Response, vm.ResponseNote = nil, "The stored response is not shown: its viewing could not be recorded in the audit trail."
			}
		}
	}
	if decider != nil {
		vm.Actions = keyActions(v, rec)
		if a, ok := verifyAction(r.Context(), v, rec); ok {
			// Offered first: asking the provider comes before a guess.
			vm.Actions = append([]views.ActionForm{a}, vm.Actions...)
		}
		hist, err := decider.History(r.Context(), id, 50)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		vm.Verification = verificationNote(time.Now(), hist)
		for _, e := range hist {
			vm.History = append(vm.History, views.AuditRow{Seq: e.Seq, At: e.At, Actor: e.Actor, Role: e.Role, Action: e.Action, Reason: e.Reason, Outcome: e.Outcome})
		}
	}
	adjust(&vm)
	if apiRequest(r) {
		writeJSON(w, status, struct {
			keyJSON
			History []auditRowJSON `json:"history"`
		}{keyOf(rec), historyOf(vm.History)})
		return
	}
	page := pageFor(r, "Key "+strconv.FormatInt(id, 10), "keys")
	page.URL = "/keys/" + strconv.FormatInt(id, 10)
	render(w, r, status, page, views.KeyDetail(page, vm))
}

// renderKeyRemoved renders key id that is no longer there: who removed
// it, when and why, from its audit history (SPEC K21), or a 404 when no
// decision removed it (it expired).
func renderKeyRemoved(w http.ResponseWriter, r *http.Request, status int, id int64, decider KeyDecider, log *slog.Logger) {
	var hist []audit.Entry
	if decider != nil {
		var err error
		if hist, err = decider.History(r.Context(), id, 50); err != nil {
			writeError(w, r, log, err)
			return
		}
	}
	e, ok := removal(hist)
	if !ok {
		writeError(w, r, log, appError(ENotFound, "There is no key with this ID; it may have expired."))
		return
	}
	vm := removedVM(id, e, hist)
	if apiRequest(r) {
		writeError(w, r, log, appError(ENotFound, "Key "+strconv.FormatInt(id, 10)+" is no longer there: "+e.Action+" by "+e.Actor+
			" at "+views.UTC(e.At)+" (audit entry "+strconv.FormatInt(e.Seq, 10)+")."))
		return
	}
	if r.URL.Query().Get("done") == "removed" {
		vm.Notice = "Key " + strconv.FormatInt(id, 10) + " forgotten and recorded in the audit trail: the next request with its key runs."
		if vm.Released {
			vm.Notice = "Key " + strconv.FormatInt(id, 10) + " confirmed not to have happened and recorded in the audit trail: the next request with its key runs."
		}
	}
	page := pageFor(r, "Key "+strconv.FormatInt(id, 10), "keys")
	page.URL = "/keys/" + strconv.FormatInt(id, 10)
	render(w, r, status, page, views.KeyRemoved(page, vm))
}

func openForView(opener resultOpener, rec idemdriver.Record, log *slog.Logger) (*views.StoredResponse, string) {
	plain, err := opener.OpenResult(rec)
	if err != nil {
		log.Warn("stored result cannot be opened", "record_id", rec.ID, "error", err.Error())
		return nil, "The stored result cannot be opened: it is sealed under an unknown secret, or damaged."
	}
	var resp idem.StoredResponse
	if err := resp.UnmarshalBinary(plain); err == nil {
		return &views.StoredResponse{Status: resp.Status, Header: resp.Header, Body: string(resp.Body)}, ""
	}
	return &views.StoredResponse{Body: string(plain)}, ""
}

// ConsoleOperationPrefix starts the operation name of the console's own
// decision records ("console POST /keys/{id}/forget", see routes.go).
const ConsoleOperationPrefix = "console "

// DefaultCountBudget is the time a key list's count may take (see
// Config.CountBudget). A count stops at its
// cap, but where no index covers the whole filter (a tenant and a rare
// state) it reads past every record that fails the rest to find its
// matches; past this budget it stops (in the database too, where the store
// can) and the page says it shows at least its rows.
const DefaultCountBudget = 50 * time.Millisecond

// listCount is one list page's counts, sharing the count budget from
// when the page began to read.
type listCount struct {
	parent  context.Context
	ctx     context.Context
	done    context.CancelFunc
	reader  keyReader
	stopped bool // a count ran out of the budget
}

func budgetedCount(ctx context.Context, keys keyReader, budget time.Duration) *listCount {
	bounded, cancel := context.WithTimeout(ctx, budget)
	return &listCount{parent: ctx, ctx: bounded, done: cancel, reader: keys}
}

// keys counts f's records up to the default cap. A count that runs out of
// the budget, while the request goes on, is no error: it sets stopped and
// returns a zero count.
func (c *listCount) keys(f idemdriver.KeyFilter) (idemdriver.KeyCount, error) {
	n, err := c.reader.CountKeys(c.ctx, f, 0)
	if errors.Is(err, context.DeadlineExceeded) && c.parent.Err() == nil {
		c.stopped = true
		return idemdriver.KeyCount{}, nil
	}
	return n, err
}
