package benchround

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Op is one operation of a paired variant; i counts that variant's
// operations from 0.
type Op struct {
	Name string
	Fn   func(ctx context.Context, i int) error
}

// Paired measures ops against each other inside one benchmark, in blocks:
// a block runs `block` operations of every op in turn (shared by g
// goroutines, started for the block), in an order shuffled each block (a
// fixed rotation would always put the same op after the same other), so
// that each op meets the same machine within milliseconds of the others. Rounds of whole sub-benchmarks (RunVariants) are seconds
// apart, and on a shared machine their spread can be as wide as the
// effect measured; blocks see the same noise on every side.
//
// b.N is the number of operations of each op (rounded up to whole
// blocks). Paired reports, for each op, "<name>-ns/op" (elapsed) and
// "<name>-cpu-ns/op" (this process's CPU, see CPUTime); for each ratio
// "a/b" in ratios, "a/b" — the median over blocks of a's block time ÷
// b's — and "a/b-cpu", the ratio of their total CPU. The quartiles of each
// elapsed ratio are logged. The built-in ns/op is the time of one
// operation of every op together.
func Paired(b *testing.B, g, block int, ratios []string, ops ...Op) {
	b.Helper()
	ctx := context.Background()
	index := make(map[string]int, len(ops))
	for i, op := range ops {
		index[op.Name] = i
	}
	type pair struct{ a, b int }
	pairs := make([]pair, len(ratios))
	for k, r := range ratios {
		an, bn, ok := strings.Cut(r, "/")
		ai, aok := index[an]
		bi, bok := index[bn]
		if !ok || !aok || !bok {
			b.Fatalf("benchround: ratio %q does not name two ops", r)
		}
		pairs[k] = pair{ai, bi}
	}
	blocks := (b.N + block - 1) / block
	elapsed := make([][]time.Duration, len(ops)) // [op][block]
	cpu := make([]time.Duration, len(ops))
	next := make([]int, len(ops)) // each op's next i
	for i := range elapsed {
		elapsed[i] = make([]time.Duration, blocks)
	}
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	shuffle := rand.New(rand.NewPCG(uint64(b.N), uint64(len(ops))))
	b.ReportAllocs()
	b.ResetTimer()
	for blk := range blocks {
		shuffle.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, o := range order {
			c0, t0 := CPUTime(), time.Now()
			if err := runBlock(ctx, g, next[o], block, ops[o].Fn); err != nil {
				b.Fatalf("%s: %v", ops[o].Name, err)
			}
			elapsed[o][blk] = time.Since(t0)
			cpu[o] += CPUTime() - c0
			next[o] += block
		}
	}
	b.StopTimer()
	n := float64(blocks * block)
	for o, op := range ops {
		var sum time.Duration
		for _, d := range elapsed[o] {
			sum += d
		}
		b.ReportMetric(float64(sum)/n, op.Name+"-ns/op")
		b.ReportMetric(float64(cpu[o])/n, op.Name+"-cpu-ns/op")
	}
	for k, p := range pairs {
		r := make([]float64, blocks)
		for blk := range r {
			r[blk] = float64(elapsed[p.a][blk]) / float64(elapsed[p.b][blk])
		}
		slices.Sort(r)
		q := func(f float64) float64 { return r[int(f*float64(len(r)-1))] }
		b.ReportMetric(q(0.5), ratios[k])
		b.ReportMetric(float64(cpu[p.a])/float64(cpu[p.b]), ratios[k]+"-cpu")
		if blocks < 2 {
			continue // the framework's probe with b.N = 1
		}
		b.Logf("%s over %d blocks of %d: min %.3f q1 %.3f median %.3f q3 %.3f max %.3f",
			ratios[k], blocks, block, r[0], q(0.25), q(0.5), q(0.75), r[len(r)-1])
	}
}

// runBlock runs fn for i in [first, first+n) on g goroutines and returns
// the first error.
func runBlock(ctx context.Context, g, first, n int, fn func(ctx context.Context, i int) error) error {
	if g == 1 {
		for i := first; i < first+n; i++ {
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		taken    atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range g {
		wg.Go(func() {
			for {
				k := int(taken.Add(1) - 1)
				if k >= n {
					return
				}
				if err := fn(ctx, first+k); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}
