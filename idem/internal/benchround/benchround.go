// Package benchround interleaves the variants of a benchmark in rounds, so
// that a comparison with a limit is measured back to back under the same
// load. go test -count repeats each sub-benchmark in a row,
// which does not interleave.
package benchround

import (
	"os"
	"strconv"
	"testing"
)

// Rounds is how many rounds Run measures: UNSTUCK_BENCH_ROUNDS, default 1.
func Rounds() int {
	n, err := strconv.Atoi(os.Getenv("UNSTUCK_BENCH_ROUNDS"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Run runs engine and limit as sub-benchmarks of b named
// "engine/goroutines=g" and "limit/goroutines=g", [Rounds] times, the
// engine first in even rounds and the limit first in odd ones. Go
// suffixes the repeated names with #01, #02, …: the ratio of round k is
// limit ns/op ÷ engine ns/op of the pair with the same suffix.
func Run(b *testing.B, g int, engine, limit func(b *testing.B)) {
	RunVariants(b, g, Variant{"engine", engine}, Variant{"limit", limit})
}

// Variant is one side of a comparison: its name and its benchmark.
type Variant struct {
	Name string
	Fn   func(b *testing.B)
}

// RunVariants runs every variant as a sub-benchmark of b named
// "name/goroutines=g", [Rounds] times, the order rotated by one each
// round (round k starts with variant k mod len), so that each variant
// runs first, in the middle and last equally often. Ratios are taken
// between sub-benchmarks with the same #NN suffix, as for [Run].
func RunVariants(b *testing.B, g int, variants ...Variant) {
	for round := range Rounds() {
		for i := range variants {
			v := variants[(round+i)%len(variants)]
			b.Run(v.Name+"/goroutines="+strconv.Itoa(g), v.Fn)
		}
	}
}
