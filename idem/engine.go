package idem

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/decide"
)

// Limits of SPEC IDEM-R2 and H15.
const (
	MaxKeyBytes   = 255
	MaxScopeBytes = 255
	MinTTL        = 60 * time.Second
	MaxTTL        = 30 * 24 * time.Hour // 2,592,000 s
	MinLease      = time.Second
	MaxLease      = 24 * time.Hour

	// DefaultTTL is how long a record is kept after it is first seen.
	DefaultTTL = 24 * time.Hour
	// DefaultLease is how long a running call holds its key; it must be
	// longer than the call's longest run (SPEC R8).
	DefaultLease = 60 * time.Second
	// DefaultOperation is the operation name of programmatic runs.
	DefaultOperation = "run"
	// DefaultMaxResultBytes bounds the JSON of a stored result.
	DefaultMaxResultBytes = 1 << 20
	// DefaultPendingRetryAfter is the polling pace given to programs for a
	// pending key (see [Config].PendingRetryAfter).
	DefaultPendingRetryAfter = 30 * time.Second
	// DefaultStoreTimeout bounds every store call the engine makes.
	DefaultStoreTimeout = 5 * time.Second
	// MinRecordingWindow is the shortest time the engine keeps trying to
	// record an outcome in the background (see [Config].RecordingWindow).
	MinRecordingWindow = 30 * time.Second
	// DefaultSweepBatch is the records one store call of [Engine.Sweep]
	// handles at most (see [Config].SweepBatch).
	DefaultSweepBatch = 100
	// DefaultSweepPause is the wait after each full batch of
	// [Engine.Sweep] (see [Config].SweepPause): with DefaultSweepBatch, at
	// most about 2,000 records a second, measured at 1,900 a second on
	// PostgreSQL beside a steady load whose p99 it kept within 1.4× of no
	// sweep (BENCHMARKS.md, "Retention under load").
	DefaultSweepPause = 50 * time.Millisecond
)

// Engine decides and records idempotent runs over a [idemdriver.Store]. It is safe for
// concurrent use; build it once with [New] and share it.
type Engine struct {
	store          idemdriver.Store
	sealer         *sealer
	nowFunc        func() time.Time
	log            *slog.Logger
	maxResultBytes int
	policy         decide.Policy
	storeTimeout   time.Duration
	local          bool // store is a idemdriver.LocalStore: bound passes no deadline
	deadlines      sharedDeadlines
	recordWindow   time.Duration // 0: per run, max(2 × lease, MinRecordingWindow)
	recovery       Recovery
	sweepBatch     int
	sweepPause     time.Duration
	late           lateRecordings
	tracer         trace.Tracer // nil: tracing off (Config.TracerProvider)
}

// Config configures an [Engine] built by [New]. The zero value is the
// default of every field, except that a secret is required: set Secret, or
// DisableSealing to store results in clear.
type Config struct {
	// Secret is the application secret from which the result-sealing key
	// is derived (HKDF-SHA-256, for this purpose only). New results are
	// always sealed under it. It must have at least [MinSecretBytes]
	// bytes. New copies it.
	Secret []byte
	// PreviousSecrets are earlier secrets that may still open results
	// sealed before a rotation, each of at least [MinSecretBytes] bytes.
	// New copies them.
	PreviousSecrets [][]byte
	// DisableSealing stores results in clear. Sealing is on by default and
	// [New] refuses to build an engine without a Secret unless this is
	// set; setting both is refused too.
	DisableSealing bool
	// Now replaces the store's clock for every store call. It is for tests
	// that move time; in production (nil) leases are judged by the store's
	// clock.
	Now func() time.Time
	// Logger is where the engine logs. Logs carry a safe key id, never a
	// raw key, a payload or a secret (SPEC M5). Nil discards.
	Logger *slog.Logger
	// MaxResultBytes bounds the JSON encoding of a stored result; a larger
	// result completes the key unavailable (SPEC R5). 0 means
	// [DefaultMaxResultBytes] (1 MiB); a negative value is refused.
	MaxResultBytes int
	// PendingRetryAfter is the polling pace given for a pending key,
	// which holds no lease and waits for an operator or a reconciliation:
	// the RetryAfter of the *[PendingReviewError] that [Run] returns, at
	// which a program that polls comes back (package idemriver snoozes its
	// job for at most this long). Nothing in the engine retries a pending
	// key by itself, and the HTTP middleware sends no Retry-After for one
	// (SPEC K21): this is no promise that the review ends by then. 0 means
	// [DefaultPendingRetryAfter] (30 s); otherwise at least 1 s.
	PendingRetryAfter time.Duration
	// StoreTimeout bounds every store call the engine makes. 0 means
	// [DefaultStoreTimeout] (5 s); a negative value is refused. Each call
	// ends, or fails with an error matching [context.DeadlineExceeded], at
	// most StoreTimeout after it began (a call whose context can never be
	// cancelled, such as an outcome write, shares its deadline with the
	// calls that begin close to it and may be cut up to StoreTimeout/64
	// sooner, so that no call pays a timer of its own). The bound is set
	// once per phase, and every call of the phase shares its deadline,
	// StoreTimeout after the phase began: the reservation (Reserve, and the
	// Takeover of a record whose lease ended, over all rounds of a lost
	// race), one outcome write (complete or release; an escalation or a
	// verified effect), one Annotate, Forget or Sweep batch, one retry of
	// a background recording or release of a reservation whose answer was
	// lost. Calls on the caller's path (reserve, take over, read,
	// annotate, forget, sweep) run under the caller's context further
	// bounded by StoreTimeout; outcome writes run under a context detached
	// from the caller's cancellation and bounded by StoreTimeout. The
	// driver must honour context deadlines (both drivers here do; see
	// their package documentation for the connect timeout). A
	// [idemdriver.LocalStore] (SQLite) gets the phase's deadline as a
	// value ([idemdriver.CallDeadline]) instead of a context deadline and
	// bounds its calls itself.
	StoreTimeout time.Duration
	// RecordingWindow is how long the engine keeps trying, in the
	// background, to record an outcome whose first write failed (see
	// [ErrOutcomeUnrecorded]), at least [MinRecordingWindow]. 0: twice the
	// run's lease, at least MinRecordingWindow.
	RecordingWindow time.Duration
	// DefaultRecovery is the engine's recovery of abandoned records, used
	// by runs, routes and jobs that set none. The zero value is
	// [RecoverByEscalating].
	DefaultRecovery Recovery
	// TracerProvider turns tracing on: the engine records the spans named
	// by [SpanRun] and [SpanDecide] with it, and stores the trace ID of
	// the call that creates or takes over a record on it
	// (Record.TraceID), for the console to link to the tracing UI. Nil
	// leaves tracing off: then no tracing code runs at all
	// (BENCHMARKS.md, "tracing off vs on").
	TracerProvider trace.TracerProvider
	// SweepBatch is the records one store call of [Engine.Sweep] deletes
	// or escalates at most: one statement, one transaction. 0 means
	// [DefaultSweepBatch]; a negative value is refused.
	SweepBatch int
	// SweepPause is the wait after each full batch of [Engine.Sweep] before
	// the next: a sweep then removes at most about SweepBatch records per
	// SweepPause, and the database serves the applications' requests
	// between its statements. 0 means [DefaultSweepPause]; a negative
	// value means none, batches back to back (on PostgreSQL 20 times the
	// rate, at twice the applications' p99). The sweep must keep up with
	// the rate new keys arrive: docs/capacity.md gives measured settings.
	SweepPause time.Duration
}

// New returns an engine over store configured by cfg. It fails fast when
// no secret is given and sealing was not explicitly turned off, or when a
// field is out of range.
func New(store idemdriver.Store, cfg Config) (*Engine, error) {
	if store == nil {
		return nil, errors.New("idem: nil store")
	}
	c := cfg
	c.MaxResultBytes = cmp.Or(c.MaxResultBytes, DefaultMaxResultBytes)
	c.PendingRetryAfter = cmp.Or(c.PendingRetryAfter, DefaultPendingRetryAfter)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, DefaultStoreTimeout)
	c.SweepBatch = cmp.Or(c.SweepBatch, DefaultSweepBatch)
	c.SweepPause = cmp.Or(c.SweepPause, DefaultSweepPause)
	e := &Engine{store: store, nowFunc: c.Now, log: c.Logger, maxResultBytes: c.MaxResultBytes,
		policy: decide.Policy{PendingRetryAfter: c.PendingRetryAfter}, storeTimeout: c.StoreTimeout,
		recordWindow: c.RecordingWindow, recovery: c.DefaultRecovery, sweepBatch: c.SweepBatch,
		sweepPause: c.SweepPause, late: newLateRecordings()}
	switch {
	case c.DisableSealing && len(c.Secret) > 0:
		return nil, errors.New("idem: Config.Secret and Config.DisableSealing both set")
	case c.DisableSealing:
		e.sealer = &sealer{plain: true}
	case len(c.Secret) == 0:
		return nil, errors.New("idem: no secret: set Config.Secret, or Config.DisableSealing to store results in clear")
	default:
		// Copies: the caller may reuse or wipe its slices.
		previous := make([][]byte, 0, len(c.PreviousSecrets))
		for _, p := range c.PreviousSecrets {
			previous = append(previous, append([]byte(nil), p...))
		}
		s, err := newSealer(append([]byte(nil), c.Secret...), previous)
		if err != nil {
			return nil, err
		}
		e.sealer = s
	}
	if c.MaxResultBytes <= 0 {
		return nil, fmt.Errorf("idem: max result bytes %d must be positive", c.MaxResultBytes)
	}
	if c.PendingRetryAfter < time.Second {
		return nil, fmt.Errorf("idem: pending retry-after %s must be at least 1s", c.PendingRetryAfter)
	}
	if c.StoreTimeout <= 0 {
		return nil, fmt.Errorf("idem: store timeout %s must be positive", c.StoreTimeout)
	}
	if c.SweepBatch < 0 {
		return nil, fmt.Errorf("idem: sweep batch %d must not be negative", c.SweepBatch)
	}
	if c.RecordingWindow != 0 && c.RecordingWindow < MinRecordingWindow {
		return nil, fmt.Errorf("idem: recording window %s must be at least %s", c.RecordingWindow, MinRecordingWindow)
	}
	if c.TracerProvider != nil {
		e.tracer = c.TracerProvider.Tracer(TracerName)
	}
	_, e.local = store.(idemdriver.LocalStore)
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() idemdriver.Store { return e.store }

// DefaultRecovery returns the recovery of abandoned records used where none
// is set ([Config].DefaultRecovery).
func (e *Engine) DefaultRecovery() Recovery { return e.recovery }

// bound returns ctx bounded by the store timeout: with a deadline, or, for
// a [idemdriver.LocalStore], with the end of the timeout as a value that the store
// honours itself (see LocalStore). A ctx that can never be cancelled gets
// a deadline shared with the calls that begin close to it (see
// sharedDeadlines): no timer of its own.
func (e *Engine) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.local {
		return idemdriver.ContextWithCallDeadline(ctx, time.Now().Add(e.storeTimeout)), noCancel
	}
	if ctx.Done() == nil {
		return &sharedBound{parent: ctx, slot: e.deadlines.slot(e.storeTimeout)}, noCancel
	}
	return context.WithTimeout(ctx, e.storeTimeout)
}

// boundDetached is bound(context.WithoutCancel(ctx)) for an outcome write,
// with the bound in buf when buf is not nil (the run state's, so that
// the write allocates nothing for it).
func (e *Engine) boundDetached(ctx context.Context, buf *sharedBound) context.Context {
	if e.local {
		return idemdriver.ContextWithCallDeadline(context.WithoutCancel(ctx), time.Now().Add(e.storeTimeout))
	}
	if buf == nil {
		buf = new(sharedBound)
	}
	*buf = sharedBound{parent: ctx, slot: e.deadlines.slot(e.storeTimeout)}
	return buf
}

// noCancel is the CancelFunc of a bound that set no deadline.
func noCancel() {}

// now is the time passed to store calls: zero (the store's clock) unless a
// NowFunc is set.
func (e *Engine) now() time.Time {
	if e.nowFunc == nil {
		return time.Time{}
	}
	return e.nowFunc()
}

// Forget releases the programmatic key (key, scope) whatever its state and
// reports whether it existed (SPEC R7). A run still holding the key will
// fail to complete with ErrFenced.
func (e *Engine) Forget(ctx context.Context, key, scope string) (existed bool, err error) {
	return e.ForgetOperation(ctx, key, scope, DefaultOperation)
}

// ForgetOperation is [Engine.Forget] for a key used with [RunOpts].Operation.
func (e *Engine) ForgetOperation(ctx context.Context, key, scope, operation string) (bool, error) {
	if err := validateIdent(key, scope, operation); err != nil {
		return false, err
	}
	ctx, cancel := e.bound(ctx)
	defer cancel()
	existed, err := e.store.Delete(ctx, idemdriver.Ident{Scope: scope, Operation: operation, KeyDigest: Digest(scope, operation, key)})
	if err != nil {
		return false, fmt.Errorf("idem: forget: %w", storeError(err))
	}
	return existed, nil
}

// Sweep deletes finished records whose retention has ended, never one
// under a live lease and never a pending one (SPEC M6). An abandoned record
// (processing, lease ended) past its retention is never deleted: it is
// escalated to pending with an [idemdriver.AbandonedReason] for an operator, logged
// and counted. It works in batches of [Config].SweepBatch, each store call
// bounded by the store timeout, with [Config].SweepPause after each full
// one, until a batch finds less than a full one or ctx ends; it returns
// what it did, also when ctx ends during a pause.
func (e *Engine) Sweep(ctx context.Context) (idemdriver.SweepResult, error) {
	batch := e.sweepBatch
	var total idemdriver.SweepResult
	for first := true; ; first = false {
		if !first && e.sweepPause > 0 {
			if err := sleepCtx(ctx, e.sweepPause); err != nil {
				return total, fmt.Errorf("idem: sweep: %w", err)
			}
		}
		bctx, cancel := e.bound(ctx)
		r, err := e.store.Sweep(bctx, idemdriver.SweepParams{Limit: batch, Now: e.now()})
		cancel()
		total.Deleted += r.Deleted
		total.Escalated += r.Escalated
		if r.Escalated > 0 {
			e.late.escalated.Add(int64(r.Escalated))
			e.log.Warn("idem: sweep escalated abandoned records to pending for an operator", "count", r.Escalated)
		}
		if err != nil {
			return total, fmt.Errorf("idem: sweep: %w", err)
		}
		if r.Deleted+r.Escalated < batch {
			return total, nil
		}
	}
}

func validateIdent(key, scope, operation string) error {
	switch {
	case key == "":
		return &ValidationError{Field: "key", Reason: "empty"}
	case len(key) > MaxKeyBytes:
		return &ValidationError{Field: "key", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(key), MaxKeyBytes)}
	case scope == "":
		return &ValidationError{Field: "scope", Reason: "empty"}
	case len(scope) > MaxScopeBytes:
		return &ValidationError{Field: "scope", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(scope), MaxScopeBytes)}
	case operation == "":
		return &ValidationError{Field: "operation", Reason: "empty"}
	case len(operation) > MaxScopeBytes:
		return &ValidationError{Field: "operation", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(operation), MaxScopeBytes)}
	}
	return nil
}

// ValidateTTL reports whether d is a valid retention (SPEC H15).
func ValidateTTL(d time.Duration) error {
	if d < MinTTL || d > MaxTTL {
		return &ValidationError{Field: "ttl", Reason: fmt.Sprintf("%s is not in [%s, %s]", d, MinTTL, MaxTTL)}
	}
	return nil
}

// ValidateLease reports whether d is a valid lease (SPEC R2).
func ValidateLease(d time.Duration) error {
	if d < MinLease || d > MaxLease {
		return &ValidationError{Field: "lease", Reason: fmt.Sprintf("%s is not in [%s, %s]", d, MinLease, MaxLease)}
	}
	return nil
}
