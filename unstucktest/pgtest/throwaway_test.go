//go:build unix

package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// TestClusterSurvivesEveryStopMode: a throwaway Cluster comes back on the
// same port, with its data, after a fast stop, an immediate stop and a
// kill -9 of the postmaster (the fault harness, cmd/faults, relies on it).
func TestClusterSurvivesEveryStopMode(t *testing.T) {
	slowtest.Skip(t, slowtest.Fault)
	ctx := t.Context()
	k, err := StartCluster(ctx, "")
	if IsUnavailable(err) && os.Getenv("CI") != "true" {
		t.Skipf("no throwaway cluster on this machine: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, k.Stop()) })

	exec := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, k.URL())
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		require.NoError(t, err)
	}
	exec("CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)")
	for _, mode := range []string{StopFast, StopImmediate, StopKill} {
		require.NoError(t, k.Restart(ctx, mode, 100*time.Millisecond), mode)
		exec("INSERT INTO kept VALUES (1)")
	}
	conn, err := pgx.Connect(ctx, k.URL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n))
	require.Equal(t, 4, n, "every committed row survives the restarts")
	require.Error(t, k.Down("nonsense"))
}
