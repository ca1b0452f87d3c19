package consolecmd

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// Bulk jobs waiting on the applications' River tables are the console's
// own, left by a console that ran them there: "console migrate" retires
// those still waiting (a running request resumes on the console's own tables
// when the console starts) and leaves the applications' jobs alone.
func TestMigrateRetiresBulkJobsFromApplicationsTables(t *testing.T) {
	slowtest.Skip(t, slowtest.Upgrade)
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := d.URL(t)
			_, errOut, err := runConsole(t, nil, "migrate", "--db", url)
			require.NoError(t, err, errOut)

			var count func(queue string) int
			var insert func(args river.JobArgs, opts *river.InsertOpts)
			if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
				db, err := idemsqlite.Open(path)
				require.NoError(t, err)
				t.Cleanup(func() { _ = db.Close() })
				insert = jobInserter(t, riversqlite.New(db))
				count = func(queue string) int {
					var n int
					require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE queue = ?`, queue).Scan(&n))
					return n
				}
			} else {
				pool, err := pgxpool.New(ctx, url)
				require.NoError(t, err)
				t.Cleanup(pool.Close)
				insert = jobInserter(t, riverpgxv5.New(pool))
				count = func(queue string) int {
					var n int
					require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1`, queue).Scan(&n))
					return n
				}
			}
			insert(ops.BulkArgs{BulkID: 7}, nil)
			insert(ops.BulkArgs{BulkID: 8}, nil)
			insert(appJobArgs{N: 1}, &river.InsertOpts{Queue: "app"})
			require.Equal(t, 2, count(ops.BulkQueue))

			_, errOut, err = runConsole(t, nil, "migrate", "--db", url)
			require.NoError(t, err, errOut)
			require.Zero(t, count(ops.BulkQueue), "the console's waiting bulk jobs left the applications' tables")
			require.Equal(t, 1, count("app"), "the applications' jobs stay")
		})
	}
}

// appJobArgs is a job of an application's own.
type appJobArgs struct {
	N int `json:"n"`
}

func (appJobArgs) Kind() string { return "app.job" }

// jobInserter inserts jobs with an insert-only River client on rd, as an
// application that only enqueues does.
func jobInserter[TTx any](t *testing.T, rd riverdriver.Driver[TTx]) func(river.JobArgs, *river.InsertOpts) {
	client, err := river.NewClient(rd, &river.Config{})
	require.NoError(t, err)
	return func(args river.JobArgs, opts *river.InsertOpts) {
		t.Helper()
		_, err := client.Insert(t.Context(), args, opts)
		require.NoError(t, err)
	}
}
