package idemmysql_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// TestOpenURL: a mysql:// URL opens the same database as the DSN, and
// Open forces the settings the store relies on.
func TestOpenURL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg, err := mysql.ParseDSN(b.dsn)
	require.NoError(t, err)
	db, err := idemmysql.Open("mysql://" + cfg.User + "@" + cfg.Addr + "/" + cfg.DBName)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	var name, mode, tz string
	require.NoError(t, db.QueryRowContext(t.Context(), `SELECT DATABASE(), @@session.sql_mode, @@session.time_zone`).Scan(&name, &mode, &tz))
	require.Equal(t, cfg.DBName, name)
	require.Contains(t, mode, "STRICT_ALL_TABLES")
	require.Equal(t, "+00:00", tz)
}

// TestOpenRefusesBadDSNs: bad DSNs are refused naming the problem, and a
// password never appears in the error.
func TestOpenRefusesBadDSNs(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://u:s3cret@h/db":                   "mysql://",
		"mysql://u:s3cret@/db":                       "no host",
		"mysql://u:s3cret@h:3306/":                   "no database",
		"u:s3cret@tcp(127.0.0.1:3306)/":              "no database",
		"mysql://u:s3cret@h:3306/db?parseTime=maybe": "parameters",
		"not a dsn at all":                           "not a go-sql-driver DSN",
	} {
		_, err := idemmysql.Open(dsn)
		require.ErrorContains(t, err, want, dsn)
		require.NotContains(t, err.Error(), "s3cret", dsn)
	}
}

// TestCheckRefusesLaxSessions: a handle whose session is not strict, or
// has autocommit off, is refused by Check and so by Migrate, with the
// setting named.
func TestCheckRefusesLaxSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for param, want := range map[string]string{
		"sql_mode=%27%27": "sql_mode",
		"autocommit=0":    "autocommit",
	} {
		db, err := sql.Open("mysql", b.dsn+"?"+param)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		require.ErrorContains(t, idemmysql.Check(t.Context(), db), want)
		require.ErrorContains(t, idemmysql.New(db).Migrate(t.Context()), want)
	}
	require.NoError(t, idemmysql.Check(t.Context(), b.db))
}

// TestMigrateRerunsAfterACrash: MySQL commits each DDL statement, so a
// crash can leave a migration applied without its bookkeeping row; the
// next Migrate runs the file again and must succeed. Concurrent Migrates
// wait for each other on GET_LOCK.
func TestMigrateRerunsAfterACrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.db.ExecContext(t.Context(), `DELETE FROM unstuck_migration WHERE line = 'idem'`)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- b.store.Migrate(t.Context()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, b.db.QueryRowContext(t.Context(), `SELECT count(*) FROM unstuck_migration WHERE line = 'idem'`).Scan(&n))
	ups, err := filepath.Glob("migration/idem/*.up.sql")
	require.NoError(t, err)
	require.Equal(t, len(ups), n, "one bookkeeping row per migration")
	reserve(t, b.store, ident("after-rerun"), "o", time.Time{})
}

// TestIdentIsByteExact: scopes, operations and digests compare byte for
// byte, where a _ci or PAD SPACE collation would merge "Acme" with "acme"
// and "a" with "a ".
func TestIdentIsByteExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	digest := idem.Digest("x", "y", "k")
	for _, scope := range []string{"acme", "Acme", "acme ", "ácme", "acme\x00", "租户"} {
		id := idemdriver.Ident{Scope: scope, Operation: "charge", KeyDigest: digest}
		rec := reserve(t, b.store, id, "o-"+scope, time.Time{})
		require.Equal(t, scope, get(t, b.store, id).Scope)
		require.Equal(t, rec.ID, get(t, b.store, id).ID)
	}
	page, err := b.store.ListKeys(t.Context(), idemdriver.KeyFilter{Scope: "Acme"})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	require.Equal(t, "Acme", page.Records[0].Scope)
}

// TestBadInputIsRefused: values the columns cannot hold are errors, never
// truncated (strict mode); binary results round-trip; the engine refuses
// bad keys and TTLs with the same ValidationError as on every store.
func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := idemdriver.Ident{Scope: strings.Repeat("s", 256), Operation: "charge", KeyDigest: idem.Digest("a", "b", "c")}
	_, _, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: long, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.Error(t, err, "a 256-byte scope is refused, not truncated")
	_, ok, err := b.store.Get(t.Context(), idemdriver.Ident{Scope: strings.Repeat("s", 255), Operation: "charge", KeyDigest: long.KeyDigest})
	require.NoError(t, err)
	require.False(t, ok)
	empty := idemdriver.Ident{Scope: "", Operation: "charge", KeyDigest: long.KeyDigest}
	_, _, err = b.store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: empty, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.Error(t, err, "the CHECK constraint refuses an empty scope")

	id := ident("binary")
	rec := reserve(t, b.store, id, "o", time.Time{})
	binary := []byte{0, 1, 2, 0xff, 0xfe, '\'', '"', '\\', 0}
	require.NoError(t, b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: binary}))
	require.Equal(t, binary, get(t, b.store, id).Result)

	e, err := idem.New(b.store, idem.Config{Secret: idemtest.Secret})
	require.NoError(t, err)
	run := func(key string, opts *idem.RunOpts) error {
		_, err := idem.Run(t.Context(), e, key, "tenant", func(context.Context) (int, error) { return 1, nil }, opts)
		return err
	}
	for _, c := range []struct {
		key, field string
		opts       *idem.RunOpts
	}{
		{"", "key", nil},
		{strings.Repeat("k", idem.MaxKeyBytes+1), "key", nil},
		{"k-ttl-neg", "ttl", &idem.RunOpts{TTL: -time.Hour}},
		{"k-ttl-max", "ttl", &idem.RunOpts{TTL: idem.MaxTTL + time.Second}},
	} {
		var verr *idem.ValidationError
		require.ErrorAs(t, run(c.key, c.opts), &verr, c.field)
		require.Equal(t, c.field, verr.Field)
	}
	require.NoError(t, run("ключ-🔑", &idem.RunOpts{TTL: idem.MaxTTL}), "a Unicode key at the longest TTL")
}

// TestFencesStrictlyIncrease: fences increase across records, across a
// forgotten key reserved again, and after Sweep trims the fence table.
func TestFencesStrictlyIncrease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	id := ident("fence")
	first := reserve(t, b.store, id, "a", t0)
	second := reserve(t, b.store, ident("fence-2"), "b", t0)
	require.Greater(t, second.Fence, first.Fence)
	_, err := b.store.Delete(ctx, id)
	require.NoError(t, err)
	_, err = b.store.Sweep(ctx, idemdriver.SweepParams{})
	require.NoError(t, err)
	var rows int
	require.NoError(t, b.db.QueryRowContext(ctx, `SELECT count(*) FROM unstuck_idem_fence`).Scan(&rows))
	require.Equal(t, 1, rows, "sweep keeps only the highest fence row")
	again := reserve(t, b.store, id, "c", t0)
	require.Greater(t, again.Fence, second.Fence)
	taken, err := b.store.Takeover(ctx, idemdriver.TakeoverParams{Ident: id, Seen: again.Owner, NewOwner: "d",
		Lease: time.Minute, Now: t0.Add(2 * time.Minute)})
	require.NoError(t, err)
	require.Greater(t, taken.Fence, again.Fence)
	require.ErrorIs(t, b.store.Complete(ctx, id, again.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted}),
		idemdriver.ErrFenced, "the old owner is fenced out")
}

// TestExtendReturnsTheLeaseEnd: the new end comes back with the UPDATE's
// result (LAST_INSERT_ID(expr)) and never moves backwards.
func TestExtendReturnsTheLeaseEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := ident("extend")
	rec := reserve(t, b.store, id, "o", t0)
	until, err := b.store.Extend(t.Context(), id, rec.Owner, 5*time.Minute, t0.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Second+5*time.Minute), until)
	require.Equal(t, until, get(t, b.store, id).LeaseExpiresAt)
	shorter, err := b.store.Extend(t.Context(), id, rec.Owner, time.Second, t0.Add(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, until, shorter, "a shorter lease does not shorten it")
	_, err = b.store.Extend(t.Context(), id, idemdriver.Owner{Token: "other", Fence: rec.Fence}, time.Minute, time.Time{})
	require.ErrorIs(t, err, idemdriver.ErrFenced)
}

// TestReadAtIsTheDatabaseClock: without Now, times come from the
// database's UTC clock, whatever the session's time_zone.
func TestReadAtIsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	db, err := sql.Open("mysql", b.dsn+"?time_zone=%27%2B05%3A00%27&sql_mode=%27STRICT_ALL_TABLES%27")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	s := idemmysql.New(db)
	var before, after time.Time
	require.NoError(t, b.db.QueryRowContext(t.Context(), `SELECT UTC_TIMESTAMP(6)`).Scan(&before))
	rec := reserve(t, s, ident("clock"), "o", time.Time{})
	require.NoError(t, b.db.QueryRowContext(t.Context(), `SELECT UTC_TIMESTAMP(6)`).Scan(&after))
	require.WithinRange(t, rec.CreatedAt, before, after)
	require.WithinRange(t, get(t, s, ident("clock")).ReadAt, before, after.Add(time.Second))
	require.Equal(t, rec.CreatedAt.Add(time.Minute), rec.LeaseExpiresAt)
}

// TestCallerTxUnderRepeatableRead: a caller's REPEATABLE READ transaction
// whose snapshot predates another connection's reservation still finds
// that record (a locking read after the duplicate), instead of looping.
func TestCallerTxUnderRepeatableRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	ts := b.store.Tx(tx)
	id := ident("rr")
	_, ok, err := ts.Get(ctx, id) // takes the snapshot
	require.NoError(t, err)
	require.False(t, ok)
	other := reserve(t, b.store, id, "other", time.Time{})
	rec, created, err := ts.Reserve(ctx, idemdriver.ReserveParams{Ident: id, Owner: "mine", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, other.Owner, rec.Owner)
	require.NoError(t, tx.Commit())
	_, _, err = ts.Get(ctx, id)
	require.ErrorIs(t, err, sql.ErrTxDone)
}

// TestCorruptRowIsAnError: a row that does not decode is an error, never
// a panic.
func TestCorruptRowIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := ident("corrupt")
	reserve(t, b.store, id, "o", time.Time{})
	_, err := b.db.ExecContext(t.Context(), `UPDATE unstuck_idem_record SET resource_ids = '{"a": 1}'`)
	require.NoError(t, err)
	_, _, err = b.store.Get(t.Context(), id)
	require.ErrorContains(t, err, "resource_ids")
	require.False(t, errors.Is(err, sql.ErrNoRows))
}
