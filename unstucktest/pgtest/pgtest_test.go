package pgtest

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

func TestMain(m *testing.M) { RunMain(m) }

func TestSchemaIsolatesTables(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := Schema(t), Schema(t)

	var nameA, nameB string
	require.NoError(t, a.QueryRow(ctx, "SELECT current_schema()").Scan(&nameA))
	require.NoError(t, b.QueryRow(ctx, "SELECT current_schema()").Scan(&nameB))
	require.Regexp(t, `^t_[0-9a-f]{16}$`, nameA)
	require.NotEqual(t, nameA, nameB)

	_, err := a.Exec(ctx, "CREATE TABLE item (n int)")
	require.NoError(t, err)
	_, err = b.Exec(ctx, "CREATE TABLE item (n int)")
	require.NoError(t, err, "the same table name in the other schema")
	_, err = a.Exec(ctx, "INSERT INTO item VALUES (1), (2)")
	require.NoError(t, err)

	var n int
	require.NoError(t, a.QueryRow(ctx, "SELECT count(*) FROM item").Scan(&n))
	require.Equal(t, 2, n)
	require.NoError(t, b.QueryRow(ctx, "SELECT count(*) FROM item").Scan(&n))
	require.Equal(t, 0, n, "rows of one schema are not seen from the other")
}

func TestSchemaDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("uses", func(t *testing.T) {
		pool := Schema(t)
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT current_schema()").Scan(&name))
		_, err := pool.Exec(t.Context(), "CREATE TABLE item (n int)")
		require.NoError(t, err)
	})
	require.NotEmpty(t, name)

	conn := connect(t, URL(t))
	var exists bool
	require.NoError(t, conn.QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&exists))
	require.False(t, exists, "schema %s still exists after the test's cleanup", name)
}

func TestDatabaseCreatedAndDropped(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("uses", func(t *testing.T) {
		u := Database(t)
		conn := connect(t, u)
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name))
		require.Regexp(t, `^t_[0-9a-f]{16}$`, name)
		_, err := conn.Exec(t.Context(), "CREATE TABLE item (n int)")
		require.NoError(t, err)
		// Left open on purpose: the drop must force it closed.
	})
	require.NotEmpty(t, name)

	conn := connect(t, URL(t))
	var exists bool
	require.NoError(t, conn.QueryRow(t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	require.False(t, exists, "database %s still exists after the test's cleanup", name)
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ admin, want string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/t_x?sslmode=disable"},
		{"postgresql://u:p@h/", "postgresql://u:p@h/t_x"},
		{"host=127.0.0.1 user=postgres dbname=test", "host=127.0.0.1 user=postgres dbname=test dbname=t_x"},
	} {
		got, err := withDatabase(tc.admin, "t_x")
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
}

func TestPickOrder(t *testing.T) {
	t.Parallel()
	closed := "postgres://postgres@127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/test?sslmode=disable&connect_timeout=2"
	startErr := errors.New("not started in this test")

	t.Run("TEST_DATABASE_URL that does not answer fails without falling back", func(t *testing.T) {
		t.Parallel()
		started := false
		_, err := pick(t.Context(), closed, DefaultURL, func(context.Context) (string, error) {
			started = true
			return "", startErr
		})
		require.ErrorContains(t, err, "TEST_DATABASE_URL does not answer")
		require.False(t, started, "no throwaway cluster when TEST_DATABASE_URL is set")
	})

	t.Run("TEST_DATABASE_URL wins", func(t *testing.T) {
		t.Parallel()
		u := URL(t)
		got, err := pick(t.Context(), u, closed, func(context.Context) (string, error) { return "", startErr })
		require.NoError(t, err)
		require.Equal(t, u, got)
	})

	t.Run("unset and nothing answers starts a cluster", func(t *testing.T) {
		t.Parallel()
		got, err := pick(t.Context(), "", closed, func(context.Context) (string, error) { return "started", nil })
		require.NoError(t, err)
		require.Equal(t, "started", got)

		_, err = pick(t.Context(), "", closed, func(context.Context) (string, error) { return "", startErr })
		require.ErrorIs(t, err, startErr)
	})
}

func TestStartCluster(t *testing.T) {
	slowtest.Skip(t, slowtest.Fault)
	t.Parallel()
	c, err := startCluster(t.Context())
	var unavailable *unavailableError
	if errors.As(err, &unavailable) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	require.NoError(t, err, "CI must be able to start a throwaway cluster")
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			require.NoError(t, c.stop())
		}
	})

	conn, err := pgx.Connect(t.Context(), c.url)
	require.NoError(t, err)
	var setting string
	require.NoError(t, conn.QueryRow(t.Context(), "SHOW fsync").Scan(&setting))
	require.Equal(t, "off", setting)
	_, err = conn.Exec(t.Context(), "CREATE TABLE item (n int)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))

	require.NoError(t, c.stop())
	stopped = true
	require.Error(t, ping(t.Context(), c.url), "the server still answers after stop")
	_, err = os.Stat(c.dir)
	require.ErrorIs(t, err, os.ErrNotExist, "the cluster's directory is removed")
}

// connect opens a connection closed when t ends.
func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close(context.Background())) })
	return conn
}

// closedPort returns a port of 127.0.0.1 on which nothing listens.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}
