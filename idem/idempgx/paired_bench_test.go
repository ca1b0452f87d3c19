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
	"github.com/unstuckhq/unstuck/internal/benchround"
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

// BenchmarkRunPaired puts each store row of issue 12 against its limit
// and its floor inside one benchmark, on one analyzed table, in blocks of
// operations shuffled block by block (benchround.Paired): the ratios
// without the spread of rounds taken seconds apart. Four ops each:
//
//   - limit: the least work PostgreSQL can do for the outcome
//     (limitFirst; limitReplay);
//   - required: the limit's statements with only what the contract asks
//     of them (requiredFirst: key hash, ON CONFLICT, the owner's columns,
//     fenced completion; requiredReplay: first seen, retention by the
//     database's clock), no client work;
//   - floor: required plus the contract's client work
//     (idem/internal/benchfloor: digest, key hash, owner token, JSON,
//     AES-256-GCM) — the least any conforming engine can do, without even
//     a bound on the call;
//   - engine: idem.Run on this store.
//
// It reports limit/engine (the row's figure), limit/required,
// limit/floor (the best any conforming engine can reach) and floor/engine
// (what is left of the engine's own work), medians over blocks, with
// their quartiles in the log.
func BenchmarkRunPaired(b *testing.B) {
	ratios := []string{"limit/engine", "limit/required", "limit/floor", "floor/engine"}
	for _, g := range benchGoroutines {
		b.Run("first/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			f := benchfloor.NewTB(b)
			blob := make([]byte, env.sealedLen)
			prefix := "paired-first-" + benchPrefix(b) + "-"
			limitPrefix, requiredPrefix := benchPrefix(b), benchPrefix(b)
			benchround.Paired(b, g, 32*g, ratios,
				benchround.Op{Name: "limit", Fn: func(ctx context.Context, i int) error {
					return limitFirst(ctx, env.pool, benchDigest(limitPrefix, i), benchOwner, func() ([]byte, error) { return blob, nil })
				}},
				benchround.Op{Name: "required", Fn: func(ctx context.Context, i int) error {
					return requiredFirst(ctx, env.pool, benchDigest(requiredPrefix, i), benchDigest(requiredPrefix, i), benchOwner[:32],
						func() ([]byte, error) { return blob, nil })
				}},
				benchround.Op{Name: "floor", Fn: func(ctx context.Context, i int) error {
					digest, keyHash, token := benchfloor.Reserve(benchScope, idem.DefaultOperation, prefix+"floor-"+strconv.Itoa(i))
					var roundTrip benchResult
					err := requiredFirst(ctx, env.pool, digest, keyHash, token, func() ([]byte, error) {
						v, err := benchCallback(ctx)
						if err != nil {
							return nil, err
						}
						return f.Seal(digest, v, &roundTrip)
					})
					if err == nil && roundTrip != benchValue {
						err = fmt.Errorf("floor first: round trip %+v", roundTrip)
					}
					return err
				}},
				benchround.Op{Name: "engine", Fn: func(ctx context.Context, i int) error {
					res, err := idem.Run(ctx, env.engine, prefix+strconv.Itoa(i), benchScope, benchCallback)
					if err == nil && res.Replayed {
						err = errors.New("first run replayed")
					}
					return err
				}})
		})
	}
	for _, g := range benchGoroutines {
		b.Run("replay/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			f := benchfloor.NewTB(b)
			prefix := "paired-replay-" + benchPrefix(b) + "-"
			keys := make([]string, benchReplayKeys)      // the engine's
			floorKeys := make([]string, benchReplayKeys) // the floor's; the limit and required read them too
			floorDigests := make([]string, benchReplayKeys)
			for i := range keys {
				keys[i] = prefix + strconv.Itoa(i)
				if _, err := idem.Run(context.Background(), env.engine, keys[i], benchScope, benchCallback); err != nil {
					b.Fatal(err)
				}
				floorKeys[i] = prefix + "floor-" + strconv.Itoa(i)
				floorDigests[i] = idem.Digest(benchScope, idem.DefaultOperation, floorKeys[i])
				if err := floorFirst(context.Background(), env.pool, f, floorKeys[i]); err != nil {
					b.Fatal(err)
				}
			}
			benchround.Paired(b, g, 64*g, ratios,
				benchround.Op{Name: "limit", Fn: func(ctx context.Context, i int) error {
					_, err := limitReplay(ctx, env.pool, floorDigests[i%len(floorDigests)])
					return err
				}},
				benchround.Op{Name: "required", Fn: func(ctx context.Context, i int) error {
					_, _, err := requiredReplay(ctx, env.pool, floorDigests[i%len(floorDigests)])
					return err
				}},
				benchround.Op{Name: "floor", Fn: func(ctx context.Context, i int) error {
					var v benchResult
					var firstSeen time.Time
					err := f.Replay(benchScope, idem.DefaultOperation, floorKeys[i%len(floorKeys)], func(digest string) ([]byte, error) {
						sealed, created, err := requiredReplay(ctx, env.pool, digest)
						firstSeen = created
						return sealed, err
					}, &v)
					if err == nil && (v != benchValue || firstSeen.IsZero()) {
						err = fmt.Errorf("floor replay: %+v, first seen %s", v, firstSeen)
					}
					return err
				}},
				benchround.Op{Name: "engine", Fn: func(ctx context.Context, i int) error {
					res, err := idem.Run(ctx, env.engine, keys[i%len(keys)], benchScope, benchCallback)
					if err == nil && !res.Replayed {
						err = errors.New("replay ran the callback")
					}
					return err
				}})
		})
	}
}
