package sagasqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/saga/sagatest"
)

// TestConformance runs the saga driver suite on a database file of its own
// per subtest.
func TestConformance(t *testing.T) {
	t.Parallel()
	sagatest.Run(t, func(t *testing.T) sagatest.Fixture[*sql.Tx] {
		db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "saga.db"))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		d := sagasqlite.New(db)
		require.NoError(t, d.Migrate(t.Context()))
		return sagatest.Fixture[*sql.Tx]{Driver: d}
	})
}
