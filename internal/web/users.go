package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

type userLister interface {
	ListUsers(ctx context.Context) ([]store.User, error)
	// People says which accounts are one person (SPEC K13), for the
	// list's "Person" column.
	People(ctx context.Context) (store.People, error)
}

// userUnlocker clears an account's sign-in throttle (store.DB.UnlockUser).
type userUnlocker interface {
	UnlockUser(ctx context.Context, username string) error
}

// userLinker links accounts of one person, or unlinks one
// (store.DB.LinkUsers, store.DB.UnlinkUser).
type userLinker interface {
	LinkUsers(ctx context.Context, username, sameAs string) (store.LinkChange, error)
	UnlinkUser(ctx context.Context, username string) (store.LinkChange, error)
}

// maxUserForm bounds the body of a user form (a username, in a field or
// two), in bytes; more answers 413.
const maxUserForm = 4 << 10

func handleUserList(users userLister, tokens tokenAdmin, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		notice := ""
		q := r.URL.Query()
		switch {
		case store.ValidateUsername(q.Get("unlocked")) == nil:
			notice = "Sign-in of " + q.Get("unlocked") + " unlocked and recorded in the audit trail."
		case store.ValidateUsername(q.Get("linked")) == nil:
			notice = q.Get("linked") + " is linked as one person with the accounts shown; recorded in the audit trail."
		case store.ValidateUsername(q.Get("unlinked")) == nil:
			notice = q.Get("unlinked") + " is no longer linked with other accounts; recorded in the audit trail."
		}
		renderUsers(w, r, http.StatusOK, users, tokens, log, views.UsersVM{Notice: notice}, views.TokensVM{})
	})
}

// renderUsers renders the user list with status; vm brings the notice or
// the error of a refused form, form the state of the API token section
// (shown when tokens is not nil).
func renderUsers(w http.ResponseWriter, r *http.Request, status int, users userLister, tokens tokenAdmin, log *slog.Logger, vm views.UsersVM, form views.TokensVM) {
	list, err := users.ListUsers(r.Context())
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	people, err := users.People(r.Context())
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	vm.Rows = make([]views.UserRow, 0, len(list))
	for _, u := range list {
		row := views.UserRow{Username: u.Username, Role: u.Role, Disabled: u.Disabled, CreatedAt: u.CreatedAt, Linked: people.Linked(u.Username)}
		for _, a := range people.Others(u.Username) {
			row.Person = append(row.Person, views.PersonAccount{Username: a.Username, Linked: a.Linked, SameEmail: a.SameEmail})
		}
		vm.Rows = append(vm.Rows, row)
	}
	if tokens != nil {
		if vm.Tokens, err = tokensVM(r.Context(), tokens, time.Now(), form); err != nil {
			writeError(w, r, log, err)
			return
		}
	}
	page := pageFor(r, "Users", "users")
	page.URL = "/users"
	render(w, r, status, page, views.Users(page, vm))
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

// handleUserLink links the account named in the path with the account
// named by the form's same_as, as one person (SPEC K13: none of a person's
// accounts approves another's request), and audits it as a user change
// (user.link, with the accounts it was linked with before and after).
// same_as naming no user, or the account itself, is refused: 400 with the
// field named (problem+json, or the list with the message next to the
// field).
func handleUserLink(users userLister, links userLinker, tokens tokenAdmin, trail AuditTrail, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "username")
		if store.ValidateUsername(name) != nil {
			writeError(w, r, log, appError(ENotFound, "There is no user with this name."))
			return
		}
		if !parseUserForm(w, r, log) {
			return
		}
		sameAs := strings.TrimSpace(r.PostForm.Get(store.FieldSameAs))
		ch, err := links.LinkUsers(r.Context(), name, sameAs)
		var fe *fielderr.Error
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, r, log, appError(ENotFound, "There is no user with this name."))
			return
		case errors.As(err, &fe):
			msg := strings.ToUpper(fe.Reason[:1]) + fe.Reason[1:] + "."
			if wantsJSON(r) {
				writeError(w, r, log, &AppError{Code: EInvalid, Message: msg, Field: fe.Field})
				return
			}
			renderUsers(w, r, http.StatusBadRequest, users, tokens, log, views.UsersVM{Error: msg, ErrorUser: name, FieldErr: fe.Field, SameAs: sameAs}, views.TokensVM{})
			return
		case err != nil:
			writeError(w, r, log, err)
			return
		}
		if !auditLink(w, r, trail, log, "user.link", name, "linked as one person with "+sameAs+" by an admin", ch) {
			return
		}
		log.Info("accounts linked as one person", "username", name, "same_as", sameAs, "by", viewerFrom(r.Context()).Username, "addr", clientAddr(r))
		http.Redirect(w, r, "/users?linked="+url.QueryEscape(name), http.StatusSeeOther)
	})
}

// handleUserUnlink takes the account named in the path out of the
// accounts an admin linked it with, and audits it (user.unlink). It stays
// one person with the accounts that share its verified e-mail.
func handleUserUnlink(links userLinker, trail AuditTrail, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := chi.URLParam(r, "username")
		if store.ValidateUsername(name) != nil {
			writeError(w, r, log, appError(ENotFound, "There is no user with this name."))
			return
		}
		if !parseUserForm(w, r, log) {
			return
		}
		ch, err := links.UnlinkUser(r.Context(), name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeError(w, r, log, appError(ENotFound, "There is no user with this name."))
			return
		case err != nil:
			writeError(w, r, log, err)
			return
		}
		if !auditLink(w, r, trail, log, "user.unlink", name, "unlinked from the accounts of its person by an admin", ch) {
			return
		}
		log.Info("account unlinked from its person", "username", name, "by", viewerFrom(r.Context()).Username, "addr", clientAddr(r))
		http.Redirect(w, r, "/users?unlinked="+url.QueryEscape(name), http.StatusSeeOther)
	})
}

// parseUserForm reads a user form of at most maxUserForm bytes; it
// answers 413 or 400 and returns false when it cannot.
func parseUserForm(w http.ResponseWriter, r *http.Request, log *slog.Logger) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxUserForm)
	if err := r.ParseForm(); err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeError(w, r, log, appError(ETooLarge, "The form is too large."))
			return false
		}
		writeError(w, r, log, appError(EInvalid, "The form could not be read."))
		return false
	}
	return true
}

// auditLink appends the entry of a link or unlink of username, with the
// accounts it was linked with before and after; it answers 500 and
// returns false when the trail refused it. No trail: true.
func auditLink(w http.ResponseWriter, r *http.Request, trail AuditTrail, log *slog.Logger, action, username, reason string, ch store.LinkChange) bool {
	if trail == nil {
		return true
	}
	state := func(linked []string) json.RawMessage {
		if linked == nil {
			linked = []string{}
		}
		b, _ := json.Marshal(struct {
			LinkedWith []string `json:"linked_with"`
		}{linked})
		return b
	}
	v := viewerFrom(r.Context())
	if _, err := trail.Append(r.Context(), audit.Entry{Actor: v.Username, Role: v.Role, Action: action,
		TargetKind: "user", TargetID: username, Reason: reason, Before: state(ch.Before), After: state(ch.After), Outcome: audit.OutcomeApplied,
		RequestID: middleware.GetReqID(r.Context()), ClientAddr: clientAddr(r), UserAgent: r.UserAgent()}); err != nil {
		writeError(w, r, log, fmt.Errorf("audit %s: %w", action, err))
		return false
	}
	return true
}
