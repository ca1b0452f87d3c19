package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/sso"
)

// Bounds of the back-channel logout endpoint: a logout token is a signed
// JWT of a few hundred bytes, and each refused one may make the console
// fetch the provider's keys again, so refusals are counted per client
// address (20 in 15 minutes, then 429) to spare the provider.
const (
	maxLogoutBody        = 16 << 10
	logoutRefusals       = 20
	logoutRefusalsWindow = 15 * time.Minute
)

// BackChannelActor is the audit actor of the sessions the identity
// provider ended through back-channel logout ("system:…": no console user
// can be named so).
const BackChannelActor = "system:oidc-provider"

// newLogoutLimiter counts the refused logout tokens per client address.
func newLogoutLimiter() *auth.Limiter { return auth.NewLimiter(logoutRefusals, logoutRefusalsWindow) }

// handleBackChannelLogout is OpenID Connect Back-Channel Logout 1.0's
// endpoint (section 2.5–2.8): the provider POSTs a form with a
// logout_token, server to server, with no session and no cookie. A token
// that verifies (sso.Client.VerifyLogoutToken) ends every console session
// of the user with its subject, on every device, audited as
// user.backchannel_logout by BackChannelActor; the answer is 200 with no
// body, also when the console has no such user (nothing to end). A token
// that does not verify, a replayed one and one without a subject are
// answered 400 with a problem+json code (logout_token_invalid,
// logout_token_replayed, logout_token_no_subject) and logged with the
// reason, never the token; they are not audited, as no verified request
// comes with them. Every answer has Cache-Control: no-store.
func handleBackChannelLogout(d ssoDeps, refused *auth.Limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		w.Header().Set("Cache-Control", "no-store")
		addr := clientAddr(r)
		problem := func(status int, code, detail string) {
			idem.WriteProblem(w, idem.Problem{Status: status, Code: code, Detail: detail})
		}
		// internal answers 500, which the provider may retry: tok's jti
		// is forgotten so that the retry is not refused as a replay.
		internal := func(tok sso.LogoutToken, err error) {
			d.cfg.Client.ForgetLogoutToken(tok)
			d.log.Error("sso: back-channel logout failed", "subject", tok.Subject, "error", err.Error())
			problem(http.StatusInternalServerError, EInternal, "The console could not end the sessions. Send the logout token again.")
		}
		if ok, wait := refused.Reserve(addr); !ok {
			w.Header().Set("Retry-After", itoaDur(wait))
			problem(http.StatusTooManyRequests, "logout_throttled", "Too many refused logout tokens from this address. Try again in "+wait.Round(time.Second).String()+".")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLogoutBody)
		if err := r.ParseForm(); err != nil {
			d.log.Warn("sso: back-channel logout: unreadable request", "addr", addr, "error", err.Error())
			problem(http.StatusBadRequest, "logout_token_invalid", "Send the logout token as the form field logout_token (application/x-www-form-urlencoded, at most 16 KiB).")
			return
		}
		tok, err := d.cfg.Client.VerifyLogoutToken(ctx, r.PostForm.Get("logout_token"))
		if err != nil {
			d.log.Warn("sso: back-channel logout refused", "addr", addr, "error", err.Error())
			switch {
			case errors.Is(err, sso.ErrUnavailable):
				refused.Release(addr) // the console's trouble, not the caller's
				w.Header().Set("Retry-After", "30")
				problem(http.StatusServiceUnavailable, "sso_unavailable", "The identity provider's keys could not be read to verify the logout token. Send it again later.")
			case errors.Is(err, sso.ErrLogoutReplayed):
				problem(http.StatusBadRequest, "logout_token_replayed", "This logout token (its jti) was accepted before.")
			case errors.Is(err, sso.ErrLogoutNoSubject):
				problem(http.StatusBadRequest, "logout_token_no_subject", "The logout token names a session (sid) but no user (sub): the console ends the sessions of a subject. Configure the provider to send sub.")
			default:
				problem(http.StatusBadRequest, "logout_token_invalid", "The logout token does not verify: it must be signed by the provider, for this client, with the back-channel logout event, a jti, a recent iat and no nonce.")
			}
			return
		}
		refused.Release(addr)
		u, found, err := d.users.UserBySubject(ctx, tok.Subject)
		if err != nil {
			internal(tok, err)
			return
		}
		if !found {
			d.log.Info("sso: back-channel logout of a subject with no console user", "subject", tok.Subject)
			w.WriteHeader(http.StatusOK)
			return
		}
		n, err := d.users.EndUserSessions(ctx, u.ID)
		if err != nil {
			internal(tok, err)
			return
		}
		st, _ := json.Marshal(struct {
			Source        string `json:"source"`
			Subject       string `json:"subject"`
			ProviderSID   string `json:"provider_sid,omitempty"`
			SessionsEnded int64  `json:"sessions_ended"`
		}{u.Source, tok.Subject, tok.SessionID, n})
		if !d.audit(r, audit.Entry{Actor: BackChannelActor, Action: "user.backchannel_logout", TargetKind: "user", TargetID: u.Username,
			Reason: "the identity provider ended the user's sessions (back-channel logout)", Outcome: audit.OutcomeApplied, After: st}) {
			// The sessions ended; the provider's retry records it.
			internal(tok, errors.New("the back-channel logout could not be audited"))
			return
		}
		d.log.Info("sso: back-channel logout", "username", u.Username, "sessions_ended", n)
		w.WriteHeader(http.StatusOK)
	})
}
