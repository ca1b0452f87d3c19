package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Result is what [Run] returns: the JSON round trip of the callback's value,
// the same on the first run and on every replay (SPEC R1).
type Result[T any] struct {
	Value T
	// Replayed is true when the value comes from the store and the callback
	// did not run.
	Replayed bool
	// FirstSeenAt is when the store first saw the key (kept across lease
	// takeovers).
	FirstSeenAt time.Time
}

type runConfig struct {
	fingerprint string
	ttl         time.Duration
	lease       time.Duration
	operation   string
	err         error
}

// RunOption configures one [Run].
type RunOption func(*runConfig)

// WithFingerprint sets the request fingerprint. A later run with the same
// key and another fingerprint gets ErrKeyReused (SPEC R3). At most 255 bytes.
func WithFingerprint(fp string) RunOption {
	return func(c *runConfig) {
		if len(fp) > MaxKeyBytes {
			c.err = &ValidationError{Field: "fingerprint", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(fp), MaxKeyBytes)}
			return
		}
		c.fingerprint = fp
	}
}

// WithTTL sets how long the record is kept after it is first seen, 60 s to
// 30 days (default 24 h).
func WithTTL(d time.Duration) RunOption {
	return func(c *runConfig) {
		if err := ValidateTTL(d); err != nil {
			c.err = err
			return
		}
		c.ttl = d
	}
}

// WithLease sets how long this run holds the key, 1 s to 1 day (default
// 60 s). It must be longer than the callback's longest run: after it ends,
// another caller may take the key over (SPEC R8).
func WithLease(d time.Duration) RunOption {
	return func(c *runConfig) {
		if err := ValidateLease(d); err != nil {
			c.err = err
			return
		}
		c.lease = d
	}
}

// WithOperation names the operation the key belongs to (default "run").
// The same key under two operations is two records.
func WithOperation(name string) RunOption {
	return func(c *runConfig) { c.operation = name }
}

// maxTakeoverRounds bounds how often Run re-reads a record after losing a
// compare-and-swap race, before it answers in-progress.
const maxTakeoverRounds = 4

// Run runs fn at most once per (key, scope) while the record is kept, and
// returns its result to this and every later caller (SPEC IDEM-R).
//
//   - Arguments are validated before the store is touched: ErrInvalidKey.
//   - The first caller runs fn under a lease. A concurrent caller gets
//     ErrInProgress (an *InProgressError with RetryAfter); a caller after
//     completion gets the stored value with Replayed set.
//   - fn returning an error, or panicking, releases the key; the error is
//     returned and the panic re-raised after the release.
//   - fn returning [Uncertain] leaves the record pending: the error is
//     returned and repeats get ErrInProgress until the record is resolved.
//   - A value that cannot be stored completes the key unavailable and returns
//     ErrResultNotStorable; later callers get ErrResultUnavailable and fn is
//     never run again for this key.
//   - If the lease ended and another caller took the key over, this run's
//     completion fails with ErrFenced and changes nothing.
//
// fn receives a context from which [Annotate] and [RunInfoFrom] work.
func Run[T any](ctx context.Context, e *Engine, key, scope string, fn func(ctx context.Context) (T, error), opts ...RunOption) (Result[T], error) {
	var zero Result[T]
	cfg := runConfig{ttl: DefaultTTL, lease: DefaultLease, operation: DefaultOperation}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return zero, cfg.err
	}
	if err := validateIdent(key, scope, cfg.operation); err != nil {
		return zero, err
	}
	if fn == nil {
		return zero, errors.New("idem: nil callback")
	}
	id := Ident{Scope: scope, Operation: cfg.operation, KeyDigest: Digest(scope, cfg.operation, key)}
	req := Request{Fingerprint: cfg.fingerprint}

	claim, err := e.acquire(ctx, e.store, id, req, cfg.ttl, cfg.lease)
	if err != nil {
		return zero, err
	}
	switch claim.outcome.Action {
	case ActionReserve, ActionTakeOver, ActionRestart:
		return execute(ctx, e.newRunState(e.store, claim.rec), fn)
	case ActionWait:
		return zero, &InProgressError{RetryAfter: claim.outcome.RetryAfter, Status: claim.rec.Status}
	case ActionRejectReused:
		return zero, ErrKeyReused
	case ActionReplay:
		return replay[T](e, claim.rec)
	default:
		return zero, ErrResultUnavailable
	}
}

// claim is what acquire found: either ownership of rec (outcome reserve,
// take over or restart: the caller must complete or release it) or an
// answer to give without running.
type claim struct {
	rec     Record
	outcome Outcome
}

// owned reports whether the caller now owns the record.
func (c claim) owned() bool {
	switch c.outcome.Action {
	case ActionReserve, ActionTakeOver, ActionRestart:
		return true
	}
	return false
}

// acquire applies the decision table to the key until it owns the record
// or has an answer. Losing a compare-and-swap race reads the record again,
// at most maxTakeoverRounds times, then answers in-progress.
func (e *Engine) acquire(ctx context.Context, s Store, id Ident, req Request, ttl, lease time.Duration) (claim, error) {
	for range maxTakeoverRounds {
		token := uuid.NewString()
		rec, created, err := s.Reserve(ctx, ReserveParams{Ident: id, Fingerprint: req.Fingerprint, Owner: token, Lease: lease, TTL: ttl, Now: e.now()})
		if err != nil {
			return claim{}, fmt.Errorf("idem: reserve: %w", err)
		}
		if created {
			return claim{rec: rec, outcome: Outcome{Action: ActionReserve}}, nil
		}
		out := Decide(&rec, req, e.policy)
		if out.Action != ActionTakeOver && out.Action != ActionRestart {
			return claim{rec: rec, outcome: out}, nil
		}
		taken, err := s.Takeover(ctx, TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: token, Lease: lease,
			Fresh: out.Action == ActionRestart, Fingerprint: req.Fingerprint, TTL: ttl, Now: e.now()})
		if errors.Is(err, ErrFenced) {
			continue // someone else moved first: read again
		}
		if err != nil {
			return claim{}, fmt.Errorf("idem: take over: %w", err)
		}
		e.log.Info("idem: lease taken over", "key_id", SafeKeyID(id.KeyDigest), "operation", id.Operation,
			"fence", taken.Fence, "attempt", taken.Attempts, "restart", out.Action == ActionRestart)
		return claim{rec: taken, outcome: out}, nil
	}
	return claim{outcome: Outcome{Action: ActionWait, RetryAfter: time.Second}, rec: Record{Status: StatusProcessing}}, nil
}

// OpenResult returns the plaintext of rec's stored result: the JSON of a
// [Run] value, or of a [StoredResponse] for an HTTP record. It fails for a
// record without a result, and for a result that cannot be opened under the
// engine's secrets (moved, corrupt, or sealed under an unknown secret). It is
// for operators: callers that replay use Run or the middleware.
func (e *Engine) OpenResult(rec Record) ([]byte, error) {
	if len(rec.Result) == 0 {
		return nil, errors.New("idem: the record holds no result")
	}
	return e.sealer.open(rec.Ident, rec.Fingerprint, rec.Result)
}

// replay opens the stored result of rec. Whatever cannot be opened or
// decoded is unavailable, never a guess and never a panic.
func replay[T any](e *Engine, rec Record) (Result[T], error) {
	var r Result[T]
	plain, err := e.sealer.open(rec.Ident, rec.Fingerprint, rec.Result)
	if err == nil {
		err = json.Unmarshal(plain, &r.Value)
	}
	if err != nil {
		e.log.Warn("idem: stored result cannot be replayed", "key_id", SafeKeyID(rec.KeyDigest), "operation", rec.Operation, "record_id", rec.ID, "error", err.Error())
		return Result[T]{}, ErrResultUnavailable
	}
	r.Replayed = true
	r.FirstSeenAt = rec.CreatedAt
	return r, nil
}

// execute runs fn as the owner of rec and records the outcome.
func execute[T any](ctx context.Context, st *runState, fn func(context.Context) (T, error)) (res Result[T], err error) {
	e, rec := st.engine, st.rec
	log := lazyLogger{st: st}

	value, err := callGuarded(withRunState(ctx, st), fn, func() {
		if rerr := e.release(ctx, st); rerr != nil {
			log.Error("idem: release after panic failed; the key stays processing until its lease ends", "error", rerr.Error())
		}
	})
	if err != nil {
		if errors.Is(err, ErrUncertain) {
			if cerr := e.complete(ctx, st, Completion{Status: StatusPending, LastError: shortError(err)}); cerr != nil {
				return res, errors.Join(err, fmt.Errorf("idem: record pending: %w", cerr))
			}
			log.Warn("idem: outcome uncertain, record pending")
			return res, err
		}
		if rerr := e.release(ctx, st); rerr != nil {
			return res, errors.Join(err, fmt.Errorf("idem: release: %w", rerr))
		}
		return res, err
	}

	plain, value, err := encodeResult(value, e.maxResultBytes)
	if err != nil {
		log.Warn("idem: result not storable, key completed unavailable", "error", err.Error())
		if cerr := e.complete(ctx, st, Completion{Status: StatusUnavailable, LastError: shortError(err)}); cerr != nil {
			return res, errors.Join(fmt.Errorf("%w: %w", ErrResultNotStorable, err), fmt.Errorf("idem: complete: %w", cerr))
		}
		return res, fmt.Errorf("%w: %w", ErrResultNotStorable, err)
	}
	sealed, err := e.sealer.seal(rec.Ident, rec.Fingerprint, plain)
	if err == nil {
		err = e.complete(ctx, st, Completion{Status: StatusCompleted, Result: sealed})
		if errors.Is(err, ErrFenced) {
			log.Warn("idem: completion refused: the lease was taken over or the key forgotten")
			return res, fmt.Errorf("idem: complete: %w", err)
		}
	}
	if err != nil {
		// The effect ran: never let the key run again. Record it as
		// unavailable if the store still lets us (SPEC R6).
		if uerr := e.complete(ctx, st, Completion{Status: StatusUnavailable, LastError: "completion failed: " + shortError(err)}); uerr != nil {
			log.Error("idem: completion failed; the key stays processing until its lease ends", "error", err.Error())
		} else {
			log.Error("idem: completion failed; key completed unavailable", "error", err.Error())
		}
		return res, fmt.Errorf("idem: complete: %w", err)
	}
	return Result[T]{Value: value, FirstSeenAt: rec.CreatedAt}, nil
}

// callGuarded calls fn; if fn panics, onPanic runs before the panic goes on.
func callGuarded[T any](ctx context.Context, fn func(context.Context) (T, error), onPanic func()) (v T, err error) {
	panicking := true
	defer func() {
		if panicking {
			onPanic()
		}
	}()
	v, err = fn(ctx)
	panicking = false
	return v, err
}

// encodeResult returns the JSON of v and v's JSON round trip, or why v
// cannot be stored.
func encodeResult[T any](v T, limit int) ([]byte, T, error) {
	var out T
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, out, err
	}
	if len(plain) > limit {
		return nil, out, fmt.Errorf("result has %d bytes, limit %d", len(plain), limit)
	}
	if err := json.Unmarshal(plain, &out); err != nil {
		return nil, out, fmt.Errorf("result does not survive a JSON round trip: %w", err)
	}
	return plain, out, nil
}

// release and complete run even when the caller's context is done: the
// callback ran, and its outcome must be recorded whether or not the caller
// still waits. They are bounded by the store's own timeouts, not by a
// context deadline (a cancellable context costs the SQLite driver a
// goroutine per statement).
func (e *Engine) release(ctx context.Context, st *runState) error {
	return st.store.Release(context.WithoutCancel(ctx), st.id, st.owner)
}

func (e *Engine) complete(ctx context.Context, st *runState, c Completion) error {
	c.Now = e.now()
	return st.store.Complete(context.WithoutCancel(ctx), st.id, st.owner, c)
}

// lazyLogger builds the run's logger only when something is logged: most
// runs log nothing.
type lazyLogger struct{ st *runState }

func (l lazyLogger) Warn(msg string, args ...any)  { l.st.logger().Warn(msg, args...) }
func (l lazyLogger) Error(msg string, args ...any) { l.st.logger().Error(msg, args...) }

// shortError is a bounded error text for LastError.
func shortError(err error) string {
	const max = 500
	s := err.Error()
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
