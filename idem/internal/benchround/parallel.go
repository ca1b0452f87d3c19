//go:build unix

package benchround

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Parallel runs op b.N times in total on exactly g goroutines, which take
// indexes 0..b.N-1 from a shared counter, and reports cpu-ns/op, the CPU
// time of the process per operation ([CPUTime]). The first error stops
// the benchmark. The goroutines are started by hand, so the count is
// exact whatever GOMAXPROCS is.
func Parallel(b *testing.B, g int, op func(ctx context.Context, i int) error) {
	b.Helper()
	ctx := context.Background()
	var (
		next   atomic.Int64
		failed atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		first  error
	)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := CPUTime()
	for range g {
		wg.Go(func() {
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := op(ctx, int(i)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if first != nil {
		b.Fatal(first)
	}
	b.ReportMetric(float64(CPUTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// CPUTime returns the user and system CPU time this process has used so
// far, on all its threads. Per operation it is a measure of cost that
// other load on the machine disturbs much less than the elapsed time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
