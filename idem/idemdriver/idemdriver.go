package idemdriver

import (
	"context"
	"errors"
	"time"
)

// Status is the state of an idempotency record (SPEC IDEM-M2).
type Status string

const (
	// StatusProcessing: an owner holds the lease and is running the operation.
	StatusProcessing Status = "processing"
	// StatusCompleted: the result is stored and every repeat replays it.
	StatusCompleted Status = "completed"
	// StatusFailed: a reproducible failure before any effect, stored and replayed
	// like a completed result (the HTTP middleware stores 4xx responses so).
	StatusFailed Status = "failed"
	// StatusPending: the external outcome is uncertain (a provider timed out).
	// Repeats are told to wait; the record stays until it is reconciled,
	// resolved by an operator or forgotten. Sweep never removes it.
	StatusPending Status = "pending"
	// StatusUnavailable: the effect ran but its result could not be stored.
	// It is never re-run automatically and never replayed.
	StatusUnavailable Status = "unavailable"
)

// Statuses lists every status in display order.
var Statuses = []Status{StatusProcessing, StatusPending, StatusUnavailable, StatusFailed, StatusCompleted}

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusProcessing, StatusCompleted, StatusFailed, StatusPending, StatusUnavailable:
		return true
	}
	return false
}

// Terminal reports whether a record in status s has finished running and
// holds no lease: completed, failed and unavailable.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusUnavailable
}

// Ident identifies one record. The triple is unique in every store (SPEC M3).
// KeyDigest is computed by [github.com/unstuckhq/unstuck/idem.Digest]; the
// raw key is never stored.
type Ident struct {
	Scope     string
	Operation string
	KeyDigest string
}

// Owner is the holder of a record's lease: a random token plus the fence
// number handed out when the lease was taken. Every write by an owner is a
// compare-and-swap on both.
type Owner struct {
	Token string
	Fence int64
}

// Record is one idempotency record as a store holds it (SPEC IDEM-M1).
type Record struct {
	// ID is the store's surrogate identifier, stable for the record's life.
	ID int64
	Ident
	// KeyHash is idem.KeyHash of the raw key: its look-up across scopes
	// and operations. "" for a record reserved before its store kept it.
	KeyHash string
	// Fingerprint is the hash of the normalized request, or "" when the
	// caller gave none.
	Fingerprint string
	Status      Status
	// Result is the sealed envelope of the stored result (see idem.Engine); nil
	// while processing, pending or unavailable.
	Result []byte
	// ResponseCode is an HTTP status kept in clear for the console; 0 for
	// programmatic runs.
	ResponseCode  int
	CorrelationID string
	ExternalRef   string
	ResourceIDs   []string
	// LastError is a short, payload-free description of why the record is
	// pending or unavailable.
	LastError string
	Owner
	// LeaseExpiresAt is when the owner's lease ends, by the store's clock.
	// Zero unless the record is processing.
	LeaseExpiresAt time.Time
	// Attempts counts how many owners have held the lease (1 after the first
	// reservation, +1 on every takeover).
	Attempts int
	// Version increases on every write; the console uses it for optimistic
	// concurrency.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt time.Time
	// ReadAt is the store's clock when this copy was read. Leases are judged
	// against it, never against the application's clock.
	ReadAt time.Time
	// TraceID is the OpenTelemetry trace ID (32 lowercase hex digits) of
	// the call that created the record or last took it over, "" when that
	// call was not traced (the engine traces only with
	// idem.Config.TracerProvider). Not among the LeanFields.
	TraceID string
}

// LeaseLive reports whether the record is processing under a lease that had
// not ended when the record was read.
func (r Record) LeaseLive() bool {
	return r.Status == StatusProcessing && r.ReadAt.Before(r.LeaseExpiresAt)
}

// Expired reports whether the record's retention had ended when it was read
// and no live lease holds it. Pending records never expire by time.
func (r Record) Expired() bool {
	return r.Status != StatusPending && !r.LeaseLive() && !r.ReadAt.Before(r.ExpiresAt)
}

// ReserveParams describes a new record for [Store.Reserve].
type ReserveParams struct {
	Ident
	// KeyHash is stored with the new record (see Record.KeyHash); "" when
	// the caller has no raw key.
	KeyHash     string
	Fingerprint string
	Owner       string // the new owner's token; the store assigns the fence
	Lease       time.Duration
	TTL         time.Duration // retention from now; the store keeps at least the lease
	// Now replaces the store's clock when non-zero (tests only).
	Now time.Time
	// Lean is an optional capability (see [LeanFields]): a store may
	// ignore it and return whole records.
	Lean bool
	// TraceID is stored with a new record (see Record.TraceID); "" when
	// the call is not traced.
	TraceID string
}

// TakeoverParams describes a compare-and-swap takeover for [Store.Takeover].
type TakeoverParams struct {
	Ident
	Seen     Owner  // the owner token and fence the caller read
	NewOwner string // the new owner's token; the store assigns a new, higher fence
	Lease    time.Duration
	// Fresh restarts the record as if first seen: fingerprint replaced,
	// created/expiry reset, attempts back to 1, result and annotations
	// cleared. Used when a terminal record's retention has ended.
	Fresh       bool
	Fingerprint string        // used when Fresh
	TTL         time.Duration // used when Fresh
	Now         time.Time
	// TraceID replaces the record's (see Record.TraceID): the takeover is
	// the call that last touched it; "" when not traced.
	TraceID string
}

// Completion is the final state an owner writes with [Store.Complete].
type Completion struct {
	Status       Status // completed, failed, pending or unavailable
	Result       []byte // sealed envelope; only for completed and failed
	ResponseCode int
	LastError    string
	Now          time.Time
	// RecordID, when not 0, is the ID of the record the owner holds
	// (Record.ID as Reserve or Takeover returned it). Optional: a store
	// may ignore it, or find the record by it, by primary key, instead of
	// by the ident (it must still change no record but the one the ident
	// names). What it saves is not measured separately.
	RecordID int64
}

// Annotation is what a running owner attaches to its record (SPEC M4).
// Empty fields leave the stored value unchanged; ResourceIDs are appended.
type Annotation struct {
	CorrelationID string
	ExternalRef   string
	ResourceIDs   []string
	Now           time.Time
}

// Settlement is an operator's decision, applied by [Store.Settle] only if
// the record is still at Version. The engine checks the transition first
// (idem.CheckOperator); the store only compares and swaps.
type Settlement struct {
	Version int64
	// Delete removes the record (forget, or "it did not happen"): the next
	// request with the key runs.
	Delete bool
	// Status is the new status when not deleting: the lease ends, the owner
	// token is cleared (a late owner is fenced out) and the result is
	// cleared, so nothing is replayed.
	Status      Status
	ExternalRef string // replaces the stored reference when non-empty
	LastError   string
	Now         time.Time
}

// ErrStale is returned when a record changed (or vanished) since the
// version an operator saw; nothing was changed.
var ErrStale = errors.New("idem: the record changed since it was read")

// SweepParams bounds one [Store.Sweep] call.
type SweepParams struct {
	Limit int // at most this many records; <= 0 means a store default (1000)
	Now   time.Time
}

// SweepResult is what one [Store.Sweep] call did.
type SweepResult struct {
	// Deleted counts the finished records whose retention had ended.
	Deleted int
	// Escalated counts the abandoned records (processing, lease ended,
	// retention ended) that were made pending with an [AbandonedReason]
	// instead of being deleted.
	Escalated int
}

// AbandonedReason is the LastError of a record whose owner's lease ended at
// leaseEnd without an outcome, escalated to pending by recovery (as
// "escalate", "verify: …" or "sweep"). Stores that escalate in SQL write
// the same text: the time is UTC, RFC 3339, whole seconds.
func AbandonedReason(leaseEnd time.Time, recovery string) string {
	return "abandoned: the owner's lease ended at " + leaseEnd.UTC().Format(time.RFC3339) +
		" without an outcome (recovery: " + recovery + ")"
}

// ErrFenced is returned by a store when a compare-and-swap finds another
// owner or fence than the caller's: the caller's lease was taken over, or
// the record was completed, released or forgotten. Nothing was changed.
var ErrFenced = errors.New("idem: fenced out: the record has another owner")

// Store is the seam between the engine and a database. A store provides
// atomic primitives only; the engine's decision table holds all
// policy (SPEC IDEM-S1). Implementations must be safe for concurrent use by
// many goroutines and processes, judge time by the store's own clock unless a
// params struct carries a non-zero Now, and pass the conformance suite in
// package idemtest.
//
// Fences: every reservation and every takeover receives a fence number
// strictly greater than any fence the store has handed out before, for any
// record, so a fence never repeats even after a record is forgotten and
// created again.
type Store interface {
	// Reserve inserts a processing record owned by p.Owner if none exists for
	// p.Ident, and returns it with created = true. If a record exists it is
	// returned unchanged with created = false (with p.Lean, only its
	// [LeanFields] need be set). The existence check and the
	// insert are one atomic step (a unique constraint, never select-then-insert
	// alone): a store may read first, so that a repeat writes nothing, but on
	// a miss the insert's constraint decides who owns the key.
	Reserve(ctx context.Context, p ReserveParams) (rec Record, created bool, err error)

	// Takeover gives the record to p.NewOwner, with a new fence, a new lease
	// and one more attempt, if and only if the record still has owner p.Seen,
	// holds no live lease and is not pending. Otherwise it returns ErrFenced
	// and changes nothing.
	Takeover(ctx context.Context, p TakeoverParams) (Record, error)

	// Complete writes c to the record if it is processing under owner o.
	// Otherwise it returns ErrFenced and changes nothing.
	Complete(ctx context.Context, id Ident, o Owner, c Completion) error

	// Annotate attaches a to the record if it is processing under owner o.
	// Otherwise it returns ErrFenced and changes nothing.
	Annotate(ctx context.Context, id Ident, o Owner, a Annotation) error

	// Release deletes the record if it is processing under owner o, so that
	// the key may run again. Otherwise it returns ErrFenced.
	Release(ctx context.Context, id Ident, o Owner) error

	// Extend moves the lease of a record processing under owner o to at
	// least now + lease (by the store's clock unless now is non-zero), and
	// the retention along with it, and returns the new end of the lease. It
	// works whether or not the lease has ended, as long as nobody took the
	// record over. Otherwise it returns ErrFenced and changes nothing.
	Extend(ctx context.Context, id Ident, o Owner, lease time.Duration, now time.Time) (leaseExpiresAt time.Time, err error)

	// Get reads a record; ok is false when none exists.
	Get(ctx context.Context, id Ident) (rec Record, ok bool, err error)

	// Delete removes a record whatever its state and reports whether it existed.
	Delete(ctx context.Context, id Ident) (existed bool, err error)

	// Settle applies an operator's decision to the record if its version is
	// still s.Version, and returns the record after it (ok = false when
	// deleted). Otherwise it returns ErrStale and changes nothing.
	Settle(ctx context.Context, id Ident, s Settlement) (rec Record, ok bool, err error)

	// Sweep handles up to p.Limit records whose retention has ended, never
	// one processing under a live lease and never a pending one: a
	// completed, failed or unavailable record is deleted; a processing one
	// whose lease ended (abandoned by its owner) is never deleted but made
	// pending, its owner cleared (fenced out) and its LastError set to
	// AbandonedReason(lease end, "sweep"), so that an operator decides.
	Sweep(ctx context.Context, p SweepParams) (SweepResult, error)
}
