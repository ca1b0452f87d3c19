package consolecmd

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/ops"
)

// bulkSetup is what the console's bulk work on River (SPEC K12) and its
// verifications of keys (SPEC K19) are built from: the bounds of bulk
// requests, and the scheduled verification with the keys it looks at.
// consoleRiver builds them with the River clients.
type bulkSetup struct {
	config ops.BulkConfig
	// reconcile is the scheduled verification of keys (off when its
	// After is 0); keyList lists the keys it looks at.
	reconcile ops.ReconcileConfig
	keyList   interface {
		ListKeys(ctx context.Context, f idemdriver.KeyFilter) (idemdriver.KeyPage, error)
	}
}

// registerBulk adds to cfg the workers of bulks' runs and of verify's
// answers (and b's scheduled verification), with their queues: one bulk
// job at a time, so that the runs of several requests take turns,
// bounding their load.
func registerBulk[TTx any](b *bulkSetup, workers *river.Workers, cfg *river.Config, bulks *ops.Bulks[TTx], verify *ops.Verifications[TTx]) error {
	if cfg.Queues == nil {
		cfg.Queues = map[string]river.QueueConfig{}
	}
	cfg.Queues[ops.BulkQueue] = river.QueueConfig{MaxWorkers: 1}
	cfg.Queues[ops.VerifyAwaitQueue] = river.QueueConfig{MaxWorkers: 5}
	if b.reconcile.After > 0 && b.keyList != nil {
		// On the console's own leader: one console of several runs it.
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(b.reconcile.Every),
			func() (river.JobArgs, *river.InsertOpts) { return ops.ReconcileKeysArgs{}, nil },
			&river.PeriodicJobOpts{ID: ops.ReconcileKeysArgs{}.Kind()}))
		if err := river.AddWorkerSafely(workers, river.WorkFunc(func(ctx context.Context, _ *river.Job[ops.ReconcileKeysArgs]) error {
			_, err := verify.Reconcile(ctx, b.keyList, b.reconcile)
			return err
		})); err != nil {
			return err
		}
	}
	if err := river.AddWorkerSafely(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[ops.VerifyAwaitArgs]) error {
		return verify.Await(ctx, job.Args)
	})); err != nil {
		return err
	}
	return river.AddWorkerSafely(workers, ops.NewBulkWorker(bulks))
}

// resumeBulk starts again the bulk runs and the waits for verification
// answers that a stopped process left, once their River client works.
func resumeBulk[TTx any](ctx context.Context, bulks *ops.Bulks[TTx], verify *ops.Verifications[TTx], log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := bulks.ResumeRuns(ctx); err != nil {
		log.Error("bulk requests not resumed", "error", err.Error())
	}
	if err := verify.Resume(ctx); err != nil {
		log.Error("verification answers not resumed", "error", err.Error())
	}
}

// bulkFlags are the settings of bulk decisions and approvals, and of the
// scheduled verification of keys.
type bulkFlags struct {
	approval    *string
	cap         *int
	expiry      *time.Duration
	batch       *int
	pause       *time.Duration
	canaryPct   *float64
	canaryMin   *int
	pauseRate   *float64
	pauseStreak *int
	previewMax  *time.Duration
	verifyAfter *time.Duration
	verifyEvery *time.Duration
	verifyBatch *int
}

func addBulkFlags(fs *flag.FlagSet, getenv func(string) string) bulkFlags {
	return bulkFlags{
		approval:    fs.String("approval-required", envOr(getenv, "UNSTUCK_APPROVAL_REQUIRED", "bulk"), "decisions that need a second person's approval: none, or a comma `list` of bulk, keys.forget, keys.confirm, operations.retry, operations.confirm, operations.compensate, operations.resolve (env UNSTUCK_APPROVAL_REQUIRED)"),
		cap:         fs.Int("bulk-cap", ops.DefaultBulkCap, "the most items one bulk request may decide"),
		expiry:      fs.Duration("approval-expiry", ops.DefaultBulkExpiry, "how long a request waits for approval before it expires"),
		batch:       fs.Int("bulk-batch", ops.DefaultBulkBatch, "items a bulk run decides per batch"),
		pause:       fs.Duration("bulk-pause", 0, "pause between two batches of a bulk run, to bound its load on the database"),
		canaryPct:   fs.Float64("bulk-canary-percent", ops.DefaultCanaryPercent, "the first batch of a bulk run, in percent of its items: the run goes on only if it went well"),
		canaryMin:   fs.Int("bulk-canary-min", ops.DefaultCanaryMin, "the fewest items of a bulk run's first batch"),
		pauseRate:   fs.Float64("bulk-pause-failure-rate", ops.DefaultPauseRate, "a bulk run pauses itself when more than this fraction of a batch failed"),
		pauseStreak: fs.Int("bulk-pause-failure-streak", ops.DefaultPauseStreak, "a bulk run pauses itself when this many items in a row failed"),
		previewMax:  fs.Duration("bulk-preview-timeout", ops.DefaultPreviewTimeout, "the longest a bulk preview reads the matching items before it asks for a narrower filter"),
		verifyAfter: fs.Duration("verify-pending-after", envDuration(getenv, "UNSTUCK_VERIFY_PENDING_AFTER"),
			"verify with the applications' verifiers, on a schedule, the keys whose outcome has been unknown for this long; 0 (the default) turns it off (env UNSTUCK_VERIFY_PENDING_AFTER)"),
		verifyEvery: fs.Duration("verify-every", 5*time.Minute, "how often the scheduled verification runs (with --verify-pending-after)"),
		verifyBatch: fs.Int("verify-batch", 100, "the most keys one run of the scheduled verification asks about"),
	}
}

// envDuration is getenv(name) as a duration, 0 when unset or not one
// (the flag's parse then reports a bad value given on the command line).
func envDuration(getenv func(string) string, name string) time.Duration {
	d, _ := time.ParseDuration(getenv(name))
	return d
}

// reconcile is the scheduled verification the flags ask for.
func (f bulkFlags) reconcile() (ops.ReconcileConfig, error) {
	if *f.verifyAfter < 0 || *f.verifyEvery <= 0 || *f.verifyBatch <= 0 {
		return ops.ReconcileConfig{}, errors.New("--verify-pending-after must be at least 0, --verify-every and --verify-batch positive")
	}
	return ops.ReconcileConfig{After: *f.verifyAfter, Every: *f.verifyEvery, Batch: *f.verifyBatch}, nil
}

func (f bulkFlags) config() (ops.BulkConfig, error) {
	a, err := ops.ParseApproval(*f.approval)
	if err != nil {
		return ops.BulkConfig{}, err
	}
	if *f.cap <= 0 || *f.batch <= 0 || *f.expiry <= 0 || *f.pause < 0 {
		return ops.BulkConfig{}, errors.New("--bulk-cap, --bulk-batch and --approval-expiry must be positive, --bulk-pause at least 0")
	}
	if *f.canaryPct <= 0 || *f.canaryPct > 100 || *f.canaryMin <= 0 || *f.pauseRate <= 0 || *f.pauseRate > 1 || *f.pauseStreak <= 0 || *f.previewMax <= 0 {
		return ops.BulkConfig{}, errors.New("--bulk-canary-percent must be in (0, 100], --bulk-pause-failure-rate in (0, 1], --bulk-canary-min, --bulk-pause-failure-streak and --bulk-preview-timeout positive")
	}
	return ops.BulkConfig{Approval: a, Cap: *f.cap, Expiry: *f.expiry, Batch: *f.batch, Pause: *f.pause, CanaryPercent: *f.canaryPct,
		CanaryMin: *f.canaryMin, PauseRate: *f.pauseRate, PauseStreak: *f.pauseStreak, PreviewTimeout: *f.previewMax}, nil
}
