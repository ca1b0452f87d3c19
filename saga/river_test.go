package saga_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// leaseRunner returns a runner (never started) with one definition whose
// steps have the given Timeouts.
func leaseRunner(t *testing.T, margin time.Duration, timeouts ...time.Duration) *saga.Runner[*sql.Tx] {
	t.Helper()
	def := saga.Definition{Type: "t"}
	for i, d := range timeouts {
		def.Steps = append(def.Steps, saga.Step{Name: string(rune('a' + i)), Timeout: d,
			Do: func(context.Context, saga.StepInput) (saga.Result, error) { return saga.Result{}, nil }})
	}
	r, err := saga.NewRunner(sagasqlite.New(nil), saga.Config{Definitions: []saga.Definition{def}, JobMargin: margin})
	require.NoError(t, err)
	return r
}

// With nothing configured, River's 1 h rescue delay kept
// a step of a killed process running for an hour. ConfigureRiver derives
// the knobs from the steps' leases; CheckRiver refuses the gap.
func TestConfigureRiverDerivesRecoveryFromLeasesG11(t *testing.T) {
	t.Parallel()
	r := leaseRunner(t, 0, 0, 5*time.Second) // leases 90 s and 40 s
	lease, ok := r.StepLease("t", "a")
	require.True(t, ok)
	require.Equal(t, 90*time.Second, lease, "2 × the default Timeout + the default JobMargin")
	lease, ok = r.StepLease("t", "b")
	require.True(t, ok)
	require.Equal(t, 40*time.Second, lease)
	_, ok = r.StepLease("t", "nope")
	require.False(t, ok)

	err := r.CheckRiver(&river.Config{Queues: map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 1}}})
	require.ErrorContains(t, err, "RescueStuckJobsAfter is 1h0m0s (River's default)", "the documented setup is refused")
	require.ErrorContains(t, err, "at most 1m20s")

	cfg := &river.Config{}
	require.NoError(t, r.ConfigureRiver(cfg))
	require.Equal(t, 40*time.Second, cfg.JobTimeout, "River's 1 min default, shortened to the shortest lease")
	require.Equal(t, 40*time.Second, cfg.RescueStuckJobsAfter)
	require.Equal(t, 10, cfg.Queues[saga.QueueDefault].MaxWorkers)
	// River accepts the result.
	cfg.Workers = river.NewWorkers()
	require.NoError(t, r.AddWorkers(cfg.Workers))
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "river.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	_, err = river.NewClient(riversqlite.New(db), cfg)
	require.NoError(t, err)
	// River refuses a JobTimeout longer than RescueStuckJobsAfter, as
	// CheckRiver does.
	_, err = river.NewClient(riversqlite.New(nil), &river.Config{JobTimeout: 2 * time.Minute, RescueStuckJobsAfter: time.Minute})
	require.ErrorContains(t, err, "RescueStuckJobsAfter cannot be less than JobTimeout")

	// What the caller set stays, and is checked.
	cfg = &river.Config{RescueStuckJobsAfter: 10 * time.Minute, JobTimeout: 30 * time.Second}
	err = r.ConfigureRiver(cfg)
	require.ErrorContains(t, err, "river.Config.RescueStuckJobsAfter is 10m0s (set)")
	require.ErrorContains(t, err, `step "b" of "t" (lease 40s)`)
	cfg = &river.Config{RescueStuckJobsAfter: time.Minute, JobTimeout: 2 * time.Minute}
	require.ErrorContains(t, r.ConfigureRiver(cfg), "river.Config.JobTimeout (2m0s) is longer than RescueStuckJobsAfter (1m0s)")
	cfg = &river.Config{Queues: map[string]river.QueueConfig{"other": {MaxWorkers: 2}}}
	require.NoError(t, r.ConfigureRiver(cfg))
	require.Equal(t, 2, cfg.Queues["other"].MaxWorkers, "other queues stay")
	require.ErrorContains(t, r.CheckRiver(&river.Config{RescueStuckJobsAfter: time.Minute, Queues: map[string]river.QueueConfig{"other": {MaxWorkers: 2}}}),
		`river.Config.Queues has no queue "saga"`)

	// A long step lengthens its own lease, never the others' rescue.
	r = leaseRunner(t, 10*time.Second, 10*time.Minute, time.Second)
	cfg = &river.Config{}
	require.NoError(t, r.ConfigureRiver(cfg))
	require.Equal(t, 12*time.Second, cfg.RescueStuckJobsAfter, "the shortest lease, 2 × 1 s + 10 s")
	require.Equal(t, 12*time.Second, cfg.JobTimeout)
}
