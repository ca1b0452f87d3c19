package idemsqlite

import (
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
)

func TestMigrateLine(t *testing.T) {
	t.Parallel()
	db, err := Open(filepath.Join(t.TempDir(), "m.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	ctx := t.Context()

	fsys := fstest.MapFS{
		"001_create.up.sql": {Data: []byte("CREATE TABLE t (v INTEGER NOT NULL); INSERT INTO t VALUES (1);")},
	}
	require.NoError(t, migratesqlite.Migrate(ctx, db, "test", fsys))
	require.NoError(t, migratesqlite.Migrate(ctx, db, "test", fsys), "again")

	// A new version is applied alone; the old one does not run again.
	fsys["002_more.up.sql"] = &fstest.MapFile{Data: []byte("INSERT INTO t VALUES (2);")}
	require.NoError(t, migratesqlite.Migrate(ctx, db, "test", fsys))
	var sum, versions int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT sum(v) FROM t`).Scan(&sum))
	require.Equal(t, 3, sum, "each migration ran once")
	require.NoError(t, db.QueryRowContext(ctx,
		`SELECT count(*) FROM unstuck_migration WHERE line = 'test'`).Scan(&versions))
	require.Equal(t, 2, versions)

	// A failing migration leaves neither its changes nor its bookkeeping row.
	fsys["003_bad.up.sql"] = &fstest.MapFile{Data: []byte("INSERT INTO t VALUES (4); INSERT INTO missing VALUES (1);")}
	require.Error(t, migratesqlite.Migrate(ctx, db, "test", fsys))
	require.NoError(t, db.QueryRowContext(ctx, `SELECT sum(v) FROM t`).Scan(&sum))
	require.Equal(t, 3, sum, "failed migration rolled back")
	require.NoError(t, db.QueryRowContext(ctx,
		`SELECT count(*) FROM unstuck_migration WHERE line = 'test'`).Scan(&versions))
	require.Equal(t, 2, versions)

	// Lines are independent.
	require.NoError(t, migratesqlite.Migrate(ctx, db, "other", fstest.MapFS{"001_create.up.sql": {Data: []byte("CREATE TABLE u (v INTEGER)")}}))
}
