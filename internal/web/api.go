package web

// The operator API under /api/v1 (SPEC K25): the console's reads and
// decisions as JSON, for automation. It is the console's own handlers
// behind another door: a bearer token instead of a session (no cookie, no
// CSRF), JSON bodies turned into the forms' fields, problem+json errors.
// Authorization, version checks, the approval policy, the idempotency of
// decisions and the audit entry are those of the forms, because the
// routes run the same middleware and the same handlers.

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

// APIPrefix is where the operator API is mounted.
const APIPrefix = "/api/v1"

// Limits of the operator API.
const (
	// maxAPIBody bounds a request body, in bytes; more answers 413.
	maxAPIBody = 64 << 10
	// apiRate and apiBurst are each token's bucket: requests a second,
	// and how many may come at once.
	apiRate  = 20
	apiBurst = 40
	// apiTouchEvery is how often a token's last use is written at most.
	apiTouchEvery = time.Minute
)

// APITokens is what the API needs of the console's store to authenticate
// a bearer token (a *store.DB).
type APITokens interface {
	APITokenByHash(ctx context.Context, hash []byte) (store.APIToken, bool, error)
	TouchAPIToken(ctx context.Context, id int64, now time.Time) error
}

// apiTokenKey carries the request's token in its context.
type apiTokenKey struct{}

// apiTokenFrom is the token the API request authenticated with; nil for
// any other request.
func apiTokenFrom(ctx context.Context) *store.APIToken {
	t, _ := ctx.Value(apiTokenKey{}).(*store.APIToken)
	return t
}

// apiRequest reports whether r came through the operator API: it is
// answered in JSON.
func apiRequest(r *http.Request) bool { return apiTokenFrom(r.Context()) != nil || isAPIPath(r) }

func isAPIPath(r *http.Request) bool {
	return r.URL.Path == APIPrefix || strings.HasPrefix(r.URL.Path, APIPrefix+"/")
}

// apiPermissions maps each route of the API (its chi pattern under
// APIPrefix, and method) to the console route whose permission it needs
// in the casbin policy: the API adds no permission of its own. A route
// missing here is refused (deny by default); a test checks every API
// route has its entry.
var apiPermissions = map[string]string{
	"GET /keys":                        "/keys",
	"GET /keys/{id}":                   "/keys/{id}",
	"POST /keys/{id}/forget":           "/keys/{id}/forget",
	"POST /keys/{id}/confirm":          "/keys/{id}/confirm",
	"POST /keys/{id}/verify":           "/keys/{id}/verify",
	"GET /operations":                  "/operations",
	"GET /operations/{id}":             "/operations/{id}",
	"POST /operations/{id}/retry":      "/operations/{id}/retry",
	"POST /operations/{id}/confirm":    "/operations/{id}/confirm",
	"POST /operations/{id}/compensate": "/operations/{id}/compensate",
	"POST /operations/{id}/resolve":    "/operations/{id}/resolve",
	"POST /operations/{id}/redrive":    "/operations/{id}/redrive",
	"GET /bulk/{id}":                   "/bulk/{id}",
	"GET /keys/bulk":                   "/keys/bulk",
	"GET /operations/bulk":             "/operations/bulk",
	"POST /bulk/{id}/submit":           "/bulk/{id}/submit",
	"POST /bulk/{id}/pause":            "/bulk/{id}/pause",
	"POST /bulk/{id}/resume":           "/bulk/{id}/resume",
	"POST /bulk/{id}/cancel":           "/bulk/{id}/cancel",
	"GET /incidents":                   "/incidents",
	"GET /audit":                       "/audit",
	"POST /approvals/{id}/approve":     "/approvals/{id}/approve",
	"POST /approvals/{id}/reject":      "/approvals/{id}/reject",
	"GET /openapi.json":                "", // public: the document only
}

// apiPermission is the console route pattern (casbin form) whose
// permission the API route pattern (under APIPrefix) with method needs,
// and whether there is one.
func apiPermission(method, pattern string) (string, bool) {
	p, ok := apiPermissions[method+" "+strings.TrimPrefix(pattern, APIPrefix)]
	if !ok || p == "" {
		return "", false
	}
	return casbinPattern(p), true
}

// apiAuth authenticates "Authorization: Bearer <token>" and nothing else:
// a session cookie is not read here. An unknown, revoked or expired token,
// or a user token whose user is disabled, answers 401 at once.
type apiAuth struct {
	tokens  APITokens
	users   userFinder
	az      *authorizer
	log     *slog.Logger
	now     func() time.Time
	limits  sync.Map // token ID → *rate.Limiter
	touched sync.Map // token ID → time.Time of the last write of last use
}

func (a *apiAuth) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, u, ok := a.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="unstuck"`)
			writeError(w, r, a.log, appError(EUnauthorized, "Send an API token as Authorization: Bearer <token>; this one is missing, unknown, revoked or expired."))
			return
		}
		if d := a.wait(t.ID); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
			writeError(w, r, a.log, appError(ETooMany, "Too many requests with this token: slow down."))
			return
		}
		a.touch(r.Context(), t.ID)
		username, role := u.Username, u.Role
		if t.Owner == "" {
			username, role = "token:"+t.Name, t.Role
		}
		v := &views.Viewer{Username: username, Role: role, Can: func(obj, act string) bool { return a.az.can(role, obj, act) }}
		ctx := context.WithValue(context.WithValue(r.Context(), viewerKey{}, v), apiTokenKey{}, &t)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// authenticate finds the request's token by the SHA-256 of its text: the
// secret is never compared, and the timing of the index look-up tells a
// guesser nothing about the secret (it depends on a hash the guesser
// cannot steer). Text not of a token's form is refused unasked.
func (a *apiAuth) authenticate(r *http.Request) (store.APIToken, store.User, bool) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !store.LooksLikeToken(secret) {
		return store.APIToken{}, store.User{}, false
	}
	hash := store.HashTokenSecret(secret)
	t, found, err := a.tokens.APITokenByHash(r.Context(), hash)
	if err != nil {
		a.log.Error("api: token look-up failed", "error", err.Error())
		return store.APIToken{}, store.User{}, false
	}
	if !found || !t.Usable(a.now()) {
		return store.APIToken{}, store.User{}, false
	}
	if t.Owner == "" {
		return t, store.User{}, true
	}
	u, found, err := a.users.UserByUsername(r.Context(), t.Owner)
	if err != nil {
		a.log.Error("api: token user look-up failed", "token", t.Name, "error", err.Error())
		return store.APIToken{}, store.User{}, false
	}
	return t, u, found && !u.Disabled
}

// wait takes a request from token id's bucket: 0 when it may go on, else
// how long until it may.
func (a *apiAuth) wait(id int64) time.Duration {
	l, _ := a.limits.LoadOrStore(id, rate.NewLimiter(apiRate, apiBurst))
	lim := l.(*rate.Limiter)
	now := a.now()
	res := lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// touch records token id's use, at most once per apiTouchEvery from this
// process (the store also writes at most once a minute).
func (a *apiAuth) touch(ctx context.Context, id int64) {
	now := a.now()
	if last, ok := a.touched.Load(id); ok && now.Sub(last.(time.Time)) < apiTouchEvery {
		return
	}
	a.touched.Store(id, now)
	if err := a.tokens.TouchAPIToken(context.WithoutCancel(ctx), id, now); err != nil {
		a.log.Warn("api: last use of a token not recorded", "token_id", id, "error", err.Error())
	}
}

// apiAuthorize checks the API route's mapped console permission.
func apiAuthorize(az *authorizer, log *slog.Logger, denied func(*http.Request)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v := viewerFrom(r.Context())
			pattern := ""
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				pattern = rctx.RoutePattern()
			}
			perm, ok := apiPermission(r.Method, pattern)
			if v == nil || !ok || !az.cached(v.Role, perm, r.Method) {
				denied(r)
				writeError(w, r, log, appError(EForbidden, "Your role may not do this."))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// apiDecisionBody is the JSON body of every decision: the fields of the
// forms, by the same names. A field the route does not use is ignored,
// as the form ignores it; a field no form has is refused.
type apiDecisionBody struct {
	Reason            *string `json:"reason"`
	Version           *int64  `json:"version"`
	Outcome           *string `json:"outcome"`
	ExternalRef       *string `json:"external_ref"`
	Step              *string `json:"step"`
	Status            *string `json:"status"`
	Mode              *string `json:"mode"`
	AcknowledgeRerun  *bool   `json:"acknowledge_rerun"`
	AcceptUnprotected *bool   `json:"accept_unprotected"`
	// ConfirmCount is a bulk submit's typed count of the frozen set.
	ConfirmCount *int64 `json:"confirm_count"`
}

// form is the body as the form would have posted it.
func (b apiDecisionBody) form() url.Values {
	f := url.Values{}
	set := func(name string, v *string) {
		if v != nil {
			f.Set(name, *v)
		}
	}
	set("reason", b.Reason)
	set("outcome", b.Outcome)
	set("external_ref", b.ExternalRef)
	set("step", b.Step)
	set("status", b.Status)
	set("mode", b.Mode)
	if b.Version != nil {
		f.Set("version", strconv.FormatInt(*b.Version, 10))
	}
	if b.ConfirmCount != nil {
		f.Set("confirm_count", strconv.FormatInt(*b.ConfirmCount, 10))
	}
	if b.AcknowledgeRerun != nil && *b.AcknowledgeRerun {
		f.Set(ops.FieldAcknowledgeRerun, "yes")
	}
	if b.AcceptUnprotected != nil && *b.AcceptUnprotected {
		f.Set("accept_unprotected", "yes")
	}
	return f
}

// jsonAsForm reads a decision's JSON body (at most maxAPIBody bytes; an
// empty body is an empty object) and hands it on as the form it stands
// for, so that the idempotency middleware, the approval gate and the
// handler read it as they read a form. An unknown field, or one of the
// wrong type, answers 400 naming it.
func jsonAsForm(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAPIBody))
			if err != nil {
				writeError(w, r, log, appError(ETooLarge, "The body is too large: at most 64 KiB."))
				return
			}
			if !utf8.Valid(raw) {
				// The decoder would replace what is not UTF-8 silently: the
				// reason recorded would not be the one sent.
				writeError(w, r, log, appError(EInvalid, "The body is not valid UTF-8."))
				return
			}
			var body apiDecisionBody
			if len(bytes.TrimSpace(raw)) > 0 {
				if ae := decodeStrict(raw, &body); ae != nil {
					writeError(w, r, log, ae)
					return
				}
			}
			enc := body.form().Encode()
			r.Body = io.NopCloser(strings.NewReader(enc))
			r.ContentLength = int64(len(enc))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.PostForm, r.Form = nil, nil
			next.ServeHTTP(w, r)
		})
	}
}

// decodeStrict decodes one JSON object into dst, refusing unknown fields,
// fields of the wrong type and anything after the object.
func decodeStrict(raw []byte, dst any) *AppError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return &AppError{Code: EInvalid, Field: te.Field, Message: "Field " + strconv.Quote(te.Field) + " must be a JSON " + te.Type.Kind().String() + "."}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return &AppError{Code: EInvalid, Field: name, Message: "Unknown field " + strconv.Quote(name) + "."}
	}
	return appError(EInvalid, "The body must be one JSON object.")
}

// writeJSON answers status with v as JSON, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiDecision is the answer of an applied decision.
type apiDecision struct {
	Applied    bool   `json:"applied"`
	Action     string `json:"action"`
	TargetKind string `json:"target_kind"`
	TargetID   string `json:"target_id"`
	// Version is the target's version after the decision; Removed says
	// the decision removed it (a key forgotten or released).
	Version int64 `json:"version,omitempty"`
	Removed bool  `json:"removed,omitempty"`
}

// decisionOutcome answers an API decision from what the decider
// returned: 200 with done, or the problem: 400 naming the field (422 for
// an unacknowledged re-run), 404, 409 with the target's current version
// (current; ok false when it is gone), or 500.
func decisionOutcome(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, done apiDecision, current func() (int64, bool)) {
	var fe *fielderr.Error
	switch {
	case err == nil:
		done.Applied = true
		writeJSON(w, http.StatusOK, done)
	case errors.As(err, &fe):
		ae := &AppError{Code: EInvalid, Field: fe.Field, Message: "Not applied: " + fe.Reason + "."}
		if fe.Field == ops.FieldAcknowledgeRerun {
			ae.Code = EUnprocessable
		}
		writeError(w, r, log, ae)
	case errors.Is(err, ops.ErrNotFound):
		writeError(w, r, log, appError(ENotFound, "There is no "+done.TargetKind+" with this ID."))
	case errors.Is(err, ops.ErrStale), errors.Is(err, ops.ErrIllegal):
		ae := &AppError{Code: EStale, Message: "Not applied: the " + done.TargetKind + " changed since the version given; read it again and decide if still needed."}
		if errors.Is(err, ops.ErrIllegal) {
			ae = &AppError{Code: EConflict, Message: "Not applied: this action is not allowed in the " + done.TargetKind + "'s current state."}
		}
		if v, ok := current(); ok {
			ae.CurrentVersion = &v
		}
		writeError(w, r, log, ae)
	default:
		writeError(w, r, log, err)
	}
}

// apiRoutes mounts the operator API under APIPrefix, outside the
// console's session and cross-origin group: no session is loaded, so a
// cookie alone is no credential here, and a bearer token is none on the
// console's pages.
func apiRoutes(r chi.Router, cfg Config, az *authorizer, log *slog.Logger, now func() time.Time) {
	auth := &apiAuth{tokens: cfg.Tokens, users: cfg.Store, az: az, log: log, now: now}
	r.Route(APIPrefix, func(api chi.Router) {
		api.NotFound(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, log, appError(ENotFound, "There is no API route here; see "+APIPrefix+"/openapi.json."))
		})
		api.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Allow", allowedMethods(api, strings.TrimPrefix(req.URL.Path, APIPrefix)))
			writeError(w, req, log, appError(EMethod, "This method is not allowed here."))
		})
		api.Method(http.MethodGet, "/openapi.json", handleOpenAPI())
		api.Group(func(api chi.Router) {
			api.Use(auth.middleware, apiAuthorize(az, log, deniedAuditor(cfg.Keys, cfg.Operations, log)))
			api.Method(http.MethodGet, "/keys", handleKeyList(cfg.Records, cfg.CountBudget, log))
			api.Method(http.MethodGet, "/keys/{id}", handleKeyDetail(cfg.Records, cfg.Keys, cfg.Engine, log))
			if cfg.Sagas != nil {
				api.Method(http.MethodGet, "/operations", handleOperationList(cfg.Sagas, log))
				api.Method(http.MethodGet, "/operations/{id}", handleOperationDetail(cfg.Sagas, log))
			}
			if cfg.Incidents != nil {
				api.Method(http.MethodGet, "/incidents", handleIncidents(cfg.Incidents, now, log))
			}
			if cfg.Trail != nil {
				api.Method(http.MethodGet, "/audit", handleAuditList(cfg.Trail, nil, nil, log))
			}
			if cfg.Bulks != nil {
				bulkAPIRoutes(api, cfg.Bulks, cfg.Engine, log)
				api.Method(http.MethodGet, "/bulk/{id}", handleBulkStatus(cfg.Bulks, log))
			}
			decisionRoutes(api, cfg, true, log)
		})
	})
}

// openAPI is the API's OpenAPI 3.1 document, written by hand; a test
// checks it against the routes.
//
//go:embed openapi.json
var openAPI []byte

// handleOpenAPI serves openAPI, to anyone: it holds no data.
func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(openAPI)
	})
}
