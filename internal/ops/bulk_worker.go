package ops

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// BulkQueue is the River queue of the console's bulk runs.
const BulkQueue = "unstuck_console_bulk"

// bulkSlice is how long one job works a request before it hands over to
// the next job of the same request: well inside River's job timeout.
const bulkSlice = 20 * time.Second

// BulkArgs is the River job that runs a bulk request.
type BulkArgs struct {
	BulkID int64 `json:"bulk_id"`
}

// Kind is the job's kind.
func (BulkArgs) Kind() string { return "unstuck_console_bulk" }

// InsertOpts puts the job on [BulkQueue].
func (BulkArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: BulkQueue, MaxAttempts: 25}
}

// BulkWorker runs bulk requests as durable background work: each job
// decides pending items for a while, then snoozes itself at once to
// carry on, so no job outlives River's timeout and a crashed process's
// run resumes at its first pending item ([Bulks.Resume] on start, or
// River's rescue of the job).
type BulkWorker[TTx any] struct {
	river.WorkerDefaults[BulkArgs]
	bulks *Bulks[TTx]
}

// NewBulkWorker returns the worker of b's requests.
func NewBulkWorker[TTx any](b *Bulks[TTx]) *BulkWorker[TTx] { return &BulkWorker[TTx]{bulks: b} }

// Work decides the request's pending items for up to 20 s.
func (w *BulkWorker[TTx]) Work(ctx context.Context, job *river.Job[BulkArgs]) error {
	done, err := w.bulks.Run(ctx, job.Args.BulkID, bulkSlice)
	if err != nil {
		return err
	}
	if !done {
		return river.JobSnooze(0)
	}
	return nil
}
