package idempgx

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// Issue 12: the lean Reserve decodes its row itself; a row in any shape
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
