package web

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/casbin/casbin/v2"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/ops"
)

// Store is what the console needs of its database.
type Store interface {
	userFinder
	userLister
	userUnlocker
	userLinker
	Ping(ctx context.Context) error
}

// Config holds the dependencies of the console's HTTP handler.
type Config struct {
	Store Store
	// Records reads the engine's key records: the driver's
	// idemdriver.Admin (idempgx.Store, idemsqlite.Store).
	Records  idemdriver.Admin
	Engine   *idem.Engine
	Sessions *scs.SessionManager
	// Enforcer holds the RBAC policy; its decisions are cached per role,
	// route and method, so a policy changed after NewHandler is not seen.
	Enforcer *casbin.Enforcer
	Static   fs.FS // the contents of static/
	Log      *slog.Logger
	// HSTS sets Strict-Transport-Security (serving https).
	HSTS bool
	// Registry receives the console's metrics; nil makes a new one.
	Registry *prometheus.Registry
	// Mount adds routes outside the console (the demo shop), with no
	// session, CSRF or RBAC of the console.
	Mount func(chi.Router)
	// Trail is the audit trail that /audit shows and exports (an
	// *audit.Trail); nil answers 404 there.
	Trail AuditTrail
	// AuditVerifyEvery is how long /audit shows a verification of the
	// trail's hash chain before a page view starts the next one;
	// DefaultAuditVerifyEvery when <= 0.
	AuditVerifyEvery time.Duration
	// ExternalCheckpoints, when not nil, says when the newest checkpoint
	// of the trail written outside the database was made: /audit shows
	// its age, and warns once it is older than MaxAge (SPEC K24).
	ExternalCheckpoints ExternalCheckpoints
	// Keys applies operator decisions on keys and audits them; nil serves
	// the console read-only.
	Keys KeyDecider
	// TrustedProxies are the reverse proxies whose X-Forwarded-For gives
	// the client address (see ParseTrustedProxies); none: the peer's
	// address is the client's.
	TrustedProxies []netip.Prefix
	// SignInHashes caps the password verifications that run at once;
	// DefaultSignInHashes() when <= 0.
	SignInHashes int
	// SignInHashWait is how long a sign-in waits for one of those slots
	// before it is answered 503 with Retry-After; 2 s when <= 0.
	SignInHashWait time.Duration
	// MetricsToken, when set, is the bearer token /metrics requires
	// (Authorization: Bearer …); empty leaves /metrics public.
	MetricsToken string
	// NoMetricsRoute leaves /metrics off the console's handler: the caller
	// serves MetricsHandler(Registry, …) on a listener of its own.
	NoMetricsRoute bool
	// Operations applies operator decisions on saga operations (retry,
	// confirm, compensate, resolve) and audits them (an *ops.Operations);
	// nil serves the operation pages read-only.
	Operations OperationDecider
	// Sagas reads the saga records for the operation pages and the
	// overview (a sagapgx.Driver or sagasqlite.Driver). It is nil on a
	// database without sagas (MySQL): the operation pages then answer 404
	// with SagasUnavailable, the overview shows it and search finds keys
	// only.
	Sagas            OperationReader
	SagasUnavailable string
	// Bulks runs bulk decisions and approvals (an *ops.Bulks); nil serves
	// neither.
	Bulks BulkService
	// Verify asks the applications' verifiers about keys (an
	// *ops.Verifications, SPEC K19); nil offers no verification.
	Verify KeyVerifier
	// Ready, if set, is asked by /readyz after the database answers: an
	// error (e.g. a schema behind the binary) answers 503 with its text.
	Ready func(context.Context) error
	// SSO, when not nil, signs users in through the company's OpenID
	// provider at /login/sso (Store must then also satisfy ssoUsers, as
	// *store.DB does).
	SSO *SSO
	// NoLocalSignIn turns the local sign-in form off (SSO only).
	NoLocalSignIn bool
	// TraceURL, when set, links a key's trace ID to the tracing UI: a
	// template checked by ParseTraceURL, TracePlaceholder replaced by the
	// ID.
	TraceURL string
	// Incidents reads the snapshots of incident groups and trends (a
	// *store.DB): /incidents, the overview's trends and the incident
	// gauges; nil serves none of them.
	Incidents IncidentStore
	// Webhooks reads the decision webhooks' delivery log (a *store.DB):
	// /webhooks and its link in the navigation; nil (no webhook
	// configured) serves neither.
	Webhooks WebhookLog
	// NowFunc is the clock of the trend and incident windows; time.Now
	// when nil.
	NowFunc func() time.Time
	// CountBudget is the time a key list's count may take before the page
	// shows its rows as a lower bound; 0 means DefaultCountBudget.
	CountBudget time.Duration
	// Tokens authenticates the operator API's bearer tokens (a
	// *store.DB); nil serves no API under /api/v1.
	Tokens APITokens
}

// NewHandler returns the console: every route of the surface is listed
// here. Public routes are marked; everything else requires a signed-in user
// whose role the casbin policy allows for the path and method.
func NewHandler(cfg Config) http.Handler {
	cfg.CountBudget = cmp.Or(cfg.CountBudget, DefaultCountBudget)
	log := cfg.Log
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	reg.MustRegister(newKeyCollector(cfg.Records, log))
	if cfg.Incidents != nil {
		reg.MustRegister(newIncidentCollector(cfg.Incidents, log))
	}
	now := cfg.NowFunc
	if now == nil {
		now = time.Now
	}
	logins := newLoginDeps(cfg.Sessions, cfg.Store, cfg.SignInHashes, cfg.SignInHashWait, log)
	logins.sso, logins.noLocal = cfg.SSO, cfg.NoLocalSignIn && cfg.SSO != nil
	var ssoD *ssoDeps
	if cfg.SSO != nil {
		users, ok := cfg.Store.(ssoUsers)
		if !ok {
			panic("web: Config.SSO needs a Store with the single sign-on users (*store.DB)")
		}
		ssoD = &ssoDeps{cfg: *cfg.SSO, sm: cfg.Sessions, users: users, noLocal: logins.noLocal, log: log}
		if cfg.Trail != nil {
			ssoD.trail, logins.trail = cfg.Trail, cfg.Trail
		}
	}

	az := &authorizer{enf: cfg.Enforcer}
	r := chi.NewRouter()
	r.Use(requestID, middleware.Recoverer, secureHeaders(cfg.HSTS))

	r.Use(clientAddresses(cfg.TrustedProxies), headAsGet, withVerify(cfg.Verify != nil))
	if cfg.Webhooks != nil {
		r.Use(withWebhooks)
	}
	if cfg.TraceURL != "" {
		r.Use(withTraceURL(cfg.TraceURL))
	}

	// Public: health, metrics, static assets.
	r.Method(http.MethodGet, "/healthz", handleHealth())
	r.Method(http.MethodGet, "/readyz", handleReady(cfg.Store, cfg.Ready, log))
	if !cfg.NoMetricsRoute {
		r.Method(http.MethodGet, "/metrics", MetricsHandler(reg, cfg.MetricsToken))
	}
	r.Method(http.MethodGet, "/static/*", staticFiles(cfg.Static, log))
	if ssoD != nil && ssoD.cfg.BackChannelLogout {
		// The provider's, server to server: no session, no cookie; the
		// signed logout token is the authentication.
		r.Method(http.MethodPost, BackChannelLogoutPath, handleBackChannelLogout(*ssoD, newLogoutLimiter()))
	}
	if cfg.Mount != nil {
		cfg.Mount(r)
	}

	if cfg.Tokens != nil {
		apiRoutes(r, cfg, az, log, now)
	}

	// The console: sessions and cross-origin protection on every route.
	r.Group(func(r chi.Router) {
		r.Use(http.NewCrossOriginProtection().Handler, sessionMemo, cfg.Sessions.LoadAndSave)
		r.Method(http.MethodGet, "/login", handleLoginPage(logins))
		r.Method(http.MethodPost, "/login", handleLogin(logins))
		r.Method(http.MethodPost, "/logout", handleLogout(cfg.Sessions, ssoD, log))
		if ssoD != nil {
			r.Method(http.MethodGet, "/login/sso", handleSSOStart(*ssoD))
			r.Method(http.MethodGet, "/login/sso/callback", handleSSOCallback(*ssoD))
		}

		r.Group(func(r chi.Router) {
			r.Use(requireUser(cfg.Sessions, cfg.Store, az, ssoD, log), authorize(az, log, deniedAuditor(cfg.Keys, cfg.Operations, log)))
			if cfg.Bulks != nil {
				r.Use(countWaiting(cfg.Bulks, log))
				bulkRoutes(r, cfg.Bulks, cfg.Engine, log)
			}
			r.Method(http.MethodGet, "/", handleOverview(cfg.Records, cfg.Sagas, cfg.SagasUnavailable, cfg.Incidents, now, log))
			if cfg.Incidents != nil {
				r.Method(http.MethodGet, "/incidents", handleIncidents(cfg.Incidents, now, log))
				opIter, _ := cfg.Sagas.(operationIterator) // nil: no operation items
				r.Method(http.MethodGet, "/incidents/{key}", handleIncidentItems(cfg.Incidents, cfg.Records, opIter, now, log))
			}
			r.Method(http.MethodGet, "/keys", handleKeyList(cfg.Records, cfg.CountBudget, log))
			tombs, _ := cfg.Store.(tombstoneReader)
			r.Method(http.MethodGet, "/search", handleSearch(cfg.Records, cfg.Sagas, tombs, log))
			r.Method(http.MethodPost, "/search", handleSearch(cfg.Records, cfg.Sagas, tombs, log))
			r.Method(http.MethodGet, "/keys/{id}", handleKeyDetail(cfg.Records, cfg.Keys, cfg.Engine, log))
			decisionRoutes(r, cfg, false, log)
			switch {
			case cfg.Sagas == nil:
				unavailable := handleSagasUnavailable(cfg.SagasUnavailable, log)
				r.Method(http.MethodGet, "/operations", unavailable)
				r.Method(http.MethodGet, "/operations/{id}", unavailable)
			case cfg.Operations == nil:
				r.Method(http.MethodGet, "/operations", handleOperationList(cfg.Sagas, log))
				r.Method(http.MethodGet, "/operations/{id}", handleOperationDetail(cfg.Sagas, log))
			default:
				r.Method(http.MethodGet, "/operations", handleOperationList(cfg.Sagas, log))
				r.Method(http.MethodGet, "/operations/{id}", handleOperationDetailDecisions(cfg.Sagas, cfg.Operations, log))
				r.Method(http.MethodGet, "/operations/{id}/redrive", handleRedrivePage(cfg.Sagas, log))
			}
			tokens, _ := cfg.Tokens.(tokenAdmin) // nil: no API, no token section
			r.Method(http.MethodGet, "/users", handleUserList(cfg.Store, tokens, log))
			if tokens != nil {
				r.Method(http.MethodPost, "/tokens", handleTokenCreate(cfg.Store, tokens, cfg.Trail, log))
				r.Method(http.MethodPost, "/tokens/{name}/revoke", handleTokenRevoke(tokens, cfg.Trail, log))
			}
			r.Method(http.MethodPost, "/users/{username}/unlock", handleUserUnlock(cfg.Store, logins, cfg.Trail, log))
			r.Method(http.MethodPost, "/users/{username}/link", handleUserLink(cfg.Store, cfg.Store, tokens, cfg.Trail, log))
			r.Method(http.MethodPost, "/users/{username}/unlink", handleUserUnlink(cfg.Store, cfg.Trail, log))
			chain := newChainStatus(cfg.Trail, cfg.AuditVerifyEvery, log)
			chain.external = cfg.ExternalCheckpoints
			r.Method(http.MethodGet, "/audit", handleAuditList(cfg.Trail, chain, cfg.Store, log))
			r.Method(http.MethodGet, "/audit/export", handleAuditExport(cfg.Trail, log))
			if cfg.Webhooks != nil {
				r.Method(http.MethodGet, "/webhooks", handleWebhooks(cfg.Webhooks, log))
			}
		})
	})
	// A page not found shows the navigation to a signed-in viewer.
	r.NotFound(cfg.Sessions.LoadAndSave(optionalUser(cfg.Sessions, cfg.Store, az, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, log, appError(ENotFound, "There is no page here."))
	}))).ServeHTTP)
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowedMethods(r, req.URL.Path))
		writeError(w, req, log, appError(EMethod, "This method is not allowed here."))
	})
	az.routes = r
	return r
}

// decisionRoutes registers the decisions on keys and operations, once
// for the forms (api false) and once for the API (api true): the same
// handlers behind the same middleware — the principal, the idempotency of
// decisions, the approval gate. A form sends its rendered key as a field
// (required); the API reads its JSON body as the form and honours an
// Idempotency-Key header when one is sent.
func decisionRoutes(r chi.Router, cfg Config, api bool, log *slog.Logger) {
	decided := decisionMiddleware(cfg.Engine)
	post := func(pattern string, h http.Handler, gated ...func(http.Handler) http.Handler) {
		r.With(append(decisionChain(decided, api, pattern, log), gated...)...).Method(http.MethodPost, pattern, h)
	}
	if cfg.Keys != nil {
		for _, action := range []string{"forget", "confirm"} {
			post("/keys/{id}/"+action, handleKeyDecision(action, cfg.Records, cfg.Keys, cfg.Engine, log), gate(cfg.Bulks, ops.BulkKeys, action, log))
		}
		if cfg.Verify != nil {
			post("/keys/{id}/verify", handleKeyVerify(cfg.Records, cfg.Keys, cfg.Verify, cfg.Engine, log))
		}
	}
	if cfg.Sagas == nil || cfg.Operations == nil {
		return
	}
	for _, action := range []ops.OperationAction{ops.OperationRetry, ops.OperationConfirm, ops.OperationCompensate, ops.OperationResolve} {
		post("/operations/{id}/"+string(action), handleOperationDecision(action, cfg.Sagas, cfg.Operations, log), gate(cfg.Bulks, ops.BulkOperations, string(action), log))
	}
	post("/operations/{id}/redrive", handleRedrive(cfg.Sagas, cfg.Operations, log))
}

// decisionChain is the middleware in front of the decision route pattern:
// for a form, its rendered key copied into the Idempotency-Key header and
// required; for the API, the JSON body read as the form and the client's
// Idempotency-Key honoured when sent. Both scoped to the acting user.
func decisionChain(decided *idem.Middleware, api bool, pattern string, log *slog.Logger) []func(http.Handler) http.Handler {
	if api {
		return []func(http.Handler) http.Handler{jsonAsForm(log), withPrincipal, decided.Optional(&idem.RouteOpts{Name: "api POST " + pattern, TTL: time.Hour})}
	}
	return []func(http.Handler) http.Handler{formKeyHeader, withPrincipal, decided.Required(&idem.RouteOpts{Name: "console POST " + pattern, TTL: time.Hour})}
}

// headAsGet answers HEAD as GET: net/http sends the headers and drops the
// body, since the request it serves is still a HEAD. A handler whose GET
// does work beyond rendering (an export) asks [isHead].
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			r = r.Clone(context.WithValue(r.Context(), headKey{}, true))
			r.Method = http.MethodGet
		}
		next.ServeHTTP(w, r)
	})
}

type headKey struct{}

// isHead reports whether r arrived as a HEAD that [headAsGet] turned into
// a GET.
func isHead(r *http.Request) bool {
	v, _ := r.Context().Value(headKey{}).(bool)
	return v
}

// allowedMethods is the Allow header of a 405: the methods routes has for
// path, with HEAD beside GET.
func allowedMethods(routes chi.Routes, path string) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if routes.Match(chi.NewRouteContext(), m, path) {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	return strings.Join(allow, ", ")
}

// MetricsHandler serves reg's metrics in the Prometheus format; with a
// token, only to requests that carry it as "Authorization: Bearer …"
// (else 401).
func MetricsHandler(reg *prometheus.Registry, token string) http.Handler {
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "metrics need the bearer token (UNSTUCK_METRICS_TOKEN)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func handleHealth() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// handleReady answers 200 when the database answers and ready (if not
// nil) returns nil, else 503 with the reason.
func handleReady(db interface{ Ping(context.Context) error }, ready func(context.Context) error, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := db.Ping(ctx); err != nil {
			log.Warn("not ready", "error", err.Error())
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("database unavailable\n"))
			return
		}
		if ready != nil {
			if err := ready(ctx); err != nil {
				log.Warn("not ready", "error", err.Error())
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(err.Error() + "\n"))
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
}

// staticFiles serves the assets; a directory is 404, never a listing.
func staticFiles(files fs.FS, log *slog.Logger) http.Handler {
	fileServer := http.StripPrefix("/static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean(r.URL.Path), "/static")
		name = strings.TrimPrefix(name, "/")
		if info, err := fs.Stat(files, name); name == "" || err != nil || info.IsDir() {
			writeError(w, r, log, appError(ENotFound, "There is no file here."))
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fileServer.ServeHTTP(w, r)
	})
}

// keyCollector exports the key counts of the overview as gauges (SPEC K10).
type keyCollector struct {
	keys  keyReader
	log   *slog.Logger
	count *prometheus.Desc
	age   *prometheus.Desc
	stuck *prometheus.Desc
	up    *prometheus.Desc
}

func newKeyCollector(keys keyReader, log *slog.Logger) *keyCollector {
	return &keyCollector{keys: keys, log: log,
		count: prometheus.NewDesc("unstuck_idempotency_records", `Idempotency records per status; exact="false" marks an estimate from the planner's statistics (PostgreSQL, above 1,000).`, []string{"status", "exact"}, nil),
		age:   prometheus.NewDesc("unstuck_idempotency_oldest_age_seconds", "Age of the least recently updated record per status.", []string{"status"}, nil),
		stuck: prometheus.NewDesc("unstuck_idempotency_stuck_records", `Processing records whose lease has ended; exact="false" marks a lower bound (PostgreSQL, above 10,000).`, []string{"exact"}, nil),
		up:    prometheus.NewDesc("unstuck_idempotency_stats_up", "1 if the last read of the key counts succeeded; 0 if not (the other key gauges are then absent).", nil, nil)}
}

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.age
	ch <- c.stuck
	ch <- c.up
}

func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ov, err := c.keys.KeyOverview(ctx)
	if err != nil {
		c.log.Warn("metrics: key overview failed", "error", err.Error())
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	now := time.Now()
	for _, s := range ov.Counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(s.Count), string(s.Status), strconv.FormatBool(s.Exact))
		age := 0.0
		if !s.Oldest.IsZero() {
			age = now.Sub(s.Oldest).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, string(s.Status))
	}
	ch <- prometheus.MustNewConstMetric(c.stuck, prometheus.GaugeValue, float64(ov.StuckProcessing), strconv.FormatBool(ov.StuckExact))
}
