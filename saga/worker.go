package saga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// JobRef is what every engine job carries: the step of an operation and
// the step's generation when the job was inserted. The first three fields
// make the job unique (River UniqueOpts ByArgs): inserting the same job
// twice is skipped as a duplicate while River keeps the first. A job
// whose generation is not the step's current one does nothing.
type JobRef struct {
	OperationID string `json:"operation_id" river:"unique"`
	Step        string `json:"step" river:"unique"`
	Generation  int    `json:"generation" river:"unique"`
	Type        string `json:"type"`
}

// StepArgs are the args of a job that executes a step's Do.
type StepArgs struct{ JobRef }

// Kind implements river.JobArgs.
func (StepArgs) Kind() string { return "saga.step" }

// VerifyArgs are the args of a job that verifies an uncertain step.
type VerifyArgs struct{ JobRef }

// Kind implements river.JobArgs.
func (VerifyArgs) Kind() string { return "saga.verify" }

// CompensateArgs are the args of a job that executes a step's Compensate.
type CompensateArgs struct{ JobRef }

// Kind implements river.JobArgs.
func (CompensateArgs) Kind() string { return "saga.compensate" }

// AddWorkers registers the engine's workers (saga.step, saga.verify,
// saga.compensate, saga.reconcile) in workers.
func (r *Runner[TTx]) AddWorkers(workers *river.Workers) error {
	for _, err := range []error{
		river.AddWorkerSafely(workers, &stepWorker[TTx]{r: r}),
		river.AddWorkerSafely(workers, &verifyWorker[TTx]{r: r}),
		river.AddWorkerSafely(workers, &compensateWorker[TTx]{r: r}),
		river.AddWorkerSafely(workers, &reconcileWorker[TTx]{r: r}),
	} {
		if err != nil {
			return fmt.Errorf("saga: add workers: %w", err)
		}
	}
	return nil
}

// load reads the operation and the definition of its step in tx.
func (r *Runner[TTx]) load(ctx context.Context, tx TTx, ref JobRef) (sagadriver.Operation, Step, error) {
	op, err := r.driver.GetOperation(ctx, tx, ref.OperationID, true)
	if err != nil {
		return sagadriver.Operation{}, Step{}, err
	}
	def, ok := r.defs[op.Type]
	if !ok {
		return sagadriver.Operation{}, Step{}, fmt.Errorf("saga: operation %s has type %q, which this runner does not know", op.ID, op.Type)
	}
	step, ok := def.step(ref.Step)
	if !ok {
		return sagadriver.Operation{}, Step{}, fmt.Errorf("saga: operation type %q has no step %q", op.Type, ref.Step)
	}
	return op, step, nil
}

func (r *Runner[TTx]) stepOf(ref JobRef) (Step, bool) {
	def, ok := r.defs[ref.Type]
	if !ok {
		return Step{}, false
	}
	return def.step(ref.Step)
}

// begin runs the signal that opens a job (sigBegin, sigCompBegin, or a
// check for a verify job) in a transaction of its own. When the job has
// nothing to do, it is completed in the same transaction and begin
// returns ok false.
func begin[TTx any, T river.JobArgs](ctx context.Context, r *Runner[TTx], job *river.Job[T], ref JobRef, mk func(sagadriver.Operation, Step) signal) (op sagadriver.Operation, step Step, d decision, ok bool, err error) {
	err = r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		op, step, err = r.load(ctx, tx, ref)
		if err != nil {
			return err
		}
		now, err := r.clock(ctx, tx)
		if err != nil {
			return err
		}
		st, _ := op.Step(ref.Step)
		if st.Generation != ref.Generation {
			d.noop = fmt.Sprintf("stale job: generation %d, step is at %d", ref.Generation, st.Generation)
		} else {
			s := mk(op, step)
			s.step, s.now, s.actor = ref.Step, now, "worker"
			if d, err = decide(op, s); err != nil {
				return err
			}
		}
		if d.noop != "" {
			r.log.InfoContext(ctx, "saga: job has nothing to do", "operation_id", op.ID, "step", ref.Step, "reason", d.noop)
			if err := r.apply(ctx, tx, &d); err != nil {
				return err
			}
			_, err := river.JobCompleteTx[riverdriver.Driver[TTx]](ctx, tx, job)
			return err
		}
		return r.apply(ctx, tx, &d)
	})
	if errors.Is(err, ErrNotFound) {
		return op, step, d, false, river.JobCancel(err)
	}
	if err != nil {
		return op, step, d, false, fmt.Errorf("saga: begin %s/%s: %w", ref.OperationID, ref.Step, err)
	}
	op = d.op
	return op, step, d, d.noop == "", nil
}

// finish records the outcome s of the job's call, inserts the next jobs
// and, unless the job must be retried or snoozed, completes it, all in one
// transaction (JobCompleteTx). It returns what the worker returns.
func finish[TTx any, T river.JobArgs](ctx context.Context, r *Runner[TTx], job *river.Job[T], ref JobRef, s signal, callErr error) error {
	// The call's ctx may have run out; the outcome must still be recorded.
	ctx = context.WithoutCancel(ctx)
	var d decision
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		op, _, err := r.load(ctx, tx, ref)
		if err != nil {
			return err
		}
		if s.now, err = r.clock(ctx, tx); err != nil {
			return err
		}
		s.step, s.actor = ref.Step, "worker"
		st, _ := op.Step(ref.Step)
		if st.Generation != ref.Generation {
			// An operator acted meanwhile; keep the answer in the history.
			d = decision{op: op}
			m := &machine{d: d, s: s}
			m.late(st, "outcome of a superseded job")
			d = m.d
		} else if d, err = decide(op, s); err != nil {
			return err
		}
		if err := r.apply(ctx, tx, &d); err != nil {
			return err
		}
		if d.retry || d.snooze > 0 {
			return nil
		}
		_, err = river.JobCompleteTx[riverdriver.Driver[TTx]](ctx, tx, job)
		return err
	})
	if err != nil {
		// River retries the job; the next attempt finds the step running
		// and verifies it before anything else.
		return fmt.Errorf("saga: record outcome of %s/%s: %w", ref.OperationID, ref.Step, errors.Join(err, callErr))
	}
	switch {
	case d.retry:
		return fmt.Errorf("saga: %s/%s attempt failed: %w", ref.OperationID, ref.Step, callErr)
	case d.snooze > 0:
		return river.JobSnooze(d.snooze)
	}
	return nil
}

func inputFor(op sagadriver.Operation, step string, key string, attempt int) StepInput {
	stepKey := op.ID + "/" + step
	if st, ok := op.Step(step); ok && st.Key != "" {
		stepKey = st.Key
	}
	return StepInput{OperationID: op.ID, Type: op.Type, Step: step, Key: key, StepKey: stepKey, Attempt: attempt,
		Input: op.Input, Results: results(op)}
}

// call runs fn under the step's timeout, turning a panic into an error.
func call[R any](ctx context.Context, step Step, fn func(ctx context.Context) (R, error)) (res R, err error) {
	ctx, cancel := context.WithTimeout(ctx, step.timeout())
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("saga: step %s panicked: %v", step.Name, p)
		}
	}()
	return fn(ctx)
}

// jobTimeout leaves room for a verification, the call and two
// transactions.
func (r *Runner[TTx]) jobTimeout(step Step) time.Duration { return 2*step.timeout() + r.cfg.JobMargin }

// timeoutOf is River's Timeout for every job on ref's step (zero, River's
// default, for a step the runner does not know).
func (r *Runner[TTx]) timeoutOf(ref JobRef) time.Duration {
	if s, ok := r.stepOf(ref); ok {
		return r.jobTimeout(s)
	}
	return 0
}

// retryAt is River's NextRetry after a job's attempt on ref's step, by the
// step's policy that policy picks (zero, River's default, for a step the
// runner does not know).
func (r *Runner[TTx]) retryAt(ref JobRef, attempt int, policy func(Step) RetryPolicy) time.Time {
	if s, ok := r.stepOf(ref); ok {
		return time.Now().Add(policy(s).Backoff(attempt))
	}
	return time.Time{}
}

type stepWorker[TTx any] struct {
	river.WorkerDefaults[StepArgs]
	r *Runner[TTx]
}

func (w *stepWorker[TTx]) Timeout(job *river.Job[StepArgs]) time.Duration {
	return w.r.timeoutOf(job.Args.JobRef)
}

func (w *stepWorker[TTx]) NextRetry(job *river.Job[StepArgs]) time.Time {
	return w.r.retryAt(job.Args.JobRef, job.Attempt, func(s Step) RetryPolicy { return s.Retry })
}

func (w *stepWorker[TTx]) Work(ctx context.Context, job *river.Job[StepArgs]) error {
	r, ref := w.r, job.Args.JobRef
	op, step, d, ok, err := begin(ctx, r, job, ref, func(_ sagadriver.Operation, step Step) signal {
		return signal{kind: sigBegin, hasVerify: step.Verify != nil, compensateFailed: step.CompensateOnFailure}
	})
	if !ok {
		return err
	}
	st, _ := op.Step(ref.Step)
	in := inputFor(op, ref.Step, st.Key, st.Attempts)
	if d.verifyFirst {
		vctx, span := r.startCall(ctx, SpanVerify, op, ref.Step, st.Attempts, job.ID)
		v, verr := call(vctx, step, func(ctx context.Context) (Verification, error) { return step.Verify(ctx, in) })
		endCall(span, verr)
		switch {
		case verr == nil && v.Outcome == Applied:
			return finish(ctx, r, job, ref, signal{kind: sigDone, result: v.Result}, nil)
		case verr == nil && v.Outcome == NotApplied:
			// Safe to execute again with the same key.
		default:
			msg := "verification after an interrupted attempt was inconclusive"
			if verr != nil {
				msg += ": " + errText(verr)
			}
			return finish(ctx, r, job, ref, signal{kind: sigFailed, class: sagadriver.ClassUncertain, err: msg,
				hasVerify: true, verifyAfter: step.verifyAfter()}, nil)
		}
	}
	sctx, span := r.startCall(ctx, SpanStep, op, ref.Step, st.Attempts, job.ID)
	res, err := call(sctx, step, func(ctx context.Context) (Result, error) { return step.Do(ctx, in) })
	endCall(span, err)
	if err == nil {
		return finish(ctx, r, job, ref, signal{kind: sigDone, result: res}, nil)
	}
	return finish(ctx, r, job, ref, signal{kind: sigFailed, class: step.classify(err), err: errText(err), result: res,
		hasVerify: step.Verify != nil, verifyAfter: step.verifyAfter(), compensateFailed: step.CompensateOnFailure}, err)
}

type verifyWorker[TTx any] struct {
	river.WorkerDefaults[VerifyArgs]
	r *Runner[TTx]
}

func (w *verifyWorker[TTx]) Timeout(job *river.Job[VerifyArgs]) time.Duration {
	return w.r.timeoutOf(job.Args.JobRef)
}

func (w *verifyWorker[TTx]) Work(ctx context.Context, job *river.Job[VerifyArgs]) error {
	r, ref := w.r, job.Args.JobRef
	var op sagadriver.Operation
	var step Step
	noop := ""
	var wait time.Duration
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		if op, step, err = r.load(ctx, tx, ref); err != nil {
			return err
		}
		st, _ := op.Step(ref.Step)
		switch {
		case st.Generation != ref.Generation:
			noop = "stale job"
		case st.Status != sagadriver.StepUncertain || op.Status != sagadriver.StatusRunning || step.Verify == nil:
			noop = fmt.Sprintf("step is %s, operation %s", st.Status, op.Status)
		default:
			now, err := r.clock(ctx, tx)
			wait = st.UpdatedAt.Add(step.verifyAfter()).Sub(now)
			return err
		}
		_, err = river.JobCompleteTx[riverdriver.Driver[TTx]](ctx, tx, job)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil || noop != "" {
		return err
	}
	if wait > 0 {
		return river.JobSnooze(wait)
	}
	st, _ := op.Step(ref.Step)
	vctx, span := r.startCall(ctx, SpanVerify, op, ref.Step, st.Attempts, job.ID)
	v, verr := call(vctx, step, func(ctx context.Context) (Verification, error) {
		return step.Verify(ctx, inputFor(op, ref.Step, st.Key, st.Attempts))
	})
	endCall(span, verr)
	if verr != nil {
		v = Verification{Outcome: Unknown, Detail: errText(verr)}
	}
	return finish(ctx, r, job, ref, signal{kind: sigVerified, outcome: v.Outcome, result: v.Result, note: v.Detail,
		maxVerifications: step.maxVerifications(), verifyAfter: step.verifyAfter()}, nil)
}

type compensateWorker[TTx any] struct {
	river.WorkerDefaults[CompensateArgs]
	r *Runner[TTx]
}

func (w *compensateWorker[TTx]) Timeout(job *river.Job[CompensateArgs]) time.Duration {
	return w.r.timeoutOf(job.Args.JobRef)
}

func (w *compensateWorker[TTx]) NextRetry(job *river.Job[CompensateArgs]) time.Time {
	return w.r.retryAt(job.Args.JobRef, job.Attempt, func(s Step) RetryPolicy { return s.CompensationRetry })
}

func (w *compensateWorker[TTx]) Work(ctx context.Context, job *river.Job[CompensateArgs]) error {
	r, ref := w.r, job.Args.JobRef
	op, step, _, ok, err := begin(ctx, r, job, ref, func(sagadriver.Operation, Step) signal { return signal{kind: sigCompBegin} })
	if !ok {
		return err
	}
	st, _ := op.Step(ref.Step)
	in := inputFor(op, ref.Step, st.CompKey, st.CompAttempts)
	in.Results[ref.Step] = Result{ExternalID: st.ExternalID, Data: st.Result}
	cctx, span := r.startCall(ctx, SpanCompensate, op, ref.Step, st.CompAttempts, job.ID)
	_, err = call(cctx, step, func(ctx context.Context) (struct{}, error) { return struct{}{}, step.Compensate(ctx, in) })
	endCall(span, err)
	if err == nil {
		return finish(ctx, r, job, ref, signal{kind: sigCompDone}, nil)
	}
	return finish(ctx, r, job, ref, signal{kind: sigCompFailed, class: step.classify(err), err: errText(err)}, err)
}
