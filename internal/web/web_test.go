package web_test

import (
	"cmp"
	"context"
	"database/sql"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

var roles = []string{store.RoleAuditor, store.RoleSupport, store.RoleOncall, store.RoleAdmin}

type bundle struct {
	srv *httptest.Server
	db  *store.DB
	// records reads the engine's records, as the console does.
	records idemdriver.Admin
	engine  *idem.Engine
	router  chi.Routes
	sqlDB   *sql.DB
	trail   *audit.Trail
	keyID   int64  // a completed HTTP record with a stored response
	opID    string // an operation under review, with steps and events
	sagas   *sagasqlite.Driver
	// bulks runs the bulk requests (no River: tests call Run).
	bulks *ops.Bulks[*sql.Tx]
	// logs holds what the handler logged.
	logs *lockedBuffer
}

// newBulks returns the bulk decisions on c's store, key and operation
// decisions (operations listed with opList, if not nil), with persons and
// cfg, as cmd/console makes them but without River (tests call Run).
func newBulks(t *testing.T, c *web.Config, opList ops.OperationIterator, persons ops.Persons, cfg ops.BulkConfig) *ops.Bulks[*sql.Tx] {
	t.Helper()
	p := ops.BulkParts[*sql.Tx]{Store: c.Store.(*store.DB), Keys: c.Keys.(*ops.Keys[*sql.Tx]), KeyList: c.Records,
		Operations: c.Operations.(*ops.Operations[*sql.Tx]), Persons: persons}
	if opList != nil {
		p.OperationList = opList
	}
	bulks, err := ops.NewBulks(p, cfg)
	require.NoError(t, err)
	return bulks
}

func password(role string) string { return "password-for-" + role }

// testAuditKeys is the audit key of the test console's trail.
var testAuditKeys = func() *audit.Keyring {
	k, err := audit.NewKeyring([]byte("web-test-audit-key-0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	return k
}()

// setup builds the console over a fresh SQLite database; opts adjust its
// configuration.
func setup(t *testing.T, opts ...func(*web.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	sqlDB, err := idemsqlite.Open(filepath.Join(t.TempDir(), "console.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sqlDB.Close() })
	idemStore := idemsqlite.New(sqlDB)
	require.NoError(t, idemStore.Migrate(ctx))
	sagaDriver := sagasqlite.New(sqlDB)
	require.NoError(t, sagaDriver.Migrate(ctx))
	db := store.NewSQLite(sqlDB)
	require.NoError(t, db.Migrate(ctx))
	trail := audit.NewSQLite(sqlDB, audit.WithKeys(testAuditKeys))
	require.NoError(t, trail.Migrate(ctx))
	for _, role := range roles {
		hash, err := auth.Hash(password(role))
		require.NoError(t, err)
		_, err = db.CreateUser(ctx, role, role, hash)
		require.NoError(t, err)
	}
	engine, err := idem.New(idemStore, idem.Config{Secret: []byte("web-test-secret-0123456789abcdefgh")})
	require.NoError(t, err)

	// One record with a stored HTTP response, made through the middleware.
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	require.NoError(t, err)
	shop := httptest.NewServer(mw.Required(&idem.RouteOpts{Name: "POST /orders"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ord_secret_body"}`)
	})))
	defer shop.Close()
	req, _ := http.NewRequest(http.MethodPost, shop.URL, strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", `"web-test-key-000001"`)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	page, err := idemStore.ListKeys(ctx, idemdriver.KeyFilter{})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)

	opID := seedOperation(t, sagaDriver)
	logs := &lockedBuffer{}

	enf, err := web.NewEnforcer(unstuck.RBACModel, unstuck.RBACPolicy)
	require.NoError(t, err)
	static, err := fs.Sub(unstuck.Static, "static")
	require.NoError(t, err)
	cfg := web.Config{Store: db, Records: idemStore, Sagas: sagaDriver, Engine: engine, Enforcer: enf, Static: static, Trail: trail, Incidents: db, Webhooks: db,
		Sessions: web.NewSessionManager(db.SessionStore(), 30*time.Minute, 12*time.Hour, false),
		Log:      slog.New(slog.NewTextHandler(logs, nil)),
		// Counts here are of a few records, on a machine busy with parallel
		// tests under -race: a budget they never meet by being scheduled
		// late. TestKeyListCountStopsAtItsBudget sets the default.
		CountBudget: 10 * time.Second}
	// The decisions as cmd/console makes them on SQLite: one handle whose
	// transactions begin IMMEDIATE, for keys and operations alike.
	imm := immediateHandle(t, sqlDB)
	dec, err := ops.SQLite(imm, trail, db, nil)
	require.NoError(t, err)
	keys, err := ops.NewKeys(dec, engine, idemStore, idemStore)
	require.NoError(t, err)
	cfg.Keys = keys
	cfg.Operations = operationDecisions(t, imm, dec)
	bulks := newBulks(t, &cfg, sagaDriver, nil, ops.BulkConfig{})
	cfg.Bulks = bulks
	for _, o := range opts {
		o(&cfg)
	}
	h := web.NewHandler(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{logs: logs, srv: srv, db: db, records: idemStore, engine: engine, router: h.(chi.Routes), sqlDB: sqlDB, trail: trail, keyID: page.Records[0].ID, opID: opID, sagas: sagaDriver,
		bulks: bulks}
}

// seedOperation records, through the saga driver as the engine does, an
// operation under review: its account step completed, its workspace step
// uncertain after two attempts, with the events that led there.
func seedOperation(t *testing.T, d *sagasqlite.Driver) string {
	t.Helper()
	return seedOperationID(t, d, "op-web-0001")
}

// seedOperationID is seedOperation with the operation's ID.
func seedOperationID(t *testing.T, d *sagasqlite.Driver, id string) string {
	t.Helper()
	at := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Microsecond)
	later := at.Add(3 * time.Minute)
	op := sagadriver.Operation{ID: id, Type: "signup", Status: sagadriver.StatusReviewRequired, CorrelationID: "order-77",
		Input: []byte(`{"email":"ann@example.com"}`), CurrentStep: "workspace", LastError: "workspace: timeout after 5s",
		ReviewReason: "uncertain_unresolved", Version: 7, CreatedAt: at, UpdatedAt: later,
		Steps: []sagadriver.StepRecord{
			{Name: "account", Seq: 0, Kind: sagadriver.Compensatable, System: "local", Status: sagadriver.StepCompleted, Key: id + "/account",
				ExternalID: "acct-881", Result: []byte(`{"external_id":"acct-881"}`), Attempts: 1, MaxAttempts: 5, Compensable: true,
				CompSeq: 2, CompKey: id + "/account/compensate", CompMaxAttempts: 5, Generation: 1, StartedAt: &at, FinishedAt: &at, UpdatedAt: at},
			{Name: "workspace", Seq: 1, Kind: sagadriver.Pivot, System: "workspace-provider", Status: sagadriver.StepUncertain, Key: id + "/workspace",
				Attempts: 2, MaxAttempts: 5, Verifications: 3, LastError: "workspace: timeout after 5s", LastErrorClass: sagadriver.ClassUncertain,
				Compensable: true, CompSeq: 1, CompKey: id + "/workspace/compensate", CompMaxAttempts: 5, Generation: 4, StartedAt: &later, UpdatedAt: later},
		}}
	events := []sagadriver.Event{
		{OperationID: id, Action: "started", To: "pending", Actor: "app", At: at},
		{OperationID: id, Step: "workspace", Action: "step_uncertain", From: "running", To: "uncertain", Actor: "worker",
			Message: "workspace: timeout after 5s", Attempt: 2, At: later},
		{OperationID: id, Action: "status", From: "running", To: "review_required", Actor: "worker",
			Message: "verification could not resolve step workspace", At: later},
	}
	require.NoError(t, d.WithinTx(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
		if err := d.InsertOperation(ctx, tx, &op); err != nil {
			return err
		}
		return d.InsertEvents(ctx, tx, events)
	}))
	return id
}

// client returns an HTTP client with its own cookie jar that does not
// follow redirects.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func signIn(t *testing.T, b *bundle, role string) *http.Client {
	t.Helper()
	c := client(t)
	resp, _ := do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {role}, "password": {password(role)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "sign-in as %s", role)
	require.Equal(t, "/", resp.Header.Get("Location"))
	return c
}

// TestAuthorizationMatrix walks every route of the console and checks each
// role, and an anonymous caller, against the expected answer (SPEC K6).
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := "/keys/" + itoa(b.keyID)
	seeded, _, err := b.bulks.Request(context.Background(), ops.Actor{Username: store.RoleOncall, Role: store.RoleOncall},
		ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", All: true, IncludeMayHaveHappened: true}, "seeded request for the route tests", 1)
	require.NoError(t, err)
	_, err = (&incident.Snapshotter{Keys: b.records, Ops: b.sagas, Store: b.db}).Once(context.Background())
	require.NoError(t, err)
	groups, err := b.db.IncidentGroups(context.Background(), 0)
	require.NoError(t, err)
	require.NotEmpty(t, groups, "the operation under review is an incident")
	type cell struct {
		method, path, pattern string
		allowed               []string // roles that get 200 (or okStatus)
		public                bool     // no sign-in needed
	}
	// A preview freezes its set and answers 303 to it (SPEC K22).
	okStatus := map[string]int{"/keys/bulk": http.StatusSeeOther, "/operations/bulk": http.StatusSeeOther}
	matrix := []cell{
		{"GET", "/", "/", roles, false},
		{"GET", "/keys", "/keys", roles, false},
		{"GET", "/incidents", "/incidents", roles, false},
		{"GET", "/incidents/" + groups[0].Key, "/incidents/{key}", roles, false},
		{"GET", key, "/keys/{id}", roles, false},
		{"GET", "/operations", "/operations", roles, false},
		{"GET", "/operations/" + b.opID, "/operations/{id}", roles, false},
		{"GET", "/operations/" + b.opID + "/redrive", "/operations/{id}/redrive", []string{store.RoleOncall, store.RoleAdmin}, false},
		{"GET", "/users", "/users", []string{store.RoleAdmin}, false},
		{"GET", "/webhooks", "/webhooks", []string{store.RoleOncall, store.RoleAdmin}, false},
		{"GET", "/search", "/search", roles, false},
		{"GET", "/audit", "/audit", []string{store.RoleAuditor, store.RoleAdmin}, false},
		{"GET", "/audit/export?format=csv", "/audit/export", []string{store.RoleAuditor, store.RoleAdmin}, false},
		{"GET", "/audit/export?format=jsonl", "/audit/export", []string{store.RoleAuditor, store.RoleAdmin}, false},
		{"GET", "/keys/bulk?action=forget&all=1&include_may_have_happened=1", "/keys/bulk", []string{store.RoleSupport, store.RoleOncall, store.RoleAdmin}, false},
		{"GET", "/operations/bulk?action=resolve&resolve_to=failed&status=review_required", "/operations/bulk", []string{store.RoleOncall, store.RoleAdmin}, false},
		{"GET", "/bulk/" + itoa(seeded.ID), "/bulk/{id}", roles, false},
		{"GET", "/bulk/" + itoa(seeded.ID) + "/items", "/bulk/{id}/items", roles, false},
		{"GET", "/bulk/" + itoa(seeded.ID) + "/drift", "/bulk/{id}/drift", roles, false},
		{"GET", "/approvals", "/approvals", roles, false},
		{"GET", "/login", "/login", nil, true},
		{"GET", "/healthz", "/healthz", nil, true},
		{"GET", "/readyz", "/readyz", nil, true},
		{"GET", "/metrics", "/metrics", nil, true},
		{"GET", "/static/app.css", "/static/*", nil, true},
	}
	special := map[string]bool{"POST /login": true, "POST /logout": true, // tested in TestSignIn
		"POST /keys/{id}/forget": true, "POST /keys/{id}/confirm": true, // tested in TestKeyDecisions
		"POST /operations/{id}/retry": true, "POST /operations/{id}/confirm": true, // tested in TestOperationDecisions
		"POST /operations/{id}/compensate": true, "POST /operations/{id}/resolve": true,
		"POST /operations/{id}/redrive": true,                                 // tested in TestOperationRedrive
		"POST /users/{username}/unlock": true,                                 // tested in TestAdminUnlock
		"POST /bulk/{id}/submit":        true, "POST /bulk/{id}/cancel": true, // tested in TestBulk…
		"POST /bulk/{id}/pause": true, "POST /bulk/{id}/resume": true,
		"POST /approvals/{id}/approve": true, "POST /approvals/{id}/reject": true,
		"POST /search": true} // tested in TestSearch
	// tested in TestFourEyesPerPerson…
	special["POST /users/{username}/link"], special["POST /users/{username}/unlink"] = true, true
	covered := map[string]bool{}
	for _, c := range matrix {
		covered[c.method+" "+c.pattern] = true
	}
	require.NoError(t, chi.Walk(b.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !covered[method+" "+route] && !special[method+" "+route] {
			t.Errorf("route %s %s has no row in the authorization matrix", method, route)
		}
		return nil
	}))

	clients := map[string]*http.Client{}
	for _, role := range roles {
		clients[role] = signIn(t, b, role)
	}
	for _, c := range matrix {
		if c.public {
			resp, _ := do(t, client(t), c.method, b.srv.URL+c.path, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "anonymous %s %s", c.method, c.path)
			continue
		}
		resp, _ := do(t, client(t), c.method, b.srv.URL+c.path, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "anonymous %s %s", c.method, c.path)
		require.Equal(t, "/login", resp.Header.Get("Location"))
		for _, role := range roles {
			want := http.StatusForbidden
			for _, a := range c.allowed {
				if a == role {
					want = cmp.Or(okStatus[c.pattern], http.StatusOK)
				}
			}
			resp, body := do(t, clients[role], c.method, b.srv.URL+c.path, nil)
			require.Equal(t, want, resp.StatusCode, "%s %s %s", role, c.method, c.path)
			if want == http.StatusForbidden {
				require.Contains(t, body, "Forbidden")
			}
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestSecurityHeadersAndNonce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleOncall)
	resp, body := do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	csp := resp.Header.Get("Content-Security-Policy")
	for _, d := range []string{"object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'", "form-action 'self'"} {
		require.Contains(t, csp, d)
	}
	nonce := regexp.MustCompile(`'nonce-([^']+)'`).FindStringSubmatch(csp)
	require.Len(t, nonce, 2)
	require.Contains(t, body, `nonce="`+nonce[1]+`"`, "script tags carry the response's nonce")
	require.NotContains(t, body, "<script>", "no inline script")
	require.NotRegexp(t, `\son[a-z]+=`, body, "no inline event handlers")
	require.NotContains(t, body, "style=", "no inline style attributes")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.NotEmpty(t, resp.Header.Get("Referrer-Policy"))
	require.Contains(t, body, `"allowEval":false`)
	require.Contains(t, body, `"selfRequestsOnly":true`)

	_, other := do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.NotContains(t, other, `nonce="`+nonce[1]+`"`, "a fresh nonce per response")
}

func TestSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	resp, _ := do(t, c, http.MethodGet, b.srv.URL+"/login", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, body := do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"oncall"}, "password": {"wrong-password"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, "The username or password is wrong")
	resp, body = do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"nobody"}, "password": {"wrong-password"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "an unknown user gets the same answer")
	require.Contains(t, body, "The username or password is wrong")

	// The session token is renewed at sign-in and destroyed at sign-out.
	u, _ := url.Parse(b.srv.URL)
	before := c.Jar.Cookies(u)
	resp, _ = do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"oncall"}, "password": {password("oncall")}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "unstuck_session" {
			cookie = ck
		}
	}
	require.NotNil(t, cookie, "session cookie set")
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, cookie.SameSite)
	for _, old := range before {
		require.NotEqual(t, old.Value, cookie.Value, "token renewed at sign-in")
	}
	resp, _ = do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	stolen := client(t)
	stolen.Jar.SetCookies(u, []*http.Cookie{{Name: "unstuck_session", Value: cookie.Value}})
	resp, _ = do(t, c, http.MethodPost, b.srv.URL+"/logout", url.Values{})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = do(t, stolen, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the old token is dead after sign-out")
}

func TestDisabledAccountLosesItsSessionAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleSupport)
	require.NoError(t, b.db.SetUserDisabled(context.Background(), "support", true))
	resp, _ := do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("Location"))
	resp, _ = do(t, client(t), http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"support"}, "password": {password("support")}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestRoleChangeTakesEffectAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := signIn(t, b, store.RoleAdmin)
	resp, _ := do(t, c, http.MethodGet, b.srv.URL+"/users", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, b.db.SetUserRole(context.Background(), "admin", store.RoleAuditor))
	resp, _ = do(t, c, http.MethodGet, b.srv.URL+"/users", nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

func TestSignInIsRateLimited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	for range 5 {
		resp, _ := do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"auditor"}, "password": {"not-the-password"}})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	resp, body := do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"auditor"}, "password": {password("auditor")}})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "even the right password is refused while limited")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Contains(t, body, "Too many failed sign-ins")
}

func TestCrossOriginPostsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, site := range []string{"cross-site", "same-site"} {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/login", strings.NewReader("username=oncall&password="+password("oncall")))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := client(t).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "Sec-Fetch-Site: %s", site)
	}
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/logout", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := client(t).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "foreign Origin")
}

func TestKeyPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	oncall := signIn(t, b, store.RoleOncall)
	support := signIn(t, b, store.RoleSupport)
	key := b.srv.URL + "/keys/" + itoa(b.keyID)

	_, body := do(t, oncall, http.MethodGet, key, nil)
	require.Contains(t, body, "ord_secret_body", "oncall sees the stored response")
	reads, _, err := b.trail.List(context.Background(), audit.Filter{Action: "key.view_response"})
	require.NoError(t, err)
	require.Len(t, reads, 1, "viewing a stored response is audited as a read")
	require.Equal(t, "oncall", reads[0].Actor)
	require.Equal(t, audit.OutcomeRead, reads[0].Outcome)
	_, body = do(t, support, http.MethodGet, key, nil)
	require.NotContains(t, body, "ord_secret_body", "support does not")
	require.Contains(t, body, "may not see stored responses")

	resp, _ := do(t, oncall, http.MethodGet, b.srv.URL+"/keys/999999", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = do(t, oncall, http.MethodGet, b.srv.URL+"/keys/not-a-number", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp, body = do(t, oncall, http.MethodGet, b.srv.URL+"/keys?state=completed", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "POST /orders")
	_, body = do(t, oncall, http.MethodGet, b.srv.URL+"/keys?state=pending", nil)
	require.Contains(t, body, "No records match")

	resp, body = do(t, oncall, http.MethodGet, b.srv.URL+"/keys?state=bogus", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, `Unknown state &#34;bogus&#34;`)
	resp, body = do(t, oncall, http.MethodGet, b.srv.URL+"/keys?from=yesterday", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, `data-field="from"`)
	resp, _ = do(t, oncall, http.MethodGet, b.srv.URL+"/keys?after=garbage", nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// A raw key is not taken in a URL (history, logs): the search box
	// takes it by POST (TestSearch).
	q := url.Values{"key": {"web-test-key-000001"}, "scope": {"ip:127.0.0.1"}, "operation": {"POST /orders"}}
	resp, body = do(t, oncall, http.MethodGet, b.srv.URL+"/keys?"+q.Encode(), nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "use Search")
	require.NotContains(t, body, "/keys/"+itoa(b.keyID))

	// HTMX gets only the results fragment.
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/keys?state=completed", nil)
	require.NoError(t, err)
	req.Header.Set("HX-Request", "true")
	resp, err = oncall.Do(req)
	require.NoError(t, err)
	frag, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.NotContains(t, string(frag), "<html")
	require.Contains(t, string(frag), `id="results"`)
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := do(t, client(t), http.MethodGet, b.srv.URL+"/readyz", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ready\n", body)
	resp, body = do(t, client(t), http.MethodGet, b.srv.URL+"/metrics", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `unstuck_idempotency_records{exact="true",status="completed"} 1`)
}

func TestSessionCookieAndTimeouts(t *testing.T) {
	t.Parallel()
	secure := web.NewSessionManager(nil, 30*time.Minute, 12*time.Hour, true)
	require.Equal(t, "__Host-unstuck_session", secure.Cookie.Name, "SPEC K5: the __Host- prefix when served over https")
	require.True(t, secure.Cookie.Secure)
	require.True(t, secure.Cookie.HttpOnly)
	require.Equal(t, "/", secure.Cookie.Path)
	require.Empty(t, secure.Cookie.Domain, "__Host- cookies carry no Domain")
	require.Equal(t, http.SameSiteLaxMode, secure.Cookie.SameSite)
	require.Equal(t, 30*time.Minute, secure.IdleTimeout)
	require.Equal(t, 12*time.Hour, secure.Lifetime)

	// An idle session ends on the server: the next request signs in again.
	b := setup(t, func(c *web.Config) {
		c.Sessions = web.NewSessionManager(c.Store.(*store.DB).SessionStore(), time.Second, 12*time.Hour, false)
	})
	c := signIn(t, b, store.RoleAuditor)
	resp, _ := do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	time.Sleep(1500 * time.Millisecond)
	resp, _ = do(t, c, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "idle timeout")
	require.Equal(t, "/login", resp.Header.Get("Location"))
}

func TestSignInIsRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	// 30 failures from one address across many usernames (5 each at most).
	for i := range 30 {
		resp, _ := do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"nobody" + strconv.Itoa(i)}, "password": {"wrong-password"}})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "attempt %d", i)
	}
	resp, _ := do(t, c, http.MethodPost, b.srv.URL+"/login", url.Values{"username": {"oncall"}, "password": {password("oncall")}})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the address is limited whatever the account")
}
