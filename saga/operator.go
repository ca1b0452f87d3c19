package saga

import (
	"context"
	"fmt"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// ActionParams identify an operator action (SPEC G9) on an operation.
type ActionParams struct {
	OperationID string
	// Step names the step, for RetryStep and ConfirmStep.
	Step string
	// Version is the operation's version the operator saw; if the
	// operation changed since, the action returns ErrStale and applies
	// nothing.
	Version int64
	// Actor names the operator, recorded as "operator:<Actor>".
	Actor string
	// Note is the operator's reason; required by ConfirmStep and Resolve.
	Note string
}

// Change is the operation before and after an operator action, for the
// audit trail.
type Change struct {
	Before sagadriver.Operation
	After  sagadriver.Operation
}

// RetryStep retries a failed, uncertain or stuck step of an operation under
// review (with fresh attempts and the same key), or its failed
// compensation, and resumes the operation.
func (r *Runner[TTx]) RetryStep(ctx context.Context, p ActionParams) (Change, error) {
	return r.within(ctx, func(ctx context.Context, tx TTx) (Change, error) { return r.RetryStepTx(ctx, tx, p) })
}

// RetryStepTx is RetryStep in the caller's transaction, with the River
// job inserted in it; the caller commits.
func (r *Runner[TTx]) RetryStepTx(ctx context.Context, tx TTx, p ActionParams) (Change, error) {
	return r.operator(ctx, tx, p, signal{kind: opRetry})
}

// ConfirmParams are the outcome an operator confirms.
type ConfirmParams struct {
	ActionParams
	// Happened says the step's effect exists (true) or does not (false).
	Happened bool
	// ExternalID is the effect's identifier in the external system, when
	// it happened.
	ExternalID string
}

// ConfirmStep records a step's real outcome as an operator established
// it. Happened completes the step with ExternalID and moves the operation
// on; not happened fails it, which compensates a compensatable or pivot
// step's operation. For a failed compensation, Happened records it done
// and continues the compensation.
func (r *Runner[TTx]) ConfirmStep(ctx context.Context, p ConfirmParams) (Change, error) {
	return r.within(ctx, func(ctx context.Context, tx TTx) (Change, error) { return r.ConfirmStepTx(ctx, tx, p) })
}

// ConfirmStepTx is ConfirmStep in the caller's transaction.
func (r *Runner[TTx]) ConfirmStepTx(ctx context.Context, tx TTx, p ConfirmParams) (Change, error) {
	return r.operator(ctx, tx, p.ActionParams, signal{kind: opConfirm, happened: p.Happened, result: Result{ExternalID: p.ExternalID}})
}

// StartCompensation compensates a running operation or one under review:
// every step that completed or may have applied is compensated in order.
func (r *Runner[TTx]) StartCompensation(ctx context.Context, p ActionParams) (Change, error) {
	return r.within(ctx, func(ctx context.Context, tx TTx) (Change, error) { return r.StartCompensationTx(ctx, tx, p) })
}

// StartCompensationTx is StartCompensation in the caller's transaction.
func (r *Runner[TTx]) StartCompensationTx(ctx context.Context, tx TTx, p ActionParams) (Change, error) {
	return r.operator(ctx, tx, p, signal{kind: opCompensate})
}

// Resolve closes a review with a note and a terminal status (completed,
// failed or compensated), and resolves the operation's open findings. The
// engine changes nothing else: the operator has settled the external
// state.
func (r *Runner[TTx]) Resolve(ctx context.Context, p ActionParams, to sagadriver.Status) (Change, error) {
	return r.within(ctx, func(ctx context.Context, tx TTx) (Change, error) { return r.ResolveTx(ctx, tx, p, to) })
}

// ResolveTx is Resolve in the caller's transaction.
func (r *Runner[TTx]) ResolveTx(ctx context.Context, tx TTx, p ActionParams, to sagadriver.Status) (Change, error) {
	ch, err := r.operator(ctx, tx, p, signal{kind: opResolve, resolveTo: to})
	if err != nil {
		return ch, err
	}
	if _, err := r.driver.ResolveFindings(ctx, tx, p.OperationID, ch.After.UpdatedAt, "operator:"+p.Actor); err != nil {
		return Change{}, fmt.Errorf("saga: resolve %s: %w", p.OperationID, err)
	}
	return ch, nil
}

func (r *Runner[TTx]) within(ctx context.Context, fn func(ctx context.Context, tx TTx) (Change, error)) (Change, error) {
	var ch Change
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		ch, err = fn(ctx, tx)
		return err
	})
	return ch, err
}

// operator checks the version, applies the transition and writes it.
func (r *Runner[TTx]) operator(ctx context.Context, tx TTx, p ActionParams, s signal) (Change, error) {
	return r.act(ctx, tx, p, func(sagadriver.Operation) (signal, error) { return s, nil })
}

// act reads the operation locked, checks the version the operator saw,
// applies the transition mk builds from the record and writes it.
func (r *Runner[TTx]) act(ctx context.Context, tx TTx, p ActionParams, mk func(sagadriver.Operation) (signal, error)) (Change, error) {
	op, err := r.driver.GetOperation(ctx, tx, p.OperationID, true)
	if err != nil {
		return Change{}, err
	}
	if op.Version != p.Version {
		return Change{}, fmt.Errorf("%w: %s is at version %d, the operator saw %d", ErrStale, op.ID, op.Version, p.Version)
	}
	s, err := mk(op)
	if err != nil {
		return Change{}, err
	}
	if s.now, err = r.clock(ctx, tx); err != nil {
		return Change{}, err
	}
	s.step, s.note, s.actor = p.Step, p.Note, "operator:"+p.Actor
	d, err := decide(op, s)
	if err != nil {
		return Change{}, err
	}
	if err := r.apply(ctx, tx, &d); err != nil {
		return Change{}, fmt.Errorf("saga: operator action on %s: %w", op.ID, err)
	}
	return Change{Before: op, After: d.op}, nil
}
