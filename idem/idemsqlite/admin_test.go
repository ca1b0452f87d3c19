package idemsqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// newMigrated returns a migrated store on a fresh database file.
func newMigrated(t *testing.T) *Store {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "unstuck.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	s := New(db)
	require.NoError(t, s.Migrate(t.Context()))
	return s
}

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
		s := newMigrated(t)
		return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
	})
}

// TestExplainAdmin checks that SQLite answers every list query from an
// index in the list's order, sorting only the few matches of a reference
// look-up.
func TestExplainAdmin(t *testing.T) {
	t.Parallel()
	s := newMigrated(t)
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	id := idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", "k")}
	after := idemdriver.EncodeCursor(idemdriver.Record{ID: 1, UpdatedAt: base}, idemdriver.OrderNewest)
	cases := []struct {
		name   string
		f      idemdriver.KeyFilter
		index  string
		sorted bool
	}{
		{"all", idemdriver.KeyFilter{}, "unstuck_console_idem_updated_idx", false},
		{"all, next page", idemdriver.KeyFilter{After: after}, "unstuck_console_idem_updated_idx", false},
		{"time range", idemdriver.KeyFilter{From: base, To: base.Add(time.Hour)}, "unstuck_console_idem_updated_idx", false},
		{"status", idemdriver.KeyFilter{Status: idemdriver.StatusPending}, "unstuck_idem_record_status_updated_idx", false},
		{"status, next page", idemdriver.KeyFilter{Status: idemdriver.StatusPending, After: after}, "unstuck_idem_record_status_updated_idx", false},
		{"stuck", idemdriver.KeyFilter{Stuck: true}, "unstuck_idem_record_status_updated_idx", false},
		{"scope", idemdriver.KeyFilter{Scope: "acme"}, "unstuck_console_idem_scope_idx", false},
		{"operation", idemdriver.KeyFilter{Operation: "charge"}, "unstuck_console_idem_operation_idx", false},
		{"correlation", idemdriver.KeyFilter{CorrelationID: "c"}, "unstuck_idem_record_correlation_idx", true},
		{"external ref", idemdriver.KeyFilter{ExternalRef: "e"}, "unstuck_idem_record_external_ref_idx", true},
		{"key", idemdriver.KeyFilter{Scope: "acme", Operation: "charge", KeyDigest: id.KeyDigest}, "(scope=? AND operation=? AND key_digest=?)", false},
		{"digest alone", idemdriver.KeyFilter{KeyDigest: id.KeyDigest}, "unstuck_idem_record_short_digest_idx", true},
		{"short key ID", idemdriver.KeyFilter{KeyDigest: id.KeyDigest[:12]}, "unstuck_idem_record_short_digest_idx", true},
		{"digest prefix", idemdriver.KeyFilter{KeyDigest: id.KeyDigest[:30]}, "unstuck_idem_record_short_digest_idx", true},
	}
	// Oldest first, each query again: the same index, read backward.
	for _, tc := range cases {
		tc.name += ", oldest first"
		tc.f.Order = idemdriver.OrderOldest
		if tc.f.After != "" {
			tc.f.After = idemdriver.EncodeCursor(idemdriver.Record{ID: 1, UpdatedAt: base}, idemdriver.OrderOldest)
		}
		cases = append(cases, tc)
	}
	for _, tc := range cases {
		q, err := tc.f.Check()
		require.NoError(t, err, tc.name)
		query, args := listKeysSQL(q, time.Now())
		plan := queryPlan(t, s, query, args...)
		require.Contains(t, plan, tc.index, "%s:\n%s", tc.name, plan)
		if !tc.sorted {
			require.NotContains(t, plan, "TEMP B-TREE", "%s:\n%s", tc.name, plan)
		}
	}
}

// TestExplainSweep: the sweep's deletion finds its records through the
// sweep's partial index, which holds no pending record, so it never reads
// past the pending records whose retention has ended; its escalation reads
// the processing records by their status. Neither scans the table.
func TestExplainSweep(t *testing.T) {
	t.Parallel()
	s := newMigrated(t)
	for _, c := range []struct{ query, index string }{
		{querySweep, "unstuck_idem_record_sweep_idx"},
		{querySweepEscalate, "unstuck_idem_record_status_updated_idx (status=?)"},
	} {
		plan := queryPlan(t, s, c.query, time.Now().UnixMicro(), 1000)
		require.Contains(t, plan, "USING INDEX "+c.index, "%s:\n%s", c.query, plan)
		require.NotContains(t, plan, "SCAN unstuck_idem_record", "%s:\n%s", c.query, plan)
	}
}

// queryPlan returns SQLite's EXPLAIN QUERY PLAN of query, a line a step.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		lines = append(lines, detail)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}

// TestMigrateAdminIndexesUpgrade: a database whose console migration
// already created the admin indexes (every release before the drivers
// owned them) upgrades: migration 003 finds them, drops the index they
// replaced, and leaves the same indexes as on a fresh database.
func TestMigrateAdminIndexesUpgrade(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := Open(filepath.Join(t.TempDir(), "old.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	var old strings.Builder
	for _, f := range []string{"001_records.up.sql", "002_fence_on_insert.up.sql"} {
		body, err := idemMigrations.ReadFile("migration/idem/" + f)
		require.NoError(t, err)
		old.Write(body)
		old.WriteString(";\n")
	}
	// The state an earlier release left: the idem line at version 2, and
	// the indexes of the console's migrations 001 (the stuck index,
	// replaced by 002 there but not yet on this database) and 002.
	old.WriteString(`CREATE TABLE unstuck_migration (line TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL,
    applied_at INTEGER NOT NULL, PRIMARY KEY (line, version));
INSERT INTO unstuck_migration VALUES ('idem', 1, 'records', 0), ('idem', 2, 'fence_on_insert', 0);
CREATE INDEX unstuck_console_idem_updated_idx ON unstuck_idem_record (updated_at, id);
CREATE INDEX unstuck_console_idem_scope_idx ON unstuck_idem_record (scope, updated_at, id);
CREATE INDEX unstuck_console_idem_operation_idx ON unstuck_idem_record (operation, updated_at, id);
CREATE INDEX unstuck_console_idem_stuck_idx ON unstuck_idem_record (lease_expires_at) WHERE status = 'processing';`)
	_, err = db.ExecContext(ctx, old.String())
	require.NoError(t, err)
	require.NoError(t, New(db).Migrate(ctx))

	indexes := func(s *Store) []string {
		rows, err := s.db.QueryContext(ctx, `SELECT name || ': ' || sql FROM sqlite_schema
WHERE type = 'index' AND tbl_name = 'unstuck_idem_record' AND sql IS NOT NULL ORDER BY name`)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, strings.Join(strings.Fields(strings.ReplaceAll(s, "IF NOT EXISTS ", "")), " "))
		}
		require.NoError(t, rows.Err())
		return out
	}
	require.Equal(t, indexes(newMigrated(t)), indexes(New(db)), "the indexes of a fresh database")
}
