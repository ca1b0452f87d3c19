package migrate

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestReadMigrations(t *testing.T) {
	t.Parallel()

	t.Run("SortedByVersion", func(t *testing.T) {
		t.Parallel()
		got, err := Read(fstest.MapFS{
			"010_later.up.sql":    {Data: []byte("B")},
			"002_second.up.sql":   {Data: []byte("A")},
			"002_second.down.sql": {Data: []byte("ignored")},
		})
		require.NoError(t, err)
		require.Equal(t, []Migration{
			{Version: 2, Name: "second", SQL: "A"},
			{Version: 10, Name: "later", SQL: "B"},
		}, got)
	})

	for name, fsys := range map[string]fstest.MapFS{
		"DuplicateVersion": {"001_a.up.sql": {}, "1_b.up.sql": {}},
		"NoVersion":        {"a.up.sql": {}},
		"SignedVersion":    {"+1_a.up.sql": {}},
		"ZeroVersion":      {"000_a.up.sql": {}},
		"NoName":           {"001_.up.sql": {}},
		"OtherFile":        {"001_a.sql": {}},
		"Directory":        {"sub/001_a.up.sql": {}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(fsys)
			require.Error(t, err)
		})
	}
}

func TestReadMigrationsRefusesStrayFiles(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"1_x.sql", "abc_x.up.sql", "001.up.sql", "000_x.up.sql", "001_.up.sql"} {
		_, err := parseMigrationName(name)
		require.Error(t, err, name)
	}
	m, err := parseMigrationName("012_add_things.up.sql")
	require.NoError(t, err)
	require.Equal(t, Migration{Version: 12, Name: "add_things"}, m)
}
