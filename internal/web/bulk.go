package web

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// BulkService is what the bulk and approval routes need (an *ops.Bulks).
type BulkService interface {
	Freeze(ctx context.Context, actor ops.Actor, spec ops.BulkSpec) (store.Bulk, ops.BulkPreview, error)
	Submit(ctx context.Context, actor ops.Actor, id int64, reason string, confirmCount int64) (store.Bulk, error)
	Drift(ctx context.Context, actor ops.Actor, req store.Bulk, spec ops.BulkSpec) (int64, bool, error)
	Pause(ctx context.Context, actor ops.Actor, id int64, isAdmin bool) (store.Bulk, error)
	Resume(ctx context.Context, actor ops.Actor, id int64, isAdmin bool) (store.Bulk, error)
	RequestSingle(ctx context.Context, actor ops.Actor, kind, action, id string, version int64, step string, params map[string]any, reason string) (store.Bulk, error)
	Get(ctx context.Context, id int64) (store.Bulk, bool, error)
	List(ctx context.Context, status string, limit int) ([]store.Bulk, error)
	Waiting(ctx context.Context) (int64, error)
	Items(ctx context.Context, id int64, outcome string, after, limit int) ([]store.BulkItem, error)
	Approve(ctx context.Context, actor ops.Actor, id int64, reason string) (store.Bulk, error)
	Reject(ctx context.Context, actor ops.Actor, id int64, reason string) (store.Bulk, error)
	Cancel(ctx context.Context, actor ops.Actor, id int64, isAdmin bool) (store.Bulk, error)
	Denied(ctx context.Context, actor ops.Actor, action, targetKind, targetID string) error
	Config() ops.BulkConfig
	VerifyReport(ctx context.Context, req store.Bulk, limit int) ([]ops.VerifyReportItem, error)
	SamePerson(ctx context.Context, a, b string) (bool, error)
}

// bulkActions are the actions a bulk request may take, per kind, with
// their labels: the decision names of an item's page (views.Decisions).
var bulkActions = map[string][][2]string{
	ops.BulkKeys: {{ops.BulkVerify, views.DecisionVerify}, {"confirm_happened", views.DecisionConfirmHappened + ", each with its own reference"},
		{"confirm", views.DecisionConfirmNotHappened}, {"forget", views.DecisionForget}},
	ops.BulkOperations: {{"retry", views.DecisionRetry}, {"compensate", views.DecisionCompensate}, {"resolve", views.DecisionResolve},
		{"redrive", views.DecisionRedrive}},
}

// cancelSettle is how long a cancelled request's page keeps refreshing:
// longer than a decision in flight takes to land.
const cancelSettle = 10 * time.Second

func actionLabel(kind, action string) string {
	for _, a := range bulkActions[kind] {
		if a[0] == action {
			return a[1]
		}
	}
	return action
}

// singlePath is the path of the single decision that a bulk action is
// many of: a role may act in bulk only where it may act on one item.
func singlePath(kind, action string) string {
	if kind == ops.BulkKeys {
		if action == ops.BulkConfirmHappened {
			action = "confirm"
		}
		// verify is its own single action (POST /keys/{id}/verify).
		return "/keys/0/" + action
	}
	return "/operations/0/" + action
}

// bulkFilterFields are the list filters a bulk request takes, per kind.
// The raw key of the key list is not one of them: it would be stored with
// the request and written in its audit entry (SPEC K11).
var bulkFilterFields = map[string][]string{
	ops.BulkKeys:       {"state", "scope", "operation", "correlation_id", "external_ref", "from", "to", "console", "group"},
	ops.BulkOperations: {"status", "type", "correlation_id", "external_id", "from", "to", "group"},
}

// includeMayHaveHappened is the bulk forget's field that includes the keys
// whose effect may have happened (SPEC K20).
const includeMayHaveHappened = "include_may_have_happened"

// bulkSpec reads a bulk action and the list's filter from q (a query or a
// form); an invalid field is an AppError naming it.
func bulkSpec(kind string, q url.Values) (ops.BulkSpec, *AppError) {
	spec := ops.BulkSpec{Kind: kind, Action: q.Get("action"), All: q.Get("all") == "1", ResolveTo: sagadriver.Status(q.Get("resolve_to")),
		IncludeMayHaveHappened: q.Get(includeMayHaveHappened) == "1"}
	spec.Group = q.Get("group")
	if q.Get("key") != "" {
		return spec, &AppError{Code: EInvalid, Field: "key", Message: "A raw key selects one record: decide it on its own page."}
	}
	filter := url.Values{}
	for _, k := range bulkFilterFields[kind] {
		if v := q.Get(k); v != "" {
			filter.Set(k, v)
		}
	}
	spec.FilterQuery = filter.Encode()
	var ae *AppError
	if kind == ops.BulkKeys {
		spec.KeyFilter, ae = keyFilter(filter)
		if filter.Get("console") != "1" {
			// The records the key list shows: without the console's own
			// decision records unless the list included them.
			spec.KeyFilter.SkipOperationPrefix = ConsoleOperationPrefix
		}
	} else {
		spec.OperationFilter, ae = operationFilter(filter)
	}
	if ae != nil {
		return spec, ae
	}
	if !slices.ContainsFunc(bulkActions[kind], func(a [2]string) bool { return a[0] == spec.Action }) {
		return spec, &AppError{Code: EInvalid, Field: "action", Message: "Choose one of the bulk actions on " + kind + "."}
	}
	return spec, nil
}

// bulkAppError maps the errors of a bulk call to the console's.
func bulkAppError(err error) error {
	var (
		fe  *fielderr.Error
		ife *idemdriver.FieldError
		sfe *sagadriver.FieldError
		ce  *ops.CountError
	)
	switch {
	case errors.As(err, &fe):
		return &AppError{Code: EInvalid, Field: fe.Field, Message: "Field " + strconv.Quote(fe.Field) + ": " + fe.Reason + "."}
	case errors.As(err, &ife):
		return &AppError{Code: EInvalid, Field: ife.Field, Message: "Field " + strconv.Quote(ife.Field) + ": " + ife.Reason + "."}
	case errors.As(err, &sfe):
		return &AppError{Code: EInvalid, Field: sfe.Field, Message: "Field " + strconv.Quote(sfe.Field) + ": " + sfe.Reason + "."}
	case errors.As(err, &ce):
		return &AppError{Code: EInvalid, Field: "confirm_count", Message: "Type the number of items of this frozen set: " +
			strconv.FormatInt(ce.Now, 10) + "."}
	case errors.Is(err, ops.ErrTooManyPreviews):
		return appError(ETooMany, "You already run two previews: wait until one has answered.")
	case errors.Is(err, ops.ErrPreviewTooSlow):
		return &AppError{Code: EInvalid, Field: "filter", Message: "The preview did not reach the end of the matching items in time (" + err.Error() +
			"): narrow the filter."}
	case errors.Is(err, ops.ErrNothingToRun):
		return appError(EConflict, "No item of this request can be decided any more: each changed or is no longer legal. Reject it, and make another if still needed.")
	case errors.Is(err, ops.ErrStale):
		return appError(EConflict, "Not requested: the item changed since you opened the page. Reload it and decide again if still needed.")
	case errors.Is(err, ops.ErrIllegal):
		return appError(EConflict, "Not requested: this action is not allowed in the item's current state.")
	case errors.Is(err, ops.ErrNotFound):
		return appError(ENotFound, "There is no such request.")
	case errors.Is(err, ops.ErrSelfApproval):
		return appError(EForbidden, "You made this request: a second person must approve or reject it.")
	case errors.Is(err, ops.ErrForbidden):
		return appError(EForbidden, "Only the requester or an admin may pause, resume or cancel this request.")
	case errors.Is(err, ops.ErrNotWaiting):
		return appError(EConflict, "This request is no longer waiting for that: reload the page.")
	}
	return err
}

// bulkDenied refuses a bulk or approval step the viewer's role may not
// take for this action: 403, audited as denied.
func bulkDenied(w http.ResponseWriter, r *http.Request, bulks BulkService, log *slog.Logger, action, targetID string) {
	if err := bulks.Denied(r.Context(), actorOf(r), action, "bulk", targetID); err != nil {
		log.Error("denied attempt not audited", "error", err.Error())
	}
	writeError(w, r, log, appError(EForbidden, "Your role may not take this action."))
}

func mayAct(r *http.Request, kind, action string) bool {
	v := viewerFrom(r.Context())
	return v != nil && v.Can != nil && v.Can(singlePath(kind, action), http.MethodPost)
}

// handleBulkPreview freezes the set a bulk action on the list's filter
// would decide (SPEC K22) and answers 303 to the draft's page, where the
// requester confirms it; a filter over the cap, or with no item the action
// is legal for, is shown without a set.
func handleBulkPreview(kind string, bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		spec, ae := bulkSpec(kind, q)
		if ae != nil {
			writeError(w, r, log, ae)
			return
		}
		if !mayAct(r, kind, spec.Action) {
			bulkDenied(w, r, bulks, log, kind+".bulk_"+spec.Action, "preview")
			return
		}
		draft, p, err := bulks.Freeze(r.Context(), actorOf(r), spec)
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away: no one reads an answer
			}
			writeError(w, r, log, bulkAppError(err))
			return
		}
		if draft.ID != 0 {
			if apiRequest(r) {
				// The draft: its page says what was frozen; submit it to run.
				writeBulkRef(w, http.StatusCreated, draft.ID)
				return
			}
			http.Redirect(w, r, "/bulk/"+strconv.FormatInt(draft.ID, 10), http.StatusSeeOther)
			return
		}
		if apiRequest(r) {
			msg := "Nothing was frozen: the action is legal for none of the items the filter selects."
			if p.OverCap {
				msg = "Nothing was frozen: the filter selects more than " + strconv.FormatInt(int64(p.Cap), 10) + " items; narrow it."
			}
			writeError(w, r, log, appError(EUnprocessable, msg))
			return
		}
		vm := views.BulkPreviewVM{Kind: kind, Action: spec.Action, ActionLabel: actionLabel(kind, spec.Action), ListURL: "/" + kind + "?" + spec.FilterQuery,
			FilterText: filterWords(kind, spec.FilterQuery), Consequence: p.Consequence, Summary: summaryVM(kind, p.Legal, ops.BulkSummary{
				NotLegal: p.NotLegal, MayHaveHappened: p.MayHaveHappened, Included: p.Included, Breakdown: p.Breakdown, Sample: p.Sample})}
		vm.Summary.OverCap, vm.Summary.Cap, vm.Summary.Frozen = p.OverCap, p.Cap, false
		if spec.FilterQuery == "" {
			vm.ListURL = "/" + kind
		}
		switchLinks(&vm.Summary, kind, spec)
		page := pageFor(r, vm.ActionLabel+": all matching "+kind, kind)
		render(w, r, http.StatusOK, page, views.BulkPreview(page, vm))
	})
}

// switchLinks sets the links of a forget's preview that include or leave
// out the keys whose effect may have happened (SPEC K20).
func switchLinks(s *views.BulkSummaryVM, kind string, spec ops.BulkSpec) {
	if s.MayHaveHappened == 0 {
		return
	}
	q, _ := url.ParseQuery(spec.FilterQuery)
	q.Set("action", spec.Action)
	if spec.All {
		q.Set("all", "1")
	}
	s.ExcludeURL = "/" + kind + "/bulk?" + q.Encode()
	q.Set(includeMayHaveHappened, "1")
	s.IncludeURL = "/" + kind + "/bulk?" + q.Encode()
}

// summaryVM is the view of a set of legal items with its summary.
func summaryVM(kind string, legal int64, sum ops.BulkSummary) views.BulkSummaryVM {
	vm := views.BulkSummaryVM{Kind: kind, Legal: legal, Frozen: true, MayHaveHappened: sum.MayHaveHappened, Included: sum.Included}
	for _, why := range slices.Sorted(maps.Keys(sum.NotLegal)) {
		vm.NotLegal = append(vm.NotLegal, views.BulkCount{Label: why, Count: sum.NotLegal[why]})
		vm.NotLegalTotal += sum.NotLegal[why]
	}
	for _, b := range sum.Breakdown {
		bd := views.BulkBreakdownVM{By: b.By}
		for _, c := range b.Counts {
			bd.Counts = append(bd.Counts, views.BulkCount{Label: c.Label, Count: c.Count})
		}
		vm.Breakdown = append(vm.Breakdown, bd)
	}
	for _, s := range sum.Sample {
		vm.Sample = append(vm.Sample, views.BulkSampleRow{ID: s.ID, Label: s.Label, Version: s.Version, Href: itemHref(kind, s.ID),
			LastError: s.LastError, ExternalRef: s.ExternalRef})
	}
	return vm
}

func itemHref(kind, id string) string { return "/" + kind + "/" + url.PathEscape(id) }

// maxBulkForm bounds the forms of a request's steps (submit, approve,
// reject, pause, resume, cancel): a reason is at most ops.MaxReason
// bytes, with room for the field names.
const maxBulkForm = 8 << 10

// parseBulkForm reads a bounded form; on failure it answers 413 or 400
// itself and returns false.
func parseBulkForm(w http.ResponseWriter, r *http.Request, log *slog.Logger) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxBulkForm)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, r, log, appError(ETooLarge, "The form is too large: a reason or note is at most 2,000 characters."))
			return false
		}
		writeError(w, r, log, appError(EInvalid, "The form could not be read."))
		return false
	}
	return true
}

// handleBulkSubmit turns the requester's draft into a request: the reason
// and the typed count of the frozen set.
func handleBulkSubmit(bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := loadBulk(w, r, bulks, log)
		if !ok || !parseBulkForm(w, r, log) {
			return
		}
		if !mayAct(r, req.Kind, req.Action) {
			bulkDenied(w, r, bulks, log, req.Kind+".bulk_"+req.Action, strconv.FormatInt(req.ID, 10))
			return
		}
		reason, typed := r.PostForm.Get("reason"), strings.TrimSpace(r.PostForm.Get("confirm_count"))
		count, perr := strconv.ParseInt(typed, 10, 64)
		var err error
		if perr != nil || count <= 0 {
			err = ops.InvalidField("confirm_count", "type the number of items of the frozen set")
		} else {
			req, err = bulks.Submit(r.Context(), actorOf(r), req.ID, reason, count)
		}
		if err != nil {
			mapped := bulkAppError(err)
			var me *AppError
			if !errors.As(mapped, &me) || wantsJSON(r) || me.Code != EInvalid {
				writeError(w, r, log, mapped)
				return
			}
			// The draft again, with the error next to its field.
			vm, verr := bulkVM(r, bulks, req)
			if verr != nil {
				writeError(w, r, log, verr)
				return
			}
			vm.FormReason, vm.Typed, vm.Error, vm.FieldErr = reason, typed, me.Message, me.Field
			page := pageFor(r, "Preview "+strconv.FormatInt(req.ID, 10), req.Kind)
			render(w, r, statusOf[me.Code], page, views.Bulk(page, vm))
			return
		}
		if apiRequest(r) {
			status := http.StatusOK
			if req.Status == store.BulkWaitingApproval {
				status = http.StatusAccepted // held for a second person
			}
			writeBulkRef(w, status, req.ID)
			return
		}
		http.Redirect(w, r, "/bulk/"+strconv.FormatInt(req.ID, 10), http.StatusSeeOther)
	})
}

// bulkJSON is GET /bulk/{id} for Accept: application/json.
type bulkJSON struct {
	ID     int64  `json:"id"`
	Action string `json:"action"`
	// What is the action in words with its parameters and target, as
	// the approver reads it.
	What        string `json:"what"`
	Target      string `json:"target,omitempty"` // a single request's item
	Filter      string `json:"filter,omitempty"` // a bulk request's filter, in words
	Status      string `json:"status"`
	RequestedBy string `json:"requested_by"`
	Reason      string `json:"reason"`
	DecidedBy   string `json:"decided_by,omitempty"`
	Total       int64  `json:"total"`
	Applied     int64  `json:"applied"`
	Skipped     int64  `json:"skipped"`
	Refused     int64  `json:"refused"`
	Failed      int64  `json:"failed"`
	Pending     int64  `json:"pending"`
	// Summary is the frozen set as its preview showed it: items left
	// out, breakdown, sample.
	Summary      *ops.BulkSummary  `json:"summary,omitempty"`
	PausedBy     string            `json:"paused_by,omitempty"`
	PausedReason string            `json:"paused_reason,omitempty"`
	Failures     []views.BulkCount `json:"failures,omitempty"`
	DurationMS   int64             `json:"duration_ms"`
	PerSecond    float64           `json:"items_per_second"`
	// Items lists every item with its outcome (add Accept: application/json).
	Items string `json:"items"`
}

func bulkID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	return id, err == nil && id > 0
}

// loadBulk reads the bulk request the URL names; when there is none (or
// the ID is not one), or the read fails, it answers the error itself and
// ok is false.
func loadBulk(w http.ResponseWriter, r *http.Request, bulks BulkService, log *slog.Logger) (req store.Bulk, ok bool) {
	id, ok := bulkID(r)
	if !ok {
		writeError(w, r, log, appError(ENotFound, "There is no such request."))
		return store.Bulk{}, false
	}
	req, ok, err := bulks.Get(r.Context(), id)
	switch {
	case err != nil:
		writeError(w, r, log, err)
		return store.Bulk{}, false
	case !ok:
		writeError(w, r, log, appError(ENotFound, "There is no such request."))
		return store.Bulk{}, false
	}
	return req, true
}

func handleBulkStatus(bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := loadBulk(w, r, bulks, log)
		if !ok {
			return
		}
		id := req.ID
		vm, err := bulkVM(r, bulks, req)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		if wantsJSON(r) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			out := bulkJSON{ID: req.ID, Action: req.Kind + "." + req.Action, What: vm.ActionLabel, Target: vm.TargetID, Status: req.Status,
				RequestedBy: req.RequestedBy, Reason: req.Reason, DecidedBy: req.DecidedBy, Total: req.Total,
				Applied: req.Counts[store.ItemApplied], Skipped: req.Counts[store.ItemSkipped], Refused: req.Counts[store.ItemRefused],
				Failed: req.Counts[store.ItemFailed], Pending: req.Counts[store.ItemPending], PausedBy: req.PausedBy, PausedReason: req.PausedReason,
				Failures: vm.Failures, DurationMS: vm.Took.Milliseconds(), PerSecond: vm.Rate, Items: vm.ItemsURL}
			if !req.Single {
				sum := ops.ReadSummary(req)
				out.Summary, out.Filter = &sum, vm.Filter
			}
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		page := pageFor(r, "Request "+strconv.FormatInt(id, 10), req.Kind)
		render(w, r, http.StatusOK, page, views.Bulk(page, vm))
	})
}

// describeAction is what a request will do, in words, with every
// parameter: what an approver approves (SPEC K13). item is a single
// request's one item (nil for a bulk request).
func describeAction(req store.Bulk, item *store.BulkItem) string {
	var params map[string]string
	_ = json.Unmarshal([]byte(req.Params), &params)
	step, ofStep := "", ""
	if item != nil && item.Step != "" {
		step, ofStep = " step "+item.Step, " (step "+item.Step+")"
	}
	var what string
	switch {
	case req.Kind == ops.BulkKeys && req.Action == "confirm" && params["happened"] == "true":
		what = views.DecisionConfirmHappened + ", with external reference " + strconv.Quote(params["external_ref"])
	case req.Kind == ops.BulkKeys && req.Action == "forget" && params[ops.FieldAcknowledgeRerun] == "true":
		what = views.DecisionForget + ", acknowledging that the client's retry runs the operation again"
	case req.Kind == ops.BulkOperations && req.Action == "confirm" && params["happened"] == "true":
		what = views.DecisionConfirmHappened + ofStep + ", with external reference " + strconv.Quote(params["external_id"])
	case req.Kind == ops.BulkOperations && req.Action == "confirm":
		what = views.DecisionConfirmNotHappened + ofStep
	case req.Kind == ops.BulkOperations && req.Action == "retry":
		what = views.DecisionRetry + step
		if step == "" {
			what = views.DecisionRetry + " each operation's failed step"
		}
	case req.Kind == ops.BulkOperations && req.Action == "resolve":
		what = views.DecisionResolve + " as " + params["resolve_to"]
	case req.Kind == ops.BulkOperations && req.Action == "redrive":
		what = views.DecisionRedrive + ": resume at the failed step" + ofStep
		if step == "" {
			what = views.DecisionRedrive + ": resume each operation at its failed step"
		}
	default:
		what = actionLabel(req.Kind, req.Action)
	}
	if item != nil {
		return what + " — " + strings.TrimSuffix(req.Kind, "s") + " " + item.TargetID
	}
	if req.Filter == "" {
		return what + " — all " + req.Kind
	}
	return what + " — " + req.Kind + " where " + filterWords(req.Kind, req.Filter)
}

// filterWords is a bulk request's filter as a reader says it: decoded,
// "state pending, operation POST /charges"; "all" when empty.
func filterWords(kind, filter string) string {
	q, err := url.ParseQuery(filter)
	if err != nil || len(q) == 0 {
		return "all " + kind
	}
	parts := make([]string, 0, len(q))
	for _, k := range slices.Sorted(maps.Keys(q)) {
		parts = append(parts, strings.ReplaceAll(k, "_", " ")+" "+q.Get(k))
	}
	return strings.Join(parts, ", ")
}

func bulkVM(r *http.Request, bulks BulkService, req store.Bulk) (views.BulkVM, error) {
	v := viewerFrom(r.Context())
	vm := views.BulkVM{ID: req.ID, Kind: req.Kind, Action: req.Action, ActionLabel: actionLabel(req.Kind, req.Action) + " " + req.Kind, Single: req.Single,
		Status: req.Status, Filter: req.Filter, FilterURL: "/" + req.Kind + "?" + req.Filter, Reason: req.Reason, RequestedBy: req.RequestedBy,
		RequestRole: req.RequestedRole, DecidedBy: req.DecidedBy, DecisionReason: req.DecisionReason, CancelledBy: req.CancelledBy,
		CreatedAt: req.CreatedAt, ExpiresAt: req.ExpiresAt, Total: req.Total, Applied: req.Counts[store.ItemApplied],
		Skipped: req.Counts[store.ItemSkipped], Refused: req.Counts[store.ItemRefused], Failed: req.Counts[store.ItemFailed],
		Pending: req.Counts[store.ItemPending], NotLegal: req.NotLegal, SelfURL: "/bulk/" + strconv.FormatInt(req.ID, 10)}
	vm.ActionLabel = describeAction(req, nil)
	if req.Single {
		items, err := bulks.Items(r.Context(), req.ID, "", 0, 1)
		if err != nil {
			return vm, err
		}
		if len(items) == 1 {
			vm.ActionLabel = describeAction(req, &items[0])
			vm.TargetID, vm.TargetURL = items[0].TargetID, itemHref(req.Kind, items[0].TargetID)
		}
	}
	vm.Filter = filterWords(req.Kind, req.Filter)
	if req.Filter == "" {
		vm.FilterURL = "/" + req.Kind
	}
	// A decision in flight when a cancel is recorded may still land after
	// it (none starts after it): the page keeps refreshing for a while
	// after a cancel, so that the counts it ends with are final.
	vm.Live = req.Status == store.BulkRunning || req.Status == store.BulkWaitingApproval ||
		req.Status == store.BulkCancelled && time.Since(req.FinishedAt) < cancelSettle
	self := "/bulk/" + strconv.FormatInt(req.ID, 10)
	cfg := bulks.Config()
	vm.Approval, vm.Consequence, vm.Verb = cfg.Approval.Bulk(), consequence(req), actionLabel(req.Kind, req.Action)
	if !req.Single {
		vm.Summary = summaryVM(req.Kind, req.Total, ops.ReadSummary(req))
		if req.Status == store.BulkDraft || req.Status == store.BulkWaitingApproval {
			vm.DriftURL = self + "/drift"
		}
	}
	if req.Status != store.BulkDraft {
		vm.ItemsURL = self + "/items"
	}
	vm.PausedBy, vm.PausedReason = req.PausedBy, req.PausedReason
	if !req.FirstDecided.IsZero() {
		end := req.LastDecided
		if req.Status == store.BulkRunning {
			end = time.Now()
		}
		if vm.Took = end.Sub(req.FirstDecided).Round(time.Millisecond); vm.Took > 0 {
			decided := req.Total - req.Counts[store.ItemPending]
			vm.Rate = float64(decided) / vm.Took.Seconds()
		}
	}
	if v != nil && v.Can != nil {
		vm.OwnRequest = v.Username == req.RequestedBy
		owner := vm.OwnRequest || v.Role == "admin"
		open := req.Status == store.BulkRunning || req.Status == store.BulkWaitingApproval || req.Status == store.BulkPaused
		vm.CanCancel = open && owner && v.Can(self+"/cancel", http.MethodPost)
		vm.CanPause = req.Status == store.BulkRunning && !req.Single && owner && v.Can(self+"/pause", http.MethodPost)
		vm.CanResume = req.Status == store.BulkPaused && owner && v.Can(self+"/resume", http.MethodPost)
		vm.CanApprove = req.Status == store.BulkWaitingApproval && !vm.OwnRequest && mayAct(r, req.Kind, req.Action) &&
			v.Can("/approvals/"+strconv.FormatInt(req.ID, 10)+"/approve", http.MethodPost)
		if vm.CanApprove {
			// Another account of the requester's person may not either.
			same, err := bulks.SamePerson(r.Context(), req.RequestedBy, v.Username)
			if err != nil {
				return vm, err
			}
			vm.CanApprove = !same
		}
		vm.CanSubmit = req.Status == store.BulkDraft && vm.OwnRequest && mayAct(r, req.Kind, req.Action) && v.Can(self+"/submit", http.MethodPost)
		if vm.CanSubmit {
			vm.FormKey = formKey()
		}
	}
	if req.Counts[store.ItemFailed] > 0 {
		groups, err := failureGroups(r.Context(), bulks, req.ID)
		if err != nil {
			return vm, err
		}
		vm.Failures = groups
	}
	if req.Status != store.BulkWaitingApproval && req.Status != store.BulkDraft {
		items, err := notApplied(r.Context(), bulks, req.ID)
		if err != nil {
			return vm, err
		}
		for _, it := range items {
			vm.Report = append(vm.Report, views.BulkItemRow{ID: it.TargetID, Href: itemHref(req.Kind, it.TargetID), Outcome: it.Outcome, Detail: it.Detail})
		}
		// A bulk verification reports each answer, with its evidence.
		answers, err := bulks.VerifyReport(r.Context(), req, 200)
		if err != nil {
			return vm, err
		}
		for _, a := range answers {
			vm.Answers = append(vm.Answers, views.BulkItemRow{ID: a.TargetID, Href: itemHref(req.Kind, a.TargetID), Outcome: a.Outcome, Detail: a.Detail})
			// Answers come after the run: the page stays live until each
			// has one.
			vm.Live = vm.Live || a.Outcome == "waiting"
		}
	}
	return vm, nil
}

// consequence is what req's action does, in words.
func consequence(req store.Bulk) string {
	return ops.Consequence(req.Kind, req.Action)
}

// failureGroups groups up to 1,000 failed items of request id by their
// normalized message, largest first, as incidents group errors.
func failureGroups(ctx context.Context, bulks BulkService, id int64) ([]views.BulkCount, error) {
	items, err := bulks.Items(ctx, id, store.ItemFailed, 0, 1000)
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	for _, it := range items {
		counts[incident.Normalize(it.Detail)]++
	}
	out := make([]views.BulkCount, 0, len(counts))
	for msg, n := range counts {
		out = append(out, views.BulkCount{Label: msg, Count: n})
	}
	slices.SortFunc(out, func(a, b views.BulkCount) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Label, b.Label)
	})
	return out, nil
}

// notApplied lists up to 200 items that were skipped, refused or failed.
func notApplied(ctx context.Context, bulks BulkService, id int64) ([]store.BulkItem, error) {
	var out []store.BulkItem
	for _, o := range []string{store.ItemSkipped, store.ItemRefused, store.ItemFailed} {
		items, err := bulks.Items(ctx, id, o, 0, 200-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if len(out) >= 200 {
			break
		}
	}
	return out, nil
}

// handleBulkStep pauses, resumes or cancels a request: by its requester
// or an admin (403, audited as denied, for anyone else).
func handleBulkStep(step string, bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := bulkID(r)
		if !ok {
			writeError(w, r, log, appError(ENotFound, "There is no such request."))
			return
		}
		if !parseBulkForm(w, r, log) {
			return
		}
		v := viewerFrom(r.Context())
		admin := v != nil && v.Role == "admin"
		var err error
		switch step {
		case "pause":
			_, err = bulks.Pause(r.Context(), actorOf(r), id, admin)
		case "resume":
			_, err = bulks.Resume(r.Context(), actorOf(r), id, admin)
		default:
			_, err = bulks.Cancel(r.Context(), actorOf(r), id, admin)
		}
		if errors.Is(err, ops.ErrForbidden) {
			bulkDenied(w, r, bulks, log, "bulk."+step, strconv.FormatInt(id, 10))
			return
		}
		if err != nil {
			writeError(w, r, log, bulkAppError(err))
			return
		}
		if apiRequest(r) {
			writeBulkRef(w, http.StatusOK, id)
			return
		}
		http.Redirect(w, r, "/bulk/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
	})
}

// bulkItemsPage is how many items /bulk/{id}/items shows at a time.
const bulkItemsPage = 100

// bulkItemJSON is one item of GET /bulk/{id}/items as JSON.
type bulkItemJSON struct {
	Seq       int        `json:"seq"`
	Target    string     `json:"target"`
	Version   int64      `json:"version"`
	Outcome   string     `json:"outcome"`
	Detail    string     `json:"detail,omitempty"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	Audit     string     `json:"audit,omitempty"`
}

// handleBulkItems lists a request's items with their outcomes, paged
// (after: the last seq shown), each decided one linked to its audit
// entries under the request.
func handleBulkItems(bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := loadBulk(w, r, bulks, log)
		if !ok {
			return
		}
		q := r.URL.Query()
		outcome := q.Get("outcome")
		switch outcome {
		case "", store.ItemApplied, store.ItemSkipped, store.ItemRefused, store.ItemFailed, store.ItemPending:
		default:
			writeError(w, r, log, &AppError{Code: EInvalid, Field: "outcome", Message: "Choose applied, skipped, refused, failed or pending."})
			return
		}
		after := 0
		if a := q.Get("after"); a != "" {
			n, err := strconv.Atoi(a)
			if err != nil || n < 0 {
				writeError(w, r, log, &AppError{Code: EInvalid, Field: "after", Message: "A cursor is the last item number shown."})
				return
			}
			after = n
		}
		items, err := bulks.Items(r.Context(), req.ID, outcome, after, bulkItemsPage+1)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		self := "/bulk/" + strconv.FormatInt(req.ID, 10)
		vm := views.BulkItemsVM{ID: req.ID, What: describeAction(req, nil), Outcome: outcome, BackURL: self}
		if len(items) > bulkItemsPage {
			items = items[:bulkItemsPage]
			nq := url.Values{"after": {strconv.Itoa(items[len(items)-1].Seq)}}
			if outcome != "" {
				nq.Set("outcome", outcome)
			}
			vm.NextURL = self + "/items?" + nq.Encode()
		}
		target := strings.TrimSuffix(req.Kind, "s")
		out := make([]bulkItemJSON, 0, len(items))
		for _, it := range items {
			row := views.BulkItemRow{ID: it.TargetID, Href: itemHref(req.Kind, it.TargetID), Outcome: it.Outcome, Detail: it.Detail, DecidedAt: it.DecidedAt}
			// An applied item has its decision's entry; a skipped or
			// refused one, its conflict entry; a failed one none.
			if it.Outcome != store.ItemPending && it.Outcome != store.ItemFailed {
				row.AuditURL = "/audit?" + url.Values{"target_kind": {target}, "target_id": {it.TargetID},
					"request_id": {ops.BulkRequestID(req.ID)}}.Encode()
			}
			vm.Items = append(vm.Items, row)
			j := bulkItemJSON{Seq: it.Seq, Target: it.TargetID, Version: it.Version, Outcome: it.Outcome, Detail: it.Detail, Audit: row.AuditURL}
			if !it.DecidedAt.IsZero() {
				j.DecidedAt = &it.DecidedAt
			}
			out = append(out, j)
		}
		if wantsJSON(r) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_ = json.NewEncoder(w).Encode(map[string]any{"items": out, "next": vm.NextURL})
			return
		}
		page := pageFor(r, "Request "+strconv.FormatInt(req.ID, 10)+": items", req.Kind)
		render(w, r, http.StatusOK, page, views.BulkItems(page, vm))
	})
}

// handleBulkDrift counts the items that started matching the request's
// filter since its set was frozen: they are not in it (SPEC K22). An
// HTML fragment for the request's page, or JSON.
func handleBulkDrift(bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := loadBulk(w, r, bulks, log)
		if !ok {
			return
		}
		q, err := url.ParseQuery(req.Filter)
		if err != nil || req.Single {
			writeError(w, r, log, appError(ENotFound, "This request has no filter."))
			return
		}
		q.Set("action", req.Action)
		if req.Filter == "" {
			q.Set("all", "1")
		}
		var params map[string]string
		_ = json.Unmarshal([]byte(req.Params), &params)
		q.Set("resolve_to", params["resolve_to"])
		if params[ops.FieldAcknowledgeRerun] == "true" {
			q.Set(includeMayHaveHappened, "1")
		}
		spec, ae := bulkSpec(req.Kind, q)
		if ae != nil {
			writeError(w, r, log, ae)
			return
		}
		n, atLeast, err := bulks.Drift(r.Context(), actorOf(r), req, spec)
		text := ""
		switch {
		case r.Context().Err() != nil:
			return
		case err != nil:
			var me *AppError
			if !errors.As(bulkAppError(err), &me) {
				writeError(w, r, log, err)
				return
			}
			text = "The items that started matching since this set was frozen could not be counted: " + me.Message
		case n == 0:
			text = "No new matches since this set was frozen."
		default:
			more := ""
			if atLeast {
				more = "at least "
			}
			text = more + strconv.FormatInt(n, 10) + " new matches since this set was frozen: they are not in this request; make another for them."
		}
		if wantsJSON(r) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"new_matches": n, "at_least": atLeast, "text": text})
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = io.WriteString(w, `<p id="drift" class="notice" data-testid="drift">`+html.EscapeString(text)+`</p>`)
	})
}

// bulkRoutes adds the bulk and approval routes (SPEC K12, K13). The
// creating POSTs are keyed per rendered form, as single decisions are, so
// a double submit records one request.
func bulkRoutes(r chi.Router, bulks BulkService, engine *idem.Engine, log *slog.Logger) {
	decided := decisionMiddleware(engine)
	for _, kind := range []string{ops.BulkKeys, ops.BulkOperations} {
		r.Method(http.MethodGet, "/"+kind+"/bulk", handleBulkPreview(kind, bulks, log))
	}
	r.Method(http.MethodGet, "/bulk/{id}", handleBulkStatus(bulks, log))
	r.Method(http.MethodGet, "/bulk/{id}/items", handleBulkItems(bulks, log))
	r.Method(http.MethodGet, "/bulk/{id}/drift", handleBulkDrift(bulks, log))
	r.With(decisionChain(decided, false, "/bulk/{id}/submit", log)...).Method(http.MethodPost, "/bulk/{id}/submit", handleBulkSubmit(bulks, log))
	for _, step := range []string{"pause", "resume", "cancel"} {
		r.Method(http.MethodPost, "/bulk/{id}/"+step, handleBulkStep(step, bulks, log))
	}
	r.Method(http.MethodGet, "/approvals", handleApprovals(bulks, log))
	r.Method(http.MethodPost, "/approvals/{id}/approve", handleApprovalDecision(true, bulks, log))
	r.Method(http.MethodPost, "/approvals/{id}/reject", handleApprovalDecision(false, bulks, log))
}

// bulkAPIRoutes registers the bulk and approval steps of the API: the
// handlers of bulkRoutes, the JSON body read as their forms.
func bulkAPIRoutes(r chi.Router, bulks BulkService, engine *idem.Engine, log *slog.Logger) {
	for _, kind := range []string{ops.BulkKeys, ops.BulkOperations} {
		r.Method(http.MethodGet, "/"+kind+"/bulk", handleBulkPreview(kind, bulks, log))
	}
	r.With(decisionChain(decisionMiddleware(engine), true, "/bulk/{id}/submit", log)...).Method(http.MethodPost, "/bulk/{id}/submit", handleBulkSubmit(bulks, log))
	body := r.With(jsonAsForm(log))
	for _, step := range []string{"pause", "resume", "cancel"} {
		body.Method(http.MethodPost, "/bulk/{id}/"+step, handleBulkStep(step, bulks, log))
	}
	body.Method(http.MethodPost, "/approvals/{id}/approve", handleApprovalDecision(true, bulks, log))
	body.Method(http.MethodPost, "/approvals/{id}/reject", handleApprovalDecision(false, bulks, log))
}

// gate is approvalGate when the configuration sends single decisions of
// action on kind for approval, else a pass-through.
func gate(bulks BulkService, kind, action string, log *slog.Logger) func(http.Handler) http.Handler {
	if bulks == nil || !bulks.Config().Approval.Single(kind, action) {
		return func(next http.Handler) http.Handler { return next }
	}
	return approvalGate(kind, action, bulks, log)
}
