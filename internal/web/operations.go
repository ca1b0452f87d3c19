package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// OperationReader is what the operation pages and the overview read of
// the saga records: the saga driver's admin contract (sagadriver.Admin,
// which sagapgx.Driver and sagasqlite.Driver implement), the only reader
// of the saga tables.
type OperationReader interface {
	PageOperations(ctx context.Context, f sagadriver.OperationFilter) (sagadriver.OperationPage, error)
	ReadOperation(ctx context.Context, id string, maxEvents int) (sagadriver.OperationDetail, error)
	CountOperations(ctx context.Context, exactUpTo int) (sagadriver.OperationCounts, error)
	CountFiltered(ctx context.Context, f sagadriver.OperationFilter, upTo int) (sagadriver.FilteredCount, error)
	ReviewRequired(ctx context.Context, limit int) ([]sagadriver.Operation, error)
}

// operationReader is the name the handlers use.
type operationReader = OperationReader

// readOperation reads the detail of operation id; ok is false when there
// is none, or no sagas at all (ops nil: MySQL).
func readOperation(ctx context.Context, ops operationReader, id string) (sagadriver.OperationDetail, bool, error) {
	if ops == nil {
		return sagadriver.OperationDetail{}, false, nil
	}
	det, err := ops.ReadOperation(ctx, id, sagadriver.DefaultMaxEvents)
	if errors.Is(err, sagadriver.ErrNotFound) {
		return det, false, nil
	}
	return det, err == nil, err
}

// operationStatuses are the statuses the list filters by, in saga's
// display order.
func operationStatuses() []string {
	out := make([]string, len(sagadriver.Statuses))
	for i, s := range sagadriver.Statuses {
		out[i] = string(s)
	}
	return out
}

// handleSagasUnavailable answers the operation pages of a console whose
// database has no sagas (MySQL) with 404 and why.
func handleSagasUnavailable(why string, log *slog.Logger) http.Handler {
	if why == "" {
		why = "Sagas are not available on this database."
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, log, appError(ENotFound, why))
	})
}

func handleOperationList(ops operationReader, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		fvm := views.OperationFilterVM{Status: q.Get("status"), Type: q.Get("type"), CorrelationID: q.Get("correlation_id"),
			ExternalID: q.Get("external_id"), From: q.Get("from"), To: q.Get("to"), Live: q.Get("live") == "1"}
		vm := views.OperationsVM{Filter: fvm, Statuses: operationStatuses(), SelfURL: r.URL.RequestURI(), Sort: orderURLs("/operations", q)}
		page := pageFor(r, "Operations", "operations")
		page.Results = true
		f, ferr := operationFilter(q)
		if ferr == nil {
			// Operations under review are listed the longest waiting first.
			var order string
			order, ferr = listOrder(q, q.Get("status") == string(sagadriver.StatusReviewRequired))
			f.Order = sagadriver.Order(order)
			vm.Sort.Oldest = f.Order.Oldest()
			if ferr == nil {
				vm.Filter.Order = q.Get("order") // kept by the filter form
			}
		}
		var backward bool
		if ferr == nil {
			f.After, backward, ferr = pageCursor(q)
		}
		status := http.StatusOK
		if ferr != nil {
			vm.Error, vm.FieldErr, status = ferr.Message, ferr.Field, http.StatusBadRequest
		} else {
			read := f
			if backward {
				read.Order = f.Order.Reversed()
			}
			res, total, err := pageAndCount(func() (sagadriver.OperationPage, error) { return ops.PageOperations(r.Context(), read) },
				func() (sagadriver.FilteredCount, error) { return ops.CountFiltered(r.Context(), f, 0) })
			switch {
			case errors.Is(err, sagadriver.ErrInvalidCursor):
				field := "after"
				if backward {
					field = "before"
				}
				vm.Error, vm.FieldErr, status = "The page link is not valid; start from the first page.", field, http.StatusBadRequest
			case err != nil:
				writeError(w, r, log, err)
				return
			default:
				vm.Operations, vm.Pager = paged("/operations", q, res.Operations, res.Next != "", backward, func(op sagadriver.Operation, rev bool) string {
					if rev {
						return sagadriver.CursorOrder(op, f.Order.Reversed())
					}
					return sagadriver.CursorOrder(op, f.Order)
				})
				vm.Total = views.CountVM{N: total.N, Exact: total.Exact, Known: true}
			}
		}
		if apiRequest(r) {
			writeList(w, r, status, vm.Error, vm.FieldErr, vm.Operations, vm.Total, vm.Pager, func(op sagadriver.Operation) operationJSON { return operationOf(op, false) })
			return
		}
		render(w, r, status, page, views.Operations(page, vm), "results")
	})
}

// operationFilter reads the list's filters from the URL; an invalid one is
// an error naming its field.
func operationFilter(q url.Values) (sagadriver.OperationFilter, *AppError) {
	f := sagadriver.OperationFilter{Type: q.Get("type"), CorrelationID: q.Get("correlation_id"),
		ExternalID: q.Get("external_id"), After: q.Get("after")}
	if err := textFilters(q, "type", "correlation_id", "external_id"); err != nil {
		return f, err
	}
	if s := q.Get("status"); s != "" {
		if !slices.Contains(sagadriver.Statuses, sagadriver.Status(s)) {
			return f, &AppError{Code: EInvalid, Field: "status", Message: "Unknown status " + strconv.Quote(s) + "."}
		}
		f.Status = sagadriver.Status(s)
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
	return f, nil
}

// maxOperationID bounds the IDs the detail page looks up.
const maxOperationID = 512

func handleOperationDetail(ops operationReader, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		// chi routes on the escaped path when there is one (an ID with an
		// escaped slash); the parameter is then still escaped.
		if r.URL.RawPath != "" {
			var err error
			if id, err = url.PathUnescape(id); err != nil {
				id = ""
			}
		}
		if id == "" || len(id) > maxOperationID {
			writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
			return
		}
		det, ok, err := readOperation(r.Context(), ops, id)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		if !ok {
			writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
			return
		}
		if apiRequest(r) {
			writeJSON(w, http.StatusOK, operationOf(det.Operation, true))
			return
		}
		vm := views.OperationVM{Operation: det.Operation, Events: det.Events, EventsOmitted: det.EventsOmitted, Findings: det.Findings}
		gateOperationData(r, &vm, nil, log)
		liveOperation(r, &vm)
		page := pageFor(r, "Operation "+id, "operations")
		render(w, r, http.StatusOK, page, views.OperationDetail(page, vm), "live")
	})
}

// liveOperation sets vm to refresh the page's live part (the fragment
// "live", asked for with HX-Request) from the page's own address while
// the operation moves, and on the page right after a decision (?done=),
// which the engine may not have picked up yet; a refresh that finds the
// operation final or under review stops. A page showing the
// operation's data (?data=show) does not refresh: each showing is audited.
func liveOperation(r *http.Request, vm *views.OperationVM) {
	switch st := vm.Operation.Status; {
	case r.URL.Query().Get("data") == "show":
	case st == sagadriver.StatusPending, st == sagadriver.StatusRunning, st == sagadriver.StatusCompensating:
		vm.Live = true
	case st.Terminal():
	default:
		vm.Live = r.URL.Query().Get("done") != "" && r.Header.Get("HX-Request") != "true"
	}
	if vm.Live {
		vm.LiveURL = r.URL.RequestURI()
	}
}

// countCap is how many operations of one status the overview counts
// exactly before the driver may estimate (as the store's key overview).
const countCap = 1000

// operationsOverview fills the operations' part of the overview: counts
// per status and the operations under review, which come first under
// "Needs a human".
func operationsOverview(ctx context.Context, ops operationReader, vm *views.OverviewVM) error {
	ov, err := ops.CountOperations(ctx, countCap)
	if err != nil {
		return err
	}
	vm.OperationsAvailable = true
	exact := true
	for _, c := range ov.Counts {
		vm.Operations = append(vm.Operations, views.StatusCount{Status: string(c.Status), Count: c.Count, Exact: c.Exact,
			Oldest: c.Oldest, Href: "/operations?status=" + url.QueryEscape(string(c.Status))})
		exact = exact && c.Exact
		if c.Status == sagadriver.StatusReviewRequired {
			vm.ReviewCount, vm.ReviewExact = c.Count, c.Exact
		}
	}
	if !exact {
		vm.OperationsAsOf = ov.AsOf
	}
	if vm.Review, err = ops.ReviewRequired(ctx, 20); err != nil {
		return err
	}
	return nil
}
