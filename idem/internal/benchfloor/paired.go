package benchfloor

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/internal/benchround"
)

// PairedRatios are the ratios a store's paired benchmark reports:
// limit/engine (the row's figure), limit/required (what the contract's
// statements cost), limit/floor (the best any conforming engine can reach)
// and floor/engine (what is left of the engine's own work).
var PairedRatios = []string{"limit/engine", "limit/required", "limit/floor", "floor/engine"}

// FirstStatements are a store's statements of a first run, for FirstOps.
// Each stores what result returns between its insert and its update.
type FirstStatements struct {
	// Limit is the least work the database can do: insert the record of
	// digest under token, update it with the result.
	Limit func(ctx context.Context, digest, token string, result func() ([]byte, error)) error
	// Required is Limit with only what the contract asks of the
	// statements: the key hash stored, an insert that meets an existing
	// record without an error, what a new owner needs returned, a fenced
	// completion that moves updated_at and version.
	Required func(ctx context.Context, digest, keyHash, token string, result func() ([]byte, error)) error
}

// FirstOps returns the ops of a paired first-run benchmark
// (benchround.Paired with PairedRatios): limit and required on new
// digests with a blob as long as the engine's envelope; floor, Required
// with the contract's client work (Reserve, then Seal of value with its
// round trip checked); engine, run on a new key, which must not replay.
func FirstOps[V comparable](f *Floor, scope, operation string, value V, blob []byte, st FirstStatements, engine func(ctx context.Context, key string) (replayed bool, err error)) []benchround.Op {
	limitPrefix, requiredPrefix, keyPrefix := RandomHex(), RandomHex(), "paired-first-"+RandomHex()+"-"
	stored := func() ([]byte, error) { return blob, nil }
	return []benchround.Op{
		{Name: "limit", Fn: func(ctx context.Context, i int) error {
			return st.Limit(ctx, NumberedDigest(limitPrefix, i), token32, stored)
		}},
		{Name: "required", Fn: func(ctx context.Context, i int) error {
			digest := NumberedDigest(requiredPrefix, i)
			return st.Required(ctx, digest, digest, token32, stored)
		}},
		{Name: "floor", Fn: func(ctx context.Context, i int) error {
			digest, keyHash, token := Reserve(scope, operation, keyPrefix+"floor-"+strconv.Itoa(i))
			var roundTrip V
			if err := st.Required(ctx, digest, keyHash, token, func() ([]byte, error) { return f.Seal(digest, value, &roundTrip) }); err != nil {
				return err
			}
			if roundTrip != value {
				return fmt.Errorf("floor first: round trip %+v", roundTrip)
			}
			return nil
		}},
		{Name: "engine", Fn: func(ctx context.Context, i int) error {
			replayed, err := engine(ctx, keyPrefix+strconv.Itoa(i))
			if err == nil && replayed {
				err = errors.New("first run replayed")
			}
			return err
		}},
	}
}

// ReplayStatements are a store's reads of a completed record by digest,
// for ReplayOps.
type ReplayStatements struct {
	// Limit reads what a replay needs (status, fingerprint, result) and
	// returns the result.
	Limit func(ctx context.Context, digest string) ([]byte, error)
	// Required also reads when the key was first seen (R1) and its
	// retention by the store's clock (M6); it returns the result and the
	// first-seen time, and fails for a record past its retention.
	Required func(ctx context.Context, digest string) ([]byte, time.Time, error)
}

// ReplayOps returns the ops of a paired replay benchmark
// (benchround.Paired with PairedRatios) over floorKeys, which the floor
// completed with value beforehand (First): limit and required read their
// digests; floor reads with Required and opens into a new value like
// value, which must equal it; engine replays its own key number i, which
// must not run.
func ReplayOps[V comparable](f *Floor, scope, operation string, value V, floorKeys []string, st ReplayStatements, engine func(ctx context.Context, i int) (replayed bool, err error)) []benchround.Op {
	digests := make([]string, len(floorKeys))
	for i, k := range floorKeys {
		digests[i] = idem.Digest(scope, operation, k)
	}
	return []benchround.Op{
		{Name: "limit", Fn: func(ctx context.Context, i int) error {
			_, err := st.Limit(ctx, digests[i%len(digests)])
			return err
		}},
		{Name: "required", Fn: func(ctx context.Context, i int) error {
			_, _, err := st.Required(ctx, digests[i%len(digests)])
			return err
		}},
		{Name: "floor", Fn: func(ctx context.Context, i int) error {
			var firstSeen time.Time
			var got V
			if err := f.Replay(scope, operation, floorKeys[i%len(floorKeys)], func(digest string) ([]byte, error) {
				sealed, created, err := st.Required(ctx, digest)
				firstSeen = created
				return sealed, err
			}, &got); err != nil {
				return err
			}
			if got != value || firstSeen.IsZero() {
				return fmt.Errorf("floor replay: %+v, first seen %s", got, firstSeen)
			}
			return nil
		}},
		{Name: "engine", Fn: func(ctx context.Context, i int) error {
			replayed, err := engine(ctx, i)
			if err == nil && !replayed {
				err = errors.New("replay ran the callback")
			}
			return err
		}},
	}
}

// token32 stands for the owner token of the limit and the required
// statements: as long as the floor's, made once.
const token32 = "00000000000040008000000000000000"

// NumberedDigest returns a 64-digit key digest unique to i: prefix (48 hex
// digits) followed by i in 16 hex digits — no hashing, for the limit.
func NumberedDigest(prefix string, i int) string {
	var buf [64]byte
	var n [8]byte
	copy(buf[:48], prefix)
	binary.BigEndian.PutUint64(n[:], uint64(i))
	hex.Encode(buf[48:], n[:])
	return string(buf[:])
}

// RandomHex returns 48 random hex digits: a prefix for NumberedDigest, or
// for keys no other invocation uses.
func RandomHex() string {
	var r [24]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand.Read's contract)
	return hex.EncodeToString(r[:])
}

// ReplayKeys names n keys for the engine and n for the floor, completes
// them with engineFirst and floorFirst, and returns both lists, for
// ReplayOps and the engine op beside it.
func ReplayKeys(n int, engineFirst, floorFirst func(key string) error) (keys, floorKeys []string, err error) {
	prefix := "paired-replay-" + RandomHex() + "-"
	keys, floorKeys = make([]string, n), make([]string, n)
	for i := range n {
		keys[i], floorKeys[i] = prefix+strconv.Itoa(i), prefix+"floor-"+strconv.Itoa(i)
		if err := engineFirst(keys[i]); err != nil {
			return nil, nil, err
		}
		if err := floorFirst(floorKeys[i]); err != nil {
			return nil, nil, err
		}
	}
	return keys, floorKeys, nil
}
