//go:build unix

package idempgx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/benchfloor"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
)

// requiredReplaySQL is the limit's SELECT with the columns the contract
// needs to answer a repeat, and nothing else: when the key was first seen
// (SPEC R1, Result.FirstSeenAt), and its retention judged by the
// database's clock (M6: a record past its retention is not replayed).
const requiredReplaySQL = `SELECT status, fingerprint, result, created_at, expires_at, statement_timestamp()
FROM unstuck_idem_record
WHERE scope = $1 AND operation = $2 AND key_digest = $3`

// requiredReplay reads digest with requiredReplaySQL and returns its sealed
// result and when it was first seen; a record that is not completed or is
// past its retention is an error.
func requiredReplay(ctx context.Context, db dbtx, digest string) ([]byte, time.Time, error) {
	var status, fp string
	var result []byte
	var created, expires, now time.Time
	if err := db.QueryRow(ctx, requiredReplaySQL, benchScope, idem.DefaultOperation, digest).Scan(&status, &fp, &result, &created, &expires, &now); err != nil {
		return nil, created, fmt.Errorf("select: %w", err)
	}
	if status != string(idemdriver.StatusCompleted) || len(result) == 0 || !now.Before(expires) {
		return nil, created, fmt.Errorf("select: status %q, %d bytes, expires %s at %s", status, len(result), expires, now)
	}
	return result, created, nil
}

// requiredFirst is the required pair of a first run (requiredInsertSQL,
// requiredUpdateSQL) of digest under token, storing what result returns
// between them.
func requiredFirst(ctx context.Context, db dbtx, digest, keyHash, token string, result func() ([]byte, error)) error {
	var id, fence int64
	var lease, created, expires time.Time
	if err := db.QueryRow(ctx, requiredInsertSQL, benchScope, idem.DefaultOperation, digest, token, keyHash).Scan(&id, &fence, &lease, &created, &expires); err != nil {
		return fmt.Errorf("required insert: %w", err)
	}
	blob, err := result()
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, requiredUpdateSQL, id, blob, token, fence)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("required update: no row")
	}
	return err
}

// BenchmarkRunPaired puts each store row of BENCHMARKS.md against its limit
// and its floor inside one benchmark, on one analyzed table, in blocks of
// operations shuffled block by block (benchround.Paired): the ratios
// without the spread of rounds taken seconds apart. Four ops each (see
// benchfloor.FirstOps and ReplayOps):
//
//   - limit: the least work PostgreSQL can do for the outcome
//     (limitFirst; limitReplay);
//   - required: the limit's statements with only what the contract asks
//     of them (requiredFirst: key hash, ON CONFLICT, the owner's columns,
//     fenced completion; requiredReplay: first seen, retention by the
//     database's clock), no client work;
//   - floor: required plus the contract's client work
//     (idem/internal/benchfloor: digest, key hash, owner token, JSON and
//     its round trip, AES-256-GCM) — the least any conforming engine can
//     do, without even a bound on the call;
//   - engine: idem.Run on this store.
//
// It reports benchfloor.PairedRatios, medians over blocks, with their
// quartiles in the log.
func BenchmarkRunPaired(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run("first/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			st := benchfloor.FirstStatements{
				Limit: func(ctx context.Context, digest, token string, result func() ([]byte, error)) error {
					return limitFirst(ctx, env.pool, digest, token, result)
				},
				Required: func(ctx context.Context, digest, keyHash, token string, result func() ([]byte, error)) error {
					return requiredFirst(ctx, env.pool, digest, keyHash, token, result)
				},
			}
			benchround.Paired(b, g, 32*g, benchfloor.PairedRatios, benchfloor.FirstOps(benchfloor.NewTB(b), benchScope, idem.DefaultOperation,
				benchValue, make([]byte, env.sealedLen), st, func(ctx context.Context, key string) (bool, error) {
					res, err := idem.Run(ctx, env.engine, key, benchScope, benchCallback, nil)
					return res.Replayed, err
				})...)
		})
	}
	for _, g := range benchGoroutines {
		b.Run("replay/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			f := benchfloor.NewTB(b)
			keys, floorKeys, err := benchfloor.ReplayKeys(benchReplayKeys, func(key string) error {
				_, err := idem.Run(context.Background(), env.engine, key, benchScope, benchCallback, nil)
				return err
			}, func(key string) error { return floorFirst(context.Background(), env.pool, f, key) })
			if err != nil {
				b.Fatal(err)
			}
			st := benchfloor.ReplayStatements{
				Limit: func(ctx context.Context, digest string) ([]byte, error) { return limitReplay(ctx, env.pool, digest) },
				Required: func(ctx context.Context, digest string) ([]byte, time.Time, error) {
					return requiredReplay(ctx, env.pool, digest)
				},
			}
			benchround.Paired(b, g, 64*g, benchfloor.PairedRatios, benchfloor.ReplayOps(f, benchScope, idem.DefaultOperation,
				benchValue, floorKeys, st, func(ctx context.Context, i int) (bool, error) {
					res, err := idem.Run(ctx, env.engine, keys[i%len(keys)], benchScope, benchCallback, nil)
					return res.Replayed, err
				})...)
		})
	}
}
