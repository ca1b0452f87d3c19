//go:build unix

package idemsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/benchfloor"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
)

// The required statements: the limit's with only what the contract asks
// of them (as in idempgx's paired benchmark). A first run stores the key
// hash (K11), meets an existing record without an error, returns what a
// created record's owner needs, and completes only as the owner of a
// processing record (fencing), moving updated_at and version. A replay
// also reads when the key was first seen (R1) and its retention (M6),
// judged by this process's clock, the store's clock on SQLite.
const (
	requiredInsert = `INSERT INTO unstuck_idem_record (scope, operation, key_digest, status, owner_token, fence,
    lease_expires_at, created_at, updated_at, expires_at, key_hash)
VALUES (?, ?, ?, 'processing', ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (scope, operation, key_digest) DO NOTHING
RETURNING id, fence, lease_expires_at, created_at, expires_at`
	requiredComplete = `UPDATE unstuck_idem_record SET status = 'completed', result = ?, lease_expires_at = NULL,
    updated_at = ?, version = version + 1
WHERE id = ? AND owner_token = ? AND fence = ? AND status = 'processing'`
	requiredReplay = `SELECT status, fingerprint, result, created_at, expires_at FROM unstuck_idem_record
WHERE scope = ? AND operation = ? AND key_digest = ?`
)

// benchRequired holds the required statements, prepared, and shares the
// limit's writer semaphore and fence counter.
type benchRequired struct {
	*benchLimit
	insert, complete, replay *sql.Stmt
}

func newBenchRequired(b *testing.B, db *sql.DB, l *benchLimit) *benchRequired {
	b.Helper()
	return &benchRequired{benchLimit: l, insert: prepare(b, db, requiredInsert), complete: prepare(b, db, requiredComplete),
		replay: prepare(b, db, requiredReplay)}
}

// first is the required pair for digest under token, storing what result
// returns between the insert and the update.
func (r *benchRequired) first(ctx context.Context, digest, keyHash, token string, result func() ([]byte, error)) error {
	now := time.Now().UnixMicro()
	var id, fence, lease, created, expires int64
	r.writer <- struct{}{}
	err := r.insert.QueryRowContext(ctx, benchScope, idem.DefaultOperation, digest, token, r.fence.Add(1),
		now+benchLease.Microseconds(), now, now, now+benchTTL.Microseconds(), keyHash).Scan(&id, &fence, &lease, &created, &expires)
	<-r.writer
	if err != nil {
		return fmt.Errorf("required insert: %w", err)
	}
	blob, err := result()
	if err != nil {
		return err
	}
	r.writer <- struct{}{}
	res, err := r.complete.ExecContext(ctx, blob, time.Now().UnixMicro(), id, token, fence)
	<-r.writer
	if err != nil {
		return fmt.Errorf("required complete: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("required complete: %d rows, %v", n, err)
	}
	return nil
}

// replayed reads digest with the required SELECT and returns its sealed
// result and when it was first seen; a record that is not completed or is
// past its retention is an error.
func (r *benchRequired) replayed(ctx context.Context, digest string) ([]byte, time.Time, error) {
	var status, fp string
	var result []byte
	var created, expires int64
	if err := r.replay.QueryRowContext(ctx, benchScope, idem.DefaultOperation, digest).Scan(&status, &fp, &result, &created, &expires); err != nil {
		return nil, time.Time{}, fmt.Errorf("select: %w", err)
	}
	if status != string(idemdriver.StatusCompleted) || len(result) == 0 || time.Now().UnixMicro() >= expires {
		return nil, time.Time{}, fmt.Errorf("select: status %q, %d bytes, expires %d", status, len(result), expires)
	}
	return result, time.UnixMicro(created).UTC(), nil
}

// BenchmarkRunPaired puts each store row of BENCHMARKS.md against its limit
// and its floor inside one benchmark, on one database file, in blocks of
// operations shuffled block by block (benchround.Paired), as idempgx's
// BenchmarkRunPaired does: limit (the least work SQLite can do), required
// (the limit's statements with what the contract asks of them), floor
// (required plus the contract's client work) and engine (idem.Run); see
// benchfloor.FirstOps and ReplayOps. It reports benchfloor.PairedRatios.
func BenchmarkRunPaired(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run("first/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			l := newBenchLimit(b, env.db)
			r := newBenchRequired(b, env.db, l)
			st := benchfloor.FirstStatements{Limit: l.firstAs, Required: r.first}
			benchround.Paired(b, g, 64*g, benchfloor.PairedRatios, benchfloor.FirstOps(benchfloor.NewTB(b), benchScope, idem.DefaultOperation,
				benchValue, make([]byte, env.sealedLen), st, func(ctx context.Context, key string) (bool, error) {
					res, err := idem.Run(ctx, env.engine, key, benchScope, benchCallback, nil)
					return res.Replayed, err
				})...)
		})
	}
	for _, g := range benchGoroutines {
		b.Run("replay/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			l := newBenchLimit(b, env.db)
			r := newBenchRequired(b, env.db, l)
			f := benchfloor.NewTB(b)
			keys, floorKeys, err := benchfloor.ReplayKeys(benchReplayKeys, func(key string) error {
				_, err := idem.Run(context.Background(), env.engine, key, benchScope, benchCallback, nil)
				return err
			}, func(key string) error { return l.floorFirst(context.Background(), f, key) })
			if err != nil {
				b.Fatal(err)
			}
			st := benchfloor.ReplayStatements{Limit: l.replayed, Required: r.replayed}
			benchround.Paired(b, g, 256*g, benchfloor.PairedRatios, benchfloor.ReplayOps(f, benchScope, idem.DefaultOperation,
				benchValue, floorKeys, st, func(ctx context.Context, i int) (bool, error) {
					res, err := idem.Run(ctx, env.engine, keys[i%len(keys)], benchScope, benchCallback, nil)
					return res.Replayed, err
				})...)
		})
	}
}
