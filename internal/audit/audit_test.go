package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m) }

// testKeys is the audit keyring of every test trail.
var testKeys = mustKeyring([]byte("test-audit-key-0123456789abcdef!"))

func mustKeyring(current []byte, previous ...[]byte) *Keyring {
	k, err := NewKeyring(current, previous...)
	if err != nil {
		panic(err)
	}
	return k
}

// mustHash is testKeys' hash of e.
func mustHash(t testing.TB, e Entry) []byte {
	t.Helper()
	h, err := testKeys.ComputeHash(e)
	require.NoError(t, err)
	return h
}

// testBundle is one migrated trail and its database.
type testBundle struct {
	trail *Trail
	pool  *pgxpool.Pool // PostgreSQL only
	sqlDB *sql.DB       // SQLite and MySQL
}

// withinTx runs fn in a transaction of the dialect's native type, begun as
// a decision begins it (READ COMMITTED; BEGIN IMMEDIATE), and commits it if
// fn returns nil. appendTx appends on that transaction.
func (b testBundle) withinTx(ctx context.Context, fn func(appendTx func(Entry) (Entry, error)) error) error {
	if b.pool != nil {
		return pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			return fn(func(e Entry) (Entry, error) { return b.trail.AppendPgxTx(ctx, tx, e) })
		})
	}
	if b.trail.Dialect() == DialectMySQL {
		tx, err := b.sqlDB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		if err := fn(func(e Entry) (Entry, error) { return b.trail.AppendMySQLTx(ctx, tx, e) }); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		return tx.Commit()
	}
	return migratesqlite.Immediate(ctx, b.sqlDB, func(conn *sql.Conn) error {
		return fn(func(e Entry) (Entry, error) { return b.trail.AppendSQLiteTx(ctx, conn, e) })
	})
}

// setupMySQL is a trail on a MySQL database of its own (unstucktest/mysqltest).
func setupMySQL(t testing.TB) testBundle {
	t.Helper()
	db, err := idemmysql.Open(mysqltest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	trail := NewMySQL(db, WithKeys(testKeys))
	require.NoError(t, trail.Migrate(context.Background()))
	return testBundle{trail: trail, sqlDB: db}
}

func setupPostgres(t testing.TB) testBundle {
	t.Helper()
	pool := pgtest.Schema(t)
	trail := NewPostgres(pool, WithKeys(testKeys))
	require.NoError(t, trail.Migrate(context.Background()))
	return testBundle{trail: trail, pool: pool}
}

func setupSQLite(t testing.TB) testBundle {
	t.Helper()
	db, err := openSQLite(filepath.Join(t.TempDir(), "audit.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	trail := NewSQLite(db, WithKeys(testKeys))
	require.NoError(t, trail.Migrate(context.Background()))
	return testBundle{trail: trail, sqlDB: db}
}

// openSQLite opens the SQLite file at path with the settings of
// idem/idemsqlite's Open that the trail relies on: a busy timeout and WAL
// on every connection.
func openSQLite(path string) (*sql.DB, error) {
	q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"}}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.ToSlash(path), RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, err
	}
	return db, db.Ping()
}

// eachDialect runs fn as a parallel subtest per dialect, on fresh state.
func eachDialect(t *testing.T, fn func(t *testing.T, b testBundle)) {
	t.Helper()
	for _, d := range []struct {
		name  string
		setup func(testing.TB) testBundle
	}{
		{DialectPostgres, setupPostgres},
		{DialectSQLite, setupSQLite},
		{DialectMySQL, setupMySQL},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			fn(t, d.setup(t))
		})
	}
}

// exec runs a statement as the database's superuser would: on the pool or
// the handle, outside the trail.
func (b testBundle) exec(t *testing.T, query string) error {
	t.Helper()
	if b.pool != nil {
		_, err := b.pool.Exec(t.Context(), query)
		return err
	}
	_, err := b.sqlDB.ExecContext(t.Context(), query)
	return err
}

// count returns the result of a one-integer query.
func (b testBundle) count(t *testing.T, query string) int64 {
	t.Helper()
	var n int64
	if b.pool != nil {
		require.NoError(t, b.pool.QueryRow(t.Context(), query).Scan(&n))
	} else {
		require.NoError(t, b.sqlDB.QueryRowContext(t.Context(), query).Scan(&n))
	}
	return n
}

// entryOpts describes an entry for testBundle.append; zero fields get
// defaults.
type entryOpts struct {
	Actor, Action, TargetKind, TargetID, Outcome, Reason string
}

func entry(o entryOpts) Entry {
	def := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	return Entry{
		Actor:      def(o.Actor, "ada"),
		Role:       "oncall",
		Action:     def(o.Action, "key.forget"),
		TargetKind: def(o.TargetKind, "key"),
		TargetID:   def(o.TargetID, "42"),
		Reason:     def(o.Reason, "customer confirmed by phone"),
		Before:     json.RawMessage(`{"status": "unavailable", "version": 3}`),
		After:      json.RawMessage(`{"status":"released","version":4}`),
		Outcome:    def(o.Outcome, OutcomeApplied),
		RequestID:  "req-1",
		ClientAddr: "192.0.2.10",
		UserAgent:  "Mozilla/5.0 (test)",
	}
}

func (b testBundle) append(t *testing.T, o entryOpts) Entry {
	t.Helper()
	e, err := b.trail.Append(t.Context(), entry(o))
	require.NoError(t, err)
	return e
}

func seqs(entries []Entry) []int64 {
	out := make([]int64, len(entries))
	for i, e := range entries {
		out[i] = e.Seq
	}
	return out
}

func TestAppend(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		start := time.Now().Add(-time.Minute)
		first := b.append(t, entryOpts{})
		require.Equal(t, int64(1), first.Seq, "first seq")
		require.Equal(t, make([]byte, 32), first.PrevHash, "seq 1 follows the zero hash")
		require.Equal(t, mustHash(t, first), first.Hash, "MAC of the content")
		require.Equal(t, testKeys.CurrentID(), first.KeyID, "MACed with the current key")
		require.Equal(t, time.UTC, first.At.Location(), "at in UTC")
		require.WithinDuration(t, time.Now(), first.At, time.Minute, "at is now, by the database's clock")
		require.True(t, first.At.After(start))
		require.JSONEq(t, `{"status":"unavailable","version":3}`, string(first.Before))
		require.Equal(t, `{"status":"unavailable","version":3}`, string(first.Before), "states stored compacted")

		second := b.append(t, entryOpts{Actor: "bob"})
		require.Equal(t, int64(2), second.Seq)
		require.Equal(t, first.Hash, second.PrevHash, "chained to the first")
		require.False(t, second.At.Before(first.At), "times follow seq")

		// What List reads is what Append returned, byte for byte.
		got, next, err := b.trail.List(t.Context(), Filter{})
		require.NoError(t, err)
		require.Zero(t, next, "one page")
		require.Equal(t, []Entry{second, first}, got, "newest first, as appended")

		v, err := b.trail.Verify(t.Context())
		require.NoError(t, err)
		require.Equal(t, Verification{Checked: 2, OK: true, HeadSeq: 2, Head: second.Hash, KeyedFrom: 1}, withoutKeying(t, v, 1))
	})
}

func TestAppendValidation(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	for _, tc := range []struct {
		name  string
		edit  func(*Entry)
		field string
	}{
		{"actor required", func(e *Entry) { e.Actor = "" }, "actor"},
		{"actor not blank", func(e *Entry) { e.Actor = "  " }, "actor"},
		{"action required", func(e *Entry) { e.Action = "" }, "action"},
		{"target kind required", func(e *Entry) { e.TargetKind = "" }, "target_kind"},
		{"outcome required", func(e *Entry) { e.Outcome = "" }, "outcome"},
		{"reason bounded", func(e *Entry) { e.Reason = strings.Repeat("x", MaxReasonBytes+1) }, "reason"},
		{"actor bounded", func(e *Entry) { e.Actor = strings.Repeat("x", 257) }, "actor"},
		{"no NUL", func(e *Entry) { e.TargetID = "a\x00b" }, "target_id"},
		{"valid UTF-8", func(e *Entry) { e.Reason = "bad \xff byte" }, "reason"},
		{"before is JSON", func(e *Entry) { e.Before = json.RawMessage(`{"a":`) }, "before"},
		{"after bounded", func(e *Entry) {
			e.After = json.RawMessage(`"` + strings.Repeat("x", MaxStateBytes) + `"`)
		}, "after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := entry(entryOpts{})
			tc.edit(&e)
			_, err := b.trail.Append(t.Context(), e)
			var fe *fielderr.Error
			require.ErrorAs(t, err, &fe)
			require.ErrorIs(t, err, ErrInvalid)
			require.Equal(t, tc.field, fe.Field, "field named")
		})
	}
	require.Zero(t, b.count(t, `SELECT count(*) FROM unstuck_audit_entry`), "nothing appended")

	// Request fields come from the client: cut and cleaned, never refused.
	e := entry(entryOpts{})
	e.UserAgent = strings.Repeat("é", 400) // 800 bytes
	e.RequestID = "id\x00\xff"
	e.Before = json.RawMessage(" null ")
	e.After = json.RawMessage(`{"note":"<b>&</b>"}`)
	e.Seq, e.Hash = 99, []byte("ignored")
	got, err := b.trail.Append(t.Context(), e)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Seq, "seq assigned, not taken from the caller")
	require.Len(t, got.UserAgent, 512, "user agent cut to 512 bytes")
	require.Equal(t, strings.Repeat("é", 256), got.UserAgent, "cut on a rune boundary")
	require.Equal(t, "id\uFFFD", got.RequestID)
	require.Nil(t, got.Before, "JSON null is no state")
	require.Equal(t, `{"note":"\u003cb\u003e\u0026\u003c/b\u003e"}`, string(got.After), "HTML escaped as json.Marshal writes it")
	var note struct{ Note string }
	require.NoError(t, json.Unmarshal(got.After, &note))
	require.Equal(t, "<b>&</b>", note.Note, "the same JSON value")
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		var all []Entry
		for i, o := range []entryOpts{
			{Actor: "ada", Action: "key.forget", TargetKind: "key", TargetID: "1"},
			{Actor: "bob", Action: "key.confirm", TargetKind: "key", TargetID: "2", Outcome: OutcomeDenied},
			{Actor: "ada", Action: "operation.retry", TargetKind: "operation", TargetID: "1", Outcome: OutcomeConflict},
			{Actor: "cy", Action: "audit.export", TargetKind: "audit", TargetID: "", Outcome: OutcomeRead},
			{Actor: "ada", Action: "key.forget", TargetKind: "key", TargetID: "1"},
		} {
			all = append(all, b.append(t, o))
			if i == 2 {
				time.Sleep(5 * time.Millisecond) // a time boundary between seq 3 and 4
			}
		}
		list := func(f Filter) []int64 {
			t.Helper()
			got, _, err := b.trail.List(ctx, f)
			require.NoError(t, err)
			return seqs(got)
		}
		require.Equal(t, []int64{5, 4, 3, 2, 1}, list(Filter{}))
		require.Equal(t, []int64{5, 3, 1}, list(Filter{Actor: "ada"}))
		require.Equal(t, []int64{5, 1}, list(Filter{Action: "key.forget"}))
		require.Equal(t, []int64{5, 2, 1}, list(Filter{TargetKind: "key"}))
		require.Equal(t, []int64{5, 1}, list(Filter{TargetKind: "key", TargetID: "1"}))
		require.Equal(t, []int64{3}, list(Filter{TargetKind: "operation", TargetID: "1"}))
		require.Equal(t, []int64{2}, list(Filter{Outcome: OutcomeDenied}))
		require.Equal(t, []int64{5, 1}, list(Filter{Actor: "ada", Outcome: OutcomeApplied}))
		require.Equal(t, []int64{5, 4}, list(Filter{From: all[3].At}))
		require.Equal(t, []int64{3, 2, 1}, list(Filter{To: all[3].At}))
		require.Equal(t, []int64{4}, list(Filter{From: all[3].At, To: all[4].At}))
		require.Equal(t, []int64{2, 1}, list(Filter{After: 3}))
		require.Empty(t, list(Filter{Actor: "nobody"}))

		// Keyset pages of 2, with an append between pages that does not
		// shift them.
		page1, next, err := b.trail.List(ctx, Filter{Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []int64{5, 4}, seqs(page1))
		require.Equal(t, int64(4), next)
		b.append(t, entryOpts{Actor: "ada", Action: "key.forget", TargetKind: "key", TargetID: "1"})
		page2, next, err := b.trail.List(ctx, Filter{Limit: 2, After: next})
		require.NoError(t, err)
		require.Equal(t, []int64{3, 2}, seqs(page2))
		page3, next, err := b.trail.List(ctx, Filter{Limit: 2, After: next})
		require.NoError(t, err)
		require.Equal(t, []int64{1}, seqs(page3))
		require.Zero(t, next, "last page")

		hist, err := b.trail.History(ctx, "key", "1", 0)
		require.NoError(t, err)
		require.Equal(t, []int64{6, 5, 1}, seqs(hist))
		hist, err = b.trail.History(ctx, "key", "1", 1)
		require.NoError(t, err)
		require.Equal(t, []int64{6}, seqs(hist))

		for _, f := range []Filter{
			{After: -1},
			{TargetID: "1"},
			{From: all[3].At, To: all[3].At},
		} {
			_, _, err := b.trail.List(ctx, f)
			require.ErrorIs(t, err, ErrInvalid, "filter %+v", f)
		}
		_, err = b.trail.History(ctx, "key", "", 10)
		require.ErrorIs(t, err, ErrInvalid)
	})
}

func TestAppendTx(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		var committed Entry
		require.NoError(t, b.withinTx(ctx, func(appendTx func(Entry) (Entry, error)) error {
			var err error
			committed, err = appendTx(entry(entryOpts{Reason: "committed"}))
			return err
		}))
		require.Equal(t, int64(1), committed.Seq)

		// A decision whose transaction rolls back leaves no entry, and no
		// gap: the next append takes its seq.
		errRollback := errors.New("the transition failed")
		var rolledBack Entry
		err := b.withinTx(ctx, func(appendTx func(Entry) (Entry, error)) error {
			var err error
			rolledBack, err = appendTx(entry(entryOpts{Reason: "rolled back"}))
			require.NoError(t, err)
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		require.Equal(t, int64(2), rolledBack.Seq, "seq 2 was handed out inside the transaction")
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM unstuck_audit_entry`), "the rolled-back entry is gone")

		next := b.append(t, entryOpts{Reason: "after the rollback"})
		require.Equal(t, int64(2), next.Seq, "no gap")
		require.Equal(t, committed.Hash, next.PrevHash)
		got, _, err := b.trail.List(ctx, Filter{})
		require.NoError(t, err)
		require.Equal(t, []string{"after the rollback", "committed"}, []string{got[0].Reason, got[1].Reason})

		v, err := b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK, "verified: %+v", v)
		require.Equal(t, int64(2), v.Checked)
	})
}

func TestAppendTxExplicit(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		b := setupPostgres(t)
		ctx := t.Context()
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := b.trail.AppendPgxTx(ctx, tx, entry(entryOpts{}))
			return err
		}))
		// Under REPEATABLE READ the head read after the lock could be
		// stale: refused before anything is written.
		err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			_, err := b.trail.AppendPgxTx(ctx, tx, entry(entryOpts{}))
			return err
		})
		require.ErrorContains(t, err, "appends need READ COMMITTED")
		_, err = b.trail.AppendSQLiteTx(ctx, nil, entry(entryOpts{}))
		require.Error(t, err, "a SQLite transaction on a PostgreSQL trail")
		require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM unstuck_audit_entry`))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		b := setupSQLite(t)
		ctx := t.Context()
		// A deferred database/sql transaction that has written already, as
		// the saga runner's does before it records the decision.
		tx, err := b.sqlDB.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, `CREATE TABLE decision (id INTEGER PRIMARY KEY)`)
		require.NoError(t, err)
		e, err := b.trail.AppendSQLiteTx(ctx, tx, entry(entryOpts{}))
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		require.Equal(t, int64(1), e.Seq)
		_, err = b.trail.AppendPgxTx(ctx, nil, entry(entryOpts{}))
		require.Error(t, err, "a pgx transaction on a SQLite trail")
	})
}

func TestAppendOnly(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		b.append(t, entryOpts{})
		b.append(t, entryOpts{})
		for _, stmt := range []struct{ sql, op string }{
			{`UPDATE unstuck_audit_entry SET reason = 'edited' WHERE seq = 1`, "UPDATE"},
			{`DELETE FROM unstuck_audit_entry WHERE seq = 2`, "DELETE"},
			{`DELETE FROM unstuck_audit_entry`, "DELETE"},
			{`TRUNCATE unstuck_audit_entry`, "TRUNCATE"},
		} {
			if stmt.op == "TRUNCATE" && b.pool == nil {
				// SQLite has no TRUNCATE (an unqualified DELETE is its
				// form); MySQL's skips triggers (see its migration).
				continue
			}
			err := b.exec(t, stmt.sql)
			require.ErrorContains(t, err, "unstuck_audit_entry is append-only: "+stmt.op+" is not allowed", stmt.sql)
		}
		require.Equal(t, int64(2), b.count(t, `SELECT count(*) FROM unstuck_audit_entry`), "nothing changed")
		v, err := b.trail.Verify(t.Context())
		require.NoError(t, err)
		require.True(t, v.OK)
	})
}

// tamper runs statements with the append-only triggers out of the way, as
// a superuser or the file's owner could.
func (b testBundle) tamper(t *testing.T, stmts ...string) {
	t.Helper()
	if b.pool != nil {
		// session_replication_role = replica skips ordinary triggers, for
		// this connection only.
		conn, err := b.pool.Acquire(t.Context())
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(t.Context(), `SET session_replication_role = replica`)
		require.NoError(t, err)
		for _, s := range stmts {
			_, err = conn.Exec(t.Context(), s)
			require.NoError(t, err, s)
		}
		_, err = conn.Exec(t.Context(), `RESET session_replication_role`)
		require.NoError(t, err)
		return
	}
	require.NoError(t, b.exec(t, `DROP TRIGGER IF EXISTS unstuck_audit_entry_no_update`))
	require.NoError(t, b.exec(t, `DROP TRIGGER IF EXISTS unstuck_audit_entry_no_delete`))
	require.NoError(t, b.exec(t, `DROP TRIGGER IF EXISTS unstuck_audit_entry_keyed`))
	for _, s := range stmts {
		require.NoError(t, b.exec(t, s), s)
	}
}

func TestTamperDetected(t *testing.T) {
	t.Parallel()
	const n = 12
	cases := []struct {
		name     string
		stmts    []string
		firstBad int64
		problem  string
	}{
		{"edit after", []string{`UPDATE unstuck_audit_entry SET after_state = '{"status":"completed","version":4}' WHERE seq = 7`},
			7, "the entry was altered"},
		{"edit actor", []string{`UPDATE unstuck_audit_entry SET actor = 'mallory' WHERE seq = 1`},
			1, "the entry was altered"},
		{"delete a middle row", []string{`DELETE FROM unstuck_audit_entry WHERE seq = 5`},
			5, "seq 5 is missing (the next entry is seq 6)"},
		{"delete the first row", []string{`DELETE FROM unstuck_audit_entry WHERE seq = 1`},
			1, "seq 1 is missing"},
		{"renumber to hide a gap", []string{
			`DELETE FROM unstuck_audit_entry WHERE seq = 5`,
			`UPDATE unstuck_audit_entry SET seq = seq - 1 WHERE seq > 5`},
			5, "prev_hash is not the hash of seq 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachDialect(t, func(t *testing.T, b testBundle) {
				for range n {
					b.append(t, entryOpts{})
				}
				b.tamper(t, tc.stmts...)
				v, err := b.trail.Verify(t.Context())
				require.NoError(t, err)
				require.False(t, v.OK, "tampering detected")
				require.Equal(t, tc.firstBad, v.FirstBad, "first bad seq: %s", v.Problem)
				require.Contains(t, v.Problem, tc.problem)
				require.Equal(t, tc.firstBad-1, v.Checked, "entries before it verified")
			})
		})
	}
}

func TestTamperPostgresDisableTrigger(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)
	for range 10 {
		b.append(t, entryOpts{})
	}
	// The table's owner (here a superuser) can disable the triggers for
	// everyone: the chain still names the edited entry.
	require.NoError(t, b.exec(t, `ALTER TABLE unstuck_audit_entry DISABLE TRIGGER USER`))
	require.NoError(t, b.exec(t, `UPDATE unstuck_audit_entry SET after_state = '{"status":"forged"}' WHERE seq = 6`))
	require.NoError(t, b.exec(t, `ALTER TABLE unstuck_audit_entry ENABLE TRIGGER USER`))
	v, err := b.trail.Verify(t.Context())
	require.NoError(t, err)
	require.Equal(t, Verification{Checked: 5, FirstBad: 6, Problem: "hash is not the MAC of the entry's content under audit key " + testKeys.CurrentID() + ": the entry was altered or forged without the key",
		HeadSeq: 5, Head: v.Head, KeyedFrom: 1}, withoutKeying(t, v, 1))
}

func TestAnchors(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := t.Context()
		for range 6 {
			b.append(t, entryOpts{})
		}
		v, err := b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK)
		head := Anchor{Seq: v.HeadSeq, Hash: v.Head}
		parsed, err := ParseAnchor(head.String())
		require.NoError(t, err)
		require.Equal(t, head, parsed)

		mid, _, err := b.trail.List(ctx, Filter{After: 4, Limit: 1})
		require.NoError(t, err)
		midAnchor := Anchor{Seq: 3, Hash: mid[0].Hash}

		v, err = b.trail.Verify(ctx, head, midAnchor)
		require.NoError(t, err)
		require.True(t, v.OK, "anchors match: %+v", v)

		// Cut the two newest entries: the chain alone cannot tell, the
		// anchor of the old head can.
		b.tamper(t, `DELETE FROM unstuck_audit_entry WHERE seq > 4`)
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK, "a cut tail verifies without an anchor")
		v, err = b.trail.Verify(ctx, head)
		require.NoError(t, err)
		require.False(t, v.OK)
		require.Equal(t, int64(5), v.FirstBad)
		require.Contains(t, v.Problem, "removed from the end")

		// Rewrite seq 2 and recompute every hash after it: consistent, but
		// not with the anchor of seq 3.
		b.rewrite(t, 2, 2, func(e Entry) []byte { return mustHash(t, e) })
		v, err = b.trail.Verify(ctx)
		require.NoError(t, err)
		require.True(t, v.OK, "a recomputed chain verifies without an anchor")
		v, err = b.trail.Verify(ctx, midAnchor)
		require.NoError(t, err)
		require.Equal(t, int64(3), v.FirstBad)
		require.Contains(t, v.Problem, "differs from the anchor")

		_, err = b.trail.Verify(ctx, Anchor{Seq: 0, Hash: head.Hash})
		require.ErrorIs(t, err, ErrInvalid)
		_, err = b.trail.Verify(ctx, Anchor{Seq: 1, Hash: []byte("short")})
		require.ErrorIs(t, err, ErrInvalid)
	})
}

// rewrite replaces the entries from seq from on, edits the reason of seq
// from to through, and rechains them with hash, as an insider who can
// write the table (and, with mustHash, holds the key) could.
func (b testBundle) rewrite(t *testing.T, from, through int64, hash func(Entry) []byte, more ...string) {
	t.Helper()
	entries, _, err := b.trail.List(t.Context(), Filter{Limit: MaxLimit})
	require.NoError(t, err)
	slices.Reverse(entries)
	stmts := append(more, fmt.Sprintf(`DELETE FROM unstuck_audit_entry WHERE seq >= %d`, from))
	prev := entries[from-2].Hash
	for _, e := range entries[from-1:] {
		if e.Seq <= through {
			e.Reason = "rewritten"
		}
		e.PrevHash = prev
		e.Hash = hash(e)
		prev = e.Hash
		stmts = append(stmts, insertSQL(b, e))
	}
	b.tamper(t, stmts...)
}

// insertSQL is an INSERT of e with literal values, for tampering.
func insertSQL(b testBundle, e Entry) string {
	at := fmt.Sprintf("%d", e.At.UnixMicro())
	blob := func(h []byte) string { return fmt.Sprintf("X'%x'", h) }
	if b.pool != nil {
		at = fmt.Sprintf("'%s'::timestamptz", e.At.Format(time.RFC3339Nano))
		blob = func(h []byte) string { return fmt.Sprintf(`'\x%x'::bytea`, h) }
	}
	text := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	return fmt.Sprintf(`INSERT INTO unstuck_audit_entry (`+columns+`) VALUES (%d, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)`,
		e.Seq, at, text(e.Actor), text(e.Role), text(e.Action), text(e.TargetKind), text(e.TargetID), text(e.Reason),
		text(string(e.Before)), text(string(e.After)), text(e.Outcome), text(e.RequestID), text(e.ClientAddr),
		text(e.UserAgent), blob(e.PrevHash), blob(e.Hash), text(e.KeyID))
}

func TestVerifyEmpty(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		v, err := b.trail.Verify(t.Context())
		require.NoError(t, err)
		require.Equal(t, Verification{OK: true}, withoutKeying(t, v, 1), "a new trail is keyed from the start")
	})
}

// withoutKeying checks that v's keying marker is sealed and keyed from
// seq from, and returns v without it, to compare the rest.
func withoutKeying(t *testing.T, v Verification, from int64) Verification {
	t.Helper()
	require.Equal(t, from, v.Keying.KeyedFrom, "keyed from")
	require.True(t, v.Keying.Sealed(), "the keying marker is sealed")
	v.Keying = Keying{}
	return v
}

func TestVerifyAcrossPages(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)
	n := verifyPage*2 + 17
	seedPostgres(t, b.pool, n)
	v, err := b.trail.Verify(t.Context())
	require.NoError(t, err)
	require.True(t, v.OK, "%+v", v)
	require.Equal(t, int64(n), v.Checked)

	// A gap exactly at a page boundary.
	b.tamper(t, fmt.Sprintf(`DELETE FROM unstuck_audit_entry WHERE seq = %d`, verifyPage+1))
	v, err = b.trail.Verify(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(verifyPage+1), v.FirstBad, v.Problem)
}

func TestNotMigrated(t *testing.T) {
	t.Parallel()
	db, err := openSQLite(filepath.Join(t.TempDir(), "empty.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	_, err = NewSQLite(db, WithKeys(testKeys)).Verify(t.Context())
	require.ErrorIs(t, err, ErrNotMigrated)

	_, err = NewPostgres(pgtest.Schema(t), WithKeys(testKeys)).Append(t.Context(), entry(entryOpts{}))
	require.ErrorIs(t, err, ErrNotMigrated)
}

func TestMigrateIdempotent(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, b testBundle) {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = b.trail.Migrate(t.Context()) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int64(3), b.count(t, `SELECT count(*) FROM unstuck_migration WHERE line = 'audit'`))
	})
}

// TestHashEncoding pins version 1 of the canonical encoding: an entry
// hashed elsewhere (or by an older build) must keep verifying.
func TestHashEncoding(t *testing.T) {
	t.Parallel()
	e := Entry{
		Seq: 7, At: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC),
		Actor: "ada", Role: "oncall", Action: "key.forget", TargetKind: "key", TargetID: "42",
		Reason: "customer confirmed", Before: json.RawMessage(`{"v":1}`), After: nil, Outcome: "applied",
		RequestID: "r", ClientAddr: "192.0.2.1", UserAgent: "ua", PrevHash: make([]byte, 32),
	}
	require.Equal(t, "fe784ffb53312092ab52a9523d92ff222c53a1f9707a43e27994392c36096cf2", fmt.Sprintf("%x", e.ComputeHash()))

	// Length prefixes keep field boundaries: moving a byte from one field
	// to the next changes the hash.
	moved := e
	moved.Actor, moved.Role = "ad", "aoncall"
	require.NotEqual(t, e.ComputeHash(), moved.ComputeHash())
	// Nanoseconds beyond the microsecond are not hashed (neither database
	// keeps them).
	trunc := e
	trunc.At = e.At.Truncate(time.Microsecond)
	require.Equal(t, e.ComputeHash(), trunc.ComputeHash())
}
