//go:build unix

package idemsqlite

import (
	"context"
	"database/sql"
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
	r := &benchRequired{benchLimit: l}
	for _, p := range []struct {
		st    **sql.Stmt
		query string
	}{{&r.insert, requiredInsert}, {&r.complete, requiredComplete}, {&r.replay, requiredReplay}} {
		st, err := db.PrepareContext(context.Background(), p.query)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		*p.st = st
	}
	return r
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

// BenchmarkRunPaired puts each store row of issue 12 against its limit
// and its floor inside one benchmark, on one database file, in blocks of
// operations shuffled block by block (benchround.Paired), as idempgx's
// BenchmarkRunPaired does: limit (the least work SQLite can do), required
// (the limit's statements with what the contract asks of them), floor
// (required plus the contract's client work, idem/internal/benchfloor)
// and engine (idem.Run). It reports limit/engine (the row's figure),
// limit/required, limit/floor (the best any conforming engine can reach)
// and floor/engine (what is left of the engine's own work).
func BenchmarkRunPaired(b *testing.B) {
	ratios := []string{"limit/engine", "limit/required", "limit/floor", "floor/engine"}
	for _, g := range benchGoroutines {
		b.Run("first/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			env := newBenchEnv(b)
			l := newBenchLimit(b, env.db)
			r := newBenchRequired(b, env.db, l)
			f := benchfloor.NewTB(b)
			blob := make([]byte, env.sealedLen)
			prefix := "paired-first-" + benchPrefix(b) + "-"
			limitPrefix, requiredPrefix := benchPrefix(b), benchPrefix(b)
			benchround.Paired(b, g, 64*g, ratios,
				benchround.Op{Name: "limit", Fn: func(ctx context.Context, i int) error {
					return l.first(ctx, benchDigest(limitPrefix, i), blob)
				}},
				benchround.Op{Name: "required", Fn: func(ctx context.Context, i int) error {
					return r.first(ctx, benchDigest(requiredPrefix, i), benchDigest(requiredPrefix, i), benchOwner[:32],
						func() ([]byte, error) { return blob, nil })
				}},
				benchround.Op{Name: "floor", Fn: func(ctx context.Context, i int) error {
					digest, keyHash, token := benchfloor.Reserve(benchScope, idem.DefaultOperation, prefix+"floor-"+strconv.Itoa(i))
					var roundTrip benchResult
					err := r.first(ctx, digest, keyHash, token, func() ([]byte, error) {
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
			l := newBenchLimit(b, env.db)
			r := newBenchRequired(b, env.db, l)
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
				if err := l.floorFirst(context.Background(), f, floorKeys[i]); err != nil {
					b.Fatal(err)
				}
			}
			benchround.Paired(b, g, 256*g, ratios,
				benchround.Op{Name: "limit", Fn: func(ctx context.Context, i int) error {
					_, err := l.replayed(ctx, floorDigests[i%len(floorDigests)])
					return err
				}},
				benchround.Op{Name: "required", Fn: func(ctx context.Context, i int) error {
					_, _, err := r.replayed(ctx, floorDigests[i%len(floorDigests)])
					return err
				}},
				benchround.Op{Name: "floor", Fn: func(ctx context.Context, i int) error {
					var v benchResult
					var firstSeen time.Time
					err := f.Replay(benchScope, idem.DefaultOperation, floorKeys[i%len(floorKeys)], func(digest string) ([]byte, error) {
						sealed, created, err := r.replayed(ctx, digest)
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
