package idemriver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/unstuckhq/unstuck/idem"
)

// Lease bounds (SPEC J2). A lease derived from a timeout is clamped to
// them; an explicit [Config].Lease outside them is refused by [New].
const (
	// MinLease is the shortest lease, River's LockSeconds: a key is held at
	// least this long even for a job with a shorter timeout.
	MinLease = 60 * time.Second
	// MaxLease is the longest lease, one day; also the lease of jobs
	// without a timeout.
	MaxLease = idem.MaxLease

	// DefaultReleaseAfter is how long a duplicate is snoozed while the
	// first delivery of its key runs.
	DefaultReleaseAfter = 10 * time.Second
)

var (
	_ rivertype.WorkerMiddleware    = (*Middleware)(nil)
	_ rivertype.JobInsertMiddleware = (*Middleware)(nil)
)

// Middleware runs River jobs at most once per idempotency key (SPEC
// IDEM-J). It is both a rivertype.JobInsertMiddleware, which copies the key
// of [Keyed] args into the job's metadata, and a rivertype.WorkerMiddleware,
// which runs the worker through [idem.Run]; install it in
// river.Config.Middleware to get both. Installed only as a worker's own
// middleware (Worker.Middleware), it still works for keys put in the
// metadata with [InsertOpts].
//
// A Middleware is immutable and safe for concurrent use by any number of
// clients and workers. Build it with [New].
type Middleware struct {
	river.MiddlewareDefaults

	engine         *idem.Engine
	lease          time.Duration // 0: derive from the timeouts
	releaseAfter   time.Duration
	defaultTimeout time.Duration // River's Config.JobTimeout semantics
	ttl            time.Duration
	timeouts       map[string]func(*rivertype.JobRow) time.Duration
	recovery       *idem.Recovery // Config.Recovery; nil: the engine's
	tracer         trace.Tracer   // Config.TracerProvider; nil: off
}

// Config configures a [Middleware] built by [New], which checks every
// field (SPEC J2). The zero value is the default of every field.
type Config struct {
	// Lease is the lease of every keyed job, from [MinLease] to
	// [MaxLease]. It must be longer than the longest run of any keyed
	// worker; the worker's context is cancelled when it ends. 0: the lease
	// is derived from the worker's or the client's timeout.
	Lease time.Duration
	// ReleaseAfter is how long a duplicate is snoozed while the first
	// delivery of its key runs, from one second to [MaxLease]. 0 means
	// [DefaultReleaseAfter]. A duplicate is never snoozed past the end of
	// the holder's lease.
	ReleaseAfter time.Duration
	// DefaultTimeout gives the middleware the client's river.Config
	// JobTimeout, which River does not expose to middleware. It has
	// River's meaning: 0 is River's default (1 minute), -1 is no timeout
	// (the lease is then [MaxLease]). Any other negative value is refused.
	DefaultTimeout time.Duration
	// TTL is how long a key is remembered after it is first seen, from 60
	// s to 30 days. 0 means [idem.DefaultTTL] (24 h). A job delivered with
	// the key after that runs again.
	TTL time.Duration
	// Recovery is what a delivery does with a key abandoned by an earlier
	// delivery (processing, lease ended: its process crashed or stalled).
	// Nil: the engine's ([idem.Config].DefaultRecovery), itself
	// [idem.RecoverByEscalating]: the record becomes pending for an
	// operator and the job snoozes until it is resolved.
	// [idem.RecoverByRerunning] runs the worker again, for work that is
	// safe to repeat.
	Recovery *idem.Recovery
	// WorkerTimeouts are the sources of the lease for jobs of the workers'
	// kinds, each made by [WorkerTimeoutOf]. River applies a worker's
	// timeout inside the middleware chain, where the middleware cannot see
	// it, so register every keyed worker whose Timeout differs from the
	// client's JobTimeout. Registering a kind twice is refused.
	WorkerTimeouts []WorkerTimeout
	// TracerProvider records [SpanWork] with it for each keyed job. Nil
	// leaves tracing off: no tracing code runs.
	TracerProvider trace.TracerProvider
}

// WorkerTimeout is a worker's Timeout as the source of the lease for jobs
// of its kind, for [Config].WorkerTimeouts. Make it with
// [WorkerTimeoutOf].
type WorkerTimeout struct {
	kind    string
	timeout func(*rivertype.JobRow) time.Duration
	err     error
}

// WorkerTimeoutOf registers w's Timeout as the source of the lease for
// jobs of its kind. Timeout is called with the job's args decoded into T;
// its result has River's meaning (0: the client's default, -1: none). A
// nil w is refused by [New].
func WorkerTimeoutOf[T river.JobArgs](w river.Worker[T]) WorkerTimeout {
	if w == nil {
		return WorkerTimeout{err: errors.New("nil worker")}
	}
	var zero T
	return WorkerTimeout{kind: zero.Kind(), timeout: func(job *rivertype.JobRow) time.Duration {
		var args T
		if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
			// River fails the job on the same decoding; the lease
			// only has to be valid until then.
			return 0
		}
		return w.Timeout(&river.Job[T]{JobRow: job, Args: args})
	}}
}

// New returns a middleware that runs keyed jobs through engine,
// configured by cfg. Every field is validated here (SPEC J2): a value out
// of range is an error and no middleware is returned.
func New(engine *idem.Engine, cfg Config) (*Middleware, error) {
	if engine == nil {
		return nil, errors.New("idemriver: nil engine")
	}
	m := &Middleware{
		engine:         engine,
		lease:          cfg.Lease,
		releaseAfter:   cmp.Or(cfg.ReleaseAfter, DefaultReleaseAfter),
		defaultTimeout: cfg.DefaultTimeout,
		ttl:            cmp.Or(cfg.TTL, idem.DefaultTTL),
		recovery:       cfg.Recovery,
	}
	var errs []error
	if m.lease != 0 && (m.lease < MinLease || m.lease > MaxLease) {
		errs = append(errs, fmt.Errorf("lease %s is not in [%s, %s]", m.lease, MinLease, MaxLease))
	}
	if m.releaseAfter < time.Second || m.releaseAfter > MaxLease {
		errs = append(errs, fmt.Errorf("release-after %s is not in [1s, %s]", m.releaseAfter, MaxLease))
	}
	if m.defaultTimeout < -1 {
		errs = append(errs, fmt.Errorf("default timeout %s must be positive, 0 (River's default) or -1 (none)", m.defaultTimeout))
	}
	if err := idem.ValidateTTL(m.ttl); err != nil {
		errs = append(errs, err)
	}
	for _, wt := range cfg.WorkerTimeouts {
		switch _, dup := m.timeouts[wt.kind]; {
		case wt.err != nil:
			errs = append(errs, wt.err)
		case wt.timeout == nil:
			errs = append(errs, errors.New("worker timeout not made by WorkerTimeoutOf"))
		case dup:
			errs = append(errs, fmt.Errorf("worker timeout for kind %q registered twice", wt.kind))
		default:
			if m.timeouts == nil {
				m.timeouts = map[string]func(*rivertype.JobRow) time.Duration{}
			}
			m.timeouts[wt.kind] = wt.timeout
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("idemriver: %w", errors.Join(errs...))
	}
	if cfg.TracerProvider != nil {
		m.tracer = cfg.TracerProvider.Tracer(TracerName)
	}
	return m, nil
}

// InsertMany implements rivertype.JobInsertMiddleware. For args that
// implement [Keyed] with a non-empty key it writes the key and scope into
// the job's metadata, replacing any put there by [InsertOpts]. It fails the
// whole insert, before anything is written, when a key, a scope or the
// kind's operation name is out of range.
func (m *Middleware) InsertMany(ctx context.Context, manyParams []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range manyParams {
		if err := prepareInsert(p); err != nil {
			return nil, fmt.Errorf("idemriver: insert %s job: %w", p.Kind, err)
		}
	}
	return doInner(ctx)
}

func prepareInsert(p *rivertype.JobInsertParams) error {
	if k, ok := p.Args.(Keyed); ok {
		if key, scope := k.IdempotencyKey(); key != "" {
			md, err := setKey(p.Metadata, key, scope)
			if err != nil {
				return err
			}
			p.Metadata = md
		}
	}
	_, _, ok, err := keyFrom(p.Metadata)
	if err != nil || !ok {
		return err
	}
	return validateKind(p.Kind)
}

// Work implements rivertype.WorkerMiddleware. A job whose metadata carries
// no key runs untouched. A keyed job runs doInner through [idem.Run] under
// the operation "river:<kind>", with the SHA-256 of its canonical args as
// fingerprint, and returns:
//
//   - nil when the worker ran and succeeded, or when the key was already
//     completed (the worker does not run);
//   - nil when the worker succeeded but its completion could not be
//     written yet (idem.ErrOutcomeUnrecorded): the work is done and must
//     not run again; the engine logs it and records the completion in the
//     background;
//   - the worker's own error when it failed: idem.Run released the key and
//     River retries as usual (if the release could not be written yet,
//     the retries snooze until it is);
//   - river.JobSnooze(min(ReleaseAfter, rest of the lease)) when another
//     delivery holds the key or its outcome is pending;
//   - river.JobCancel with an error matching idem.ErrKeyReused when the key
//     was first used with other args, or idem.ErrInvalidKey when the
//     metadata's key is malformed;
//   - an error matching idem.ErrResultUnavailable, on every delivery, when
//     the key was completed unavailable (see the runbook in the package
//     documentation);
//   - a store error otherwise, which River retries.
//
// Unless the worker runs, doInner is not called: neither are the
// worker's args decoded nor River's work hooks (HookWorkBegin,
// HookWorkEnd) run, and River's job timeout does not apply.
func (m *Middleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	key, scope, ok, err := keyFrom(job.Metadata)
	if err != nil {
		return river.JobCancel(fmt.Errorf("idemriver: job %d (%s): %w", job.ID, job.Kind, err))
	}
	if !ok {
		return doInner(ctx)
	}
	if m.tracer != nil {
		return m.workTraced(ctx, job, key, scope, doInner)
	}
	return m.work(ctx, job, key, scope, doInner)
}

// work is Work for a keyed job.
func (m *Middleware) work(ctx context.Context, job *rivertype.JobRow, key, scope string, doInner func(context.Context) error) error {
	op := Operation(job.Kind)
	keyID := idem.SafeKeyID(idem.Digest(scope, op, key))
	fp, err := fingerprint(job.EncodedArgs)
	if err != nil {
		return river.JobCancel(fmt.Errorf("idemriver: job %d (%s), key %s: %w", job.ID, job.Kind, keyID, err))
	}

	lease := m.leaseFor(job)
	// The lease starts when the key is reserved, inside Run; a deadline set
	// now ends no later, so the worker is cancelled before a duplicate can
	// take the key over (clock skew between the process and the store
	// aside).
	ctx, cancel := context.WithTimeout(ctx, lease)
	defer cancel()

	var (
		ran     bool
		workErr error
	)
	_, err = idem.Run(ctx, m.engine, key, scope, func(ctx context.Context) (struct{}, error) {
		ran = true
		workErr = doInner(ctx)
		return struct{}{}, workErr
	}, &idem.RunOpts{Operation: op, Fingerprint: fp, Lease: lease, TTL: m.ttl, Recovery: m.recovery})
	if ran && workErr == nil && errors.Is(err, idem.ErrOutcomeUnrecorded) {
		// The work is done: completing the job keeps River from running
		// it again; the engine records the completion in the background.
		return nil
	}
	if err == nil || ran {
		// The worker's own outcome, or a failure to record it: River
		// handles both as the worker's result.
		return err
	}

	var inProgress *idem.InProgressError
	switch {
	case errors.As(err, &inProgress):
		return river.JobSnooze(min(m.releaseAfter, inProgress.RetryAfter))
	case errors.Is(err, idem.ErrKeyReused), errors.Is(err, idem.ErrInvalidKey):
		return river.JobCancel(fmt.Errorf("idemriver: job %d (%s), key %s: %w", job.ID, job.Kind, keyID, err))
	case errors.Is(err, idem.ErrResultUnavailable):
		return fmt.Errorf("idemriver: job %d (%s), key %s: the work ran but its completion was not recorded; "+
			"check whether the side effect happened, then delete the job or forget the key and retry it: %w",
			job.ID, job.Kind, keyID, err)
	}
	return fmt.Errorf("idemriver: job %d (%s), key %s: %w", job.ID, job.Kind, keyID, err)
}

// leaseFor returns the lease of job: the explicit one, else its worker's
// timeout, else the client's default.
func (m *Middleware) leaseFor(job *rivertype.JobRow) time.Duration {
	var worker time.Duration
	if f, ok := m.timeouts[job.Kind]; ok && m.lease == 0 {
		worker = f(job)
	}
	return leaseOf(m.lease, worker, m.defaultTimeout)
}

// leaseOf is the lease rule of SPEC J2 as a pure function. explicit is
// used when positive (New has checked its range). Otherwise the worker's
// timeout, then the client's, with River's meanings: 0 is not set (the
// client's 0 is River's one-minute default), a negative value is no
// timeout, which gives MaxLease. The result is clamped to [MinLease,
// MaxLease].
func leaseOf(explicit, worker, client time.Duration) time.Duration {
	d := explicit
	if d <= 0 {
		d = worker
	}
	if d == 0 {
		d = client
	}
	if d == 0 {
		d = river.JobTimeoutDefault
	}
	if d < 0 {
		return MaxLease
	}
	return min(max(d, MinLease), MaxLease)
}
