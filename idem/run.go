package idem

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/decide"
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

// RunOpts are the settings of one [Run]. A nil *RunOpts, like the zero
// value of a field, means the default.
type RunOpts struct {
	// Fingerprint is the request fingerprint. A later run with the same
	// key and another fingerprint gets ErrKeyReused (SPEC R3). At most
	// 255 bytes. Default: none.
	Fingerprint string
	// TTL is how long the record is kept after it is first seen, 60 s to
	// 30 days. 0 means [DefaultTTL] (24 h).
	TTL time.Duration
	// Lease is how long this run holds the key, 1 s to 1 day. 0 means
	// [DefaultLease] (60 s). It must be longer than the callback's longest
	// run: after it ends, another caller applies the run's Recovery to the
	// key (SPEC R8): by default it escalates it to pending, with
	// RecoverByRerunning it takes it over and runs again.
	Lease time.Duration
	// Operation names the operation the key belongs to. "" means
	// [DefaultOperation] ("run"). The same key under two operations is two
	// records.
	Operation string
	// Recovery is the recovery of abandoned records for this run. Nil: the
	// engine's default ([Config].DefaultRecovery).
	Recovery *Recovery
}

// runConfig is a run's settings after the defaults are applied.
type runConfig struct {
	fingerprint string
	ttl         time.Duration
	lease       time.Duration
	operation   string
	recovery    *Recovery
}

// runConfigOf applies the defaults to opts and checks their ranges.
func runConfigOf(opts *RunOpts) (runConfig, error) {
	cfg := runConfig{ttl: DefaultTTL, lease: DefaultLease, operation: DefaultOperation}
	if opts == nil {
		return cfg, nil
	}
	if len(opts.Fingerprint) > MaxKeyBytes {
		return cfg, &ValidationError{Field: "fingerprint", Reason: fmt.Sprintf("%d bytes, at most %d allowed", len(opts.Fingerprint), MaxKeyBytes)}
	}
	cfg.fingerprint = opts.Fingerprint
	if opts.TTL != 0 {
		if err := ValidateTTL(opts.TTL); err != nil {
			return cfg, err
		}
		cfg.ttl = opts.TTL
	}
	if opts.Lease != 0 {
		if err := ValidateLease(opts.Lease); err != nil {
			return cfg, err
		}
		cfg.lease = opts.Lease
	}
	if opts.Operation != "" {
		cfg.operation = opts.Operation
	}
	cfg.recovery = opts.Recovery
	return cfg, nil
}

// maxTakeoverRounds bounds how often Run re-reads a record after losing a
// compare-and-swap race, before it answers in-progress.
const maxTakeoverRounds = 4

// Run runs fn at most once per (key, scope) while the record is kept, and
// returns its result to this and every later caller (SPEC IDEM-R).
//
//   - Arguments are validated before the store is touched: a malformed
//     key, scope, operation or fingerprint is an error matching
//     [ErrInvalidKey]; an out-of-range TTL or lease ([RunOpts])
//     one matching [ErrInvalidOption], and not ErrInvalidKey. Both are a
//     *[ValidationError] naming the field.
//   - The first caller runs fn under a lease. A concurrent caller gets
//     ErrInProgress (an *InProgressError with RetryAfter); a caller after
//     completion gets the stored value with Replayed set.
//   - fn returning an error, or panicking, releases the key; the error is
//     returned and the panic re-raised after the release.
//   - fn returning [Uncertain] leaves the record pending: the error is
//     returned and repeats get ErrPendingReview (a *PendingReviewError,
//     which still matches ErrInProgress) until the record is resolved.
//   - A value that cannot be stored completes the key unavailable and returns
//     ErrResultNotStorable; later callers get ErrResultUnavailable and fn is
//     never run again for this key.
//   - If the lease ended and another caller took the key over, this run's
//     completion fails with ErrFenced and changes nothing.
//   - If fn ran but its outcome (completion, or release after an error)
//     cannot be written — the store restarted, a connection dropped — Run
//     returns an error matching [ErrOutcomeUnrecorded] and the store's
//     error, together with the Result carrying fn's value when fn
//     succeeded: the effect is real and the value may be used. The engine
//     keeps writing the outcome in the background ([Config].RecordingWindow)
//     and keeps the lease alive meanwhile, so a repeat gets ErrInProgress,
//     then the stored result; the key never runs again while this process
//     lives.
//   - A record abandoned by its owner (processing, lease ended: a crash)
//     is handled by the run's [Recovery] ([RunOpts].Recovery, default
//     [RecoverByEscalating]: the record becomes pending for an operator
//     and Run returns ErrPendingReview, as every repeat does until the
//     record is resolved).
//
// Every store call is bounded by the engine's store timeout
// ([Config].StoreTimeout, default 5 s): reads and reservations under ctx,
// outcome writes under a context that ignores ctx's cancellation.
//
// fn receives a context from which [Annotate] and [RunInfoFrom] work.
func Run[T any](ctx context.Context, e *Engine, key, scope string, fn func(ctx context.Context) (T, error), opts *RunOpts) (Result[T], error) {
	var zero Result[T]
	cfg, err := runConfigOf(opts)
	if err != nil {
		return zero, err
	}
	if err := validateIdent(key, scope, cfg.operation); err != nil {
		return zero, err
	}
	if fn == nil {
		return zero, errors.New("idem: nil callback")
	}
	id := idemdriver.Ident{Scope: scope, Operation: cfg.operation, KeyDigest: Digest(scope, cfg.operation, key)}
	req := decide.Request{Fingerprint: cfg.fingerprint, KeyHash: KeyHash(key)}
	recovery := e.recovery
	if cfg.recovery != nil {
		recovery = *cfg.recovery
	}

	if e.tracer != nil {
		return runTraced(ctx, e, id, req, cfg, recovery, fn)
	}
	return runKey(ctx, e, id, req, cfg, recovery, fn)
}

// runKey is Run after its arguments are checked.
func runKey[T any](ctx context.Context, e *Engine, id idemdriver.Ident, req decide.Request, cfg runConfig, recovery Recovery, fn func(ctx context.Context) (T, error)) (Result[T], error) {
	var zero Result[T]
	claim, err := e.acquire(ctx, e.store, id, req, cfg.ttl, cfg.lease, recovery, false)
	if err != nil {
		return zero, err
	}
	switch claim.outcome.Action {
	case decide.ActionReserve, decide.ActionTakeOver, decide.ActionRestart:
		return execute(ctx, e.newRunState(e.store, claim.rec), fn)
	case decide.ActionWait:
		return zero, &InProgressError{RetryAfter: claim.outcome.RetryAfter, Status: claim.rec.Status}
	case decide.ActionAwaitReview:
		return zero, &PendingReviewError{RetryAfter: claim.outcome.RetryAfter}
	case decide.ActionRejectReused:
		return zero, ErrKeyReused
	case decide.ActionReplay:
		return replay[T](e, claim.rec)
	default:
		return zero, ErrResultUnavailable
	}
}

// claim is what acquire found: either ownership of rec (outcome reserve,
// take over or restart: the caller must complete or release it; rec is
// whole) or an answer to give without running (rec has the
// idemdriver.LeanFields only: acquire reserves with Lean).
type claim struct {
	rec     idemdriver.Record
	outcome decide.Outcome
	// wrote says that acquire changed the record without owning it (an
	// escalation, a verified effect): inside a transaction it must commit.
	wrote bool
}

// owned reports whether the caller now owns the record.
func (c claim) owned() bool {
	switch c.outcome.Action {
	case decide.ActionReserve, decide.ActionTakeOver, decide.ActionRestart:
		return true
	}
	return false
}

// acquire applies the decision table to the key until it owns the record
// or has an answer. Losing a compare-and-swap race reads the record again,
// at most maxTakeoverRounds times, then answers in-progress. An abandoned
// record is handled by rcv. The reservation phase (every Reserve and
// Takeover of all rounds) shares one deadline, the store timeout from its
// start, so each of its calls ends within the store timeout; escalation
// and verification write under their own bound. Outside a transaction
// (inTx false), a reservation or a restart whose answer was lost is
// disowned in the background ([Engine.disown]); a takeover of an abandoned
// record is not.
func (e *Engine) acquire(ctx context.Context, s idemdriver.Store, id idemdriver.Ident, req decide.Request, ttl, lease time.Duration, rcv Recovery, inTx bool) (claim, error) {
	if e.tracer != nil {
		return e.acquireTraced(ctx, s, id, req, ttl, lease, rcv, inTx)
	}
	return e.acquireAs(ctx, s, id, req, ttl, lease, rcv, inTx, "")
}

// acquireAs is acquire storing traceID on the record it creates or takes
// over.
func (e *Engine) acquireAs(ctx context.Context, s idemdriver.Store, id idemdriver.Ident, req decide.Request, ttl, lease time.Duration, rcv Recovery, inTx bool, traceID string) (claim, error) {
	req.Recovery = rcv.mode
	bctx, cancel := e.bound(ctx)
	defer cancel()
	for range maxTakeoverRounds {
		token := newOwnerToken()
		rec, created, err := s.Reserve(bctx, idemdriver.ReserveParams{Ident: id, KeyHash: req.KeyHash, Fingerprint: req.Fingerprint, Owner: token, Lease: lease, TTL: ttl, Now: e.now(), Lean: true, TraceID: traceID})
		if err != nil {
			if !inTx {
				e.disown(s, id, token)
			}
			return claim{}, fmt.Errorf("idem: reserve: %w", storeError(err))
		}
		if created {
			return claim{rec: rec, outcome: decide.Outcome{Action: decide.ActionReserve}}, nil
		}
		out := decide.Decide(&rec, req, e.policy)
		switch out.Action {
		case decide.ActionTakeOver, decide.ActionRestart, decide.ActionEscalate, decide.ActionVerify:
		default:
			return claim{rec: rec, outcome: out}, nil
		}
		taken, err := s.Takeover(bctx, idemdriver.TakeoverParams{Ident: id, Seen: rec.Owner, NewOwner: token, Lease: lease,
			Fresh: out.Action == decide.ActionRestart, Fingerprint: req.Fingerprint, TTL: ttl, Now: e.now(), TraceID: traceID})
		if errors.Is(err, idemdriver.ErrFenced) {
			continue // someone else moved first: read again
		}
		if err != nil {
			// Only a restart is a new intent that nothing ran under: taking
			// over an abandoned record whose answer was lost keeps it, so
			// that its lease ends and its recovery applies again —
			// releasing it would delete what the dead owner may have done.
			if !inTx && out.Action == decide.ActionRestart {
				e.disown(s, id, token)
			}
			return claim{}, fmt.Errorf("idem: take over: %w", storeError(err))
		}
		e.log.Info("idem: lease taken over", "key_id", SafeKeyID(id.KeyDigest), "operation", id.Operation,
			"fence", taken.Fence, "attempt", taken.Attempts, "action", out.Action.String())
		switch out.Action {
		case decide.ActionEscalate:
			return e.escalate(ctx, s, taken, rec.LeaseExpiresAt, "escalate")
		case decide.ActionVerify:
			return e.verify(ctx, s, taken, rec.LeaseExpiresAt, rcv.verifier)
		}
		return claim{rec: taken, outcome: out}, nil
	}
	return claim{outcome: decide.Outcome{Action: decide.ActionWait, RetryAfter: time.Second}, rec: idemdriver.Record{Status: idemdriver.StatusProcessing}}, nil
}

// newOwnerToken returns a fresh owner token: 128 bits from crypto/rand,
// hex-encoded (32 characters), so that no other process can guess or forge
// the token of a live owner.
func newOwnerToken() string {
	var raw [16]byte
	_, _ = crand.Read(raw[:]) // never fails (crypto/rand.Read's contract)
	var buf [32]byte
	hex.Encode(buf[:], raw[:])
	return string(buf[:])
}

// escalate completes the abandoned record taken, which the caller has just
// taken over, as pending with the reason, for an operator; the answer is
// that it awaits review.
func (e *Engine) escalate(ctx context.Context, s idemdriver.Store, taken idemdriver.Record, leaseEnd time.Time, how string) (claim, error) {
	reason := idemdriver.AbandonedReason(leaseEnd, how)
	bctx, cancel := e.bound(context.WithoutCancel(ctx))
	err := s.Complete(bctx, taken.Ident, taken.Owner, idemdriver.Completion{Status: idemdriver.StatusPending, LastError: reason, Now: e.now(), RecordID: taken.ID})
	cancel()
	if err != nil {
		return claim{}, fmt.Errorf("idem: escalate abandoned record: %w", err)
	}
	e.late.escalated.Add(1)
	e.log.Warn("idem: abandoned record escalated to pending for an operator", "key_id", SafeKeyID(taken.KeyDigest),
		"operation", taken.Operation, "lease_ended_at", leaseEnd.UTC().Format(time.RFC3339), "recovery", how)
	taken.Status, taken.LastError, taken.LeaseExpiresAt = idemdriver.StatusPending, reason, time.Time{}
	return claim{rec: taken, outcome: decide.Outcome{Action: decide.ActionAwaitReview, RetryAfter: decide.AtLeastASecond(e.policy.PendingRetryAfter)}, wrote: true}, nil
}

// verify asks v about the abandoned record taken, which the caller has just
// taken over: happened completes it without a result; not happened hands
// it to the caller to run; anything else escalates.
func (e *Engine) verify(ctx context.Context, s idemdriver.Store, taken idemdriver.Record, leaseEnd time.Time, v Verifier) (claim, error) {
	if v == nil {
		return e.escalate(ctx, s, taken, leaseEnd, "verify: no verifier")
	}
	got, err := v.Verify(ctx, Abandoned{KeyID: SafeKeyID(taken.KeyDigest), KeyDigest: taken.KeyDigest, Scope: taken.Scope,
		Operation: taken.Operation, CorrelationID: taken.CorrelationID, ExternalRef: taken.ExternalRef,
		ResourceIDs: taken.ResourceIDs, Fence: taken.Fence, Attempt: taken.Attempts, FirstSeenAt: taken.CreatedAt, LeaseEndedAt: leaseEnd})
	switch {
	case err != nil:
		e.log.Warn("idem: verifier failed; escalating", "key_id", SafeKeyID(taken.KeyDigest), "operation", taken.Operation, "error", err.Error())
		return e.escalate(ctx, s, taken, leaseEnd, "verify: the verifier failed")
	case got.Verdict == VerdictNotHappened:
		return claim{rec: taken, outcome: decide.Outcome{Action: decide.ActionTakeOver}}, nil
	case got.Verdict != VerdictHappened:
		return e.escalate(ctx, s, taken, leaseEnd, "verify: unknown")
	}
	bctx, cancel := e.bound(context.WithoutCancel(ctx))
	defer cancel()
	if got.ExternalRef != "" {
		if err := s.Annotate(bctx, taken.Ident, taken.Owner, idemdriver.Annotation{ExternalRef: got.ExternalRef, Now: e.now()}); err != nil {
			return claim{}, fmt.Errorf("idem: record verified effect: %w", err)
		}
	}
	reason := "verified: the effect happened; no response to replay (recovery: verify)"
	if err := s.Complete(bctx, taken.Ident, taken.Owner, idemdriver.Completion{Status: idemdriver.StatusCompleted, LastError: reason, Now: e.now(), RecordID: taken.ID}); err != nil {
		return claim{}, fmt.Errorf("idem: record verified effect: %w", err)
	}
	e.log.Info("idem: abandoned record verified as happened", "key_id", SafeKeyID(taken.KeyDigest), "operation", taken.Operation)
	taken.Status, taken.LastError, taken.Result = idemdriver.StatusCompleted, reason, nil
	return claim{rec: taken, outcome: decide.Outcome{Action: decide.ActionUnavailable}, wrote: true}, nil
}

// OpenResult returns the plaintext of rec's stored result: the JSON of a
// [Run] value, or of a [StoredResponse] for an HTTP record. It fails for a
// record without a result, and for a result that cannot be opened under the
// engine's secrets (moved, corrupt, or sealed under an unknown secret). It is
// for operators: callers that replay use Run or the middleware.
func (e *Engine) OpenResult(rec idemdriver.Record) ([]byte, error) {
	if len(rec.Result) == 0 {
		return nil, errors.New("idem: the record holds no result")
	}
	return e.sealer.open(rec.Ident, rec.Fingerprint, rec.Result)
}

// errNoResult: a completed record holds no result, as an operator's or a
// verifier's confirmation leaves it.
var errNoResult = errors.New("idem: no stored result: the effect was confirmed without one")

// openStored opens rec's stored result for a replay. A record without one
// (confirmed by an operator or a verifier) is an expected state, logged at
// Info; a result that cannot be opened is logged at Warn.
func (e *Engine) openStored(rec idemdriver.Record) ([]byte, error) {
	if len(rec.Result) == 0 {
		e.log.Info("idem: no stored result: confirmed by an operator or a verifier", "key_id", SafeKeyID(rec.KeyDigest), "operation", rec.Operation, "record_id", rec.ID)
		return nil, errNoResult
	}
	plain, err := e.sealer.open(rec.Ident, rec.Fingerprint, rec.Result)
	if err != nil {
		e.log.Warn("idem: stored result cannot be opened", "key_id", SafeKeyID(rec.KeyDigest), "operation", rec.Operation, "record_id", rec.ID, "error", err.Error())
	}
	return plain, err
}

// replay opens the stored result of rec. Whatever cannot be opened or
// decoded is unavailable, never a guess and never a panic.
func replay[T any](e *Engine, rec idemdriver.Record) (Result[T], error) {
	var r Result[T]
	plain, err := e.openStored(rec)
	if err != nil {
		return Result[T]{}, ErrResultUnavailable
	}
	if err := json.Unmarshal(plain, &r.Value); err != nil {
		e.log.Warn("idem: stored result cannot be decoded", "key_id", SafeKeyID(rec.KeyDigest), "operation", rec.Operation, "record_id", rec.ID, "error", err.Error())
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
			log.Error("idem: release after panic failed", "error", rerr.Error())
		}
	})
	if err != nil {
		if errors.Is(err, ErrUncertain) {
			if cerr := e.complete(ctx, st, idemdriver.Completion{Status: idemdriver.StatusPending, LastError: shortError(err)}); cerr != nil {
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

	plain, stored, err := encodeResult(value, e.maxResultBytes)
	if err != nil {
		log.Warn("idem: result not storable, key completed unavailable", "error", err.Error())
		if cerr := e.complete(ctx, st, idemdriver.Completion{Status: idemdriver.StatusUnavailable, LastError: shortError(err)}); cerr != nil {
			return res, errors.Join(fmt.Errorf("%w: %w", ErrResultNotStorable, err), cerr)
		}
		return res, fmt.Errorf("%w: %w", ErrResultNotStorable, err)
	}
	res = Result[T]{Value: stored, FirstSeenAt: rec.CreatedAt}
	c := idemdriver.Completion{Status: idemdriver.StatusCompleted}
	c.Result, err = e.sealer.seal(rec.Ident, rec.Fingerprint, plain)
	if err != nil {
		// Sealing does not fail with a valid key; if it does, the effect
		// still ran: never let the key run again.
		c = idemdriver.Completion{Status: idemdriver.StatusUnavailable, LastError: "result not sealed: " + shortError(err)}
	}
	err = e.complete(ctx, st, c)
	switch {
	case errors.Is(err, idemdriver.ErrFenced):
		log.Warn("idem: completion refused: the lease was taken over or the key forgotten")
		return Result[T]{}, fmt.Errorf("idem: complete: %w", err)
	case errors.Is(err, ErrOutcomeUnrecorded):
		log.Error("idem: completion failed; the callback's value is returned and the outcome is being recorded in the background", "error", err.Error())
		return res, err
	case err != nil:
		return res, fmt.Errorf("idem: complete: %w", err)
	}
	return res, nil
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

// release and complete write the owner's outcome even when the caller's
// context is done: the callback ran, and its outcome must be recorded
// whether or not the caller still waits. Each write is bounded by the
// store timeout; a write that fails goes to a background recording (see
// writeOutcome) and the error matches ErrOutcomeUnrecorded.
func (e *Engine) release(ctx context.Context, st *runState) error {
	return e.writeOutcome(ctx, st, outcomeWrite{release: true})
}

func (e *Engine) complete(ctx context.Context, st *runState, c idemdriver.Completion) error {
	return e.writeOutcome(ctx, st, outcomeWrite{c: c})
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
