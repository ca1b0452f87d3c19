package consolecmd

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// The fixtures of testdata/upgrade were made by the previous main (commit
// 7f2d0fc, before each table had one owner) with
// scripts/make-upgrade-fixtures.sh, which runs
// testdata/upgrade/makefixture_test.go there. These are its constants.
const (
	upgradeSecret   = "upgrade-fixture-secret-0123456789abcdef"
	upgradeAuditKey = "upgrade-fixture-audit-key-0123456789abcdef"
	upgradeUser     = "ada"
	upgradePassword = "ada-upgrade-fixture-pw"
)

// upgradeReads are the fixture's tables whose records the console shows,
// and the path of their list and detail pages.
var upgradeReads = map[string]string{
	"unstuck_idem_record":    "/keys",
	"unstuck_saga_operation": "/operations",
}

// upgradeBookkeeping are tables of the migrations themselves: a migration
// line may add or rename its own rows there.
var upgradeBookkeeping = []string{"unstuck_migration", "river_migration"}

// upgradeDialect restores a fixture and reads a database's tables without
// anything of the console.
type upgradeDialect struct {
	name    string
	restore func(t *testing.T) (dbURL string, raw *sql.DB)
	// tables lists the base tables, columns the columns of one ($1 or ?),
	// schema every column, index and constraint definition.
	tables, columns, schema string
}

var upgradeDialects = []upgradeDialect{
	{
		name: "SQLite",
		restore: func(t *testing.T) (string, *sql.DB) {
			fixture, err := os.ReadFile(filepath.Join("testdata", "upgrade", "previous-main.sqlite"))
			require.NoError(t, err)
			path := filepath.Join(t.TempDir(), "upgrade.db")
			require.NoError(t, os.WriteFile(path, fixture, 0o600))
			raw, err := idemsqlite.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = raw.Close() })
			return "sqlite:" + path, raw
		},
		tables:  `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`,
		columns: `SELECT name FROM pragma_table_info(?) ORDER BY cid`,
		schema:  `SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`,
	},
	{
		name: "PostgreSQL",
		restore: func(t *testing.T) (string, *sql.DB) {
			dbURL := pgtest.Database(t)
			restorePlainDump(t, dbURL, filepath.Join("testdata", "upgrade", "previous-main.pg.sql"))
			cfg, err := pgx.ParseConfig(dbURL)
			require.NoError(t, err)
			raw := stdlib.OpenDB(*cfg)
			t.Cleanup(func() { _ = raw.Close() })
			return dbURL, raw
		},
		tables: `SELECT table_name FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`,
		columns: `SELECT column_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`,
		schema: `SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
				FROM information_schema.columns WHERE table_schema = current_schema()
			UNION ALL SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
			UNION ALL SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
				FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
			ORDER BY 1`,
	},
}

// restorePlainDump runs a pg_dump plain-SQL file (made with --inserts) on
// the database of dbURL, on a connection of its own: the dump empties
// search_path for its session. psql's \restrict and \unrestrict lines are
// dropped; any other meta-command fails the test.
func restorePlainDump(t *testing.T, dbURL, path string) {
	t.Helper()
	dump, err := os.ReadFile(path)
	require.NoError(t, err)
	var sqlText strings.Builder
	for line := range strings.Lines(string(dump)) {
		if strings.HasPrefix(line, `\`) {
			require.True(t, strings.HasPrefix(line, `\restrict `) || strings.HasPrefix(line, `\unrestrict `), "a psql meta-command in the dump: %s", line)
			continue
		}
		sqlText.WriteString(line)
	}
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sqlText.String())
	require.NoError(t, err, "restore %s", path)
}

// tableImage is what a table holds: its columns, every row (each rendered
// as text, sorted), and for a table with a status column the rows per
// status and, with an id column too, the status of each id.
type tableImage struct {
	Columns  []string
	Rows     []string
	Statuses map[string]int
	IDs      map[string]string
}

// dbImage reads every table of raw, or only those of only (with only their
// columns), so that an image taken after a migration compares with one
// taken before it.
func (d upgradeDialect) dbImage(t *testing.T, raw *sql.DB, only map[string]tableImage) map[string]tableImage {
	t.Helper()
	ctx := t.Context()
	tables := queryStrings(t, raw, d.tables)
	out := make(map[string]tableImage, len(tables))
	for _, table := range tables {
		cols := queryStrings(t, raw, d.columns, table)
		if only != nil {
			before, ok := only[table]
			if !ok {
				continue
			}
			for _, c := range before.Columns {
				require.Contains(t, cols, c, "column %s.%s is still there", table, c)
			}
			cols = before.Columns
		}
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = `"` + c + `"`
		}
		rows, err := raw.QueryContext(ctx, `SELECT `+strings.Join(quoted, ", ")+` FROM "`+table+`"`)
		require.NoError(t, err, table)
		img := tableImage{Columns: cols, Rows: []string{}}
		status, id := slices.Index(cols, "status"), slices.Index(cols, "id")
		if status >= 0 {
			img.Statuses = map[string]int{}
		}
		if status >= 0 && id >= 0 {
			img.IDs = map[string]string{}
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			require.NoError(t, rows.Scan(ptrs...), table)
			fields := make([]string, len(vals))
			for i, v := range vals {
				fields[i] = renderValue(v)
			}
			img.Rows = append(img.Rows, strings.Join(fields, " | "))
			if status >= 0 {
				img.Statuses[fields[status]]++
			}
			if img.IDs != nil {
				img.IDs[fields[id]] = fields[status]
			}
		}
		require.NoError(t, rows.Err(), table)
		require.NoError(t, rows.Close())
		slices.Sort(img.Rows)
		out[table] = img
	}
	return out
}

func renderValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		return fmt.Sprintf("%q", v)
	case string:
		return v
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(v)
	}
}

func queryStrings(t *testing.T, raw *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := raw.QueryContext(t.Context(), q, args...)
	require.NoError(t, err, q)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// A database created by the previous main upgrades
// with "console migrate" and keeps every record. The fixture is restored,
// imaged, migrated by the command's own entry point and imaged again: every
// table keeps every row and every value of the columns it had (the counts
// per status are compared first, for a readable failure). Then the schema
// check of "console serve" passes, the audit chain verifies, the fixture's
// user signs in and the console shows each key and operation, and a second
// "console migrate" changes nothing, schema or rows.
func TestUpgradeFromPreviousMain(t *testing.T) {
	slowtest.Skip(t, slowtest.Upgrade)
	t.Parallel()
	for _, d := range upgradeDialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			dbURL, raw := d.restore(t)
			before := d.dbImage(t, raw, nil)
			for table := range upgradeReads {
				require.NotEmpty(t, before[table].Rows, "the fixture has records in %s", table)
			}
			require.NotEmpty(t, before["unstuck_audit_entry"].Rows, "the fixture has audit entries")
			for _, b := range upgradeBookkeeping {
				delete(before, b)
			}

			_, errOut, err := runConsole(t, nil, "migrate", "--db", dbURL)
			require.NoError(t, err, errOut)
			after := d.dbImage(t, raw, before)
			for table, b := range before {
				a := after[table]
				require.Equal(t, b.Statuses, a.Statuses, "%s: records per status after the upgrade", table)
				require.Equal(t, len(b.Rows), len(a.Rows), "%s: records after the upgrade", table)
				require.Equal(t, b.Rows, a.Rows, "%s: every record as it was, columns %v", table, b.Columns)
			}

			// Idempotent: a second run changes neither schema nor rows.
			schema, all := queryStrings(t, raw, d.schema), d.dbImage(t, raw, nil)
			_, errOut, err = runConsole(t, nil, "migrate", "--db", dbURL)
			require.NoError(t, err, errOut)
			require.Equal(t, schema, queryStrings(t, raw, d.schema), "a second migrate changes no schema")
			require.Equal(t, all, d.dbImage(t, raw, nil), "a second migrate changes no row")

			db, err := openDatabase(t.Context(), dbURL)
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, db.CheckSchema(t.Context()), "what console serve checks")
			keys, err := audit.NewKeyring([]byte(upgradeAuditKey))
			require.NoError(t, err)
			db.useAuditKeys(keys)
			v, err := db.Trail.Verify(t.Context())
			require.NoError(t, err)
			require.True(t, v.OK, "the audit chain verifies: %+v", v)
			require.Equal(t, int64(len(before["unstuck_audit_entry"].Rows)), v.Checked, "every entry verified")
			// The keying marker the upgrade wrote: keyed from the fixture's
			// first keyed entry (or the next seq), sealed by the first
			// process holding the audit key, and verified then.
			require.Equal(t, cmp.Or(v.KeyedFrom, v.HeadSeq+1), v.Keying.KeyedFrom, "the marker records when keying began")
			require.False(t, v.Keying.Sealed(), "migrate ran without the audit key")
			sealed, err := db.Trail.SealKeying(t.Context())
			require.NoError(t, err)
			require.True(t, sealed)
			v, err = db.Trail.Verify(t.Context())
			require.NoError(t, err)
			require.True(t, v.OK && v.Keying.Sealed(), "sealed, and still verified: %+v", v)

			testUpgradedReads(t, db, before)
		})
	}
}

// testUpgradedReads signs in as the fixture's user and reads every key and
// operation of before through the console's pages.
func testUpgradedReads(t *testing.T, db *database, before map[string]tableImage) {
	t.Helper()
	engine, err := idem.New(db.Store, idem.Config{Secret: []byte(upgradeSecret)})
	require.NoError(t, err)
	h, err := consoleHandler(db, engine, consoleOptions{idle: time.Hour, absolute: time.Hour}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	get := func(path string) string {
		t.Helper()
		resp, err := c.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
		return string(body)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/login",
		strings.NewReader(url.Values{"username": {upgradeUser}, "password": {upgradePassword}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the fixture's user signs in")
	get("/")

	for table, page := range upgradeReads {
		ids := before[table].IDs
		require.NotEmpty(t, ids, "%s has ids and statuses", table)
		filter := "state"
		if page == "/operations" {
			filter = "status"
		}
		lists := map[string]string{}
		for id, st := range ids {
			if _, ok := lists[st]; !ok {
				lists[st] = get(page + "?" + filter + "=" + url.QueryEscape(st))
			}
			link := page + "/" + url.PathEscape(id)
			require.Contains(t, lists[st], `href="`+link+`"`, "%s?%s=%s lists %s", page, filter, st, id)
			get(link)
		}
	}
}
