package leanpath

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// mix records times the outcomes given, in order (true: created).
func mix(l *Path, times int, created ...bool) {
	for range times {
		for _, c := range created {
			l.Record(c)
		}
	}
}

// With PostgreSQL's costs (a repeat asked in one statement costs
// little, a new key read first a round trip), a lean Reserve writes first
// while most keys are new and reads first while at least 4 in 5 Reserves
// find a record (a retry storm); it goes back when new keys return.
func TestPathFollowsTheTraffic(t *testing.T) {
	t.Parallel()
	l := Path{Costs: Costs{Hit: 1, Miss: 4, Max: 64, At: 32}}
	require.False(t, l.ReadFirst(), "a new Path writes first")
	mix(&l, 31, false)
	require.False(t, l.ReadFirst(), "31 repeats in a row are not yet a storm")
	l.Record(false)
	require.True(t, l.ReadFirst(), "32 repeats in a row read first")
	mix(&l, 1000, false)
	require.Equal(t, int32(64), l.Score(), "the score is capped")
	mix(&l, 40, true, false, false, false) // 3 repeats in 4: below 4 in 5, the score falls, by 1 each 4
	require.False(t, l.ReadFirst(), "a mix of 3 repeats in 4 writes first")
	mix(&l, 100, true)
	require.Equal(t, int32(0), l.Score(), "the score does not go below 0")
	mix(&l, 8, true, false, false, false, false, false, false, false, false, false) // 9 repeats in 10
	require.True(t, l.ReadFirst(), "a mix of 9 repeats in 10 reads first")

	for way, want := range map[Way]bool{WriteFirst: false, ReadFirst: true} {
		forced := Path{Costs: l.Costs, Force: way}
		mix(&forced, 100, !want)
		require.Equal(t, want, forced.ReadFirst(), "forced way %d", way)
	}
}

// With costs that weigh both mistakes alike (SQLite's), the break-even is
// 1 repeat in 2.
func TestPathBreakEven(t *testing.T) {
	t.Parallel()
	l := Path{Costs: Costs{Hit: 1, Miss: 1, Max: 64, At: 32}}
	mix(&l, 100, false, true, false, true, true) // 2 repeats in 5
	require.False(t, l.ReadFirst(), "2 repeats in 5 write first")
	mix(&l, 100, false, false, true) // 2 repeats in 3
	require.True(t, l.ReadFirst(), "2 repeats in 3 read first")
}
