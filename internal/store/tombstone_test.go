package store

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// addTombstone writes t in a transaction of its own on b's database.
func addTombstone(t *testing.T, b testBundle, ts Tombstone) {
	t.Helper()
	ctx := t.Context()
	if b.pool != nil {
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return b.db.PgxTx().AddTombstoneTx(ctx, tx, ts) }))
		return
	}
	tx, err := b.sqlDB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func(tx *sql.Tx) { _ = tx.Rollback() }(tx)
	require.NoError(t, b.db.SQLTx().AddTombstoneTx(ctx, tx, ts))
	require.NoError(t, tx.Commit())
}

// SPEC K21: a tombstone is found by record ID, key hash, whole digest and
// the short ID's leading digits; forgetting a reused record ID again
// replaces it; an empty filter is refused.
func TestTombstones(t *testing.T) {
	eachDialect(t, func(t *testing.T, b testBundle) {
		ctx := context.Background()
		at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
		a := Tombstone{RecordID: 41, Scope: "tenant:a", Operation: "POST /charges", KeyDigest: "ab12cd0000000000000000000000000000000000000000000000000000000000",
			KeyHash: "h1", Status: "pending", ExternalRef: "ch_1", Action: "forget", Actor: "support", Reason: "the customer paid by phone", At: at}
		other := a
		other.RecordID, other.KeyDigest, other.KeyHash, other.At = 42, "ab13"+a.KeyDigest[4:], "h2", at.Add(time.Minute)
		addTombstone(t, b, a)
		addTombstone(t, b, other)

		got, err := b.db.Tombstones(ctx, TombstoneFilter{RecordID: 41}, 10)
		require.NoError(t, err)
		require.Equal(t, []Tombstone{a}, got)
		got, err = b.db.Tombstones(ctx, TombstoneFilter{KeyHash: "h2"}, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, int64(42), got[0].RecordID)
		got, err = b.db.Tombstones(ctx, TombstoneFilter{KeyDigest: a.KeyDigest}, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, int64(41), got[0].RecordID)
		got, err = b.db.Tombstones(ctx, TombstoneFilter{KeyDigest: "ab1"}, 10)
		require.NoError(t, err)
		require.Len(t, got, 2, "a prefix")
		require.Equal(t, int64(42), got[0].RecordID, "newest first")
		got, err = b.db.Tombstones(ctx, TombstoneFilter{KeyDigest: "ab12"}, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)

		again := a
		again.Actor, again.Action, again.At = "oncall", "confirm_not_happened", at.Add(time.Hour)
		addTombstone(t, b, again)
		got, err = b.db.Tombstones(ctx, TombstoneFilter{RecordID: 41}, 10)
		require.NoError(t, err)
		require.Equal(t, []Tombstone{again}, got, "replaced")

		_, err = b.db.Tombstones(ctx, TombstoneFilter{}, 10)
		require.ErrorIs(t, err, ErrInvalid)
	})
}
