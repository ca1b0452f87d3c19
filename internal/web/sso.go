package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/sso"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

// SSO configures sign-in through the company's OpenID provider (SPEC K16).
type SSO struct {
	// Client speaks to the provider.
	Client *sso.Client
	// Roles maps the provider's groups to console roles: a user in no
	// mapped group is refused.
	Roles sso.RoleMap
	// Label is the sign-in button's text; "Sign in with your company
	// account" when empty.
	Label string
	// ReauthAfter is how long a session signed in through the provider
	// lasts before the user is sent through the provider again, so that
	// their groups, and so their role and their access, are read again;
	// when <= 0, DefaultSSOReauth, or DefaultSSOReauthBackChannel with
	// BackChannelLogout. (Sessions also end at the session manager's idle
	// and absolute timeouts, whichever comes first.)
	ReauthAfter time.Duration
	// PostLogoutURL is where the provider's end-session endpoint sends the
	// browser back to (registered at the provider); empty asks none.
	PostLogoutURL string
	// BackChannelLogout serves OpenID Connect Back-Channel Logout at
	// BackChannelLogoutPath: a logout token the provider POSTs there ends
	// every console session of its user at once (register the URI at the
	// provider).
	BackChannelLogout bool
}

// Defaults of SSO.ReauthAfter: how long a user the provider no longer
// lets in keeps a session here, at most, when the provider cannot tell the
// console (no back-channel logout), and when it can.
const (
	DefaultSSOReauth            = 15 * time.Minute
	DefaultSSOReauthBackChannel = time.Hour
)

// BackChannelLogoutPath is the console's back-channel logout endpoint
// (SSO.BackChannelLogout).
const BackChannelLogoutPath = "/oidc/backchannel-logout"

// Session values of a sign-in through the provider.
const (
	// The sign-in under way: kept server-side, popped (used once) by the
	// callback.
	sessionSSOState    = "sso_state"
	sessionSSONonce    = "sso_nonce"
	sessionSSOVerifier = "sso_verifier"
	// sessionSSOSubject is the provider's subject of the signed-in user;
	// sessionSSOAt the Unix time of that sign-in.
	sessionSSOSubject = "sso_subject"
	sessionSSOAt      = "sso_at"
)

// ssoUsers is what single sign-on needs of the store.
type ssoUsers interface {
	UserBySubject(ctx context.Context, subject string) (store.User, bool, error)
	UpsertSSOUser(ctx context.Context, s store.SSOUser) (store.User, string, error)
	EndUserSessions(ctx context.Context, id int64) (int64, error)
	UserByID(ctx context.Context, id int64) (store.User, bool, error)
}

// auditAppender records entries outside a decision's transaction.
type auditAppender interface {
	Append(ctx context.Context, e audit.Entry) (audit.Entry, error)
}

type ssoDeps struct {
	cfg     SSO
	sm      *scs.SessionManager
	users   ssoUsers
	trail   auditAppender // nil: no trail
	noLocal bool
	log     *slog.Logger
}

func (d ssoDeps) label() string {
	if d.cfg.Label != "" {
		return d.cfg.Label
	}
	return "Sign in with your company account"
}

func (d ssoDeps) reauthAfter() time.Duration {
	if d.cfg.ReauthAfter > 0 {
		return d.cfg.ReauthAfter
	}
	if d.cfg.BackChannelLogout {
		return DefaultSSOReauthBackChannel
	}
	return DefaultSSOReauth
}

// problem renders a sign-in through the provider that failed: a page
// that says what to do, or problem+json with code for API clients.
func (d ssoDeps) problem(w http.ResponseWriter, r *http.Request, status int, code, title, msg string, retry bool) {
	if wantsJSON(r) {
		idem.WriteProblem(w, idem.Problem{Status: status, Code: code, Detail: msg})
		return
	}
	render(w, r, status, pageFor(r, title, ""), views.SSOProblem(views.SSOProblemVM{Title: title, Message: msg, Retry: retry, Local: !d.noLocal}))
}

// handleSSOStart sends the browser to the provider, keeping the state, the
// nonce and the PKCE verifier in the session. A provider that cannot be
// reached gets a page that says so (502) and offers local sign-in.
func handleSSOStart(d ssoDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if d.sm.GetInt64(ctx, sessionUserID) != 0 {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		authURL, p, err := d.cfg.Client.Begin(ctx)
		if err != nil {
			d.log.Warn("sso: provider unavailable", "issuer", d.cfg.Client.Issuer(), "error", err.Error())
			d.problem(w, r, http.StatusBadGateway, "sso_unavailable", "Identity provider unavailable",
				"The identity provider could not be reached. Try again in a moment, or ask your administrator.", true)
			return
		}
		d.sm.Put(ctx, sessionSSOState, p.State)
		d.sm.Put(ctx, sessionSSONonce, p.Nonce)
		d.sm.Put(ctx, sessionSSOVerifier, p.Verifier)
		http.Redirect(w, r, authURL, http.StatusSeeOther)
	})
}

// handleSSOCallback completes a sign-in: the pending state is taken out of
// the session first (used once, whatever happens), the code is exchanged
// and the ID token verified, the groups are mapped to a role, and the user
// is created or updated before the session is renewed for them. Refusals
// of a user the provider vouched for are audited as denied.
func handleSSOCallback(d ssoDeps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		p := sso.Pending{State: d.sm.PopString(ctx, sessionSSOState), Nonce: d.sm.PopString(ctx, sessionSSONonce),
			Verifier: d.sm.PopString(ctx, sessionSSOVerifier)}
		id, err := d.cfg.Client.Finish(ctx, p, r.URL.Query())
		if err != nil {
			d.log.Warn("sso: sign-in failed", "addr", clientAddr(r), "error", err.Error())
			switch {
			case errors.Is(err, sso.ErrUnavailable):
				d.problem(w, r, http.StatusBadGateway, "sso_unavailable", "Identity provider unavailable",
					"The identity provider could not be reached to finish the sign-in. Try again in a moment.", true)
			case errors.Is(err, sso.ErrState):
				d.problem(w, r, http.StatusBadRequest, "sso_state", "Sign-in not recognised",
					"This sign-in was not started here, was already used, or has expired. Start again.", true)
			case errors.Is(err, sso.ErrDenied):
				d.problem(w, r, http.StatusForbidden, "sso_denied", "Sign-in refused by the identity provider",
					"The identity provider did not sign you in.", true)
			default: // ErrCode, ErrIDToken
				d.problem(w, r, http.StatusUnauthorized, "sso_failed", "Sign-in failed",
					"The identity provider's answer could not be verified, so you were not signed in. Start again; if it happens again, tell your administrator.", true)
			}
			return
		}
		known, found, err := d.users.UserBySubject(ctx, id.Subject)
		if err != nil {
			writeError(w, r, d.log, err)
			return
		}
		role, mapped := d.cfg.Roles.Role(id.Groups)
		refuse := func(reason, msg string) {
			actor := "oidc:" + id.Subject
			if found {
				actor = known.Username
				// Whoever the provider no longer lets in loses the
				// sessions they still have, on every device.
				if _, err := d.users.EndUserSessions(ctx, known.ID); err != nil {
					d.log.Error("sso: ending sessions of a refused user", "username", known.Username, "error", err.Error())
				}
			}
			d.audit(r, audit.Entry{Actor: clipName(actor), Role: known.Role, Action: "user.sign_in", TargetKind: "user",
				TargetID: clipName(known.Username), Reason: reason, Outcome: audit.OutcomeDenied,
				Before: ssoState(id, "")})
			d.log.Info("sso: sign-in refused", "subject", id.Subject, "reason", reason, "addr", clientAddr(r))
			d.problem(w, r, http.StatusForbidden, "sso_no_access", "No access to this console", msg, false)
		}
		switch {
		case !mapped:
			refuse("no group of the user maps to a console role",
				"Your account at the identity provider is in none of the groups that give access to this console. Ask your administrator for access.")
			return
		case found && known.Disabled:
			refuse("the console account is disabled", "Your console account is disabled. Ask your administrator.")
			return
		}
		u, previous, err := d.users.UpsertSSOUser(ctx, store.SSOUser{Subject: id.Subject, Username: firstNonEmpty(id.PreferredUsername, id.Email, id.Name),
			Email: id.Email, EmailVerified: id.EmailVerified, DisplayName: id.Name, Role: role})
		if err != nil {
			writeError(w, r, d.log, err)
			return
		}
		if u.Disabled { // disabled between the read and the write
			found, known = true, u
			refuse("the console account is disabled", "Your console account is disabled. Ask your administrator.")
			return
		}
		if previous != "" && previous != role {
			if !d.audit(r, audit.Entry{Actor: u.Username, Role: role, Action: "user.role_change", TargetKind: "user", TargetID: u.Username,
				Reason: "from the identity provider's groups at sign-in", Outcome: audit.OutcomeApplied,
				Before: ssoState(id, previous), After: ssoState(id, role)}) {
				writeError(w, r, d.log, errors.New("sso: the role change could not be audited"))
				return
			}
		}
		if err := startSession(ctx, d.sm); err != nil {
			writeError(w, r, d.log, err)
			return
		}
		if !d.audit(r, audit.Entry{Actor: u.Username, Role: role, Action: "user.sign_in", TargetKind: "user", TargetID: u.Username,
			Reason: "through the identity provider", Outcome: audit.OutcomeApplied, After: ssoState(id, role)}) {
			writeError(w, r, d.log, errors.New("sso: the sign-in could not be audited"))
			return
		}
		d.sm.Put(ctx, sessionUserID, u.ID)
		d.sm.Put(ctx, "role", u.Role)
		d.sm.Put(ctx, sessionSSOSubject, id.Subject)
		d.sm.Put(ctx, sessionSSOAt, time.Now().Unix())
		d.log.Info("signed in", "username", u.Username, "role", u.Role, "source", store.SourceOIDC, "addr", clientAddr(r))
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
}

// audit appends e with r's request fields; it reports false (and logs)
// when the trail refused it. No trail: true.
func (d ssoDeps) audit(r *http.Request, e audit.Entry) bool {
	return appendAudit(r, d.trail, d.log, e)
}

// appendAudit appends e to trail with r's request fields; it reports false
// (and logs) when the trail refused it. No trail: true.
func appendAudit(r *http.Request, trail auditAppender, log *slog.Logger, e audit.Entry) bool {
	if trail == nil {
		return true
	}
	e.RequestID, e.ClientAddr, e.UserAgent = middleware.GetReqID(r.Context()), clientAddr(r), r.UserAgent()
	if _, err := trail.Append(r.Context(), e); err != nil {
		log.Error("audit append failed", "action", e.Action, "error", err.Error())
		return false
	}
	return true
}

// startSession makes the request's session a fresh one for a sign-in:
// every value of the session before (a previous user, the markers of a
// sign-in through the provider, a pending one) is dropped, and the token
// renewed, so that nothing of an earlier identity survives into the new
// one. The caller then puts the new user's values.
func startSession(ctx context.Context, sm *scs.SessionManager) error {
	if err := sm.Clear(ctx); err != nil {
		return err
	}
	return sm.RenewToken(ctx)
}

// userState is an audit entry's state of the console user u: for a user
// of the provider their subject (as ssoState), for a local account its
// source and role only.
func userState(u store.User) json.RawMessage {
	if u.Source == store.SourceOIDC {
		return ssoState(sso.Identity{Subject: u.Subject}, u.Role)
	}
	b, err := json.Marshal(struct {
		Source string `json:"source"`
		Role   string `json:"role,omitempty"`
	}{store.SourceLocal, u.Role})
	if err != nil {
		return nil
	}
	return b
}

// ssoState is an audit entry's state of a user the provider signed in:
// their subject and groups (never a token), and the role when there is one.
func ssoState(id sso.Identity, role string) json.RawMessage {
	groups := id.Groups
	if len(groups) > 50 {
		groups = groups[:50]
	}
	s := struct {
		Source  string   `json:"source"`
		Subject string   `json:"subject"`
		Groups  []string `json:"groups"`
		Role    string   `json:"role,omitempty"`
	}{store.SourceOIDC, id.Subject, groups, role}
	if s.Groups == nil {
		s.Groups = []string{}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	return b
}

// clipName keeps an audit name within the trail's bound.
func clipName(s string) string {
	const maxName = 200
	if len(s) > maxName {
		return s[:maxName]
	}
	return s
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// ssoExpired reports whether the session was signed in through the
// provider longer than d.reauthAfter() ago.
func (d *ssoDeps) expired(ctx context.Context) bool {
	if d == nil {
		return false
	}
	at := d.sm.GetInt64(ctx, sessionSSOAt)
	return at != 0 && time.Since(time.Unix(at, 0)) > d.reauthAfter()
}

// handleLogout ends the session. With single sign-on on, every sign-out
// is audited, naming the user as the console knows them (a local account:
// no subject of the provider); the page that confirms the end of a
// session signed in through the provider links to the provider's
// end-session endpoint where the provider offers one.
func handleLogout(sm *scs.SessionManager, sd *ssoDeps, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		id := sm.GetInt64(ctx, sessionUserID)
		viaProvider := sm.GetString(ctx, sessionSSOSubject) != ""
		if err := sm.Destroy(ctx); err != nil {
			writeError(w, r, log, err)
			return
		}
		if sd == nil {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if id != 0 {
			if u, ok, err := sd.users.UserByID(ctx, id); err == nil && ok {
				sd.audit(r, audit.Entry{Actor: u.Username, Role: u.Role, Action: "user.sign_out", TargetKind: "user", TargetID: u.Username,
					Outcome: audit.OutcomeApplied, Before: userState(u)})
			} else if err != nil {
				log.Error("sign-out: reading the user", "error", err.Error())
			}
		}
		if !viaProvider {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		vm := views.SignedOutVM{}
		// A provider that does not answer soon costs the link, not the
		// sign-out.
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if u, ok := sd.cfg.Client.EndSessionURL(dctx, sd.cfg.PostLogoutURL); ok {
			vm.EndSessionURL = u
		}
		render(w, r, http.StatusOK, pageFor(r, "Signed out", ""), views.SignedOut(vm))
	})
}
