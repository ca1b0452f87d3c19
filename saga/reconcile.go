package saga

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// ReconcileArgs are the args of the periodic reconciliation job.
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return "saga.reconcile" }

// PeriodicJobs returns the reconciliation job, every
// Config.ReconcileInterval, for river.Config.PeriodicJobs. River enqueues
// periodic jobs on the elected leader only, so one runs at a time across
// the processes.
func (r *Runner[TTx]) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(r.cfg.ReconcileInterval),
		func() (river.JobArgs, *river.InsertOpts) {
			return ReconcileArgs{}, &river.InsertOpts{Queue: r.cfg.Queue, MaxAttempts: 3}
		}, &river.PeriodicJobOpts{ID: "saga.reconcile"})}
}

type reconcileWorker[TTx any] struct {
	river.WorkerDefaults[ReconcileArgs]
	r *Runner[TTx]
}

// Timeout lets a reconciliation, which calls Verify for many steps, run
// for its interval, at least a minute, whatever River's JobTimeout.
func (w *reconcileWorker[TTx]) Timeout(*river.Job[ReconcileArgs]) time.Duration {
	return max(w.r.cfg.ReconcileInterval, time.Minute)
}

func (w *reconcileWorker[TTx]) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	_, err := w.r.Reconcile(ctx)
	return err
}

// Reconcile compares the records with the external systems once (SPEC
// G8), by calling Verify for:
//
//   - the unsettled steps (running, retrying, uncertain, or pending but
//     due) of operations not changed for Config.StuckAfter: whatever the
//     answer, a finding "unresolved" is opened;
//   - the steps of operations finished within Config.ReconcileWindow: an
//     effect present for a step we record as failed, skipped, compensated
//     or never run is "orphan_external" (the provider has a workspace, we
//     have none); an effect missing for a step we record as completed, in
//     an operation that completed, is "missing_external".
//
// Each new finding is recorded and raises its operation to
// review_required with the finding as the reason, unless one of the same
// kind for the step is open, or was accepted (its operation resolved) with
// the same Fingerprint; a finding that differs from the accepted one names
// it in Supersedes and says in its Detail what changed. Reconciliation
// never changes a step: what to do about a difference is an operator's
// decision. Verify is called outside any transaction. It also measures the
// clock skew (ClockSkew). It returns the new findings.
func (r *Runner[TTx]) Reconcile(ctx context.Context) ([]sagadriver.Finding, error) {
	if _, err := r.ClockSkew(ctx); err != nil {
		r.log.WarnContext(ctx, "saga: reconcile: cannot measure the clock skew", "error", err.Error())
	}
	var now time.Time
	var stuck, finished []sagadriver.Operation
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		if now, err = r.clock(ctx, tx); err != nil {
			return err
		}
		if stuck, err = r.driver.ListOperations(ctx, tx, sagadriver.ListParams{Statuses: []sagadriver.Status{sagadriver.StatusPending, sagadriver.StatusRunning, sagadriver.StatusCompensating},
			UpdatedBefore: now.Add(-r.cfg.StuckAfter)}); err != nil {
			return err
		}
		finished, err = r.driver.ListOperations(ctx, tx, sagadriver.ListParams{Statuses: []sagadriver.Status{sagadriver.StatusCompleted, sagadriver.StatusFailed, sagadriver.StatusCompensated},
			FinishedAfter: now.Add(-r.cfg.ReconcileWindow), Limit: 500})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("saga: reconcile: %w", err)
	}
	var found []sagadriver.Finding
	var errs []error
	check := func(op sagadriver.Operation, fs []sagadriver.Finding) {
		for _, f := range fs {
			f, ok, err := r.record(ctx, op, f)
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				found = append(found, f)
			}
		}
	}
	for _, op := range stuck {
		check(op, r.checkStuck(ctx, op, now))
	}
	for _, op := range finished {
		check(op, r.checkFinished(ctx, op, now))
	}
	return found, errors.Join(errs...)
}

func (r *Runner[TTx]) verify(ctx context.Context, op sagadriver.Operation, st sagadriver.StepRecord) (Verification, bool) {
	def, ok := r.defs[op.Type]
	if !ok {
		return Verification{}, false
	}
	step, ok := def.step(st.Name)
	if !ok || step.Verify == nil {
		return Verification{}, false
	}
	v, err := call(ctx, step, func(ctx context.Context) (Verification, error) {
		return step.Verify(ctx, inputFor(op, st.Name, st.Key, st.Attempts))
	})
	if err != nil {
		v = Verification{Outcome: Unknown, Detail: errText(err)}
	}
	return v, true
}

func (r *Runner[TTx]) checkStuck(ctx context.Context, op sagadriver.Operation, now time.Time) []sagadriver.Finding {
	var out []sagadriver.Finding
	for _, st := range op.Steps {
		unsettled := st.Status == sagadriver.StepRunning || st.Status == sagadriver.StepRetrying || st.Status == sagadriver.StepUncertain ||
			(st.Status == sagadriver.StepPending && op.CurrentStep == st.Name) || st.Status == sagadriver.StepCompensating
		if !unsettled {
			continue
		}
		detail := fmt.Sprintf("step %s has been %s since %s (operation %s)", st.Name, st.Status, st.UpdatedAt.Format(time.RFC3339), op.Status)
		ext := st.ExternalID
		v, ok := r.verify(ctx, op, st)
		if ok {
			detail += "; the external system says " + v.Outcome.String()
			if v.Result.ExternalID != "" {
				ext = v.Result.ExternalID
				detail += " (" + ext + ")"
			}
			if v.Detail != "" {
				detail += ": " + v.Detail
			}
		} else {
			detail += "; the step cannot be verified"
		}
		out = append(out, sagadriver.Finding{OperationID: op.ID, Step: st.Name, Kind: sagadriver.FindingUnresolved, ExternalID: ext, Detail: detail, DetectedAt: now,
			Fingerprint: fmt.Sprintf("%s %s: we record %s since %s; the external system says %s (%q)", sagadriver.FindingUnresolved, st.Name, st.Status,
				st.UpdatedAt.Format(time.RFC3339Nano), outcomeOf(v, ok), ext)})
	}
	return out
}

func (r *Runner[TTx]) checkFinished(ctx context.Context, op sagadriver.Operation, now time.Time) []sagadriver.Finding {
	var out []sagadriver.Finding
	for _, st := range op.Steps {
		v, ok := r.verify(ctx, op, st)
		if !ok {
			continue
		}
		// The facts compared: what the operator accepts by resolving.
		facts := fmt.Sprintf("we record %s (%q); the external system says %s (%q)", st.Status, st.ExternalID, v.Outcome, v.Result.ExternalID)
		switch {
		case v.Outcome == Applied && st.Status != sagadriver.StepCompleted:
			out = append(out, sagadriver.Finding{OperationID: op.ID, Step: st.Name, Kind: sagadriver.FindingOrphanExternal, ExternalID: v.Result.ExternalID, DetectedAt: now,
				Fingerprint: sagadriver.FindingOrphanExternal + " " + st.Name + ": " + facts,
				Detail:      fmt.Sprintf("the external system has the effect of step %s (%s) but we record it %s in a %s operation", st.Name, v.Result.ExternalID, st.Status, op.Status)})
		case v.Outcome == NotApplied && st.Status == sagadriver.StepCompleted && op.Status == sagadriver.StatusCompleted:
			out = append(out, sagadriver.Finding{OperationID: op.ID, Step: st.Name, Kind: sagadriver.FindingMissingExternal, ExternalID: st.ExternalID, DetectedAt: now,
				Fingerprint: sagadriver.FindingMissingExternal + " " + st.Name + ": " + facts,
				Detail:      fmt.Sprintf("we record step %s completed (%s) but the external system has no such effect", st.Name, st.ExternalID)})
		case v.Outcome == Applied && st.Status == sagadriver.StepCompleted && op.Status == sagadriver.StatusCompleted &&
			st.ExternalID != "" && v.Result.ExternalID != "" && st.ExternalID != v.Result.ExternalID:
			// An operator confirmed the step with an identifier the
			// external system does not have under the step's key.
			out = append(out, sagadriver.Finding{OperationID: op.ID, Step: st.Name, Kind: sagadriver.FindingMissingExternal, ExternalID: st.ExternalID, DetectedAt: now,
				Fingerprint: sagadriver.FindingMissingExternal + " " + st.Name + ": " + facts,
				Detail: fmt.Sprintf("we record step %s completed (%s) but the external system has %s under its key instead",
					st.Name, st.ExternalID, v.Result.ExternalID)})
		}
	}
	return out
}

func outcomeOf(v Verification, verified bool) string {
	if !verified {
		return "nothing (no Verify)"
	}
	return v.Outcome.String()
}

// record inserts f and raises its operation to review, in one
// transaction, unless a finding of the same kind for the same step is
// open, or was accepted (its operation resolved) with the same
// fingerprint. A finding that differs from the last accepted one reopens
// the operation and says what changed.
func (r *Runner[TTx]) record(ctx context.Context, seen sagadriver.Operation, f sagadriver.Finding) (sagadriver.Finding, bool, error) {
	inserted := false
	err := r.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
		op, err := r.driver.GetOperation(ctx, tx, seen.ID, true)
		if err != nil {
			return err
		}
		if op.Version != seen.Version {
			return nil // it moved since it was read: judge it next time
		}
		prior, err := r.driver.ListFindings(ctx, tx, op.ID, false)
		if err != nil {
			return err
		}
		var accepted *sagadriver.Finding
		for i := range prior {
			p := &prior[i]
			if p.Kind != f.Kind || p.Step != f.Step {
				continue
			}
			if p.ResolvedAt == nil || p.Fingerprint == f.Fingerprint {
				return nil // open already, or known and accepted
			}
			accepted = p // the latest accepted one
		}
		if accepted != nil {
			f.Supersedes = accepted.ID
			f.Detail = fmt.Sprintf("reopened: differs from finding #%d accepted by %s at %s (%s); now %s; %s", accepted.ID,
				cmp.Or(accepted.ResolvedBy, "an operator"), accepted.ResolvedAt.Format(time.RFC3339), accepted.Fingerprint, f.Fingerprint, f.Detail)
		}
		if inserted, err = r.driver.InsertFinding(ctx, tx, &f); err != nil || !inserted {
			return err
		}
		now, err := r.clock(ctx, tx)
		if err != nil {
			return err
		}
		d, err := decide(op, signal{kind: recFinding, err: f.Kind + ": " + f.Detail, now: now, actor: "reconciler"})
		if err != nil {
			return err
		}
		d.events = append(d.events, sagadriver.Event{OperationID: op.ID, Step: f.Step, Action: "finding", Actor: "reconciler", Message: f.Kind + ": " + f.Detail, At: now})
		d.changed = true
		return r.apply(ctx, tx, &d)
	})
	if err != nil {
		return f, false, fmt.Errorf("saga: record finding for %s: %w", seen.ID, err)
	}
	return f, inserted, nil
}
