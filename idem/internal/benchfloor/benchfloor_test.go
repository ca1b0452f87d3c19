package benchfloor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type value struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

// The floor's sealing must be real work: a value sealed for one digest
// opens under it, and under no other digest or key.
func TestSealOpen(t *testing.T) {
	f, err := New()
	require.NoError(t, err)
	digest, keyHash, token := Reserve("tenant", "run", "key-1")
	require.Len(t, digest, 64)
	require.Len(t, keyHash, 64)
	require.Len(t, token, 32)
	_, _, token2 := Reserve("tenant", "run", "key-1")
	require.NotEqual(t, token, token2, "owner tokens are random")

	var roundTrip value
	sealed, err := f.Seal(digest, value{ID: "ch_1", Amount: 42}, &roundTrip)
	require.NoError(t, err)
	require.Equal(t, value{ID: "ch_1", Amount: 42}, roundTrip, "the JSON round trip")
	var got value
	require.NoError(t, f.Open(digest, sealed, &got))
	require.Equal(t, value{ID: "ch_1", Amount: 42}, got)

	other, _, _ := Reserve("tenant", "run", "key-2")
	require.Error(t, f.Open(other, sealed, &got), "bound to its digest")
	g, err := New()
	require.NoError(t, err)
	require.Error(t, g.Open(digest, sealed, &got), "another key")
	require.Error(t, f.Open(digest, sealed[:5], &got))
}

// First hands the statements the digest and token, and the result it
// seals opens through Replay under the same key.
func TestFirstReplay(t *testing.T) {
	f, err := New()
	require.NoError(t, err)
	stored := map[string][]byte{}
	var roundTrip value
	err = f.First("tenant", "run", "key-1", func() (any, error) { return value{ID: "ch_2", Amount: 7}, nil }, &roundTrip,
		func(digest, token string, result func() ([]byte, error)) error {
			require.Len(t, token, 32)
			sealed, err := result()
			stored[digest] = sealed
			return err
		})
	require.NoError(t, err)
	require.Equal(t, value{ID: "ch_2", Amount: 7}, roundTrip)
	var got value
	require.NoError(t, f.Replay("tenant", "run", "key-1", func(digest string) ([]byte, error) { return stored[digest], nil }, &got))
	require.Equal(t, value{ID: "ch_2", Amount: 7}, got)
	require.Error(t, f.Replay("tenant", "run", "key-2", func(digest string) ([]byte, error) { return stored[digest], nil }, &got))
}
