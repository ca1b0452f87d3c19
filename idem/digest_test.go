package idem

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDigestIsUnambiguous(t *testing.T) {
	t.Parallel()
	// SPEC H5: length prefixes keep ("ab","c") and ("a","bc") apart.
	require.NotEqual(t, Digest("ab", "c", "k"), Digest("a", "bc", "k"))
	require.NotEqual(t, Digest("s", "op", "k1"), Digest("s", "op", "k2"))
	require.Equal(t, Digest("s", "op", "k"), Digest("s", "op", "k"))
	require.Len(t, Digest("s", "op", "k"), 64)
}

func TestKeyHashIsTheKeyAlone(t *testing.T) {
	t.Parallel()
	// SPEC K11: one hash per raw key, whatever the scope and operation,
	// and never equal to a digest of the same key.
	require.Len(t, KeyHash("k"), 64)
	require.Equal(t, KeyHash("k"), KeyHash("k"))
	require.NotEqual(t, KeyHash("k1"), KeyHash("k2"))
	require.NotEqual(t, KeyHash("k"), Digest("", "", "k"))
}
