//go:build unix

package idempgx

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/leanpath"
)

// BenchmarkFirstStatements splits the first-request row of issue 12 into
// its statements: each operation runs the limit's INSERT and UPDATE on one
// new key and the store's lean Reserve (written first, reserveLeanSQL) and
// Complete on another, timing every statement alone, the limit's pair and
// the store's in alternating order; Complete finds the record by primary
// key (Completion.RecordID, as the engine's) in half of the operations and
// by ident in the other half. It reports the median latency of each
// statement in µs: what the store's SQL costs against the limit's, without
// the engine around it. One goroutine, on the analyzed table of
// newBenchEnv. It only reports.
func BenchmarkFirstStatements(b *testing.B) {
	env := newBenchEnv(b)
	store := New(env.pool)
	store.path.Force = leanpath.WriteFirst
	ctx := context.Background()
	prefix := benchPrefix(b)
	blob := make([]byte, env.sealedLen)
	var limitInsert, limitUpdate, reserve, byID, byIdent []time.Duration
	timed := func(into *[]time.Duration, f func() error) {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(t0))
	}
	limit := func(i int) {
		var id int64
		timed(&limitInsert, func() error {
			return env.pool.QueryRow(ctx, limitInsertSQL, benchScope, idem.DefaultOperation, benchDigest(prefix, 2*i), benchOwner).Scan(&id)
		})
		timed(&limitUpdate, func() error {
			_, err := env.pool.Exec(ctx, limitCompleteSQL, id, blob)
			return err
		})
	}
	engine := func(i int) {
		key := strconv.Itoa(i) + prefix
		id := idemdriver.Ident{Scope: benchScope, Operation: idem.DefaultOperation, KeyDigest: benchDigest(prefix, 2*i+1)}
		var rec idemdriver.Record
		timed(&reserve, func() error {
			var err error
			rec, _, err = store.Reserve(ctx, idemdriver.ReserveParams{Ident: id, KeyHash: idem.KeyHash(key), Owner: benchOwner,
				Lease: idem.DefaultLease, TTL: idem.DefaultTTL, Lean: true})
			return err
		})
		c := idemdriver.Completion{Status: idemdriver.StatusCompleted, Result: blob}
		into := &byIdent
		if (i/2)%2 == 0 {
			c.RecordID, into = rec.ID, &byID
		}
		timed(into, func() error { return store.Complete(ctx, id, rec.Owner, c) })
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			limit(i)
			engine(i)
		} else {
			engine(i)
			limit(i)
		}
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Microsecond)
	}
	b.ReportMetric(median(limitInsert), "µs-limit-insert")
	b.ReportMetric(median(limitUpdate), "µs-limit-update")
	b.ReportMetric(median(reserve), "µs-reserve")
	b.ReportMetric(median(byID), "µs-complete-by-id")
	b.ReportMetric(median(byIdent), "µs-complete-by-ident")
}
