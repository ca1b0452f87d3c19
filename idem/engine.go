package idem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
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
	// DefaultPendingRetryAfter is the retry hint for a pending key.
	DefaultPendingRetryAfter = 30 * time.Second
)

// Engine decides and records idempotent runs over a [Store]. It is safe for
// concurrent use; build it once with [New] and share it.
type Engine struct {
	store          Store
	sealer         *sealer
	nowFunc        func() time.Time
	log            *slog.Logger
	maxResultBytes int
	policy         Policy
}

type engineConfig struct {
	secret         []byte
	previous       [][]byte
	noSealing      bool
	nowFunc        func() time.Time
	log            *slog.Logger
	maxResultBytes int
	pendingRetry   time.Duration
}

// Option configures an [Engine].
type Option func(*engineConfig)

// WithSecret sets the application secret from which the result-sealing key
// is derived (HKDF-SHA-256, for this purpose only), and earlier secrets
// that may still open results sealed before a rotation. New results are
// always sealed under current. Each secret must have at least
// [MinSecretBytes] bytes.
func WithSecret(current []byte, previous ...[]byte) Option {
	return func(c *engineConfig) {
		c.secret = append([]byte(nil), current...)
		c.previous = nil
		for _, p := range previous {
			c.previous = append(c.previous, append([]byte(nil), p...))
		}
	}
}

// WithoutSealing stores results in clear. Sealing is on by default and [New]
// refuses to build an engine without a secret unless this option is given.
func WithoutSealing() Option {
	return func(c *engineConfig) { c.noSealing = true }
}

// WithNowFunc replaces the store's clock with f for every store call. It is
// for tests that move time; in production leases are judged by the store's
// clock.
func WithNowFunc(f func() time.Time) Option {
	return func(c *engineConfig) { c.nowFunc = f }
}

// WithLogger sets the logger. Logs carry a safe key id, never a raw key, a
// payload or a secret (SPEC M5). The default discards.
func WithLogger(l *slog.Logger) Option {
	return func(c *engineConfig) { c.log = l }
}

// WithMaxResultBytes bounds the JSON encoding of a stored result; a larger
// result completes the key unavailable (SPEC R5). Default 1 MiB.
func WithMaxResultBytes(n int) Option {
	return func(c *engineConfig) { c.maxResultBytes = n }
}

// WithPendingRetryAfter sets the retry hint given for a pending key, which
// holds no lease. Default 30 s.
func WithPendingRetryAfter(d time.Duration) Option {
	return func(c *engineConfig) { c.pendingRetry = d }
}

// New returns an engine over store. It fails fast when no secret is given
// and sealing was not explicitly turned off, or when an option is out of
// range.
func New(store Store, opts ...Option) (*Engine, error) {
	if store == nil {
		return nil, errors.New("idem: nil store")
	}
	c := engineConfig{maxResultBytes: DefaultMaxResultBytes, pendingRetry: DefaultPendingRetryAfter}
	for _, o := range opts {
		o(&c)
	}
	e := &Engine{store: store, nowFunc: c.nowFunc, log: c.log, maxResultBytes: c.maxResultBytes,
		policy: Policy{PendingRetryAfter: c.pendingRetry}}
	switch {
	case c.noSealing && c.secret != nil:
		return nil, errors.New("idem: WithSecret and WithoutSealing both given")
	case c.noSealing:
		e.sealer = &sealer{plain: true}
	case c.secret == nil:
		return nil, errors.New("idem: no secret: pass WithSecret, or WithoutSealing to store results in clear")
	default:
		s, err := newSealer(c.secret, c.previous)
		if err != nil {
			return nil, err
		}
		e.sealer = s
	}
	if c.maxResultBytes <= 0 {
		return nil, fmt.Errorf("idem: max result bytes %d must be positive", c.maxResultBytes)
	}
	if c.pendingRetry < time.Second {
		return nil, fmt.Errorf("idem: pending retry-after %s must be at least 1s", c.pendingRetry)
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

// Policy returns the settings the decision table is given.
func (e *Engine) Policy() Policy { return e.policy }

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

// ForgetOperation is [Engine.Forget] for a key used with [WithOperation].
func (e *Engine) ForgetOperation(ctx context.Context, key, scope, operation string) (bool, error) {
	if err := validateIdent(key, scope, operation); err != nil {
		return false, err
	}
	existed, err := e.store.Delete(ctx, Ident{Scope: scope, Operation: operation, KeyDigest: Digest(scope, operation, key)})
	if err != nil {
		return false, fmt.Errorf("idem: forget: %w", err)
	}
	return existed, nil
}

// Sweep deletes records whose retention has ended, never one under a live
// lease and never a pending one (SPEC M6), and returns how many it deleted.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	const batch = 1000
	total := 0
	for {
		n, err := e.store.Sweep(ctx, SweepParams{Limit: batch, Now: e.now()})
		total += n
		if err != nil {
			return total, fmt.Errorf("idem: sweep: %w", err)
		}
		if n < batch {
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
