package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

func handleApprovals(bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		waiting, err := bulks.List(r.Context(), store.BulkWaitingApproval, 200)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		recent, err := bulks.List(r.Context(), "", 50)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		var vm views.ApprovalsVM
		for _, b := range waiting {
			row, err := approvalRow(r.Context(), bulks, b)
			if err != nil {
				writeError(w, r, log, err)
				return
			}
			vm.Waiting = append(vm.Waiting, row)
		}
		for _, b := range recent {
			if b.Status != store.BulkWaitingApproval {
				row, err := approvalRow(r.Context(), bulks, b)
				if err != nil {
					writeError(w, r, log, err)
					return
				}
				vm.Recent = append(vm.Recent, row)
			}
		}
		page := pageFor(r, "Approvals", "approvals")
		render(w, r, http.StatusOK, page, views.Approvals(page, vm))
	})
}

func approvalRow(ctx context.Context, bulks BulkService, b store.Bulk) (views.ApprovalRow, error) {
	what := describeAction(b, nil)
	if b.Single {
		items, err := bulks.Items(ctx, b.ID, "", 0, 1)
		if err != nil {
			return views.ApprovalRow{}, err
		}
		if len(items) == 1 {
			what = describeAction(b, &items[0])
		}
	}
	return views.ApprovalRow{ID: b.ID, Href: "/bulk/" + strconv.FormatInt(b.ID, 10), What: what, Reason: b.Reason, RequestedBy: b.RequestedBy,
		Status: b.Status, Total: b.Total, CreatedAt: b.CreatedAt, ExpiresAt: b.ExpiresAt}, nil
}

// handleApprovalDecision approves (approve) or rejects a request: by a
// role that may take the request's action itself, and not by its
// requester (403, audited as denied, SPEC K13).
func handleApprovalDecision(approve bool, bulks BulkService, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := loadBulk(w, r, bulks, log)
		if !ok {
			return
		}
		id := req.ID
		step := "bulk.approve"
		if !approve {
			step = "bulk.reject"
		}
		if !mayAct(r, req.Kind, req.Action) {
			bulkDenied(w, r, bulks, log, step, strconv.FormatInt(id, 10))
			return
		}
		if !parseBulkForm(w, r, log) {
			return
		}
		var err error
		if approve {
			_, err = bulks.Approve(r.Context(), actorOf(r), id, r.PostForm.Get("reason"))
		} else {
			_, err = bulks.Reject(r.Context(), actorOf(r), id, r.PostForm.Get("reason"))
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

// writeBulkRef answers an API request about bulk request id with status,
// the request's address in Location and a body naming both.
func writeBulkRef(w http.ResponseWriter, status int, id int64) {
	loc := APIPrefix + "/bulk/" + strconv.FormatInt(id, 10)
	w.Header().Set("Location", loc)
	writeJSON(w, status, struct {
		ID  int64  `json:"id"`
		URL string `json:"url"`
	}{id, loc})
}

// approvalGate holds a single decision that the configuration sends for
// approval (--approval-required keys.forget, …): instead of deciding, it
// records a request of one item at the form's version and answers 303 to
// its page. The decision runs, through the same path, once a second
// person approves it; an item changed meanwhile is skipped, not forced.
func approvalGate(kind, action string, bulks BulkService, log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := chi.URLParam(r, "id")
			if r.URL.RawPath != "" {
				if u, err := url.PathUnescape(id); err == nil {
					id = u
				}
			}
			if kind == ops.BulkKeys {
				if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
					writeError(w, r, log, appError(ENotFound, "There is no key with this ID."))
					return
				}
			}
			if err := r.ParseForm(); err != nil {
				writeError(w, r, log, appError(EInvalid, "The form could not be read."))
				return
			}
			f := r.PostForm
			version, _ := strconv.ParseInt(f.Get("version"), 10, 64)
			params := map[string]any{}
			switch outcome := f.Get("outcome"); {
			case action != "confirm":
			case outcome == "happened":
				params["happened"] = "true"
				params["external_ref"], params["external_id"] = strings.TrimSpace(f.Get("external_ref")), strings.TrimSpace(f.Get("external_ref"))
				if kind == ops.BulkKeys && params["external_ref"] == "" {
					writeError(w, r, log, &AppError{Code: EInvalid, Field: "external_ref", Message: "Say where the effect shows: the provider's reference."})
					return
				}
			case outcome == "did_not_happen":
			default:
				writeError(w, r, log, &AppError{Code: EInvalid, Field: "outcome", Message: "Say whether the effect happened."})
				return
			}
			if action == "resolve" {
				params["resolve_to"] = f.Get("status")
			}
			if kind == ops.BulkKeys && action == "forget" && f.Get(ops.FieldAcknowledgeRerun) == "yes" {
				params[ops.FieldAcknowledgeRerun] = "true"
			}
			// The decision is checked now as it will be when it runs, so
			// that bad input is a 400 naming the field, not a failed item.
			var verr error
			if kind == ops.BulkKeys {
				n, _ := strconv.ParseInt(id, 10, 64)
				d := ops.KeyDecision{RecordID: n, Version: version, Action: idem.OperatorForget, Reason: f.Get("reason"), ExternalRef: f.Get("external_ref")}
				if action == "confirm" {
					d.Action = idem.OperatorConfirmNotHappened
					if params["happened"] == "true" {
						d.Action = idem.OperatorConfirmHappened
					}
				}
				verr = d.Validate()
			} else {
				d := ops.OperationDecision{ID: id, Version: version, Action: ops.OperationAction(action), Step: f.Get("step"), Reason: f.Get("reason"),
					ResolveTo: sagadriver.Status(f.Get("status")), Happened: params["happened"] == "true", ExternalID: f.Get("external_ref")}
				verr = d.Validate()
			}
			if verr != nil {
				writeError(w, r, log, bulkAppError(verr))
				return
			}
			req, err := bulks.RequestSingle(r.Context(), actorOf(r), kind, action, id, version, strings.TrimSpace(f.Get("step")), params, f.Get("reason"))
			if err != nil {
				writeError(w, r, log, bulkAppError(err))
				return
			}
			if apiRequest(r) {
				// Held for a second person's approval, not applied.
				writeBulkRef(w, http.StatusAccepted, req.ID)
				return
			}
			http.Redirect(w, r, "/bulk/"+strconv.FormatInt(req.ID, 10), http.StatusSeeOther)
		})
	}
}

// waitingKey carries the count of requests waiting for approval to the
// layout.
type waitingKey struct{}

// countWaiting puts the count of requests waiting for approval in the
// request's context, for the page title and the navigation (SPEC K13).
func countWaiting(bulks BulkService, log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && !wantsJSON(r) {
				n, err := bulks.Waiting(r.Context())
				if err != nil && !errors.Is(err, context.Canceled) {
					log.Warn("approvals not counted", "error", err.Error())
				}
				r = r.WithContext(context.WithValue(r.Context(), waitingKey{}, waitingInfo{n: n}))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// waitingInfo is the value under waitingKey.
type waitingInfo struct{ n int64 }

// waitingApprovals returns the count countWaiting put in ctx, and whether
// it did: the console serves bulk decisions.
func waitingApprovals(ctx context.Context) (int64, bool) {
	w, ok := ctx.Value(waitingKey{}).(waitingInfo)
	return w.n, ok
}
