package decision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// DefaultScope is the idempotency scope a [Worker] with an engine runs
// events under; the key is the event's ID.
const DefaultScope = "unstuck.decision"

// Defaults of [WorkerConfig].
const (
	DefaultOrderWait = time.Hour
	DefaultSnooze    = 5 * time.Second
)

// WorkerConfig configures a [Worker].
type WorkerConfig struct {
	// Handle is the application's handler of one event. An error makes
	// River retry the job with its backoff.
	Handle func(ctx context.Context, ev Event) error
	// Engine, when set, runs each event once: Handle runs through
	// idem.Run keyed by the event's ID in Scope, so an event delivered
	// again after it was handled (a process killed before River recorded
	// the job's completion) is not handled twice; and an event whose
	// Previous is not handled yet waits (the job is snoozed) until it is.
	// Handle must then finish within the engine's lease (60 s by
	// default); a process killed while Handle ran leaves the event's key
	// pending review, as any idem.Run does (SPEC R8): it is not run again
	// until an operator decides it in the console.
	//
	// Without Engine every delivery calls Handle, in the order River
	// fetches the jobs: the handler must dedupe by Event.ID and order by
	// Event.Previous itself.
	Engine *idem.Engine
	// Scope is the idempotency scope of the events' keys; default
	// [DefaultScope].
	Scope string
	// OrderWait bounds how long an event waits for its Previous (from the
	// job's creation); then it is handled anyway. A Previous never handled
	// (emitted while this worker was not registered, or pending review)
	// holds its successors back no longer. Default [DefaultOrderWait].
	OrderWait time.Duration
	// Snooze is how long a waiting event is snoozed between checks;
	// default [DefaultSnooze].
	Snooze time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Worker handles decision events: a river.Worker of [JobArgs]. Register it
// with river.AddWorker on the application's River client, whose
// Config.Queues must include the console's decision events queue
// ([DefaultQueue] unless configured otherwise).
type Worker struct {
	river.WorkerDefaults[JobArgs]
	cfg WorkerConfig
}

// NewWorker returns the worker of cfg. It panics if cfg.Handle is nil, a
// programming error.
func NewWorker(cfg WorkerConfig) *Worker {
	if cfg.Handle == nil {
		panic("decision: NewWorker needs a Handle")
	}
	if cfg.Scope == "" {
		cfg.Scope = DefaultScope
	}
	if cfg.OrderWait <= 0 {
		cfg.OrderWait = DefaultOrderWait
	}
	if cfg.Snooze <= 0 {
		cfg.Snooze = DefaultSnooze
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Worker{cfg: cfg}
}

// Work handles job's event: directly without an engine; with one, once,
// after its Previous.
func (w *Worker) Work(ctx context.Context, job *river.Job[JobArgs]) error {
	ev := job.Args.Event
	if ev.ID == "" {
		return river.JobCancel(errors.New("decision: an event without an ID"))
	}
	if w.cfg.Engine == nil {
		return w.cfg.Handle(ctx, ev)
	}
	if ev.Previous != "" {
		ok, err := w.Handled(ctx, ev.Previous, ev.PreviousTime)
		if err != nil {
			return err
		}
		if !ok && w.cfg.Now().Sub(job.CreatedAt) < w.cfg.OrderWait {
			return river.JobSnooze(w.cfg.Snooze)
		}
	}
	_, err := idem.Run(ctx, w.cfg.Engine, ev.ID, w.cfg.Scope, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, w.cfg.Handle(ctx, ev)
	}, nil)
	switch {
	case errors.Is(err, idem.ErrPendingReview):
		// Handled at most once: its outcome is for an operator now.
		return river.JobCancel(fmt.Errorf("decision: event %s: %w", ev.ID, err))
	case errors.Is(err, idem.ErrInProgress):
		// Another delivery of the same event is being handled.
		return river.JobSnooze(w.cfg.Snooze)
	}
	return err
}

// Handled reports whether the event id was handled through the worker's
// engine (its key completed). An event at of more than the engine's
// default retention ago counts as handled: its key may have been swept.
// Without an engine it reports false.
func (w *Worker) Handled(ctx context.Context, id string, at time.Time) (bool, error) {
	if w.cfg.Engine == nil {
		return false, nil
	}
	if !at.IsZero() && w.cfg.Now().Sub(at) > idem.DefaultTTL-time.Hour {
		return true, nil
	}
	rec, ok, err := w.cfg.Engine.Store().Get(ctx, idemdriver.Ident{Scope: w.cfg.Scope, Operation: idem.DefaultOperation,
		KeyDigest: idem.Digest(w.cfg.Scope, idem.DefaultOperation, id)})
	if err != nil {
		return false, fmt.Errorf("decision: read the record of event %s: %w", id, err)
	}
	return ok && rec.Status == idemdriver.StatusCompleted, nil
}
