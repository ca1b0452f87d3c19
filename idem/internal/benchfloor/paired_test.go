package benchfloor

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// memory stands in for a store's statements: digest → stored result.
type memory struct {
	mu   sync.Mutex
	rows map[string][]byte
}

func (m *memory) first(_ context.Context, digest, _ string, result func() ([]byte, error)) error {
	blob, err := result()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rows[digest]; ok {
		return errors.New("digest used twice")
	}
	m.rows[digest] = blob
	return nil
}

func (m *memory) read(_ context.Context, digest string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	blob, ok := m.rows[digest]
	if !ok {
		return nil, errors.New("no row")
	}
	return blob, nil
}

// The paired ops do what they say: each first-run op writes a new digest
// (the floor's sealed value decodes to the value), each replay op reads,
// the floor's replay opens the floor's result, and an engine that replays
// on a first run, or runs on a replay, fails its op.
func TestPairedOps(t *testing.T) {
	f, err := New()
	require.NoError(t, err)
	m := &memory{rows: map[string][]byte{}}
	want := value{ID: "ch_9", Amount: 3}
	ctx := context.Background()
	first := FirstStatements{Limit: m.first, Required: func(ctx context.Context, digest, keyHash, token string, result func() ([]byte, error)) error {
		require.Len(t, keyHash, 64)
		return m.first(ctx, digest, token, result)
	}}
	replayed := false
	ops := FirstOps(f, "tenant", "run", want, []byte("blob"), first, func(context.Context, string) (bool, error) { return replayed, nil })
	require.Len(t, ops, len(PairedRatios))
	for i := range 3 {
		for _, op := range ops {
			require.NoError(t, op.Fn(ctx, i), op.Name)
		}
	}
	require.Len(t, m.rows, 9, "limit, required and floor each wrote three digests")
	replayed = true
	require.Error(t, ops[3].Fn(ctx, 3), "a first run that replays")

	keys := make([]string, 4)
	for i := range keys {
		keys[i] = "floor-" + strconv.Itoa(i)
		var roundTrip value
		require.NoError(t, f.First("tenant", "run", keys[i], func() (any, error) { return want, nil }, &roundTrip, func(digest, token string, result func() ([]byte, error)) error {
			return m.first(ctx, digest, token, result)
		}))
	}
	seen := time.Now()
	replay := ReplayStatements{Limit: m.read, Required: func(ctx context.Context, digest string) ([]byte, time.Time, error) {
		blob, err := m.read(ctx, digest)
		return blob, seen, err
	}}
	ops = ReplayOps(f, "tenant", "run", want, keys, replay, func(context.Context, int) (bool, error) { return replayed, nil })
	for i := range 8 {
		for _, op := range ops {
			require.NoError(t, op.Fn(ctx, i), op.Name)
		}
	}
	ops = ReplayOps(f, "tenant", "run", value{ID: "other"}, keys, replay, func(context.Context, int) (bool, error) { return false, nil })
	require.Error(t, ops[2].Fn(ctx, 0), "the floor checks the value it opened")
	require.Error(t, ops[3].Fn(ctx, 0), "a replay that runs")
}
