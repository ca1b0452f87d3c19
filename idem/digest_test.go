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
