package consolecmd

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// execer runs one statement on a test database, whatever its dialect.
type execer func(t *testing.T, q string)

func pgExec(t *testing.T, url string) execer {
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return func(t *testing.T, q string) {
		t.Helper()
		_, err := pool.Exec(t.Context(), q)
		require.NoError(t, err, q)
	}
}

func sqliteExec(t *testing.T, url string) execer {
	db, err := idemsqlite.Open(strings.TrimPrefix(url, "sqlite:"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return func(t *testing.T, q string) {
		t.Helper()
		_, err := db.ExecContext(t.Context(), q)
		require.NoError(t, err, q)
	}
}

// execFor returns an execer on the database of url.
func execFor(t *testing.T, url string) execer {
	if strings.HasPrefix(url, "sqlite:") {
		return sqliteExec(t, url)
	}
	return pgExec(t, url)
}

// "console migrate" creates River's tables too, so that
// the first operator decision can insert its job; running it again changes
// nothing.
func TestMigrateCreatesRiverTables(t *testing.T) {
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			url := d.URL(t)
			for range 2 {
				out, _, err := runConsole(t, nil, "migrate", "--db", url)
				require.NoError(t, err)
				require.Contains(t, out, "migrated")
			}
			exec := execFor(t, url)
			for _, table := range []string{"river_job", "river_queue", "river_leader", "river_migration"} {
				exec(t, "SELECT count(*) FROM "+table)
				// The console's own River tables, apart from the
				// applications'.
				if path, ok := strings.CutPrefix(url, "sqlite:"); ok {
					sqliteExec(t, "sqlite:"+consoleRiverFile(path))(t, "SELECT count(*) FROM "+table)
				} else {
					exec(t, "SELECT count(*) FROM "+consoleRiverSchema+"."+table)
				}
			}
			db, err := openDatabase(t.Context(), url)
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, db.CheckSchema(t.Context()))
		})
	}
}

// The indexes that the console's own "console_operations" line
// made on the saga tables belong to the saga drivers now (their migration
// 003, under the same names, IF NOT EXISTS). A database migrated by the
// previous main (saga at version 2, console_operations at 1, the indexes
// made) is behind by saga 003 only, upgrades with "console migrate",
// keeps its operations and its old bookkeeping row, and serves.
func TestMigrateUpgradesOperationsLine(t *testing.T) {
	slowtest.Skip(t, slowtest.Upgrade)
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			url := d.URL(t)
			_, _, err := runConsole(t, nil, "migrate", "--db", url)
			require.NoError(t, err)
			exec := execFor(t, url)
			// Back to the previous main's bookkeeping; its indexes have the
			// names and definitions of saga 003.
			exec(t, `DELETE FROM unstuck_migration WHERE line = 'saga' AND version = 3`)
			if strings.HasPrefix(url, "sqlite:") {
				exec(t, `INSERT INTO unstuck_migration (line, version, name, applied_at) VALUES ('console_operations', 1, 'operations', 0)`)
			} else {
				exec(t, `INSERT INTO unstuck_migration (line, version, name) VALUES ('console_operations', 1, 'operations')`)
			}

			db, err := openUnmigrated(t.Context(), url)
			require.NoError(t, err)
			defer db.Close()
			err = db.CheckSchema(t.Context())
			require.ErrorContains(t, err, "schema is behind: saga (")
			require.Equal(t, 1, strings.Count(err.Error(), " ("), "only saga is behind: %v", err)
			at := time.Now().UTC().Truncate(time.Microsecond)
			op := sagadriver.Operation{ID: "op-upgrade", Type: "signup", Status: sagadriver.StatusReviewRequired, Input: []byte(`{}`),
				Version: 1, CreatedAt: at, UpdatedAt: at}
			insert := func(ctx context.Context) error {
				if db.Pool != nil {
					d := sagapgx.New(db.Pool)
					return d.WithinTx(ctx, func(ctx context.Context, tx pgx.Tx) error { return d.InsertOperation(ctx, tx, &op) })
				}
				d := sagasqlite.New(db.SQL)
				return d.WithinTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return d.InsertOperation(ctx, tx, &op) })
			}
			require.NoError(t, insert(t.Context()))

			_, _, err = runConsole(t, nil, "migrate", "--db", url)
			require.NoError(t, err)
			require.NoError(t, db.CheckSchema(t.Context()))
			det, err := db.Sagas.ReadOperation(t.Context(), op.ID, 0)
			require.NoError(t, err, "the operation is kept")
			require.Equal(t, sagadriver.StatusReviewRequired, det.Operation.Status)
			page, err := db.Sagas.PageOperations(t.Context(), sagadriver.OperationFilter{Status: sagadriver.StatusReviewRequired})
			require.NoError(t, err)
			require.Len(t, page.Operations, 1)
			require.NoError(t, serveBriefly(t, url))
		})
	}
}

// serveBriefly runs "console serve" on url for at most 10 s: a serve that
// starts returns nil then.
func serveBriefly(t *testing.T, url string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	env := map[string]string{"UNSTUCK_DB": url, "UNSTUCK_SECRET": "serve-test-secret-0123456789abcdef", "UNSTUCK_AUDIT_KEY": testAuditKey}
	return run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, io.Discard, io.Discard)
}

// Serve on an unmigrated or partly migrated PostgreSQL
// database refuses to start, naming what is behind and the command to run.
func TestServeRefusesSchemaBehind(t *testing.T) {
	t.Parallel()
	t.Run("Unmigrated", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Database(t)
		err := serveBriefly(t, url)
		require.ErrorContains(t, err, "schema is behind")
		require.ErrorContains(t, err, "run: console migrate --db postgres://")
		for _, line := range []string{"idem (", "saga (", "river (", "console river (", "console (", "audit ("} {
			require.ErrorContains(t, err, line)
		}
	})
	for line, undo := range map[string]string{
		"idem":    `DELETE FROM unstuck_migration WHERE line = 'idem' AND version = (SELECT max(version) FROM unstuck_migration WHERE line = 'idem')`,
		"saga":    `DELETE FROM unstuck_migration WHERE line = 'saga' AND version = (SELECT max(version) FROM unstuck_migration WHERE line = 'saga')`,
		"console": `DELETE FROM unstuck_migration WHERE line = 'console' AND version = (SELECT max(version) FROM unstuck_migration WHERE line = 'console')`,
		"audit":   `DELETE FROM unstuck_migration WHERE line = 'audit' AND version = (SELECT max(version) FROM unstuck_migration WHERE line = 'audit')`,
		"river":   `DELETE FROM river_migration WHERE version = (SELECT max(version) FROM river_migration)`,
		// The console's own River tables.
		consoleRiverLine: `DROP SCHEMA ` + consoleRiverSchema + ` CASCADE`,
	} {
		t.Run("Behind/"+line, func(t *testing.T) {
			t.Parallel()
			url := pgtest.Database(t)
			_, _, err := runConsole(t, nil, "migrate", "--db", url)
			require.NoError(t, err)
			pgExec(t, url)(t, undo)
			err = serveBriefly(t, url)
			require.ErrorContains(t, err, "schema is behind: "+line+" (")
			require.ErrorContains(t, err, "run: console migrate --db postgres://")
			require.Equal(t, 1, strings.Count(err.Error(), " ("), "only the line behind is named: %v", err)
		})
	}
}

// /readyz answers 503 with the reason while the schema is
// behind (a database restored from an older backup under a running
// console), and 200 again once migrated.
func TestReadyzSchemaBehind(t *testing.T) {
	t.Parallel()
	for _, d := range consoletest.DemoDatabases {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			url := d.URL(t)
			_, _, err := runConsole(t, nil, "migrate", "--db", url)
			require.NoError(t, err)
			db, err := openDatabase(t.Context(), url)
			require.NoError(t, err)
			defer db.Close()
			engine, err := idem.New(db.Store, idem.Config{Secret: []byte("readyz-test-secret-0123456789abcdef")})
			require.NoError(t, err)
			h, err := consoleHandler(db, engine, consoleOptions{idle: 1, absolute: 1}, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			srv := httptest.NewServer(h)
			defer srv.Close()
			ready := func() (int, string) {
				resp, err := http.Get(srv.URL + "/readyz")
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return resp.StatusCode, string(b)
			}
			code, body := ready()
			require.Equal(t, http.StatusOK, code, body)

			execFor(t, url)(t, `DELETE FROM river_migration WHERE version = (SELECT max(version) FROM river_migration)`)
			code, body = ready()
			require.Equal(t, http.StatusServiceUnavailable, code)
			require.Contains(t, body, "river (")
			require.Contains(t, body, "console migrate --db "+db.Redacted)

			require.NoError(t, db.Migrate(t.Context()))
			code, body = ready()
			require.Equal(t, http.StatusOK, code, body)
		})
	}
}

// On SQLite every command migrates first, so "user add"
// works on a fresh file.
func TestUserAddFreshSQLite(t *testing.T) {
	t.Parallel()
	url := "sqlite:" + filepath.Join(t.TempDir(), "fresh.db")
	var out, errOut bytes.Buffer
	err := runWithStdin(context.Background(), []string{"user", "add", "--db", url, "--username", "ada", "--role", "admin"},
		func(string) string { return "" }, strings.NewReader("a-long-enough-password\n"), &out, &errOut)
	require.NoError(t, err, errOut.String())
	require.Contains(t, out.String(), "added user ada with role admin")

	raw, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(url, "sqlite:"))
	require.NoError(t, err)
	defer raw.Close()
	var n int
	require.NoError(t, raw.QueryRow(`SELECT count(*) FROM river_migration`).Scan(&n))
	require.Positive(t, n, "River's tables too")
}
