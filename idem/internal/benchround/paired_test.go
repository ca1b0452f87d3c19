package benchround

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// work hashes n times: CPU work proportional to n.
func work(n int) {
	var sum [32]byte
	for range n {
		sum = sha256.Sum256(sum[:])
	}
}

// Paired calls every op once for each i of its own sequence, on g
// goroutines, and reports each op's time and the ratios asked for: an op
// doing a third of another's work has a ratio well under 1 against it.
func TestPaired(t *testing.T) {
	for _, g := range []int{1, 4} {
		var mu sync.Mutex
		seen := map[string]map[int]int{"light": {}, "heavy": {}}
		note := func(name string, i int) {
			mu.Lock()
			seen[name][i]++
			mu.Unlock()
		}
		var n int
		res := testing.Benchmark(func(b *testing.B) {
			n = b.N
			for _, m := range seen {
				clear(m)
			}
			Paired(b, g, 8, []string{"light/heavy", "heavy/light"},
				Op{Name: "light", Fn: func(_ context.Context, i int) error { note("light", i); work(200); return nil }},
				Op{Name: "heavy", Fn: func(_ context.Context, i int) error { note("heavy", i); work(600); return nil }})
		})
		require.Positive(t, n)
		blocks := (n + 7) / 8
		for name, m := range seen {
			require.Len(t, m, blocks*8, "%s at %d goroutines: every i once", name, g)
			for i := range blocks * 8 {
				require.Equal(t, 1, m[i], "%s: i %d", name, i)
			}
		}
		require.Less(t, res.Extra["light/heavy"], 0.8, "g %d", g)
		require.Greater(t, res.Extra["heavy/light"], 1.25, "g %d", g)
		require.Positive(t, res.Extra["light-ns/op"])
		require.Positive(t, res.Extra["heavy-cpu-ns/op"])
	}
}

// runBlock stops at an op's error and returns it.
func TestRunBlockReturnsTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	for _, g := range []int{1, 4} {
		err := runBlock(context.Background(), g, 0, 100, func(_ context.Context, i int) error {
			if i == 17 {
				return boom
			}
			return nil
		})
		require.ErrorIs(t, err, boom, "g %d", g)
	}
}
