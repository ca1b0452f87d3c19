package store

import (
	"testing"

	"github.com/alexedwards/scs/v2"
	"github.com/stretchr/testify/require"
)

func TestUpsertSSOUser(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		// A local account named like the provider's user: it is not taken
		// over, the oidc user gets a suffix.
		local, err := b.db.CreateUser(ctx, "ada", RoleAdmin, "hash")
		require.NoError(t, err)
		require.Equal(t, SourceLocal, local.Source, "local user's source")

		u, prev, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-1", Username: "Ada@Example.com", Email: "ada@example.com", DisplayName: "Ada L", Role: RoleSupport})
		require.NoError(t, err)
		require.Empty(t, prev, "previous role of a new user")
		require.Equal(t, "ada-2", u.Username, "username")
		require.Equal(t, SourceOIDC, u.Source)
		require.Equal(t, "sub-1", u.Subject)
		require.Equal(t, NoPassword, u.PasswordHash)
		require.Equal(t, "Ada L", u.DisplayName)

		local, ok, err := b.db.UserByUsername(ctx, "ada")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, RoleAdmin, local.Role, "the local account is untouched")
		require.Equal(t, "hash", local.PasswordHash)

		// The next sign-in updates role and claims, keeps the username.
		u2, prev, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-1", Username: "someone-else", Email: "a@x", DisplayName: "Ada", Role: RoleOncall})
		require.NoError(t, err)
		require.Equal(t, RoleSupport, prev, "previous role")
		require.Equal(t, u.ID, u2.ID)
		require.Equal(t, "ada-2", u2.Username)
		require.Equal(t, RoleOncall, u2.Role)
		require.Equal(t, "a@x", u2.Email)

		// A disabled user stays disabled.
		require.NoError(t, b.db.SetUserDisabled(ctx, "ada-2", true))
		u3, _, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-1", Role: RoleAdmin})
		require.NoError(t, err)
		require.True(t, u3.Disabled, "disabled after upsert")

		got, ok, err := b.db.UserBySubject(ctx, "sub-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, u.ID, got.ID)
		_, ok, err = b.db.UserBySubject(ctx, "nobody")
		require.NoError(t, err)
		require.False(t, ok)

		_, _, err = b.db.UpsertSSOUser(ctx, SSOUser{Subject: "", Role: RoleAdmin})
		require.ErrorIs(t, err, ErrInvalid)
		_, _, err = b.db.UpsertSSOUser(ctx, SSOUser{Subject: "s", Role: "root"})
		require.ErrorIs(t, err, ErrInvalid)
	})
}

func TestSSOUsername(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ wish, subject, want string }{
		{"Grace.Hopper@navy.mil", "x", "grace.hopper"},
		{"Zoë Smith", "x", "zo--smith"},
		{"", "248289761001", "sso-248289761001"},
		{"@@@", "", "sso"},
	} {
		got := SSOUsername(c.wish, c.subject)
		require.Equal(t, c.want, got, "SSOUsername(%q, %q)", c.wish, c.subject)
		require.NoError(t, ValidateUsername(got))
	}
}

func TestEndUserSessions(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		u, _, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-9", Username: "olga", Role: RoleOncall})
		require.NoError(t, err)
		other, err := b.db.CreateUser(ctx, "sam", RoleSupport, "hash")
		require.NoError(t, err)
		ss := b.db.SessionStore()
		sm := scs.New()
		sm.Store = ss
		session := func(id int64) string {
			sctx, err := sm.Load(ctx, "")
			require.NoError(t, err)
			sm.Put(sctx, SessionUserKey, id)
			token, _, err := sm.Commit(sctx)
			require.NoError(t, err)
			return token
		}
		a, c, keep := session(u.ID), session(u.ID), session(other.ID)
		n, err := b.db.EndUserSessions(ctx, u.ID)
		require.NoError(t, err)
		require.Equal(t, int64(2), n, "sessions ended")
		for token, want := range map[string]bool{a: false, c: false, keep: true} {
			_, found, err := ss.Find(token)
			require.NoError(t, err)
			require.Equal(t, want, found, "session of the other user kept, the user's gone")
		}
	})
}
