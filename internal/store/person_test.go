package store

import (
	"database/sql"
	"fmt"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// personIDs reads every account's person_id (0 for NULL), by username.
func personIDs(t *testing.T, b testBundle) map[string]int64 {
	t.Helper()
	const q = `SELECT username, coalesce(person_id, 0) FROM unstuck_console_user`
	out := map[string]int64{}
	if b.pool != nil {
		rows, err := b.pool.Query(t.Context(), q)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var (
				name string
				id   int64
			)
			require.NoError(t, rows.Scan(&name, &id))
			out[name] = id
		}
		require.NoError(t, rows.Err())
		return out
	}
	rows, err := b.sqlDB.QueryContext(t.Context(), q)
	require.NoError(t, err)
	defer func(rows *sql.Rows) { require.NoError(t, rows.Close()) }(rows)
	for rows.Next() {
		var (
			name string
			id   int64
		)
		require.NoError(t, rows.Scan(&name, &id))
		out[name] = id
	}
	require.NoError(t, rows.Err())
	return out
}

func samePerson(t *testing.T, b testBundle, x, y string) bool {
	t.Helper()
	got, err := b.db.SamePerson(t.Context(), x, y)
	require.NoError(t, err)
	back, err := b.db.SamePerson(t.Context(), y, x)
	require.NoError(t, err)
	require.Equal(t, got, back, "SamePerson is symmetric")
	return got
}

// TestSamePersonByAdminLink: SPEC K13 per person — accounts an admin
// linked are one person, transitively; linking merges groups under the
// smallest id, unlinking takes one account out (one left alone is linked
// with none); neither moves updated_at; bad names are refused naming the
// field.
func TestSamePersonByAdminLink(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		support, err := b.db.CreateUser(ctx, "support", RoleSupport, "$argon2id$s")
		require.NoError(t, err)
		sso, _, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-support", Username: "support", Email: "owner@example.com",
			EmailVerified: true, Role: RoleSupport})
		require.NoError(t, err)
		require.Equal(t, "support-2", sso.Username, "the provider's user beside the local one")
		_, err = b.db.CreateUser(ctx, "other", RoleOncall, "$argon2id$o")
		require.NoError(t, err)
		third, err := b.db.CreateUser(ctx, "third", RoleOncall, "$argon2id$t")
		require.NoError(t, err)
		_, err = b.db.CreateUser(ctx, "fourth", RoleAdmin, "$argon2id$f")
		require.NoError(t, err)

		require.True(t, samePerson(t, b, "support", "support"), "one account is one person")
		require.False(t, samePerson(t, b, "support", "support-2"), "not linked yet")

		ch, err := b.db.LinkUsers(ctx, "support-2", "support")
		require.NoError(t, err)
		require.Equal(t, LinkChange{Before: []string{}, After: []string{"support"}}, ch)
		require.True(t, samePerson(t, b, "support", "support-2"), "linked by an admin")
		require.False(t, samePerson(t, b, "support", "other"))
		ids := personIDs(t, b)
		require.Equal(t, support.ID, ids["support"], "the group is named by its smallest id")
		require.Equal(t, support.ID, ids["support-2"])
		require.Zero(t, ids["other"])

		after, ok, err := b.db.UserByUsername(ctx, "support")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, support.UpdatedAt, after.UpdatedAt, "a link does not move updated_at (the sign-in throttle's mark)")

		again, err := b.db.LinkUsers(ctx, "support", "support-2")
		require.NoError(t, err)
		require.Equal(t, LinkChange{Before: []string{"support-2"}, After: []string{"support-2"}}, again, "linked already: no change")

		// Another group, then merged into the first through one link.
		_, err = b.db.LinkUsers(ctx, "fourth", "third")
		require.NoError(t, err)
		require.Equal(t, third.ID, personIDs(t, b)["fourth"])
		require.False(t, samePerson(t, b, "support", "fourth"))
		ch, err = b.db.LinkUsers(ctx, "third", "support-2")
		require.NoError(t, err)
		require.Equal(t, LinkChange{Before: []string{"fourth"}, After: []string{"fourth", "support", "support-2"}}, ch)
		ids = personIDs(t, b)
		for _, name := range []string{"support", "support-2", "third", "fourth"} {
			require.Equal(t, support.ID, ids[name], name)
		}
		require.True(t, samePerson(t, b, "support", "fourth"), "transitively one person")

		people, err := b.db.People(ctx)
		require.NoError(t, err)
		require.Equal(t, []PersonAccount{{Username: "fourth", Linked: true}, {Username: "support-2", Linked: true}, {Username: "third", Linked: true}},
			people.Others("support"))
		require.True(t, people.Linked("support"))
		require.False(t, people.Linked("other"))
		require.Empty(t, people.Others("other"))

		// Unlinking the account that names the group renames the rest.
		ch, err = b.db.UnlinkUser(ctx, "support")
		require.NoError(t, err)
		require.Equal(t, LinkChange{Before: []string{"fourth", "support-2", "third"}, After: []string{}}, ch)
		ids = personIDs(t, b)
		require.Zero(t, ids["support"])
		require.Equal(t, sso.ID, ids["support-2"], "the smallest id left")
		require.Equal(t, sso.ID, ids["third"])
		require.Equal(t, sso.ID, ids["fourth"])
		require.False(t, samePerson(t, b, "support", "support-2"), "unlinked: a local account has no verified email")
		require.True(t, samePerson(t, b, "support-2", "fourth"), "the others stay linked")

		_, err = b.db.UnlinkUser(ctx, "third")
		require.NoError(t, err)
		ch, err = b.db.UnlinkUser(ctx, "fourth")
		require.NoError(t, err)
		require.Equal(t, LinkChange{Before: []string{"support-2"}, After: []string{}}, ch)
		ids = personIDs(t, b)
		require.Zero(t, ids["support-2"], "one account left alone is linked with none")
		require.False(t, samePerson(t, b, "support-2", "fourth"))

		ch, err = b.db.UnlinkUser(ctx, "other")
		require.NoError(t, err)
		require.Equal(t, LinkChange{Before: []string{}, After: []string{}}, ch, "unlinking an account linked with none")

		// Refused: an unknown account, an unknown or empty same_as, an
		// account linked to itself.
		_, err = b.db.LinkUsers(ctx, "nobody", "support")
		require.ErrorIs(t, err, ErrNotFound)
		_, err = b.db.LinkUsers(ctx, "No Body", "support")
		require.ErrorIs(t, err, ErrNotFound)
		_, err = b.db.UnlinkUser(ctx, "nobody")
		require.ErrorIs(t, err, ErrNotFound)
		for _, sameAs := range []string{"nobody", "", "support", "Not A Name"} {
			_, err = b.db.LinkUsers(ctx, "support", sameAs)
			var fe *fielderr.Error
			require.ErrorAs(t, err, &fe, "same_as %q", sameAs)
			require.Equal(t, FieldSameAs, fe.Field)
			require.ErrorIs(t, err, ErrInvalid)
		}
		require.Zero(t, personIDs(t, b)["support"], "nothing linked by a refused link")
	})
}

// TestSamePersonByVerifiedEmail: accounts with the same email, compared
// without case, are one person only when the email is verified; the
// provider's claim is stored at each sign-in, and an account that loses
// it stops being one person with the others.
func TestSamePersonByVerifiedEmail(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		one, _, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-1", Username: "sam", Email: "Sam@Example.com", EmailVerified: true, Role: RoleSupport})
		require.NoError(t, err)
		require.True(t, one.EmailVerified)
		two, _, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-2", Username: "sam.ops", Email: " sam@example.COM", EmailVerified: true, Role: RoleOncall})
		require.NoError(t, err)
		unverified, _, err := b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-3", Username: "sam.x", Email: "sam@example.com", Role: RoleSupport})
		require.NoError(t, err)
		require.False(t, unverified.EmailVerified)
		_, _, err = b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-4", Username: "nomail", EmailVerified: true, Role: RoleSupport})
		require.NoError(t, err)
		_, _, err = b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-5", Username: "nomail2", EmailVerified: true, Role: RoleSupport})
		require.NoError(t, err)
		_, err = b.db.CreateUser(ctx, "sam-local", RoleSupport, "$argon2id$x")
		require.NoError(t, err)

		got, ok, err := b.db.UserBySubject(ctx, "sub-4")
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, got.EmailVerified, "no email: nothing verified")

		require.True(t, samePerson(t, b, one.Username, two.Username), "the same verified email, whatever its case")
		require.False(t, samePerson(t, b, one.Username, unverified.Username), "an unverified email links nothing")
		require.False(t, samePerson(t, b, "nomail", "nomail2"), "two empty emails are not one")
		require.False(t, samePerson(t, b, "sam-local", one.Username), "a local account has no email")
		people, err := b.db.People(ctx)
		require.NoError(t, err)
		require.Equal(t, []PersonAccount{{Username: two.Username, SameEmail: true}}, people.Others(one.Username))
		require.False(t, people.Linked(one.Username), "one person by email, not by a link")

		// A local account joins the person through an admin's link, and
		// so is one person with every account of it.
		_, err = b.db.LinkUsers(ctx, "sam-local", two.Username)
		require.NoError(t, err)
		require.True(t, samePerson(t, b, "sam-local", one.Username), "transitively: linked to an account with the same verified email")
		people, err = b.db.People(ctx)
		require.NoError(t, err)
		require.Equal(t, []PersonAccount{{Username: "sam"}, {Username: "sam.ops", Linked: true}}, people.Others("sam-local"))

		// The provider stops vouching for the email: not one person any
		// more; the next sign-in that vouches again makes them one.
		before := two.UpdatedAt
		two, _, err = b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-2", Email: "sam@example.com", Role: RoleOncall})
		require.NoError(t, err)
		require.False(t, two.EmailVerified)
		require.True(t, two.UpdatedAt.After(before), "a changed claim is a change")
		require.False(t, samePerson(t, b, one.Username, two.Username))
		two, _, err = b.db.UpsertSSOUser(ctx, SSOUser{Subject: "sub-2", Email: "sam@example.com", EmailVerified: true, Role: RoleOncall})
		require.NoError(t, err)
		require.True(t, two.EmailVerified)
		require.True(t, samePerson(t, b, one.Username, two.Username))
	})
}

// TestLinkUsersConcurrently: links made at once by several admins
// (serialized per database) leave one consistent group, named by its
// smallest id.
func TestLinkUsersConcurrently(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		const n = 8
		var first int64
		for i := range n {
			u, err := b.db.CreateUser(ctx, fmt.Sprintf("u%d", i), RoleSupport, "h")
			require.NoError(t, err)
			if i == 0 {
				first = u.ID
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 1; i < n; i++ {
			wg.Go(func() {
				_, err := b.db.LinkUsers(ctx, fmt.Sprintf("u%d", i), fmt.Sprintf("u%d", i-1))
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		ids := personIDs(t, b)
		for i := range n {
			require.Equal(t, first, ids[fmt.Sprintf("u%d", i)], "u%d", i)
		}
		require.True(t, samePerson(t, b, "u0", fmt.Sprintf("u%d", n-1)))
	})
}
