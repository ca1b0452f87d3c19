package idempgx

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemtest"
	"github.com/unstuckhq/unstuck/idem/internal/leanpath"
	"github.com/unstuckhq/unstuck/unstucktest/idemsql"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// The lean Reserve decodes its row itself; a row in any shape
// but the one it asked for is an error naming the column, never a panic
// or a guess.
func TestDecodeLeanRefusesRowsOfAnotherShape(t *testing.T) {
	t.Parallel()
	i8 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	good := func() ([]pgconn.FieldDescription, [][]byte) {
		names := []string{"id", "fingerprint", "status", "result", "owner_token", "fence", "lease_expires_at", "created_at", "expires_at", "bool", "coalesce"}
		fds := make([]pgconn.FieldDescription, len(leanTypes))
		for i := range fds {
			fds[i] = pgconn.FieldDescription{Name: names[i], DataTypeOID: leanTypes[i], Format: pgtype.BinaryFormatCode}
		}
		fds[1].Format, fds[2].Format, fds[4].Format = pgtype.TextFormatCode, pgtype.TextFormatCode, pgtype.TextFormatCode
		return fds, [][]byte{i8(7), []byte("fp"), []byte("completed"), {1, 2}, []byte("tok"), i8(9), nil,
			i8(1_000_000), i8(2_000_000), {1}, i8(3_000_000)}
	}
	fds, vals := good()
	r, created, err := decodeLean(fds, vals)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, int64(7), r.ID)
	require.Equal(t, "completed", string(r.Status))
	require.Equal(t, []byte{1, 2}, r.Result)
	require.Equal(t, int64(9), r.Fence)
	require.True(t, r.LeaseExpiresAt.IsZero())
	require.Equal(t, "2000-01-01 00:00:01 +0000 UTC", r.CreatedAt.String())

	for name, c := range map[string]struct {
		mutate func(fds []pgconn.FieldDescription, vals [][]byte) ([]pgconn.FieldDescription, [][]byte)
		want   string
	}{
		"too few columns": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			return f[:5], v[:5]
		}, "5 columns"},
		"another type": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			f[0].DataTypeOID = pgtype.Int4OID
			return f, v
		}, "column id"},
		"int8 in text": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			f[5].Format = pgtype.TextFormatCode
			return f, v
		}, "column fence"},
		"NULL status": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			v[2] = nil
			return f, v
		}, "column status is NULL"},
		"unknown status": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			v[2] = []byte("done")
			return f, v
		}, "unknown status"},
		"short int8": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			v[0] = v[0][:7]
			return f, v
		}, "column id has 7 bytes"},
		"infinite expiry": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			v[8] = i8(math.MaxInt64)
			return f, v
		}, "column expires_at is infinite"},
		"long bool": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			v[9] = []byte{1, 0}
			return f, v
		}, "column bool has 2 bytes"},
		"short lease": {func(f []pgconn.FieldDescription, v [][]byte) ([]pgconn.FieldDescription, [][]byte) {
			v[6] = []byte{1}
			return f, v
		}, "column lease_expires_at has 1 bytes"},
	} {
		fds, vals := good()
		fds, vals = c.mutate(fds, vals)
		_, _, err := decodeLean(fds, vals)
		require.ErrorContains(t, err, c.want, name)
	}
}

// leanWays are the two ways of a lean Reserve, forced, by name.
var leanWays = map[string]leanpath.Way{"OneStatement": leanpath.WriteFirst, "ReadFirst": leanpath.ReadFirst}

// SPEC IDEM-S3: the whole conformance suite, which runs the
// engine's lean Reserve (the same-key race, fenced takeover, lean
// reserve), passes with either way forced; TestConformance runs the
// adaptive choice.
func TestConformanceLeanWays(t *testing.T) {
	slowtest.Skip(t, slowtest.Ways)
	t.Parallel()
	for name, way := range leanWays {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idemtest.Run(t, func(t *testing.T) idemdriver.Store {
				s := New(pgtest.Schema(t))
				s.path.Force = way
				require.NoError(t, s.Migrate(t.Context()))
				return s
			})
		})
	}
}

// A lean Reserve of a key that has a record writes nothing,
// whichever way it takes: no fence is taken from the sequence (whose
// nextval would write WAL), the record is returned as it is, and inside a
// transaction (which asks in one statement, with the INSERT) no
// transaction id is assigned, which any row written would take.
func TestLeanReserveOfExistingWritesNothing(t *testing.T) {
	t.Parallel()
	for name, way := range leanWays {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.store.path.Force = way
			id := newIdent()
			lean := func(owner string) idemdriver.ReserveParams {
				return idemdriver.ReserveParams{Ident: id, Owner: owner, Lease: time.Minute, TTL: time.Hour, Lean: true}
			}
			first, created, err := b.store.Reserve(t.Context(), lean("owner-a"))
			require.NoError(t, err)
			require.True(t, created)
			require.Equal(t, b.get(t, id), withoutReadAt(first), "a created record is whole")
			before := b.lastFence(t)
			for range 3 {
				rec, created, err := b.store.Reserve(t.Context(), lean(rand.Text()))
				require.NoError(t, err)
				require.False(t, created)
				require.Equal(t, first.ID, rec.ID)
				require.Equal(t, first.Owner, rec.Owner)
				require.Equal(t, first.Fingerprint, rec.Fingerprint)
				require.Equal(t, first.LeaseExpiresAt, rec.LeaseExpiresAt)
			}
			require.NoError(t, b.store.WithinTx(t.Context(), func(ctx context.Context, tx idemdriver.Store) error {
				rec, created, err := tx.Reserve(ctx, lean(rand.Text()))
				require.NoError(t, err)
				require.False(t, created)
				require.Equal(t, first.Owner, rec.Owner)
				pgtx, ok := TxFrom(ctx)
				require.True(t, ok)
				var assigned bool
				require.NoError(t, pgtx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned() IS NOT NULL`).Scan(&assigned))
				require.False(t, assigned, "the lean Reserve of an existing key wrote a row")
				return nil
			}))
			require.Equal(t, before, b.lastFence(t), "a lean Reserve of an existing key burnt a fence")
			require.Equal(t, b.get(t, id), withoutReadAt(first), "the record is unchanged")
			next, created, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{
				Ident: newIdent(), Owner: "owner-b", Lease: time.Minute, TTL: time.Hour, Lean: true})
			require.NoError(t, err)
			require.True(t, created)
			require.Equal(t, first.Fence+1, next.Fence, "the next new key takes the next fence")
		})
	}
}

// withoutReadAt returns r with ReadAt zero, as Get's record compares.
func withoutReadAt(r idemdriver.Record) idemdriver.Record {
	r.ReadAt = time.Time{}
	return r
}

// An owner's write finds its record through the unique ident
// index, even where the statistics say few records are processing (the
// steady state), which made PostgreSQL walk the console's partial indexes
// of processing records instead, every processing and dead entry of the
// scope. Complete with a record ID (the engine's) uses the primary key.
func TestOwnerWritesUseTheIdentIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO unstuck_idem_record (scope, operation, key_digest, fingerprint, status, owner_token,
    fence, created_at, updated_at, expires_at)
SELECT 'tenant-1', 'run', lpad(to_hex(i), 64, '0'), '', 'completed', '', nextval('unstuck_idem_fence_seq'),
    now(), now(), now() + interval '1 day'
FROM generate_series(1, 2000) i`)
	b.reserve(t, reserveOpts{})
	b.exec(t, `ANALYZE unstuck_idem_record`)
	id := newIdent()
	const identIndex, primaryKey = "unstuck_idem_record_ident_key", "unstuck_idem_record_pkey"
	for name, q := range map[string]struct {
		sql   string
		args  []any
		index string
	}{
		"complete":       {completeSQL, []any{id.Scope, id.Operation, id.KeyDigest, "tok", 1, "completed", []byte("r"), 200, "", nil}, identIndex},
		"complete by id": {completeByIDSQL, []any{int64(7), id.KeyDigest, "tok", 1, "completed", []byte("r"), 200, "", nil}, primaryKey},
		"annotate":       {annotateSQL, []any{id.Scope, id.Operation, id.KeyDigest, "tok", 1, "c", "e", []string{"r"}, nil}, identIndex},
		"release":        {releaseSQL, []any{id.Scope, id.Operation, id.KeyDigest, "tok", 1}, identIndex},
		"extend":         {extendSQL, []any{id.Scope, id.Operation, id.KeyDigest, "tok", 1, int64(1000), nil}, identIndex},
	} {
		rows, err := b.pool.Query(t.Context(), "EXPLAIN "+q.sql, q.args...)
		require.NoError(t, err, name)
		var plan strings.Builder
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line), name)
			plan.WriteString(line + "\n")
		}
		require.NoError(t, rows.Err(), name)
		require.Contains(t, plan.String(), q.index, "%s:\n%s", name, plan.String())
	}
}

// The fault experiments cut completions on the wire by their shape
// (unstucktest/idemsql): both completion statements must be recognized and
// no other statement of the store, or a cut experiment injects no fault
// (or the wrong one) without a word.
func TestFaultsKnowTheCompletion(t *testing.T) {
	for name, sql := range map[string]string{"complete": completeSQL, "complete by id": completeByIDSQL} {
		require.True(t, idemsql.IsCompletion(sql), name)
	}
	for name, sql := range map[string]string{
		"settle": settleSQL, "takeover": takeoverSQL, "takeover fresh": takeoverFreshSQL, "annotate": annotateSQL,
		"extend": extendSQL, "release": releaseSQL, "reserve": reserveLeanSQL, "insert": insertLeanSQL, "get": getLeanSQL,
	} {
		require.False(t, idemsql.IsCompletion(sql), name)
	}
}
