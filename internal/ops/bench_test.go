package ops_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/ops"
)

// BenchmarkKeyDecisions measures operator decisions per second on
// PostgreSQL with 8 concurrent operators: each op forgets one pending key
// (read, version check, transition, audit append, commit). Keys are made
// before the timer starts.
func BenchmarkKeyDecisions(b *testing.B) {
	bb := setup(b, backends["PostgreSQL"])
	ctx := context.Background()
	recs := make([]struct{ id, version int64 }, b.N)
	for i := range b.N {
		key := fmt.Sprintf("bench-%d", i)
		_, _ = idem.Run(ctx, bb.engine, key, "tenant:ops", func(ctx context.Context) (int, error) {
			return 0, idem.Uncertain(fmt.Errorf("timeout"))
		}, nil)
		page, err := bb.records.ListKeys(ctx, idemdriver.KeyFilter{Scope: "tenant:ops", Operation: idem.DefaultOperation, KeyDigest: idem.Digest("tenant:ops", idem.DefaultOperation, key)})
		if err != nil || len(page.Records) != 1 {
			b.Fatalf("seed %d: %v", i, err)
		}
		recs[i].id, recs[i].version = page.Records[0].ID, page.Records[0].Version
	}
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				_, err := bb.keys.Decide(ctx, ops.Actor{Username: fmt.Sprintf("op%d", g), Role: "oncall"},
					ops.KeyDecision{RecordID: recs[i].id, Version: recs[i].version, Action: idem.OperatorForget, Reason: "benchmark: provider has nothing", AcknowledgeRerun: true})
				if err != nil {
					b.Errorf("decide: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
