package sagapgx_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagatest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

// TestConformance runs the saga driver suite on a fresh schema per
// subtest.
func TestConformance(t *testing.T) {
	t.Parallel()
	sagatest.Run(t, func(t *testing.T) sagatest.Fixture[pgx.Tx] {
		pool := pgtest.Schema(t)
		d := sagapgx.New(pool)
		require.NoError(t, d.Migrate(t.Context()))
		return sagatest.Fixture[pgx.Tx]{Driver: d, Analyze: func(ctx context.Context) error {
			_, err := pool.Exec(ctx, "ANALYZE unstuck_saga_operation")
			return err
		}}
	})
}
