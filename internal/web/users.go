package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/unstuckhq/unstuck/internal/audit"

	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

type userLister interface {
	ListUsers(ctx context.Context) ([]store.User, error)
}

// userUnlocker clears an account's sign-in throttle (store.DB.UnlockUser).
type userUnlocker interface {
	UnlockUser(ctx context.Context, username string) error
}

func handleUserList(users userLister, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := users.ListUsers(r.Context())
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		rows := make([]views.UserRow, 0, len(list))
		for _, u := range list {
			rows = append(rows, views.UserRow{Username: u.Username, Role: u.Role, Disabled: u.Disabled, CreatedAt: u.CreatedAt})
		}
		page := pageFor(r, "Users", "users")
		notice := ""
		if name := r.URL.Query().Get("unlocked"); name != "" && store.ValidateUsername(name) == nil {
			notice = "Sign-in of " + name + " unlocked and recorded in the audit trail."
		}
		render(w, r, http.StatusOK, page, views.Users(page, rows, notice))
	})
}

// handleUserUnlock clears the sign-in throttle of the account named in the
// path, in every console process (store.DB.UnlockUser) and at once in this
// one, and audits it as a user change. It does not enable a disabled
// account.
func handleUserUnlock(users userUnlocker, logins loginDeps, trail AuditTrail, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "username")
		if store.ValidateUsername(name) != nil {
			writeError(w, r, log, appError(ENotFound, "There is no user with this name."))
			return
		}
		err := users.UnlockUser(r.Context(), name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, r, log, appError(ENotFound, "There is no user with this name."))
			return
		case err != nil:
			writeError(w, r, log, err)
			return
		}
		logins.unlock(name)
		if trail != nil {
			v := viewerFrom(r.Context())
			if _, err := trail.Append(r.Context(), audit.Entry{Actor: v.Username, Role: v.Role, Action: "user.unlock",
				TargetKind: "user", TargetID: name, Reason: "sign-in throttle cleared", Outcome: audit.OutcomeApplied,
				RequestID: middleware.GetReqID(r.Context()), ClientAddr: clientAddr(r), UserAgent: r.UserAgent()}); err != nil {
				writeError(w, r, log, fmt.Errorf("audit user unlock: %w", err))
				return
			}
		}
		log.Info("sign-in unlocked", "username", name, "by", viewerFrom(r.Context()).Username, "addr", clientAddr(r))
		http.Redirect(w, r, "/users?unlocked="+url.QueryEscape(name), http.StatusSeeOther)
	})
}
