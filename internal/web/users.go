package web

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

type userLister interface {
	ListUsers(ctx context.Context) ([]store.User, error)
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
		render(w, r, http.StatusOK, page, views.Users(page, rows))
	})
}
