package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	for range 3 {
		b.append(t, entryOpts{})
	}
	v, err := b.trail.Verify(t.Context())
	require.NoError(t, err)

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	cp := SignCheckpoint(priv, Anchor{Seq: v.HeadSeq, Hash: v.Head})

	// Kept as text, read back, checked with the public key only.
	text, err := cp.MarshalText()
	require.NoError(t, err)
	var read Checkpoint
	require.NoError(t, read.UnmarshalText(text))
	require.Equal(t, cp, read)
	require.NoError(t, read.Verify(pub), "verifies with the public key alone")
	v, err = b.trail.Verify(t.Context(), read.Anchor)
	require.NoError(t, err)
	require.True(t, v.OK)

	// Another head, another key, a flipped bit: refused.
	forged := read
	forged.Seq = 2
	require.ErrorIs(t, forged.Verify(pub), ErrBadSignature)
	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	require.ErrorIs(t, read.Verify(otherPub), ErrBadSignature)
	flipped := read
	flipped.Hash = append([]byte(nil), read.Hash...)
	flipped.Hash[0] ^= 1
	require.ErrorIs(t, flipped.Verify(pub), ErrBadSignature)
	require.Error(t, read.Verify(pub[:5]), "a truncated key")

	for _, bad := range []string{"", "nonsense 1 2 3", "unstuck-audit-checkpoint/v1 0 00 00",
		"unstuck-audit-checkpoint/v1 1 abcd " + string(make([]byte, 128))} {
		require.Error(t, new(Checkpoint).UnmarshalText([]byte(bad)), bad)
	}
	for _, bad := range []string{"", "1", "x:00", "1:zz", "-1:" + Anchor{Hash: v.Head}.String()[2:]} {
		_, err := ParseAnchor(bad)
		require.ErrorIs(t, err, ErrInvalid, bad)
	}
}
