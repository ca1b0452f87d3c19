package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// QueueDefault is the River queue of the engine's jobs unless
// [Config.Queue] names another. The River client must work it.
const QueueDefault = "saga"

// Config configures a [Runner].
type Config struct {
	// Definitions are the operation types the runner can start and run.
	Definitions []Definition
	// Queue is the River queue of the engine's jobs; default QueueDefault.
	Queue string
	// Logger receives the engine's logs; default slog.Default().
	Logger *slog.Logger
	// NowFunc is the application's clock; default time.Now. The records'
	// times come from the database's clock (Driver.Now), never from it:
	// ClockSkew compares the two.
	NowFunc func() time.Time
	// ClockSkewWarning is the skew between NowFunc and the database's
	// clock above which ClockSkew logs a warning; default 2 seconds.
	ClockSkewWarning time.Duration
	// ReconcileInterval is the period of the reconciliation job; default
	// 5 minutes.
	ReconcileInterval time.Duration
	// StuckAfter is how long a non-terminal operation may go without a
	// change before reconciliation verifies it; default 15 minutes.
	StuckAfter time.Duration
	// ReconcileWindow is how long after finishing an operation is still
	// compared with the external systems; default 24 hours.
	ReconcileWindow time.Duration
	// JobMargin is the time a job gets beyond twice its step's Timeout
	// (a verification and the call) for its transactions; default 30
	// seconds. The sum is the step's lease (Runner.StepLease), the River
	// timeout of its jobs. River rescues the job of a process that died
	// only once it has run for longer than its lease and than
	// river.Config.RescueStuckJobsAfter, which Runner.ConfigureRiver sets
	// from the leases: the two bound the recovery after a crash.
	JobMargin time.Duration
	// TracerProvider, when not nil, turns tracing on: a span around each
	// call of a step's Do, Compensate and Verify (see SpanStep). Nil, the
	// default, leaves it off and runs no tracing code.
	TracerProvider trace.TracerProvider
}

// Runner starts operations and runs them on River. It is safe for
// concurrent use. Build it with [NewRunner], register its workers in the
// River client's Workers with [Runner.AddWorkers] (and its periodic
// reconciliation with [Runner.PeriodicJobs]), build the client, and hand
// it over with [Runner.SetClient] before starting operations.
type Runner[TTx any] struct {
	driver sagadriver.Driver[TTx]
	defs   map[string]Definition
	cfg    Config
	log    *slog.Logger
	client atomic.Pointer[river.Client[TTx]]
	// skewWarned is when ClockSkew last warned (Unix nanoseconds), so
	// that a probe calling it often logs once a minute.
	skewWarned atomic.Int64
	tracer     trace.Tracer // nil: tracing off
}

// NewRunner returns a runner over driver with cfg. It validates the
// definitions.
func NewRunner[TTx any](driver sagadriver.Driver[TTx], cfg Config) (*Runner[TTx], error) {
	if driver == nil {
		return nil, errors.New("saga: nil driver")
	}
	r := &Runner[TTx]{driver: driver, defs: map[string]Definition{}, cfg: cfg, log: cfg.Logger}
	if r.cfg.Queue == "" {
		r.cfg.Queue = QueueDefault
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.cfg.NowFunc == nil {
		r.cfg.NowFunc = time.Now
	}
	if r.cfg.ReconcileInterval <= 0 {
		r.cfg.ReconcileInterval = 5 * time.Minute
	}
	if r.cfg.StuckAfter <= 0 {
		r.cfg.StuckAfter = 15 * time.Minute
	}
	if r.cfg.ReconcileWindow <= 0 {
		r.cfg.ReconcileWindow = 24 * time.Hour
	}
	if r.cfg.JobMargin <= 0 {
		r.cfg.JobMargin = 30 * time.Second
	}
	if cfg.TracerProvider != nil {
		r.tracer = cfg.TracerProvider.Tracer(TracerName)
	}
	if r.cfg.ClockSkewWarning <= 0 {
		r.cfg.ClockSkewWarning = 2 * time.Second
	}
	for _, d := range cfg.Definitions {
		if err := validateDefinition(d); err != nil {
			return nil, err
		}
		if _, dup := r.defs[d.Type]; dup {
			return nil, fmt.Errorf("saga: definition %q registered twice", d.Type)
		}
		r.defs[d.Type] = d
	}
	return r, nil
}

// ClockSkew measures the application's clock (Config.NowFunc) against the
// database's (Driver.Now) around one round trip, and returns app − database:
// positive when the application is ahead. The records never depend on it
// (their times are the database's), but River schedules retries, snoozes
// and the rescue of stuck jobs on the process clock, so a skew delays or
// hastens them by as much. Above Config.ClockSkewWarning (either way) it
// logs a warning, at most once a minute. Call it at start-up; the periodic reconciliation calls it
// too, and the Collector exports it as unstuck_clock_skew_seconds.
func (r *Runner[TTx]) ClockSkew(ctx context.Context) (time.Duration, error) {
	var skew time.Duration
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		skew, err = r.skewIn(ctx, tx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("saga: clock skew: %w", err)
	}
	now := time.Now().UnixNano()
	if last := r.skewWarned.Load(); (skew > r.cfg.ClockSkewWarning || -skew > r.cfg.ClockSkewWarning) &&
		now-last >= int64(time.Minute) && r.skewWarned.CompareAndSwap(last, now) {
		r.log.WarnContext(ctx, "saga: the application's clock and the database's disagree; River's retries, snoozes and rescues are off by as much",
			"skew", skew.Round(time.Millisecond).String(), "warning_above", r.cfg.ClockSkewWarning.String())
	}
	return skew, nil
}

// skewIn measures app − database in tx: the database's reading is taken
// as the midpoint of the round trip.
func (r *Runner[TTx]) skewIn(ctx context.Context, tx TTx) (time.Duration, error) {
	before := r.cfg.NowFunc()
	db, err := r.driver.Now(ctx, tx)
	if err != nil {
		return 0, err
	}
	after := r.cfg.NowFunc()
	return before.Add(after.Sub(before) / 2).Sub(db), nil
}

// WithinTx runs fn in a transaction of the runner's driver and commits it
// if fn returns nil (see [sagadriver.Driver]'s WithinTx). fn may pass tx to the
// runner's …Tx methods (StartTx, GetTx, the operator actions) and write the
// application's own tables or an audit entry in it, so that they commit
// together; the operations' records are written only by those methods,
// through the step machine.
func (r *Runner[TTx]) WithinTx(ctx context.Context, fn func(ctx context.Context, tx TTx) error) error {
	return r.driver.WithinTx(ctx, fn)
}

// SetClient hands the runner the River client that works its jobs (or an
// insert-only client in a process that only starts operations). Call it
// once, before Start.
func (r *Runner[TTx]) SetClient(client *river.Client[TTx]) { r.client.Store(client) }

func (r *Runner[TTx]) riverClient() (*river.Client[TTx], error) {
	c := r.client.Load()
	if c == nil {
		return nil, errors.New("saga: runner has no River client: call SetClient")
	}
	return c, nil
}

// clock reads the database's clock in tx (Driver.Now): the time of every
// record, so that processes whose clocks disagree agree on the records.
func (r *Runner[TTx]) clock(ctx context.Context, tx TTx) (time.Time, error) {
	t, err := r.driver.Now(ctx, tx)
	if err != nil {
		return time.Time{}, fmt.Errorf("saga: %w", err)
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// StartOpts are the optional parameters of Start.
type StartOpts struct {
	// ID is the operation's ID; empty picks a UUIDv7. A taken ID returns
	// ErrExists, so a caller may derive it from a business key to start
	// an operation at most once.
	ID string
	// CorrelationID ties the operation to a request or business object.
	CorrelationID string
}

// Start records a new operation of type typ with input (marshalled to
// JSON) and inserts its first job, in one transaction of its own.
func (r *Runner[TTx]) Start(ctx context.Context, typ string, input any, opts *StartOpts) (sagadriver.Operation, error) {
	var op sagadriver.Operation
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		op, err = r.StartTx(ctx, tx, typ, input, opts)
		return err
	})
	return op, err
}

// StartTx records a new operation and inserts its first job in the
// caller's transaction tx (SPEC G4, the transactional outbox): the
// application's own writes in tx, the operation and the job commit
// together or not at all, and the job is not worked before the commit.
// The caller commits or rolls back tx; on an error it must roll back.
func (r *Runner[TTx]) StartTx(ctx context.Context, tx TTx, typ string, input any, opts *StartOpts) (sagadriver.Operation, error) {
	def, ok := r.defs[typ]
	if !ok {
		return sagadriver.Operation{}, fmt.Errorf("saga: start: unknown operation type %q", typ)
	}
	if opts == nil {
		opts = &StartOpts{}
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return sagadriver.Operation{}, fmt.Errorf("saga: start %s: marshal input: %w", typ, err)
	}
	id := opts.ID
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return sagadriver.Operation{}, fmt.Errorf("saga: start %s: %w", typ, err)
		}
		id = u.String()
	}
	now, err := r.clock(ctx, tx)
	if err != nil {
		return sagadriver.Operation{}, err
	}
	op := sagadriver.Operation{ID: id, Type: typ, DefinitionVersion: def.version(), Status: sagadriver.StatusPending, CorrelationID: opts.CorrelationID,
		Input: raw, CurrentStep: def.Steps[0].Name, Version: 1, CreatedAt: now, UpdatedAt: now}
	for i := range def.Steps {
		op.Steps = append(op.Steps, stepRecord(id, def, i, now))
	}
	op.Steps[0].Generation = 1
	if err := r.driver.InsertOperation(ctx, tx, &op); err != nil {
		return sagadriver.Operation{}, fmt.Errorf("saga: start %s: %w", typ, err)
	}
	ev := sagadriver.Event{OperationID: id, Action: "started", To: string(sagadriver.StatusPending), Actor: "app", At: now,
		Message: "correlation " + opts.CorrelationID}
	if err := r.driver.InsertEvents(ctx, tx, []sagadriver.Event{ev}); err != nil {
		return sagadriver.Operation{}, fmt.Errorf("saga: start %s: %w", typ, err)
	}
	if err := r.insertJob(ctx, tx, &op, enqueue{kind: jobStep, step: def.Steps[0].Name, generation: 1}); err != nil {
		return sagadriver.Operation{}, fmt.Errorf("saga: start %s: %w", typ, err)
	}
	return op, nil
}

// stepRecord is the new record of step i of def for operation id.
func stepRecord(id string, def Definition, i int, now time.Time) sagadriver.StepRecord {
	s := def.Steps[i]
	seq := len(def.Steps) - i
	if j := slices.Index(def.CompensationOrder, s.Name); j >= 0 {
		seq = j + 1
	}
	return sagadriver.StepRecord{Name: s.Name, Seq: i, Kind: s.kind(), System: s.System, Status: sagadriver.StepPending,
		Key: id + "/" + s.Name, MaxAttempts: s.Retry.withDefaults().MaxAttempts, Compensable: s.Compensate != nil,
		CompSeq: seq, CompKey: id + "/" + s.Name + "/compensate", CompMaxAttempts: s.CompensationRetry.withDefaults().MaxAttempts,
		Unkeyed: s.Unkeyed, Verifiable: s.Verify != nil, UpdatedAt: now}
}

// Get reads an operation with its steps, or returns ErrNotFound.
func (r *Runner[TTx]) Get(ctx context.Context, id string) (sagadriver.Operation, error) {
	var op sagadriver.Operation
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		op, err = r.driver.GetOperation(ctx, tx, id, false)
		return err
	})
	return op, err
}

// GetTx reads an operation with its steps in tx, or returns ErrNotFound,
// and locks it until tx ends: an operator action later in tx sees the same
// state, and a concurrent one waits for tx.
func (r *Runner[TTx]) GetTx(ctx context.Context, tx TTx, id string) (sagadriver.Operation, error) {
	return r.driver.GetOperation(ctx, tx, id, true)
}

// Events returns an operation's history, oldest first.
func (r *Runner[TTx]) Events(ctx context.Context, id string) ([]sagadriver.Event, error) {
	var evs []sagadriver.Event
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		evs, err = r.driver.ListEvents(ctx, tx, id)
		return err
	})
	return evs, err
}

// Findings returns the reconciliation findings of an operation ("" for
// every operation), only the open ones if open is set.
func (r *Runner[TTx]) Findings(ctx context.Context, id string, open bool) ([]sagadriver.Finding, error) {
	var fs []sagadriver.Finding
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		fs, err = r.driver.ListFindings(ctx, tx, id, open)
		return err
	})
	return fs, err
}

// insertJob inserts the River job of e in tx.
func (r *Runner[TTx]) insertJob(ctx context.Context, tx TTx, op *sagadriver.Operation, e enqueue) error {
	client, err := r.riverClient()
	if err != nil {
		return err
	}
	st, ok := op.Step(e.step)
	if !ok {
		return fmt.Errorf("saga: no step %q", e.step)
	}
	ref := JobRef{OperationID: op.ID, Step: e.step, Generation: e.generation, Type: op.Type}
	opts := &river.InsertOpts{Queue: r.cfg.Queue, UniqueOpts: river.UniqueOpts{ByArgs: true},
		Tags: jobTags(op.Type)}
	// A verify job is inserted available and snoozes until the step has
	// been uncertain for VerifyAfter: River's scheduler would move a job
	// scheduled in the future only every few seconds. Other delays count
	// from the record's time, the database's clock, which River's fetch
	// compares scheduled_at with.
	if e.delay > 0 && e.kind != jobVerify {
		opts.ScheduledAt = op.UpdatedAt.Add(e.delay)
	}
	var args river.JobArgs
	switch e.kind {
	case jobStep:
		args = StepArgs{ref}
		// One more than the attempts left, so that the engine, not River,
		// decides when they are exhausted.
		opts.MaxAttempts = max(st.MaxAttempts-st.Attempts, 1) + 1
	case jobVerify:
		args = VerifyArgs{ref}
		opts.MaxAttempts = 5
	case jobCompensate:
		args = CompensateArgs{ref}
		opts.MaxAttempts = max(st.CompMaxAttempts-st.CompAttempts, 1) + 1
	}
	res, err := client.InsertTx(ctx, tx, args, opts)
	if err != nil {
		return fmt.Errorf("insert %s job for %s/%s: %w", args.Kind(), op.ID, e.step, err)
	}
	if res.UniqueSkippedAsDuplicate {
		r.log.InfoContext(ctx, "saga: job already inserted", "operation_id", op.ID, "step", e.step, "generation", e.generation)
	}
	return nil
}

// riverTag is what River accepts as a tag.
var riverTag = regexp.MustCompile(`\A[\w][\w\-]+[\w]\z`)

// jobTags tags a job "saga" and with its operation type, when River
// accepts the type as a tag (a type such as "tenant.signup" is not).
func jobTags(typ string) []string {
	if len(typ) <= 255 && riverTag.MatchString(typ) {
		return []string{"saga", typ}
	}
	return []string{"saga"}
}

// apply writes the decision's record, events and jobs in tx.
func (r *Runner[TTx]) apply(ctx context.Context, tx TTx, d *decision) error {
	if !d.changed {
		return nil
	}
	if err := r.driver.UpdateOperation(ctx, tx, &d.op); err != nil {
		return err
	}
	if err := r.driver.InsertEvents(ctx, tx, d.events); err != nil {
		return err
	}
	for _, e := range d.enqueue {
		if err := r.insertJob(ctx, tx, &d.op, e); err != nil {
			return err
		}
	}
	return nil
}

// results collects the results of the completed steps.
func results(op sagadriver.Operation) map[string]Result {
	out := map[string]Result{}
	for _, s := range op.Steps {
		if s.Status == sagadriver.StepCompleted || s.Status == sagadriver.StepCompensating || s.Status == sagadriver.StepCompensated || s.Status == sagadriver.StepCompensationFailed {
			out[s.Name] = Result{ExternalID: s.ExternalID, Data: s.Result}
		}
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}
