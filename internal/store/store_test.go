package store

import (
	"context"
	"database/sql"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

// testBundle is one database migrated by the engine's driver and the
// console, as "console migrate" does.
type testBundle struct {
	db    *DB
	pool  *pgxpool.Pool // PostgreSQL only
	sqlDB *sql.DB       // SQLite and MySQL
}

// setupPostgres migrates a schema of its own: the driver first, then the
// console.
func setupPostgres(t *testing.T) testBundle {
	t.Helper()
	pool := pgtest.Schema(t)
	records := idempgx.New(pool)
	require.NoError(t, records.Migrate(t.Context()))
	db := NewPostgres(pool)
	require.NoError(t, db.Migrate(t.Context()))
	return testBundle{db: db, pool: pool}
}

// setupSQLite migrates a database file of its own.
func setupSQLite(t *testing.T) testBundle {
	t.Helper()
	sqlDB, err := idemsqlite.Open(filepath.Join(t.TempDir(), "console.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sqlDB.Close()) })
	records := idemsqlite.New(sqlDB)
	require.NoError(t, records.Migrate(t.Context()))
	db := NewSQLite(sqlDB)
	require.NoError(t, db.Migrate(t.Context()))
	return testBundle{db: db, sqlDB: sqlDB}
}

// setupMySQL migrates a MySQL database of its own (unstucktest/mysqltest).
func setupMySQL(t *testing.T) testBundle {
	t.Helper()
	sqlDB, err := idemmysql.Open(mysqltest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sqlDB.Close()) })
	require.NoError(t, idemmysql.New(sqlDB).Migrate(t.Context()))
	db := NewMySQL(sqlDB)
	require.NoError(t, db.Migrate(t.Context()))
	return testBundle{db: db, sqlDB: sqlDB}
}

// eachDialect runs fn as a parallel subtest per dialect, on fresh state.
func eachDialect(t *testing.T, fn func(t *testing.T, b testBundle)) {
	t.Helper()
	for _, d := range []struct {
		name  string
		setup func(*testing.T) testBundle
	}{
		{DialectPostgres, setupPostgres},
		{DialectSQLite, setupSQLite},
		{DialectMySQL, setupMySQL},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, d.setup(t))
		})
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	// The console's line touches no table of the engine: it migrates a
	// database where no driver has run.
	t.Run("postgres without the driver's tables", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.Schema(t)
		require.NoError(t, NewPostgres(pool).Migrate(t.Context()))
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_class
WHERE relnamespace = current_schema()::regnamespace AND relname LIKE 'unstuck_idem%'`).Scan(&n))
		require.Zero(t, n, "no engine table or index")
	})
	t.Run("sqlite without the driver's tables", func(t *testing.T) {
		t.Parallel()
		sqlDB, err := idemsqlite.Open(filepath.Join(t.TempDir(), "console.db"))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, sqlDB.Close()) })
		require.NoError(t, NewSQLite(sqlDB).Migrate(t.Context()))
		var n int
		require.NoError(t, sqlDB.QueryRowContext(t.Context(),
			`SELECT count(*) FROM sqlite_schema WHERE tbl_name LIKE 'unstuck_idem%'`).Scan(&n))
		require.Zero(t, n, "no engine table or index")
	})

	eachDialect(t, func(t *testing.T, b testBundle) {
		require.NoError(t, b.db.Migrate(t.Context()), "second Migrate")
		require.NoError(t, b.db.Ping(t.Context()))

		q := `SELECT line, version, name FROM unstuck_migration ORDER BY line, version`
		type row struct {
			Line    string
			Version int64
			Name    string
		}
		var got []row
		if b.pool != nil {
			rows, err := b.pool.Query(t.Context(), q)
			require.NoError(t, err)
			got, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
				var x row
				var v int32
				err := r.Scan(&x.Line, &v, &x.Name)
				x.Version = int64(v)
				return x, err
			})
			require.NoError(t, err)
		} else {
			rows, err := b.sqlDB.QueryContext(t.Context(), q)
			require.NoError(t, err)
			defer rows.Close()
			for rows.Next() {
				var x row
				require.NoError(t, rows.Scan(&x.Line, &x.Version, &x.Name))
				got = append(got, x)
			}
			require.NoError(t, rows.Err())
		}
		// The console's line, whole; the idem driver's line (applied by
		// the setup) is the driver's to test.
		want := []row{{"console", 1, "console"}, {"console", 2, "processing_index"}, {"console", 3, "session_user"}, {"console", 4, "sso_user"}, {"console", 5, "bulk"}, {"console", 6, "incident"}, {"console", 7, "tombstone"}, {"console", 8, "bulk_freeze"}, {"console", 9, "person"}, {"console", 10, "api_token"}, {"console", 11, "webhook"}}
		if b.db.Dialect() == DialectMySQL { // 001 holds 001 to 005 of the other lines
			want = slices.Delete(want, 1, 5)
		}
		got = slices.DeleteFunc(got, func(r row) bool { return r.Line != "console" })
		require.Equal(t, want, got)
	})
}

func TestUsers(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		before := time.Now().Add(-5 * time.Second)

		alice, err := b.db.CreateUser(ctx, "alice", RoleOncall, "$argon2id$alice")
		require.NoError(t, err)
		require.Positive(t, alice.ID)
		require.Equal(t, "alice", alice.Username)
		require.Equal(t, RoleOncall, alice.Role)
		require.Equal(t, "$argon2id$alice", alice.PasswordHash)
		require.False(t, alice.Disabled)
		require.Equal(t, time.UTC, alice.CreatedAt.Location())
		require.WithinRange(t, alice.CreatedAt, before, time.Now().Add(5*time.Second))
		require.Equal(t, alice.CreatedAt, alice.UpdatedAt)

		got, ok, err := b.db.UserByUsername(ctx, "alice")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, alice, got)
		got, ok, err = b.db.UserByID(ctx, alice.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, alice, got)

		_, ok, err = b.db.UserByUsername(ctx, "nobody")
		require.NoError(t, err)
		require.False(t, ok, "unknown username")
		_, ok, err = b.db.UserByID(ctx, alice.ID+1000)
		require.NoError(t, err)
		require.False(t, ok, "unknown id")

		_, err = b.db.CreateUser(ctx, "alice", RoleAdmin, "$argon2id$other")
		require.ErrorIs(t, err, ErrConflict)

		for _, bad := range []struct{ username, role, hash, field string }{
			{"", RoleAdmin, "h", "username"},
			{"Alice", RoleAdmin, "h", "username"},
			{"al ice", RoleAdmin, "h", "username"},
			{"élise", RoleAdmin, "h", "username"},
			{strings.Repeat("a", 65), RoleAdmin, "h", "username"},
			{"bob", "root", "h", "role"},
			{"bob", RoleAdmin, "", "password_hash"},
		} {
			_, err := b.db.CreateUser(ctx, bad.username, bad.role, bad.hash)
			require.ErrorIs(t, err, ErrInvalid, "%q %q", bad.username, bad.role)
			var fe *fielderr.Error
			require.ErrorAs(t, err, &fe)
			require.Equal(t, bad.field, fe.Field, "%q %q", bad.username, bad.role)
		}
		_, err = b.db.CreateUser(ctx, strings.Repeat("z", 64), RoleAuditor, "h")
		require.NoError(t, err, "64 characters")
		bob, err := b.db.CreateUser(ctx, "bob.smith_2-x", RoleSupport, "h")
		require.NoError(t, err)

		require.NoError(t, b.db.SetUserDisabled(ctx, "alice", true))
		got, _, err = b.db.UserByUsername(ctx, "alice")
		require.NoError(t, err)
		require.True(t, got.Disabled, "disabled")
		require.False(t, got.UpdatedAt.Before(alice.UpdatedAt), "updated_at moves forward")
		require.NoError(t, b.db.SetUserDisabled(ctx, "alice", false))
		got, _, err = b.db.UserByUsername(ctx, "alice")
		require.NoError(t, err)
		require.False(t, got.Disabled, "enabled again")

		require.NoError(t, b.db.SetUserPassword(ctx, "alice", "$argon2id$new"))
		require.NoError(t, b.db.SetUserRole(ctx, "alice", RoleAdmin))
		got, _, err = b.db.UserByUsername(ctx, "alice")
		require.NoError(t, err)
		require.Equal(t, "$argon2id$new", got.PasswordHash)
		require.Equal(t, RoleAdmin, got.Role)

		require.ErrorIs(t, b.db.SetUserDisabled(ctx, "nobody", true), ErrNotFound)
		require.ErrorIs(t, b.db.SetUserPassword(ctx, "nobody", "h"), ErrNotFound)
		require.ErrorIs(t, b.db.SetUserRole(ctx, "nobody", RoleAdmin), ErrNotFound)
		require.ErrorIs(t, b.db.SetUserPassword(ctx, "alice", ""), ErrInvalid)
		require.ErrorIs(t, b.db.SetUserRole(ctx, "alice", "root"), ErrInvalid)

		users, err := b.db.ListUsers(ctx)
		require.NoError(t, err)
		names := make([]string, len(users))
		for i, u := range users {
			names[i] = u.Username
		}
		require.Equal(t, []string{"alice", "bob.smith_2-x", strings.Repeat("z", 64)}, names)
		require.Equal(t, bob, users[1])
	})
}

func TestValidRole(t *testing.T) {
	t.Parallel()
	for _, r := range Roles {
		require.True(t, ValidRole(r), r)
	}
	require.False(t, ValidRole(""))
	require.False(t, ValidRole("Admin"))
}

func TestSessions(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ss := b.db.SessionStore()

		require.NoError(t, ss.Commit("tok-1", []byte("one"), time.Now().Add(time.Hour)))
		data, found, err := ss.Find("tok-1")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, []byte("one"), data)

		require.NoError(t, ss.Commit("tok-1", []byte("uno"), time.Now().Add(time.Hour)))
		data, found, err = ss.Find("tok-1")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, []byte("uno"), data, "commit overwrites")

		require.NoError(t, ss.Commit("tok-old", []byte("old"), time.Now().Add(-time.Minute)))
		_, found, err = ss.Find("tok-old")
		require.NoError(t, err)
		require.False(t, found, "expired")
		n, err := b.db.DeleteExpiredSessions(t.Context())
		require.NoError(t, err)
		require.Equal(t, int64(1), n)

		require.NoError(t, ss.Delete("tok-1"))
		_, found, err = ss.Find("tok-1")
		require.NoError(t, err)
		require.False(t, found, "deleted")
		require.NoError(t, ss.Delete("tok-1"), "deleting twice")

		// Through a session manager, as the web layer uses it.
		sm := scs.New()
		sm.Store = ss
		ctx, err := sm.Load(t.Context(), "")
		require.NoError(t, err)
		sm.Put(ctx, "user_id", int64(7))
		token, _, err := sm.Commit(ctx)
		require.NoError(t, err)
		ctx, err = sm.Load(t.Context(), token)
		require.NoError(t, err)
		require.Equal(t, int64(7), sm.GetInt64(ctx, "user_id"))
	})
}

// TestUnlockUser: an admin's unlock moves the user's
// UpdatedAt, which the console's sign-in throttle compares with the
// failures it counted; nothing else of the user changes.
func TestUnlockUser(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		u, err := b.db.CreateUser(ctx, "locked", RoleSupport, "$argon2id$locked")
		require.NoError(t, err)
		time.Sleep(2 * time.Millisecond)
		require.NoError(t, b.db.UnlockUser(ctx, "locked"))
		got, ok, err := b.db.UserByUsername(ctx, "locked")
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, got.UpdatedAt.After(u.UpdatedAt), "UpdatedAt moved: %v → %v", u.UpdatedAt, got.UpdatedAt)
		got.UpdatedAt = u.UpdatedAt
		require.Equal(t, u, got, "nothing else changed")
		require.ErrorIs(t, b.db.UnlockUser(ctx, "nobody"), ErrNotFound)
	})
}

// TestSessionCommitSkipped: with an idle timeout scs commits the
// session on every request; with WithSessionMemo the store writes it only
// when its data change or the idle deadline would move by more than the
// slack (min(1 minute, idle/16)), so an idle session still ends within
// that slack of its idle timeout.
func TestSessionCommitSkipped(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ss := b.db.SessionStore()
		stored := func(token string) ([]byte, time.Time) {
			t.Helper()
			row, found, err := ss.(*sessionStore).find(t.Context(), token)
			require.NoError(t, err)
			require.True(t, found)
			return row.data, row.expiry
		}
		sm := scs.New()
		sm.Store = ss
		sm.IdleTimeout = 30 * time.Minute
		ctx, err := sm.Load(t.Context(), "")
		require.NoError(t, err)
		sm.Put(ctx, "user_id", int64(7))
		sm.Put(ctx, "role", "oncall")
		token, _, err := sm.Commit(ctx)
		require.NoError(t, err)
		data, _ := stored(token)
		// request loads the session, as LoadAndSave does, and commits it
		// after changing it or not.
		request := func(memo bool, change func(context.Context)) {
			t.Helper()
			ctx := t.Context()
			if memo {
				ctx = WithSessionMemo(ctx)
			}
			ctx, err := sm.Load(ctx, token)
			require.NoError(t, err)
			require.Equal(t, int64(7), sm.GetInt64(ctx, "user_id"))
			if change != nil {
				change(ctx)
			}
			require.Equal(t, scs.Modified, sm.Status(ctx), "scs marks every request modified under an idle timeout")
			_, _, err = sm.Commit(ctx)
			require.NoError(t, err)
		}
		setExpiry := func(e time.Time) {
			t.Helper()
			require.NoError(t, ss.Commit(token, data, e))
			_, got := stored(token)
			require.WithinDuration(t, e, got, 2*time.Millisecond)
		}

		// 30 s short of the new deadline: within the slack, not written.
		setExpiry(time.Now().Add(29*time.Minute + 30*time.Second))
		_, before := stored(token)
		for range 5 {
			request(true, nil)
		}
		_, after := stored(token)
		require.Equal(t, before, after, "an unchanged session within the slack is not written")

		// Without the memo, every commit is written.
		request(false, nil)
		_, after = stored(token)
		require.Greater(t, after.Sub(before), 25*time.Second, "written without the memo")

		// More than the slack short: written.
		setExpiry(time.Now().Add(28 * time.Minute))
		request(true, nil)
		_, after = stored(token)
		require.WithinDuration(t, time.Now().Add(30*time.Minute), after, 10*time.Second, "the idle deadline is extended")

		// Changed data: written, whatever the deadline.
		request(true, func(ctx context.Context) { sm.Put(ctx, "role", "admin") })
		ctx, err = sm.Load(t.Context(), token)
		require.NoError(t, err)
		require.Equal(t, "admin", sm.GetString(ctx, "role"))

		// A short idle timeout keeps its proportion: 1 s idle, 0.2 s lag.
		sm.IdleTimeout = time.Second
		request(false, nil)
		_, before = stored(token)
		time.Sleep(200 * time.Millisecond)
		request(true, nil)
		_, after = stored(token)
		require.Greater(t, after.Sub(before), 100*time.Millisecond, "1/16 of a second's idle timeout is less than 0.2 s")
	})
}

// TestSessionUser: the session's user is read with it, in one
// statement: known for the id the session holds, current (a change made
// since shows), and unknown — the caller reads the user itself — without
// the memo, for another id, or for a session written without user_id.
func TestSessionUser(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		u, err := b.db.CreateUser(ctx, "sam", RoleSupport, "hash")
		require.NoError(t, err)
		ss := b.db.SessionStore()
		sm := scs.New()
		sm.Store = ss
		sctx, err := sm.Load(ctx, "")
		require.NoError(t, err)
		sm.Put(sctx, SessionUserKey, u.ID)
		token, _, err := sm.Commit(sctx)
		require.NoError(t, err)

		load := func() context.Context {
			t.Helper()
			mctx := WithSessionMemo(ctx)
			_, found, err := ss.(scs.CtxStore).FindCtx(mctx, token)
			require.NoError(t, err)
			require.True(t, found)
			return mctx
		}
		got, found, known := SessionUser(load(), u.ID)
		require.True(t, known)
		require.True(t, found)
		require.Equal(t, u.ID, got.ID)
		require.Equal(t, "sam", got.Username)
		require.Equal(t, RoleSupport, got.Role)
		require.False(t, got.Disabled)

		require.NoError(t, b.db.SetUserDisabled(ctx, "sam", true))
		got, found, known = SessionUser(load(), u.ID)
		require.True(t, known && found)
		require.True(t, got.Disabled, "read at this request")

		_, _, known = SessionUser(load(), u.ID+1)
		require.False(t, known, "another id")
		_, _, known = SessionUser(ctx, u.ID)
		require.False(t, known, "no memo")
		require.NoError(t, ss.Commit("legacy", []byte("x"), time.Now().Add(time.Hour))) // no user_id in it
		mctx := WithSessionMemo(ctx)
		_, found, err = ss.(scs.CtxStore).FindCtx(mctx, "legacy")
		require.NoError(t, err)
		require.True(t, found)
		_, _, known = SessionUser(mctx, u.ID)
		require.False(t, known, "a session without user_id")
	})
}
