package leanpath

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 12: with PostgreSQL's costs (a repeat asked in one statement costs
// little, a new key read first a round trip), a lean Reserve writes first
// while most keys are new and reads first while at least 4 in 5 Reserves
// find a record (a retry storm); it goes back when new keys return.
func TestPathFollowsTheTraffic(t *testing.T) {
	t.Parallel()
	l := Path{Costs: Costs{Hit: 1, Miss: 4, Max: 64, At: 32}}
	require.False(t, l.ReadFirst(), "a new Path writes first")
	for range 31 {
		l.Record(false)
	}
	require.False(t, l.ReadFirst(), "31 repeats in a row are not yet a storm")
	l.Record(false)
	require.True(t, l.ReadFirst(), "32 repeats in a row read first")
	for range 1000 {
		l.Record(false)
	}
	require.Equal(t, int32(64), l.Score(), "the score is capped")
	// 3 repeats in 4: below 4 in 5, the score falls, by 1 each 4.
	for range 40 {
		l.Record(true)
		l.Record(false)
		l.Record(false)
		l.Record(false)
	}
	require.False(t, l.ReadFirst(), "a mix of 3 repeats in 4 writes first")
	for range 100 {
		l.Record(true)
	}
	require.Equal(t, int32(0), l.Score(), "the score does not go below 0")
	// 9 repeats in 10: above 4 in 5, the score rises.
	for range 8 {
		l.Record(true)
		for range 9 {
			l.Record(false)
		}
	}
	require.True(t, l.ReadFirst(), "a mix of 9 repeats in 10 reads first")

	forced := Path{Costs: l.Costs, Force: WriteFirst}
	for range 100 {
		forced.Record(false)
	}
	require.False(t, forced.ReadFirst())
	forced = Path{Costs: l.Costs, Force: ReadFirst}
	require.True(t, forced.ReadFirst())
}

// With SQLite's costs (a repeat that writes first costs about twice what a
// new key read first does), the break-even is 1 repeat in 3.
func TestPathBreakEven(t *testing.T) {
	t.Parallel()
	l := Path{Costs: Costs{Hit: 2, Miss: 1, Max: 64, At: 32}}
	for range 100 { // 1 repeat in 4: below 1 in 3, writes first
		l.Record(false)
		l.Record(true)
		l.Record(true)
		l.Record(true)
	}
	require.False(t, l.ReadFirst())
	for range 100 { // 1 repeat in 2: reads first
		l.Record(false)
		l.Record(true)
	}
	require.True(t, l.ReadFirst())
}
