//go:build unix

package idempgx

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/benchfloor"
	"github.com/unstuckhq/unstuck/idem/internal/leanpath"
)

// requiredInsertSQL and requiredUpdateSQL are the limit's pair with what
// the contract requires of the statements added, and nothing else: the
// key hash stored (K11), an insert that meets an existing record without
// an error (inside the application's transaction an error would abort it),
// returning what a created record's owner needs (its fence, lease, times),
// and a completion that only the owner of a processing record makes
// (fencing) and that moves updated_at and version (the console's order and
// an operator decision's compare-and-swap).
const (
	requiredInsertSQL = `INSERT INTO unstuck_idem_record (scope, operation, key_digest, status, owner_token, fence,
    lease_expires_at, created_at, updated_at, expires_at, key_hash)
VALUES ($1, $2, $3, 'processing', $4, nextval('unstuck_idem_fence_seq'),
    now() + interval '1 minute', now(), now(), now() + interval '1 day', $5)
ON CONFLICT (scope, operation, key_digest) DO NOTHING
RETURNING id, fence, lease_expires_at, created_at, expires_at`
	requiredUpdateSQL = `UPDATE unstuck_idem_record SET status = 'completed', result = $2, lease_expires_at = NULL,
    updated_at = now(), version = version + 1
WHERE id = $1 AND owner_token = $3 AND fence = $4 AND status IS NOT DISTINCT FROM 'processing'`
)

// BenchmarkFirstStatements splits the first-request row of BENCHMARKS.md into
// its statements: each operation runs the limit's INSERT and UPDATE on one
// new key and the store's lean Reserve (written first, reserveLeanSQL) and
// Complete on another, and the required pair (requiredInsertSQL,
// requiredUpdateSQL) on a third, timing every statement alone, the three
// pairs in an order rotated each operation; Complete finds the record by
// primary key (Completion.RecordID, as the engine's) in half of the
// operations and by ident in the other half. It reports the median latency of each
// statement in µs: what the store's SQL costs against the limit's, without
// the engine around it. One goroutine, on the analyzed table of
// newBenchEnv. It only reports.
func BenchmarkFirstStatements(b *testing.B) {
	env := newBenchEnv(b)
	store := New(env.pool)
	store.path.Force = leanpath.WriteFirst
	ctx := context.Background()
	prefix := benchfloor.RandomHex()
	blob := make([]byte, env.sealedLen)
	var limitInsert, limitUpdate, requiredInsert, requiredUpdate, reserve, byID, byIdent []time.Duration
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
			return env.pool.QueryRow(ctx, limitInsertSQL, benchScope, idem.DefaultOperation, benchfloor.NumberedDigest(prefix, 3*i), benchOwner).Scan(&id)
		})
		timed(&limitUpdate, func() error {
			_, err := env.pool.Exec(ctx, limitCompleteSQL, id, blob)
			return err
		})
	}
	engine := func(i int) {
		key := strconv.Itoa(i) + prefix
		id := idemdriver.Ident{Scope: benchScope, Operation: idem.DefaultOperation, KeyDigest: benchfloor.NumberedDigest(prefix, 3*i+1)}
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
	required := func(i int) {
		var id, fence int64
		var lease, created, expires time.Time
		timed(&requiredInsert, func() error {
			return env.pool.QueryRow(ctx, requiredInsertSQL, benchScope, idem.DefaultOperation, benchfloor.NumberedDigest(prefix, 3*i+2), benchOwner,
				idem.KeyHash(strconv.Itoa(i)+"required"+prefix)).Scan(&id, &fence, &lease, &created, &expires)
		})
		timed(&requiredUpdate, func() error {
			tag, err := env.pool.Exec(ctx, requiredUpdateSQL, id, blob, benchOwner, fence)
			if err == nil && tag.RowsAffected() != 1 {
				err = errors.New("required update: no row")
			}
			return err
		})
	}
	pairs := []func(int){limit, engine, required}
	b.ResetTimer()
	for i := range b.N {
		for k := range pairs {
			pairs[(i+k)%len(pairs)](i)
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
	b.ReportMetric(median(requiredInsert), "µs-required-insert")
	b.ReportMetric(median(requiredUpdate), "µs-required-update")
	b.ReportMetric(median(reserve), "µs-reserve")
	b.ReportMetric(median(byID), "µs-complete-by-id")
	b.ReportMetric(median(byIdent), "µs-complete-by-ident")
}
