package web

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/views"
)

// Error codes of the console. Each maps to one HTTP status.
const (
	EInvalid      = "invalid"
	EMethod       = "method_not_allowed"
	ENotFound     = "not_found"
	EConflict     = "conflict"
	EForbidden    = "forbidden"
	EStale        = "stale"
	EUnauthorized = "unauthorized"
	ETooMany      = "too_many_requests"
	ETooLarge     = "request_too_large"
	// EUnprocessable: well-formed, refused for the target's state (an
	// unacknowledged re-run of a key whose effect may have happened).
	EUnprocessable = "unprocessable"
	EInternal      = "internal"
)

var statusOf = map[string]int{
	EInvalid:       http.StatusBadRequest,
	EMethod:        http.StatusMethodNotAllowed,
	ENotFound:      http.StatusNotFound,
	EConflict:      http.StatusConflict,
	EForbidden:     http.StatusForbidden,
	EStale:         http.StatusConflict,
	EUnauthorized:  http.StatusUnauthorized,
	ETooMany:       http.StatusTooManyRequests,
	ETooLarge:      http.StatusRequestEntityTooLarge,
	EUnprocessable: http.StatusUnprocessableEntity,
	EInternal:      http.StatusInternalServerError,
}

var titleOf = map[string]string{
	EInvalid:       "Invalid request",
	EMethod:        "Method not allowed",
	ENotFound:      "Not found",
	EConflict:      "Conflict",
	EForbidden:     "Forbidden",
	EStale:         "Changed meanwhile",
	EUnauthorized:  "Sign-in required",
	ETooMany:       "Too many attempts",
	ETooLarge:      "Request too large",
	EUnprocessable: "Not applicable",
	EInternal:      "Internal error",
}

// AppError is the console's one error type: a code and a message that is
// safe to show. Any other error is internal: logged, shown as "Internal
// error".
type AppError struct {
	Code    string
	Message string
	Field   string
	// CurrentVersion, when set, is the target's version now, given with a
	// stale decision's 409 in problem+json.
	CurrentVersion *int64
}

func (e *AppError) Error() string { return e.Code + ": " + e.Message }

// appError returns an AppError with a code and a user-safe message.
func appError(code, msg string) *AppError { return &AppError{Code: code, Message: msg} }

// writeError is the one error exit of every handler: it chooses the status,
// logs internals, and renders the error page (or problem+json for API
// clients).
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var ae *AppError
	if !errors.As(err, &ae) {
		log.Error("internal error", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		ae = appError(EInternal, "Something went wrong on our side. The error was logged.")
	}
	status := statusOf[ae.Code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if wantsJSON(r) {
		p := idem.Problem{Status: status, Code: ae.Code, Detail: ae.Message, Field: ae.Field}
		if ae.CurrentVersion != nil {
			writeProblemVersion(w, p, *ae.CurrentVersion)
			return
		}
		idem.WriteProblem(w, p)
		return
	}
	page := pageFor(r, titleOf[ae.Code], "")
	render(w, r, status, page, views.ErrorPage(page, status, titleOf[ae.Code], ae.Message))
}

// writeProblemVersion writes p as problem+json with the target's current
// version as the extension member current_version.
func writeProblemVersion(w http.ResponseWriter, p idem.Problem, current int64) {
	p.Type, p.Title = "urn:unstuck:problem:"+p.Code, http.StatusText(p.Status)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(struct {
		idem.Problem
		CurrentVersion int64 `json:"current_version"`
	}{p, current})
}

// wantsJSON reports whether r is answered in JSON: it came through the
// operator API, or asks for JSON and not HTML.
func wantsJSON(r *http.Request) bool {
	if apiRequest(r) {
		return true
	}
	a := r.Header.Get("Accept")
	return strings.Contains(a, "application/json") && !strings.Contains(a, "text/html")
}
