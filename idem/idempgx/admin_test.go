package idempgx

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
		s := setup(t).store
		return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s, SetCaps: s.SetOverviewCaps, Analyze: s.Analyze}
	})
}

// TestExplainAdmin checks that every list query has a plan that reads an
// index in the list's order and stops after the page: no Seq Scan and no
// Sort. The planner is told to avoid both at any cost, so either appearing
// means that no index serves the query; on a table this small it would
// otherwise prefer them anyway.
func TestExplainAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	id := idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", "k")}
	require.NoError(t, b.store.SeedRecords(t.Context(), []idemdriver.Record{{Ident: id, Status: idemdriver.StatusCompleted,
		CorrelationID: "c", ExternalRef: "e", Owner: idemdriver.Owner{Fence: 1}, Attempts: 1, Version: 1,
		CreatedAt: base, UpdatedAt: base, ExpiresAt: base.Add(time.Hour)}}))
	page, err := b.store.ListKeys(t.Context(), idemdriver.KeyFilter{})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	after := idemdriver.EncodeCursor(page.Records[0], idemdriver.OrderNewest)

	explain := func(sql string, args ...any) string {
		t.Helper()
		return pgtest.Explain(t, b.pool, sql, args...)
	}

	cases := []struct {
		name string
		f    idemdriver.KeyFilter
		// index is the index the plan must use; "" when several would do.
		index string
		// sorted allows a Sort: look-ups whose matches are few.
		sorted bool
	}{
		{"all", idemdriver.KeyFilter{}, "unstuck_console_idem_updated_idx", false},
		{"all, next page", idemdriver.KeyFilter{After: after}, "unstuck_console_idem_updated_idx", false},
		{"time range", idemdriver.KeyFilter{From: base, To: base.Add(time.Hour)}, "unstuck_console_idem_updated_idx", false},
		{"status", idemdriver.KeyFilter{Status: idemdriver.StatusPending}, "unstuck_idem_record_status_idx", false},
		{"status, next page", idemdriver.KeyFilter{Status: idemdriver.StatusPending, After: after}, "unstuck_idem_record_status_idx", false},
		{"status, time range", idemdriver.KeyFilter{Status: idemdriver.StatusPending, From: base, To: base.Add(time.Hour)}, "", false},
		{"stuck", idemdriver.KeyFilter{Stuck: true}, "unstuck_console_idem_processing_idx", false},
		{"stuck, scope", idemdriver.KeyFilter{Stuck: true, Scope: "acme"}, "unstuck_console_idem_processing_scope_idx", false},
		{"scope", idemdriver.KeyFilter{Scope: "acme"}, "unstuck_console_idem_scope_idx", false},
		{"scope, next page", idemdriver.KeyFilter{Scope: "acme", After: after}, "unstuck_console_idem_scope_idx", false},
		{"operation", idemdriver.KeyFilter{Operation: "charge"}, "unstuck_console_idem_operation_idx", false},
		{"status and scope", idemdriver.KeyFilter{Status: idemdriver.StatusCompleted, Scope: "acme"}, "", false},
		{"scope and operation", idemdriver.KeyFilter{Scope: "acme", Operation: "charge"}, "", false},
		{"correlation", idemdriver.KeyFilter{CorrelationID: "c"}, "", true},
		{"external ref", idemdriver.KeyFilter{ExternalRef: "e"}, "", true},
		{"key", idemdriver.KeyFilter{Scope: "acme", Operation: "charge", KeyDigest: id.KeyDigest}, "", true},
	}
	// Oldest first, each query again: the same index, read backward.
	for _, tc := range cases {
		tc.name += ", oldest first"
		tc.f.Order = idemdriver.OrderOldest
		if tc.f.After != "" {
			tc.f.After = idemdriver.EncodeCursor(page.Records[0], idemdriver.OrderOldest)
		}
		cases = append(cases, tc)
	}
	for _, tc := range cases {
		q, err := tc.f.Check()
		require.NoError(t, err, tc.name)
		sql, args := listKeysSQL(q)
		plan := explain(sql, args...)
		require.NotContains(t, plan, "Seq Scan", "%s:\n%s", tc.name, plan)
		if !tc.sorted {
			require.NotContains(t, plan, "Sort", "%s:\n%s", tc.name, plan)
		}
		if tc.index != "" {
			require.Contains(t, plan, tc.index, "%s:\n%s", tc.name, plan)
		}
		// The list's count reads the same index and stops at its cap.
		sql, args = countKeysSQL(q, idemdriver.DefaultCountUpTo)
		plan = explain(sql, args...)
		require.NotContains(t, plan, "Seq Scan", "count, %s:\n%s", tc.name, plan)
		require.Contains(t, plan, "Limit", "count, %s:\n%s", tc.name, plan)
	}

	plan := explain(statusCountsSQL, []string{"pending"}, DefaultCountCap+1, DefaultStuckCap+1)
	require.NotContains(t, plan, "Seq Scan", plan)
	require.Contains(t, plan, "Index Only Scan using unstuck_idem_record_status_idx", plan)
	require.Contains(t, plan, "Index Only Scan using unstuck_console_idem_processing", "the stuck count reads a partial index of processing records:\n%s", plan)
	require.Contains(t, plan, "InitPlan", "the stuck count runs once, not once per status:\n%s", plan)

	plan = explain(needsAttentionSQL, 50)
	require.NotContains(t, plan, "Seq Scan", plan)
}

// TestExplainShortDigest: a digest alone, or its short form from a log
// line, is answered by the short digest's index, not a scan (SPEC K11), on
// a table with enough records for the planner to judge.
func TestExplainShortDigest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	recs := make([]idemdriver.Record, 5000)
	for i := range recs {
		scope := "tenant-" + strconv.Itoa(i%50)
		recs[i] = idemdriver.Record{Ident: idemdriver.Ident{Scope: scope, Operation: "charge", KeyDigest: idem.Digest(scope, "charge", strconv.Itoa(i))},
			Status: idemdriver.StatusCompleted, Owner: idemdriver.Owner{Fence: int64(i + 1)}, Attempts: 1, Version: 1,
			CreatedAt: base, UpdatedAt: base.Add(time.Duration(i) * time.Millisecond), ExpiresAt: base.Add(time.Hour)}
	}
	require.NoError(t, b.store.SeedRecords(t.Context(), recs))
	require.NoError(t, b.store.Analyze(t.Context()))
	digest := recs[1234].KeyDigest
	for _, f := range []idemdriver.KeyFilter{{KeyDigest: digest}, {KeyDigest: digest[:12]}, {KeyDigest: digest[:30]},
		{KeyDigest: digest[:12], Order: idemdriver.OrderOldest}} {
		q, err := f.Check()
		require.NoError(t, err)
		sql, args := listKeysSQL(q)
		plan := plannersChoice(t, b.pool, sql, args...)
		require.Contains(t, plan, "unstuck_idem_record_short_digest_idx", "%+v:\n%s", f, plan)
		page, err := b.store.ListKeys(t.Context(), f)
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		require.Equal(t, digest, page.Records[0].KeyDigest)
	}
}

// plannersChoice is the plan of sql as the planner chooses it. A look-up
// of a few records sorts them, which pgtest.Explain forbids (it would walk
// a list's index instead).
func plannersChoice(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	rows, err := pool.Query(t.Context(), "EXPLAIN "+sql, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// TestExplainSweepAndLookUps: the sweep reads its oldest expired records
// from the expiry index, and the look-ups by raw key (in every scope), by
// correlation ID and by external reference each read their own partial
// index: each index serves its query, never a scan of the table.
func TestExplainSweepAndLookUps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now().UTC().Truncate(time.Second)
	recs := make([]idemdriver.Record, 5000)
	for i := range recs {
		scope := "tenant-" + strconv.Itoa(i%50)
		recs[i] = idemdriver.Record{Ident: idemdriver.Ident{Scope: scope, Operation: "charge", KeyDigest: idem.Digest(scope, "charge", strconv.Itoa(i))},
			Status: idemdriver.StatusCompleted, Owner: idemdriver.Owner{Fence: int64(i + 1)}, Attempts: 1, Version: 1,
			CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Duration(i-50) * time.Minute)}
		switch i % 100 {
		case 0:
			recs[i].KeyHash = idem.KeyHash(strconv.Itoa(i))
		case 1:
			recs[i].CorrelationID = "req-" + strconv.Itoa(i)
		case 2:
			recs[i].ExternalRef = "ch_" + strconv.Itoa(i)
		}
	}
	require.NoError(t, b.store.SeedRecords(t.Context(), recs))
	require.NoError(t, b.store.Analyze(t.Context()))

	plan := pgtest.Explain(t, b.pool, sweepSQL, 1000, now)
	require.Contains(t, plan, "unstuck_idem_record_sweep_idx", plan)
	require.NotContains(t, plan, "Seq Scan", plan)

	// A look-up of a few records: the planner's own choice.
	for _, c := range []struct {
		f     idemdriver.KeyFilter
		index string
	}{
		{idemdriver.KeyFilter{KeyHash: recs[100].KeyHash}, "unstuck_idem_record_key_hash_idx"},
		{idemdriver.KeyFilter{CorrelationID: recs[101].CorrelationID}, "unstuck_idem_record_correlation_id_idx"},
		{idemdriver.KeyFilter{ExternalRef: recs[102].ExternalRef}, "unstuck_idem_record_external_ref_idx"},
	} {
		q, err := c.f.Check()
		require.NoError(t, err)
		sql, args := listKeysSQL(q)
		plan := plannersChoice(t, b.pool, sql, args...)
		require.Contains(t, plan, c.index, plan)
		require.NotContains(t, plan, "Seq Scan", plan)
	}
}

// TestSweepReadsPastNoPendingRecord: pending records past their retention
// (kept for an operator, never swept) are not in the sweep's index, so a
// sweep whose oldest candidates are all pending reads none of them: the
// index scan removes no row by its filter and returns the batch it deletes.
func TestSweepReadsPastNoPendingRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now().UTC().Truncate(time.Second)
	recs := make([]idemdriver.Record, 4000)
	for i := range recs {
		status := idemdriver.StatusPending // the 3,000 oldest
		if i >= 3000 {
			status = idemdriver.StatusCompleted
		}
		recs[i] = idemdriver.Record{Ident: idemdriver.Ident{Scope: "t", Operation: "charge", KeyDigest: idem.Digest("t", "charge", strconv.Itoa(i))},
			Status: status, Owner: idemdriver.Owner{Fence: 1}, Attempts: 1, Version: 1, LastError: "held",
			CreatedAt: now.Add(-48 * time.Hour), UpdatedAt: now.Add(-48 * time.Hour), ExpiresAt: now.Add(time.Duration(i-5000) * time.Second)}
	}
	require.NoError(t, b.store.SeedRecords(t.Context(), recs))
	require.NoError(t, b.store.Analyze(t.Context()))

	var lines []string
	err := pgx.BeginFunc(t.Context(), b.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(t.Context(), "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+sweepSQL, 100, now)
		if err != nil {
			return err
		}
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	plan := strings.Join(lines, "\n")
	scan := planNode(lines, "Index Scan using unstuck_idem_record_sweep_idx")
	require.NotEmpty(t, scan, plan)
	require.Contains(t, scan, "actual rows=100 ", plan)
	require.NotContains(t, scan, "Rows Removed by Filter", plan)
	require.NotContains(t, plan, "Seq Scan", "the deletion reads its rows by ID: "+plan)

	res, err := b.store.Sweep(t.Context(), idemdriver.SweepParams{Limit: 2000, Now: now})
	require.NoError(t, err)
	require.Equal(t, idemdriver.SweepResult{Deleted: 1000}, res, "every finished record past its retention, no pending one")
}

// planNode returns the lines of the first plan node whose line contains
// head, up to its next node, or "" if there is none.
func planNode(lines []string, head string) string {
	for i, l := range lines {
		if !strings.Contains(l, head) {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.Contains(lines[end], "->") && !strings.HasPrefix(strings.TrimSpace(lines[end]), "CTE ") {
			end++
		}
		return strings.Join(lines[i:end], "\n")
	}
	return ""
}

// errRollback ends a transaction a test only looks into.
var errRollback = errors.New("rolled back")

// TestMigrateAdminIndexesUpgrade: a database whose console migration
// already created the admin indexes (every release before the drivers
// owned them) upgrades: the driver's migration 002 finds them and applies.
func TestMigrateAdminIndexesUpgrade(t *testing.T) {
	t.Parallel()
	pool := pgtest.Schema(t)
	ctx := t.Context()
	s := New(pool)
	body, err := idemMigrations.ReadFile("migration/idem/001_records.up.sql")
	require.NoError(t, err)
	// The state an earlier release left: the idem line at version 1, and
	// the indexes the console's migrations 001 and 002 made.
	_, err = pool.Exec(ctx, string(body)+`;
CREATE TABLE unstuck_migration (line text NOT NULL, version integer NOT NULL, name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (line, version));
INSERT INTO unstuck_migration (line, version, name) VALUES ('idem', 1, 'records');
CREATE INDEX unstuck_console_idem_updated_idx ON unstuck_idem_record (updated_at, id);
CREATE INDEX unstuck_console_idem_scope_idx ON unstuck_idem_record (scope, updated_at, id);
CREATE INDEX unstuck_console_idem_operation_idx ON unstuck_idem_record (operation, updated_at, id);
CREATE INDEX unstuck_console_idem_processing_idx ON unstuck_idem_record (updated_at, id)
    INCLUDE (lease_expires_at) WHERE status = 'processing';
CREATE INDEX unstuck_console_idem_processing_scope_idx ON unstuck_idem_record (scope, updated_at, id)
    INCLUDE (lease_expires_at) WHERE status = 'processing';`)
	require.NoError(t, err)
	indexes := func() []string {
		rows, err := pool.Query(ctx, `SELECT indexdef FROM pg_indexes WHERE tablename = 'unstuck_idem_record' AND schemaname = current_schema() ORDER BY indexname`)
		require.NoError(t, err)
		defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return defs
	}
	before := indexes()
	require.NoError(t, s.Migrate(ctx))
	// The upgrade adds the key hash's index (migration 003), the short
	// digest's (004) and the sweep's (006, in place of the expiry index),
	// and nothing else: the console's indexes are kept, none duplicated.
	var added []string
	for _, def := range indexes() {
		if !slices.Contains(before, def) {
			added = append(added, def)
		}
	}
	require.Len(t, added, 3, "the same indexes, none duplicated, plus the key hash's, the short digest's and the sweep's")
	require.Contains(t, added[0], "unstuck_idem_record_key_hash_idx")
	require.Contains(t, added[1], "unstuck_idem_record_short_digest_idx")
	require.Contains(t, added[2], "unstuck_idem_record_sweep_idx")
	require.NotContains(t, strings.Join(indexes(), "\n"), "unstuck_idem_record_expires_at_idx", "the sweep's index replaces the expiry index")

	fresh := setup(t)
	rows, err := fresh.pool.Query(ctx, `SELECT indexdef FROM pg_indexes WHERE tablename = 'unstuck_idem_record' AND schemaname = current_schema() ORDER BY indexname`)
	require.NoError(t, err)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	schemaless := func(defs []string) []string {
		out := make([]string, len(defs))
		for i, d := range defs {
			// Index definitions name the schema; the two tests use two.
			out[i] = d[:strings.Index(d, " ON ")] + d[strings.Index(d, " USING "):]
		}
		return out
	}
	require.Equal(t, schemaless(indexes()), schemaless(defs), "a fresh database gets the same indexes")
}

// TestCountKeysStopsAtItsDeadline: a count under a deadline ends in the
// database at that deadline (here it waits on a lock the whole time) with
// an error matching context.DeadlineExceeded; the connection stays open and
// keeps no statement_timeout, and a count without a deadline is as before.
func TestCountKeysStopsAtItsDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for range 3 {
		b.reserve(t, reserveOpts{})
	}
	locker, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = locker.Rollback(ctx) }()
	_, err = locker.Exec(ctx, `LOCK TABLE unstuck_idem_record IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	bounded, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = b.store.CountKeys(bounded, idemdriver.KeyFilter{}, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var waiting int
	require.NoError(t, locker.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'active' AND query LIKE 'SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record%'`).Scan(&waiting))
	require.Zero(t, waiting, "the database ended the count")
	require.Positive(t, b.pool.Stat().IdleConns(), "the count's connection went back open (the locker holds the other)")
	require.NoError(t, locker.Rollback(ctx))

	var timeout string
	require.NoError(t, b.pool.QueryRow(ctx, `SHOW statement_timeout`).Scan(&timeout))
	require.Equal(t, "0", timeout, "the timeout was the transaction's only")
	n, err := b.store.CountKeys(ctx, idemdriver.KeyFilter{}, 0)
	require.NoError(t, err)
	require.Equal(t, idemdriver.KeyCount{N: 3, Exact: true}, n)
	n, err = b.store.CountKeys(bounded, idemdriver.KeyFilter{}, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a deadline already past: no statement")
	require.Zero(t, n)
}
