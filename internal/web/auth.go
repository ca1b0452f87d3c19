package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/casbin/casbin/v2"
	casbinmodel "github.com/casbin/casbin/v2/model"
	stringadapter "github.com/casbin/casbin/v2/persist/string-adapter"
	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

// sessionUserID is the session value of the signed-in user's id; the
// session store keeps it beside the session to read the user with it.
const sessionUserID = store.SessionUserKey

// userFinder is what the auth middleware needs of the store.
type userFinder interface {
	UserByUsername(ctx context.Context, username string) (store.User, bool, error)
	UserByID(ctx context.Context, id int64) (store.User, bool, error)
}

type viewerKey struct{}

func viewerFrom(ctx context.Context) *views.Viewer {
	v, _ := ctx.Value(viewerKey{}).(*views.Viewer)
	return v
}

// NewEnforcer builds the casbin enforcer from a model and a policy text.
func NewEnforcer(modelText, policyText string) (*casbin.Enforcer, error) {
	m, err := casbinmodel.NewModelFromString(modelText)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(policyText, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return casbin.NewEnforcer(m, stringadapter.NewAdapter(strings.Join(lines, "\n")))
}

// NewSessionManager returns the console's session manager over st, with
// idle and absolute timeouts, and a __Host- cookie when secure (SPEC K5).
func NewSessionManager(st scs.Store, idle, absolute time.Duration, secure bool) *scs.SessionManager {
	sm := scs.New()
	sm.Store = st
	sm.Codec = store.ConsoleSessionCodec
	sm.IdleTimeout = idle
	sm.Lifetime = absolute
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Path = "/"
	sm.Cookie.Secure = secure
	sm.Cookie.Name = "unstuck_session"
	if secure {
		sm.Cookie.Name = "__Host-unstuck_session"
	}
	return sm
}

// sessionMemo lets the session store skip the commit scs makes on every
// request when only the idle deadline would move, and by little
// (store.WithSessionMemo).
func sessionMemo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(store.WithSessionMemo(r.Context())))
	})
}

// optionalUser puts the signed-in user, if any, in the request's context
// as requireUser does, and sends everyone on: pages anyone may reach (a
// page not found) show a signed-in viewer their navigation.
func optionalUser(sm *scs.SessionManager, users userFinder, az *authorizer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if id := sm.GetInt64(ctx, sessionUserID); id != 0 {
			u, ok, known := store.SessionUser(ctx, id)
			if !known {
				var err error
				if u, ok, err = users.UserByID(ctx, id); err != nil {
					ok = false
				}
			}
			if ok && !u.Disabled {
				role := u.Role
				v := &views.Viewer{Username: u.Username, Role: role, Can: func(obj, act string) bool {
					return az.can(role, obj, act)
				}}
				r = r.WithContext(context.WithValue(ctx, viewerKey{}, v))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// requireUser loads the signed-in user on every request — so a disabled
// account or a changed role takes effect at once — and sends anyone else to
// the sign-in page.
//
// A session signed in through the identity provider longer ago than
// SSO.ReauthAfter ends, and the user goes through the provider again: their
// role is evaluated again from their groups at least that often.
func requireUser(sm *scs.SessionManager, users userFinder, az *authorizer, sd *ssoDeps, log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			id := sm.GetInt64(ctx, sessionUserID)
			var u store.User
			ok := false
			if id != 0 {
				// Read with the session in the same statement, or else now:
				// either way at this request.
				var known bool
				if u, ok, known = store.SessionUser(ctx, id); !known {
					var err error
					u, ok, err = users.UserByID(ctx, id)
					if err != nil {
						writeError(w, r, log, err)
						return
					}
				}
			}
			reauth := ok && sd.expired(ctx)
			if !ok || u.Disabled || reauth {
				if id != 0 {
					if err := sm.Destroy(ctx); err != nil {
						log.WarnContext(ctx, "web: the session of a missing or disabled user was not destroyed", "error", err.Error())
					}
				}
				if r.Method == http.MethodGet && !wantsJSON(r) {
					to := "/login"
					if reauth && !u.Disabled {
						to = "/login/sso"
					}
					http.Redirect(w, r, to, http.StatusSeeOther)
					return
				}
				writeError(w, r, log, appError(EUnauthorized, "Sign in first."))
				return
			}
			role := u.Role
			v := &views.Viewer{Username: u.Username, Role: role, Can: func(obj, act string) bool {
				return az.can(role, obj, act)
			}}
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, viewerKey{}, v)))
		})
	}
}

// authorize checks every request against the casbin policy: the role may
// do this method on this path, or the answer is 403 (deny by default).
// denied is told of every refusal (to audit it).
func authorize(az *authorizer, log *slog.Logger, denied func(*http.Request)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v := viewerFrom(r.Context())
			if v == nil || !allowedRoute(az, v.Role, r) {
				denied(r)
				writeError(w, r, log, appError(EForbidden, "Your role may not do this."))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// allowedRoute asks az about the route the request matched (its chi
// pattern), or about its path when the route context has no pattern.
func allowedRoute(az *authorizer, role string, r *http.Request) bool {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			return az.canPattern(role, p, r.Method)
		}
	}
	return az.can(role, r.URL.EscapedPath(), r.Method)
}

// Bounds of the sign-in form: checked before any work, any
// database query or any log line.
const (
	// maxLoginBody is the largest sign-in form read: a username of 64
	// bytes and a password of 256, url-encoded, with room to spare.
	maxLoginBody = 4 << 10
	// maxLoginUsername is the longest username (store.ValidateUsername).
	maxLoginUsername = 64
)

// Sign-in throttling defaults (SPEC K8): per account and client address,
// 5 free failures, then waits of 30 s doubling up to 15 min, forgotten
// after an hour without failures; per client address, 30 failures in 15
// minutes whatever the accounts.
const (
	signInFree        = 5
	signInBackoffBase = 30 * time.Second
	signInBackoffMax  = 15 * time.Minute
	signInForget      = time.Hour
	signInPerAddress  = 30
	signInAddrWindow  = 15 * time.Minute
	// signInHashWait is how long a sign-in waits for a hashing slot
	// before it is answered 503 with Retry-After.
	signInHashWait = 2 * time.Second
)

// DefaultSignInHashes is how many sign-ins verify a password at once when
// Config.SignInHashes is not set: each takes 19 MiB and a core.
func DefaultSignInHashes() int { return max(2, min(4, runtime.GOMAXPROCS(0))) }

type loginDeps struct {
	sm        *scs.SessionManager
	users     userFinder
	byAccount *auth.Backoff // per account and client address
	byAddress *auth.Limiter // per client address
	hashing   *auth.Gate
	log       *slog.Logger
	// sso, when not nil, is offered on the sign-in page; noLocal turns
	// the local form off.
	sso     *SSO
	noLocal bool
	// trail, when not nil, audits local sign-ins (set with single sign-on
	// on, where local accounts are the break-glass way in).
	trail auditAppender
}

// loginForm is the sign-in page's model with the options d offers.
func (d loginDeps) loginForm(username, msg string) views.LoginForm {
	f := views.LoginForm{Username: username, Error: msg, NoLocal: d.noLocal}
	if d.sso != nil {
		f.SSO = &views.SSOOption{Label: ssoDeps{cfg: *d.sso}.label()}
	}
	return f
}

func newLoginDeps(sm *scs.SessionManager, users userFinder, hashes int, hashWait time.Duration, log *slog.Logger) loginDeps {
	if hashes <= 0 {
		hashes = DefaultSignInHashes()
	}
	if hashWait <= 0 {
		hashWait = signInHashWait
	}
	return loginDeps{sm: sm, users: users, log: log,
		byAccount: auth.NewBackoff(signInFree, signInBackoffBase, signInBackoffMax, signInForget),
		byAddress: auth.NewLimiter(signInPerAddress, signInAddrWindow),
		hashing:   auth.NewGate(hashes, hashWait)}
}

// unlock forgets the failed sign-ins of username from every address.
func (d loginDeps) unlock(username string) { d.byAccount.ResetPrefix(username + "\x00") }

func handleLoginPage(d loginDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.sm.GetInt64(r.Context(), sessionUserID) != 0 {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		render(w, r, http.StatusOK, pageFor(r, "Sign in", ""), views.Login(d.loginForm("", "")))
	})
}

// errBadCredentials is the one answer for a wrong user, a wrong password
// and a disabled account, so sign-in reveals nothing about accounts.
const badCredentials = "The username or password is wrong, or the account is disabled."

// handleLogin signs a user in. In order: the form is bounded (413 for a
// body over maxLoginBody, 400 for a username that cannot exist or a
// password over the maximum), the attempt is counted against the account
// from this address and against the address (429 with Retry-After when
// either must wait), a hashing slot is taken (503 with Retry-After when
// none comes free in time: the attempt is not counted), and only then is
// the password verified. Usernames are case-insensitive.
func handleLogin(d loginDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var username string
		fail := func(status int, msg string) {
			render(w, r, status, pageFor(r, "Sign in", ""), views.Login(d.loginForm(username, msg)))
		}
		if d.noLocal {
			fail(http.StatusForbidden, "Local sign-in is turned off: sign in with the identity provider.")
			return
		}
		if r.ContentLength > maxLoginBody {
			fail(http.StatusRequestEntityTooLarge, "The form is too large.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
		if err := r.ParseForm(); err != nil {
			if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
				fail(http.StatusRequestEntityTooLarge, "The form is too large.")
				return
			}
			fail(http.StatusBadRequest, "The form could not be read.")
			return
		}
		name := strings.ToLower(strings.TrimSpace(r.PostForm.Get("username")))
		password := r.PostForm.Get("password")
		switch {
		case name == "" || password == "":
			fail(http.StatusBadRequest, "Enter a username and a password.")
			return
		case len(name) > maxLoginUsername || store.ValidateUsername(name) != nil:
			fail(http.StatusBadRequest, "Field \"username\": a username is 1 to 64 characters of a-z, 0-9, '.', '_' and '-'.")
			return
		case len(password) > auth.MaxPasswordLength:
			username = name
			fail(http.StatusBadRequest, "Field \"password\": a password has at most "+strconv.Itoa(auth.MaxPasswordLength)+" characters.")
			return
		}
		username = name
		addr := clientAddr(r)
		u, ok, err := d.users.UserByUsername(ctx, username)
		if err != nil {
			writeError(w, r, d.log, err)
			return
		}
		tooMany := func(wait time.Duration) {
			w.Header().Set("Retry-After", itoaDur(wait))
			fail(http.StatusTooManyRequests, "Too many failed sign-ins. Try again in "+wait.Round(time.Second).String()+".")
		}
		// Count first, verify after: parallel attempts cannot all pass.
		// An administrator's change to the account (an unlock) after the
		// first failure clears the account's throttle.
		acctKey := username + "\x00" + addr
		var cleared time.Time
		if ok {
			cleared = u.UpdatedAt
		}
		if okAcct, wait := d.byAccount.Reserve(acctKey, cleared); !okAcct {
			tooMany(wait)
			return
		}
		if okAddr, wait := d.byAddress.Reserve(addr); !okAddr {
			d.byAccount.Release(acctKey)
			tooMany(wait)
			return
		}
		leave, entered := d.hashing.Enter(ctx)
		if !entered {
			d.byAccount.Release(acctKey)
			d.byAddress.Release(addr)
			w.Header().Set("Retry-After", "1")
			fail(http.StatusServiceUnavailable, "Too many sign-ins at once. Try again in a moment.")
			return
		}
		verr := errors.New("no such user")
		if ok {
			verr = auth.Verify(u.PasswordHash, password)
		} else {
			_ = auth.Verify(dummyHash(), password) // same work for unknown users
		}
		leave()
		if verr != nil || u.Disabled || u.Source == store.SourceOIDC {
			d.log.Info("sign-in failed", "username", auth.LogName(username), "addr", addr)
			fail(http.StatusUnauthorized, badCredentials)
			return
		}
		d.byAccount.Reset(acctKey)
		d.byAddress.Release(addr)
		if err := startSession(ctx, d.sm); err != nil {
			writeError(w, r, d.log, err)
			return
		}
		if !appendAudit(r, d.trail, d.log, audit.Entry{Actor: u.Username, Role: u.Role, Action: "user.sign_in", TargetKind: "user",
			TargetID: u.Username, Reason: "with a local account", Outcome: audit.OutcomeApplied, After: userState(u)}) {
			writeError(w, r, d.log, errors.New("web: the sign-in could not be audited"))
			return
		}
		d.sm.Put(ctx, sessionUserID, u.ID)
		d.sm.Put(ctx, "role", u.Role)
		d.log.Info("signed in", "username", u.Username, "role", u.Role, "addr", addr)
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
}

// dummyHash is verified for unknown usernames so that their sign-in takes
// as long as a real one.
var dummyHash = sync.OnceValue(func() string {
	h, _ := auth.Hash("unstuck-dummy-password") // an unreadable hash also costs nothing to reject
	return h
})

func itoaDur(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
}

// withPrincipal makes the signed-in user the idempotency scope of the
// console's own decisions.
func withPrincipal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := viewerFrom(r.Context()); v != nil {
			r = r.WithContext(idem.ContextWithPrincipal(r.Context(), "console", v.Username))
		}
		next.ServeHTTP(w, r)
	})
}

// decisionMiddleware is the idempotency middleware of the console's
// decision forms: keyed by the form, scoped to the user.
func decisionMiddleware(engine *idem.Engine) *idem.Middleware {
	m, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{ScopeResolvers: []idem.ScopeResolver{idem.PrincipalScope},
		DiscardClientErrors: true}) // a refused decision is not replayed: its form is shown again
	if err != nil {
		panic(err) // a constant, valid configuration
	}
	return m
}
