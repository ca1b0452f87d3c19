package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAPITokens: SPEC K25 — a token is kept as the hash of its secret,
// found by it, named uniquely, revoked once, touched at most once a
// minute; a user token names an existing user and no role, a service
// token a valid role.
func TestAPITokens(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		_, err := b.db.CreateUser(ctx, "alice", RoleSupport, "hash")
		require.NoError(t, err)

		secret, hash := NewTokenSecret()
		require.True(t, LooksLikeToken(secret))
		require.False(t, LooksLikeToken(secret+"x"))
		require.Equal(t, hash, HashTokenSecret(secret))
		exp := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		tok, err := b.db.CreateAPIToken(ctx, APIToken{Name: "deploy-bot", Role: RoleOncall, CreatedBy: "admin", ExpiresAt: exp}, hash)
		require.NoError(t, err)
		require.NotZero(t, tok.ID)
		require.Equal(t, exp, tok.ExpiresAt)
		require.True(t, tok.Usable(time.Now()))
		require.False(t, tok.Usable(exp))

		_, userHash := NewTokenSecret()
		ut, err := b.db.CreateAPIToken(ctx, APIToken{Name: "alice-cli", Owner: "alice", CreatedBy: "admin"}, userHash)
		require.NoError(t, err)
		require.Equal(t, "alice", ut.Owner)
		require.Empty(t, ut.Role)
		require.True(t, ut.ExpiresAt.IsZero())

		_, h := NewTokenSecret()
		_, err = b.db.CreateAPIToken(ctx, APIToken{Name: "deploy-bot", Role: RoleOncall, CreatedBy: "admin"}, h)
		require.ErrorIs(t, err, ErrConflict)
		for _, bad := range []APIToken{{Name: "Bad Name", Role: RoleOncall}, {Name: "x", Role: "root"}, {Name: "x", Owner: "nobody"},
			{Name: "x", Owner: "alice", Role: RoleAdmin}} {
			_, err = b.db.CreateAPIToken(ctx, bad, h)
			require.ErrorIs(t, err, ErrInvalid, "%+v", bad)
		}

		got, ok, err := b.db.APITokenByHash(ctx, hash)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tok, got)
		_, ok, err = b.db.APITokenByHash(ctx, h)
		require.NoError(t, err)
		require.False(t, ok)

		now := time.Now().UTC().Truncate(time.Microsecond)
		require.NoError(t, b.db.TouchAPIToken(ctx, tok.ID, now))
		require.NoError(t, b.db.TouchAPIToken(ctx, tok.ID, now.Add(30*time.Second)))
		got, _, err = b.db.APITokenByHash(ctx, hash)
		require.NoError(t, err)
		require.Equal(t, now, got.LastUsedAt, "a second use within the minute writes nothing")
		require.NoError(t, b.db.TouchAPIToken(ctx, tok.ID, now.Add(2*time.Minute)))
		got, _, err = b.db.APITokenByHash(ctx, hash)
		require.NoError(t, err)
		require.Equal(t, now.Add(2*time.Minute), got.LastUsedAt)

		rev, revoked, err := b.db.RevokeAPIToken(ctx, "deploy-bot", now)
		require.NoError(t, err)
		require.True(t, revoked)
		require.Equal(t, now, rev.RevokedAt)
		require.False(t, rev.Usable(now))
		_, revoked, err = b.db.RevokeAPIToken(ctx, "deploy-bot", now.Add(time.Hour))
		require.NoError(t, err)
		require.False(t, revoked)
		_, _, err = b.db.RevokeAPIToken(ctx, "nope", now)
		require.ErrorIs(t, err, ErrNotFound)

		list, err := b.db.ListAPITokens(ctx)
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, "alice-cli", list[0].Name)
		require.Equal(t, now, list[1].RevokedAt)
	})
}

// TestAPITokenMigrationDown: migration 010's down file drops what its up
// file made, and the up file applies again after it, on every dialect.
func TestAPITokenMigrationDown(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		read := func(dir string) string {
			raw, err := migrations.ReadFile("migration/" + b.db.Dialect() + "/010_api_token." + dir + ".sql")
			require.NoError(t, err)
			return string(raw)
		}
		exec := func(q string) {
			if b.pool != nil {
				_, err := b.pool.Exec(t.Context(), q)
				require.NoError(t, err)
				return
			}
			_, err := b.sqlDB.ExecContext(t.Context(), q)
			require.NoError(t, err)
		}
		exec(read("down"))
		_, err := b.db.ListAPITokens(t.Context())
		require.Error(t, err, "the table is gone")
		exec(read("up"))
		list, err := b.db.ListAPITokens(t.Context())
		require.NoError(t, err)
		require.Empty(t, list)
	})
}
