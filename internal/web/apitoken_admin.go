package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

// tokenAdmin is what the admin's token section needs of the store (a
// *store.DB).
type tokenAdmin interface {
	CreateAPIToken(ctx context.Context, t store.APIToken, hash []byte) (store.APIToken, error)
	RevokeAPIToken(ctx context.Context, name string, now time.Time) (store.APIToken, bool, error)
	ListAPITokens(ctx context.Context) ([]store.APIToken, error)
}

// tokenLifetimes are the create form's choices of expiry.
var tokenLifetimes = map[string]time.Duration{"720h": 720 * time.Hour, "2160h": 2160 * time.Hour, "8760h": 8760 * time.Hour, "never": 0}

// tokensVM is the token section of the user list, with vm's form state.
func tokensVM(ctx context.Context, tokens tokenAdmin, now time.Time, vm views.TokensVM) (*views.TokensVM, error) {
	list, err := tokens.ListAPITokens(ctx)
	if err != nil {
		return nil, err
	}
	vm.Roles = store.Roles
	for _, t := range list {
		row := views.TokenRow{ID: t.ID, Name: t.Name, ActsAs: t.Owner, Role: t.Role, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt,
			ExpiresAt: t.ExpiresAt, LastUsed: t.LastUsedAt, State: "active"}
		if row.ActsAs == "" {
			row.ActsAs = "token:" + t.Name
		}
		switch {
		case !t.RevokedAt.IsZero():
			row.State = "revoked"
		case !t.Usable(now):
			row.State = "expired"
		}
		vm.Rows = append(vm.Rows, row)
	}
	return &vm, nil
}

// handleTokenCreate makes an API token from the admin's form, audits it
// (token.create, by name and ID) and answers the user list with the token
// shown once; a refused form is the list with the field named.
func handleTokenCreate(users userLister, tokens tokenAdmin, trail AuditTrail, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !parseUserForm(w, r, log) {
			return
		}
		f := r.PostForm
		form := views.TokensVM{Name: strings.TrimSpace(f.Get("name")), User: strings.TrimSpace(f.Get("user")), Role: f.Get("role"), Expires: f.Get("expires")}
		life, ok := tokenLifetimes[form.Expires]
		refuse := func(field, msg string) {
			if wantsJSON(r) {
				writeError(w, r, log, &AppError{Code: EInvalid, Message: msg, Field: field})
				return
			}
			form.Error, form.FieldErr = msg, field
			renderUsers(w, r, http.StatusBadRequest, users, tokens, log, views.UsersVM{}, form)
		}
		if !ok {
			refuse("expires", "Choose when the token expires.")
			return
		}
		v := viewerFrom(r.Context())
		t := store.APIToken{Name: form.Name, Owner: form.User, Role: form.Role, CreatedBy: v.Username}
		if life > 0 {
			t.ExpiresAt = time.Now().Add(life)
		}
		secret, hash := store.NewTokenSecret()
		t, err := tokens.CreateAPIToken(r.Context(), t, hash)
		var fe *fielderr.Error
		switch {
		case errors.Is(err, store.ErrConflict):
			refuse("name", "A token named "+form.Name+" exists; revoke it or choose another name.")
			return
		case errors.As(err, &fe):
			refuse(fe.Field, strings.ToUpper(fe.Reason[:1])+fe.Reason[1:]+".")
			return
		case err != nil:
			writeError(w, r, log, err)
			return
		}
		if !auditToken(w, r, trail, log, ActionTokenCreate, t, "created on the console's user page") {
			if _, _, rerr := tokens.RevokeAPIToken(context.WithoutCancel(r.Context()), t.Name, time.Now()); rerr != nil {
				log.Error("a token whose creation was not audited is not revoked", "token", t.Name, "error", rerr.Error())
			}
			return
		}
		log.Info("API token created", "token", t.Name, "token_id", t.ID, "by", v.Username, "addr", clientAddr(r))
		renderUsers(w, r, http.StatusCreated, users, tokens, log, views.UsersVM{}, views.TokensVM{Secret: secret, SecretName: t.Name})
	})
}

// handleTokenRevoke revokes the API token named in the path and audits it
// (token.revoke); revoking a revoked token changes and records nothing.
func handleTokenRevoke(tokens tokenAdmin, trail AuditTrail, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "name")
		t, revoked, err := tokens.RevokeAPIToken(r.Context(), name, time.Now())
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, r, log, appError(ENotFound, "There is no API token with this name."))
			return
		case err != nil:
			writeError(w, r, log, err)
			return
		}
		if revoked && !auditToken(w, r, trail, log, ActionTokenRevoke, t, "revoked on the console's user page") {
			return
		}
		log.Info("API token revoked", "token", t.Name, "token_id", t.ID, "by", viewerFrom(r.Context()).Username, "addr", clientAddr(r))
		http.Redirect(w, r, "/users#api-tokens", http.StatusSeeOther)
	})
}

// auditToken appends the entry of a token's creation or revocation by
// the viewer; it answers 500 and returns false when the trail refused it.
// No trail: true.
func auditToken(w http.ResponseWriter, r *http.Request, trail AuditTrail, log *slog.Logger, action string, t store.APIToken, reason string) bool {
	if trail == nil {
		return true
	}
	v := viewerFrom(r.Context())
	e := TokenAuditEntry(action, t, v.Username, v.Role, reason)
	e.RequestID, e.ClientAddr, e.UserAgent = middleware.GetReqID(r.Context()), clientAddr(r), r.UserAgent()
	if _, err := trail.Append(r.Context(), e); err != nil {
		writeError(w, r, log, fmt.Errorf("audit %s: %w", action, err))
		return false
	}
	return true
}
