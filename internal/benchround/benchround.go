// Package benchround interleaves the variants of a benchmark in rounds, so
// that a comparison with a limit is measured back to back under the same
// load (issue 12). go test -count repeats each sub-benchmark in a row,
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
	type sub struct {
		name string
		fn   func(b *testing.B)
	}
	for round := range Rounds() {
		subs := [2]sub{{"engine", engine}, {"limit", limit}}
		if round%2 == 1 {
			subs[0], subs[1] = subs[1], subs[0]
		}
		for _, s := range subs {
			b.Run(s.name+"/goroutines="+strconv.Itoa(g), s.fn)
		}
	}
}
