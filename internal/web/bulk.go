package web

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// bulkService is what the bulk and approval routes need (an *ops.Bulks).
type bulkService interface {
	Preview(ctx context.Context, spec ops.BulkSpec) (ops.BulkPreview, error)
	Request(ctx context.Context, actor ops.Actor, spec ops.BulkSpec, reason string, confirmCount int64) (store.Bulk, ops.BulkPreview, error)
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
}

// bulkActions are the actions a bulk request may take, per kind, with
// their labels.
var bulkActions = map[string][][2]string{
	ops.BulkKeys: {{ops.BulkVerify, "Verify with the provider"}, {"confirm_happened", "Confirm happened, each with its own reference"},
		{"confirm", "Confirm did not happen"}, {"forget", "Forget"}},
	ops.BulkOperations: {{"retry", "Retry"}, {"compensate", "Compensate"}, {"resolve", "Resolve"}},
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
	ops.BulkOperations: {"status", "type", "correlation_id", "external_id", "from", "to"},
}

// includeMayHaveHappened is the bulk forget's field that includes the keys
// whose effect may have happened (SPEC K20).
const includeMayHaveHappened = "include_may_have_happened"

// bulkSpec reads a bulk action and the list's filter from q (a query or a
// form); an invalid field is an AppError naming it.
func bulkSpec(kind string, q url.Values) (ops.BulkSpec, *AppError) {
	spec := ops.BulkSpec{Kind: kind, Action: q.Get("action"), All: q.Get("all") == "1", ResolveTo: saga.Status(q.Get("resolve_to")),
		IncludeMayHaveHappened: q.Get(includeMayHaveHappened) == "1"}
	if kind == ops.BulkKeys {
		spec.Group = q.Get("group")
	}
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
			spec.KeyFilter.SkipOperationPrefix = consoleOperationPrefix
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
		fe  *ops.FieldError
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
		return &AppError{Code: EConflict, Field: "confirm_count", Message: "The number of matching items changed since the preview: it is now " +
			strconv.FormatInt(ce.Now, 10) + ". Check the preview again and type the new count."}
	case errors.Is(err, ops.ErrStale):
		return appError(EConflict, "Not requested: the item changed since you opened the page. Reload it and decide again if still needed.")
	case errors.Is(err, ops.ErrIllegal):
		return appError(EConflict, "Not requested: this action is not allowed in the item's current state.")
	case errors.Is(err, ops.ErrNotFound):
		return appError(ENotFound, "There is no such request.")
	case errors.Is(err, ops.ErrSelfApproval):
		return appError(EForbidden, "You made this request: a second person must approve or reject it.")
	case errors.Is(err, ops.ErrForbidden):
		return appError(EForbidden, "Only the requester or an admin may cancel this request.")
	case errors.Is(err, ops.ErrNotWaiting):
		return appError(EConflict, "This request is no longer waiting for that: reload the page.")
	}
	return err
}

// bulkDenied refuses a bulk or approval step the viewer's role may not
// take for this action: 403, audited as denied.
func bulkDenied(w http.ResponseWriter, r *http.Request, bulks bulkService, log *slog.Logger, action, targetID string) {
	if err := bulks.Denied(r.Context(), actorOf(r), action, "bulk", targetID); err != nil {
		log.Error("denied attempt not audited", "error", err.Error())
	}
	writeError(w, r, log, appError(EForbidden, "Your role may not take this action."))
}

func mayAct(r *http.Request, kind, action string) bool {
	v := viewerFrom(r.Context())
	return v != nil && v.Can != nil && v.Can(singlePath(kind, action), http.MethodPost)
}

func handleBulkPreview(kind string, bulks bulkService, log *slog.Logger) http.Handler {
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
		p, err := bulks.Preview(r.Context(), spec)
		if err != nil {
			writeError(w, r, log, bulkAppError(err))
			return
		}
		vm := previewVM(kind, spec, p)
		page := pageFor(r, vm.ActionLabel+": all matching "+kind, kind)
		render(w, r, http.StatusOK, page, views.BulkPreview(page, vm))
	})
}

func previewVM(kind string, spec ops.BulkSpec, p ops.BulkPreview) views.BulkPreviewVM {
	vm := views.BulkPreviewVM{Kind: kind, Action: spec.Action, ActionLabel: actionLabel(kind, spec.Action), Post: "/" + kind + "/bulk",
		ListURL: "/" + kind + "?" + spec.FilterQuery, FilterText: spec.FilterQuery, Legal: p.Legal, OverCap: p.OverCap, Cap: p.Cap,
		NotLegalTotal: p.NotLegalTotal(), Consequence: p.Consequence, Approval: p.Approval, Resolve: spec.Action == "resolve",
		ResolveTo: string(spec.ResolveTo), FormKey: formKey()}
	if vm.FilterText == "" {
		vm.FilterText, vm.ListURL = "all "+kind, "/"+kind
	}
	vm.Hidden = append(vm.Hidden, views.BulkHidden{Name: "action", Value: spec.Action})
	if spec.All {
		vm.Hidden = append(vm.Hidden, views.BulkHidden{Name: "all", Value: "1"})
	}
	filter, _ := url.ParseQuery(spec.FilterQuery)
	if vm.MayHaveHappened, vm.Included = p.MayHaveHappened, p.Included; p.MayHaveHappened > 0 {
		q := url.Values{"action": {spec.Action}}
		if spec.All {
			q.Set("all", "1")
		}
		for k := range filter {
			q.Set(k, filter.Get(k))
		}
		vm.ExcludeURL = vm.Post + "?" + q.Encode()
		q.Set(includeMayHaveHappened, "1")
		vm.IncludeURL = vm.Post + "?" + q.Encode()
		if p.Included {
			vm.Hidden = append(vm.Hidden, views.BulkHidden{Name: includeMayHaveHappened, Value: "1"})
		}
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range filter {
			if !yield(k) {
				return
			}
		}
	}) {
		vm.Hidden = append(vm.Hidden, views.BulkHidden{Name: k, Value: filter.Get(k)})
	}
	for _, why := range slices.Sorted(func(yield func(string) bool) {
		for k := range p.NotLegal {
			if !yield(k) {
				return
			}
		}
	}) {
		vm.NotLegal = append(vm.NotLegal, views.BulkCount{Label: why, Count: p.NotLegal[why]})
	}
	for _, s := range p.Sample {
		vm.Sample = append(vm.Sample, views.BulkSampleRow{ID: s.ID, Label: s.Label, Version: s.Version, Href: itemHref(kind, s.ID)})
	}
	return vm
}

func itemHref(kind, id string) string { return "/" + kind + "/" + url.PathEscape(id) }

func handleBulkCreate(kind string, bulks bulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			writeError(w, r, log, appError(EInvalid, "The form could not be read."))
			return
		}
		spec, ae := bulkSpec(kind, r.PostForm)
		if ae != nil {
			writeError(w, r, log, ae)
			return
		}
		if !mayAct(r, kind, spec.Action) {
			bulkDenied(w, r, bulks, log, kind+".bulk_"+spec.Action, "request")
			return
		}
		reason := r.PostForm.Get("reason")
		count, perr := strconv.ParseInt(strings.TrimSpace(r.PostForm.Get("confirm_count")), 10, 64)
		var (
			req store.Bulk
			p   ops.BulkPreview
			err error
		)
		if perr != nil || count <= 0 {
			err = &ops.FieldError{Field: "confirm_count", Reason: "type the number of items the preview shows"}
			p, _ = bulks.Preview(r.Context(), spec)
		} else {
			req, p, err = bulks.Request(r.Context(), actorOf(r), spec, reason, count)
		}
		if err != nil {
			mapped := bulkAppError(err)
			var me *AppError
			if !errors.As(mapped, &me) || wantsJSON(r) || (me.Code != EInvalid && me.Code != EConflict) {
				writeError(w, r, log, mapped)
				return
			}
			// Show the preview again, as it is now, with the error next
			// to its field.
			vm := previewVM(kind, spec, p)
			vm.Reason, vm.ConfirmCount, vm.Error, vm.FieldErr = reason, r.PostForm.Get("confirm_count"), me.Message, me.Field
			page := pageFor(r, vm.ActionLabel+": all matching "+kind, kind)
			render(w, r, statusOf[me.Code], page, views.BulkPreview(page, vm))
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
	What    string `json:"what"`
	Status  string `json:"status"`
	Total   int64  `json:"total"`
	Applied int64  `json:"applied"`
	Skipped int64  `json:"skipped"`
	Refused int64  `json:"refused"`
	Failed  int64  `json:"failed"`
}

func bulkID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	return id, err == nil && id > 0
}

// loadBulk reads the bulk request the URL names; when there is none (or
// the ID is not one), or the read fails, it answers the error itself and
// ok is false.
func loadBulk(w http.ResponseWriter, r *http.Request, bulks bulkService, log *slog.Logger) (req store.Bulk, ok bool) {
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

func handleBulkStatus(bulks bulkService, log *slog.Logger) http.Handler {
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
			_ = json.NewEncoder(w).Encode(bulkJSON{ID: req.ID, Action: req.Kind + "." + req.Action, What: vm.ActionLabel, Status: req.Status, Total: req.Total,
				Applied: req.Counts[store.ItemApplied], Skipped: req.Counts[store.ItemSkipped], Refused: req.Counts[store.ItemRefused],
				Failed: req.Counts[store.ItemFailed]})
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
	step := ""
	if item != nil && item.Step != "" {
		step = " step " + item.Step
	}
	var what string
	switch {
	case req.Kind == ops.BulkKeys && req.Action == "confirm" && params["happened"] == "true":
		what = "Confirm happened, with external reference " + strconv.Quote(params["external_ref"])
	case req.Kind == ops.BulkKeys && req.Action == "forget" && params[ops.FieldAcknowledgeRerun] == "true":
		what = "Forget, acknowledging that the client's retry runs the operation again"
	case req.Kind == ops.BulkOperations && req.Action == "confirm" && params["happened"] == "true":
		what = "Confirm" + step + " happened, with external reference " + strconv.Quote(params["external_id"])
	case req.Kind == ops.BulkOperations && req.Action == "confirm":
		what = "Confirm" + step + " did not happen"
	case req.Kind == ops.BulkOperations && req.Action == "retry":
		what = "Retry" + step
		if step == "" {
			what = "Retry each operation's failed step"
		}
	case req.Kind == ops.BulkOperations && req.Action == "resolve":
		what = "Resolve as " + params["resolve_to"]
	default:
		what = actionLabel(req.Kind, req.Action)
	}
	if item != nil {
		return what + " — " + strings.TrimSuffix(req.Kind, "s") + " " + item.TargetID
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

func bulkVM(r *http.Request, bulks bulkService, req store.Bulk) (views.BulkVM, error) {
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
	if v != nil {
		vm.OwnRequest = v.Username == req.RequestedBy
		open := req.Status == store.BulkRunning || req.Status == store.BulkWaitingApproval
		vm.CanCancel = open && (vm.OwnRequest || v.Role == "admin") && v.Can != nil && v.Can("/bulk/"+strconv.FormatInt(req.ID, 10)+"/cancel", http.MethodPost)
		vm.CanApprove = req.Status == store.BulkWaitingApproval && !vm.OwnRequest && mayAct(r, req.Kind, req.Action) &&
			v.Can("/approvals/"+strconv.FormatInt(req.ID, 10)+"/approve", http.MethodPost)
	}
	if req.Status != store.BulkWaitingApproval {
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

// notApplied lists up to 200 items that were skipped, refused or failed.
func notApplied(ctx context.Context, bulks bulkService, id int64) ([]store.BulkItem, error) {
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

func handleBulkCancel(bulks bulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := bulkID(r)
		if !ok {
			writeError(w, r, log, appError(ENotFound, "There is no such request."))
			return
		}
		v := viewerFrom(r.Context())
		_, err := bulks.Cancel(r.Context(), actorOf(r), id, v != nil && v.Role == "admin")
		if errors.Is(err, ops.ErrForbidden) {
			bulkDenied(w, r, bulks, log, "bulk.cancel", strconv.FormatInt(id, 10))
			return
		}
		if err != nil {
			writeError(w, r, log, bulkAppError(err))
			return
		}
		http.Redirect(w, r, "/bulk/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
	})
}

// bulkRoutes adds the bulk and approval routes (SPEC K12, K13). The
// creating POSTs are keyed per rendered form, as single decisions are, so
// a double submit records one request.
func bulkRoutes(r chi.Router, bulks bulkService, engine *idem.Engine, log *slog.Logger) {
	decided := decisionMiddleware(engine)
	for _, kind := range []string{ops.BulkKeys, ops.BulkOperations} {
		r.Method(http.MethodGet, "/"+kind+"/bulk", handleBulkPreview(kind, bulks, log))
		r.With(formKeyHeader, withPrincipal, decided.Required(idem.RouteName("console POST /"+kind+"/bulk"), idem.RouteTTL(time.Hour))).
			Method(http.MethodPost, "/"+kind+"/bulk", handleBulkCreate(kind, bulks, log))
	}
	r.Method(http.MethodGet, "/bulk/{id}", handleBulkStatus(bulks, log))
	r.Method(http.MethodPost, "/bulk/{id}/cancel", handleBulkCancel(bulks, log))
	r.Method(http.MethodGet, "/approvals", handleApprovals(bulks, log))
	r.Method(http.MethodPost, "/approvals/{id}/approve", handleApprovalDecision(true, bulks, log))
	r.Method(http.MethodPost, "/approvals/{id}/reject", handleApprovalDecision(false, bulks, log))
}

// gate is approvalGate when the configuration sends single decisions of
// action on kind for approval, else a pass-through.
func gate(bulks bulkService, kind, action string, log *slog.Logger) func(http.Handler) http.Handler {
	if bulks == nil || !bulks.Config().Approval.Single(kind, action) {
		return func(next http.Handler) http.Handler { return next }
	}
	return approvalGate(kind, action, bulks, log)
}
