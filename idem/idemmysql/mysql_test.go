package idemmysql_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
)

// t0 is far from the real clock, so a store that ignored Now would judge
// every lease below as long expired.
var t0 = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

type testBundle struct {
	dsn   string
	db    *sql.DB
	store *idemmysql.Store
}

// setup returns a migrated store on a database of its own.
func setup(t *testing.T) *testBundle {
	t.Helper()
	dsn := mysqltest.NewDatabase(t)
	db, err := idemmysql.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	store := idemmysql.New(db)
	require.NoError(t, store.Migrate(t.Context()))
	return &testBundle{dsn: dsn, db: db, store: store}
}

func ident(key string) idemdriver.Ident {
	return idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", key)}
}

func reserve(t *testing.T, s idemdriver.Store, id idemdriver.Ident, owner string, now time.Time) idemdriver.Record {
	t.Helper()
	rec, created, err := s.Reserve(t.Context(), idemdriver.ReserveParams{
		Ident: id, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour, Now: now,
	})
	require.NoError(t, err)
	require.True(t, created, "created")
	return rec
}

func get(t *testing.T, s idemdriver.Store, id idemdriver.Ident) idemdriver.Record {
	t.Helper()
	rec, ok, err := s.Get(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok, "record found")
	return rec
}

// TestConformance runs the whole idemtest suite (SPEC IDEM-S1..S3),
// including the 64 × 200 same-key race and fenced takeover.
func TestConformance(t *testing.T) {
	t.Parallel()
	idemtest.Run(t, func(t *testing.T) idemdriver.Store {
		return setup(t).store
	})
}
