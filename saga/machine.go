package saga

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// This file is the one state machine of operations and steps: a pure
// function from a record and a signal to the new record, the events to
// append, the jobs to insert and what the current job does. Workers,
// operator actions and reconciliation all go through it.

// signalKind names what happened.
type signalKind int

const (
	sigBegin      signalKind = iota + 1 // a step job is about to execute Do
	sigDone                             // Do (or Verify, or an operator) says the effect exists
	sigFailed                           // Do returned a classified error
	sigVerified                         // Verify answered, for an uncertain step
	sigCompBegin                        // a compensation job is about to execute Compensate
	sigCompDone                         // Compensate succeeded
	sigCompFailed                       // Compensate returned a classified error
	opRetry                             // operator: retry a step
	opConfirm                           // operator: confirm a step's real outcome
	opCompensate                        // operator: start compensation
	opResolve                           // operator: resolve a review
	opRedrive                           // operator: redrive (resume, re-run or compensate from a step)
	recFinding                          // reconciliation: raise to review with a finding
)

// signal is the input of decide. Only the fields of its kind are read.
type signal struct {
	kind signalKind
	step string
	now  time.Time
	// actor is "worker", "operator:<name>" or "reconciler".
	actor string

	result  Result           // sigDone, sigVerified (Applied), opConfirm (happened); sigFailed: a partial effect
	class   sagadriver.Class // sigFailed, sigCompFailed
	err     string           // sigFailed, sigCompFailed, recFinding
	outcome Outcome
	// hasVerify says whether the step can be verified (sigBegin,
	// sigFailed).
	hasVerify        bool
	maxVerifications int // sigVerified
	verifyAfter      time.Duration
	// compensateFailed: (sigFailed, sigBegin) the step declares that a
	// failure may leave part of its effect, so it is compensated too.
	compensateFailed bool
	happened         bool              // opConfirm
	note             string            // operator actions
	resolveTo        sagadriver.Status // opResolve
	redrive          *redriveSpec
}

// jobKind names the River job kinds the engine inserts.
type jobKind int

const (
	jobStep jobKind = iota + 1
	jobVerify
	jobCompensate
)

// enqueue is a job to insert in the same transaction.
type enqueue struct {
	kind       jobKind
	step       string
	generation int
	delay      time.Duration
}

// decision is the output of decide.
type decision struct {
	op      sagadriver.Operation
	events  []sagadriver.Event
	enqueue []enqueue
	// proceed: the job goes on to call the step's function.
	proceed bool
	// verifyFirst: (sigBegin) the step was found running, so a previous
	// attempt ended without recording its outcome: verify before Do.
	verifyFirst bool
	// retry: the job returns its error so that River retries it.
	retry bool
	// snooze > 0: the job snoozes that long (verification inconclusive).
	snooze time.Duration
	// noop explains why the job does nothing (stale or duplicate).
	noop string
	// changed: the record changed and must be written.
	changed bool
}

type machine struct {
	d decision
	s signal
}

func (m *machine) op() *sagadriver.Operation { return &m.d.op }

func (m *machine) event(step, action, from, to, msg string, attempt int) {
	m.d.events = append(m.d.events, sagadriver.Event{OperationID: m.d.op.ID, Step: step, Action: action, From: from, To: to,
		Actor: m.s.actor, Message: msg, Attempt: attempt, At: m.s.now})
	m.d.changed = true
}

func (m *machine) setOp(to sagadriver.Status, msg string) {
	o := m.op()
	if o.Status == to {
		return
	}
	from := o.Status
	o.Status = to
	if to.Terminal() {
		t := m.s.now
		o.FinishedAt = &t
	} else {
		o.FinishedAt = nil
	}
	if to != sagadriver.StatusReviewRequired {
		o.ReviewReason = ""
	}
	m.event("", "status", string(from), string(to), msg, 0)
}

func (m *machine) setStep(st *sagadriver.StepRecord, to sagadriver.StepStatus, action, msg string, attempt int) {
	from := st.Status
	st.Status = to
	st.UpdatedAt = m.s.now
	switch to {
	case sagadriver.StepCompleted, sagadriver.StepFailed, sagadriver.StepSkipped, sagadriver.StepCompensated, sagadriver.StepCompensationFailed:
		t := m.s.now
		st.FinishedAt = &t
	}
	m.event(st.Name, action, string(from), string(to), msg, attempt)
}

func (m *machine) review(reason, msg string) {
	m.op().LastError = msg
	m.setOp(sagadriver.StatusReviewRequired, reason+": "+msg)
	m.op().ReviewReason = reason
}

func (m *machine) enqueue(kind jobKind, st *sagadriver.StepRecord, delay time.Duration) {
	st.Generation++
	m.d.enqueue = append(m.d.enqueue, enqueue{kind: kind, step: st.Name, generation: st.Generation, delay: delay})
	m.d.changed = true
}

func (m *machine) illegal(action string, st *sagadriver.StepRecord, reason string) error {
	e := &TransitionError{Action: action, Operation: m.op().Status, Reason: reason}
	if st != nil {
		e.Step, e.StepStatus = st.Name, st.Status
	}
	return e
}

// decide applies s to op. For worker signals a status that does not fit
// the signal (a stale or duplicate job) is a no-op with a reason, never an
// error; for operator actions it is a *TransitionError. The returned
// record has its Version unchanged: the store increments it on write.
func decide(op sagadriver.Operation, s signal) (decision, error) {
	m := &machine{d: decision{op: clone(op)}, s: s}
	o := m.op()
	var st *sagadriver.StepRecord
	if s.step != "" {
		var ok bool
		if st, ok = o.Step(s.step); !ok {
			if s.kind >= opRetry {
				return decision{}, fmt.Errorf("%w: step %q of operation %s", ErrNotFound, s.step, o.ID)
			}
			m.d.noop = "the operation has no step " + s.step
			return m.d, nil
		}
	}
	var err error
	switch s.kind {
	case sigBegin:
		m.begin(st)
	case sigDone:
		if st.Status != sagadriver.StepRunning {
			m.late(st, "result")
			break
		}
		m.complete(st, s.result, "step_completed", "")
	case sigFailed:
		if st.Status != sagadriver.StepRunning {
			m.late(st, "error")
			break
		}
		m.failed(st)
	case sigVerified:
		m.verified(st)
	case sigCompBegin:
		m.compBegin(st)
	case sigCompDone:
		if st.CompStatus != sagadriver.CompRunning || o.Status != sagadriver.StatusCompensating {
			m.late(st, "compensation result")
			break
		}
		st.CompStatus = sagadriver.CompCompleted
		st.CompError = ""
		m.setStep(st, sagadriver.StepCompensated, "compensated", "", st.CompAttempts)
		m.nextCompensation()
	case sigCompFailed:
		if st.CompStatus != sagadriver.CompRunning || o.Status != sagadriver.StatusCompensating {
			m.late(st, "compensation error")
			break
		}
		m.compFailed(st)
	case opRetry:
		err = m.operatorRetry(st)
	case opConfirm:
		err = m.operatorConfirm(st)
	case opCompensate:
		err = m.operatorCompensate()
	case opResolve:
		err = m.operatorResolve()
	case opRedrive:
		m.operatorRedrive(s.redrive)
	case recFinding:
		if o.Status != sagadriver.StatusReviewRequired {
			m.review("reconciliation_finding", s.err)
		}
	default:
		return decision{}, fmt.Errorf("saga: unknown signal %d", s.kind)
	}
	if err != nil {
		return decision{}, err
	}
	if m.d.changed {
		o.UpdatedAt = s.now
	}
	return m.d, nil
}

// late records a result that arrived for a step no longer waiting for it
// (hanging: a forward answer after compensation started, or a duplicate).
func (m *machine) late(st *sagadriver.StepRecord, what string) {
	m.d.noop = fmt.Sprintf("step %s is %s (compensation %q): %s ignored", st.Name, st.Status, st.CompStatus, what)
	msg := m.d.noop
	if m.s.result.ExternalID != "" {
		msg += "; external id " + m.s.result.ExternalID
	}
	if m.s.err != "" {
		msg += "; error " + m.s.err
	}
	m.event(st.Name, "late_result", string(st.Status), string(st.Status), msg, st.Attempts)
}

func (m *machine) begin(st *sagadriver.StepRecord) {
	o := m.op()
	if o.Status != sagadriver.StatusPending && o.Status != sagadriver.StatusRunning {
		m.d.noop = fmt.Sprintf("operation is %s", o.Status)
		return
	}
	switch st.Status {
	case sagadriver.StepPending, sagadriver.StepRetrying:
	case sagadriver.StepRunning:
		// A previous attempt began and never recorded its outcome.
		if st.Attempts >= st.MaxAttempts && !m.s.hasVerify {
			m.setOp(sagadriver.StatusRunning, "")
			m.s.class, m.s.err = sagadriver.ClassTransient, "attempt interrupted without an outcome"
			m.failed(st)
			return
		}
		m.d.verifyFirst = m.s.hasVerify
	default:
		m.d.noop = fmt.Sprintf("step %s is %s", st.Name, st.Status)
		return
	}
	m.setOp(sagadriver.StatusRunning, "")
	o.CurrentStep = st.Name
	st.Attempts++
	if st.StartedAt == nil {
		t := m.s.now
		st.StartedAt = &t
	}
	msg := ""
	if m.d.verifyFirst {
		msg = "previous attempt has no recorded outcome: verifying first"
	}
	m.setStep(st, sagadriver.StepRunning, "step_begun", msg, st.Attempts)
	m.d.proceed = true
}

// complete records the step's effect and moves the operation on.
func (m *machine) complete(st *sagadriver.StepRecord, r Result, action, msg string) {
	st.Result = r.Data
	st.ExternalID = r.ExternalID
	st.LastError, st.LastErrorClass = "", ""
	if msg == "" && r.ExternalID != "" {
		msg = "external id " + r.ExternalID
	}
	m.setStep(st, sagadriver.StepCompleted, action, msg, st.Attempts)
	m.advance()
}

// advance enqueues the first pending step, or completes the operation.
func (m *machine) advance() {
	o := m.op()
	for i := range o.Steps {
		st := &o.Steps[i]
		switch st.Status {
		case sagadriver.StepCompleted:
			continue
		case sagadriver.StepPending:
			m.setOp(sagadriver.StatusRunning, "")
			o.CurrentStep = st.Name
			m.enqueue(jobStep, st, 0)
			return
		default:
			// An operator confirmed a step while another is unsettled;
			// the operator decides about that one.
			m.review("operator", fmt.Sprintf("step %s is %s", st.Name, st.Status))
			return
		}
	}
	o.LastError = ""
	m.setOp(sagadriver.StatusCompleted, "every step completed")
}

func (m *machine) failed(st *sagadriver.StepRecord) {
	s := m.s
	st.LastError, st.LastErrorClass = s.err, s.class
	if s.result.ExternalID != "" {
		// What is known of a partial effect, for its compensation and
		// for operators.
		st.ExternalID = s.result.ExternalID
	}
	switch {
	case s.class == sagadriver.ClassUncertain:
		st.Verifications = 0
		m.setStep(st, sagadriver.StepUncertain, "step_uncertain", s.err, st.Attempts)
		if !s.hasVerify {
			m.review("uncertain_unresolved", fmt.Sprintf("step %s: outcome unknown and the step cannot be verified: %s", st.Name, s.err))
			return
		}
		m.enqueue(jobVerify, st, s.verifyAfter)
	case s.class == sagadriver.ClassTransient && st.Attempts < st.MaxAttempts:
		m.setStep(st, sagadriver.StepRetrying, "step_retrying", s.err, st.Attempts)
		m.d.retry = true
	default:
		reason := "permanent_failure"
		if s.class == sagadriver.ClassTransient {
			reason = "retries_exhausted"
		}
		m.failStep(st, reason, s.err, s.compensateFailed)
	}
}

// failStep marks st failed and compensates the operation, or sends it to
// review when st is retriable (forward recovery).
func (m *machine) failStep(st *sagadriver.StepRecord, reason, msg string, compensateSelf bool) {
	m.setStep(st, sagadriver.StepFailed, "step_failed", reason+": "+msg, st.Attempts)
	full := fmt.Sprintf("step %s failed after %d attempt(s) (%s): %s", st.Name, st.Attempts, reason, msg)
	if st.Kind == sagadriver.Retriable {
		m.review(reason, full)
		return
	}
	m.op().LastError = full
	if compensateSelf && st.Compensable {
		// Compensated like an uncertain step: a null compensation if
		// nothing of the effect exists.
		m.compensate(full, st.Name)
		return
	}
	m.compensate(full, "")
}

// compensate plans the compensations of every step that completed or may
// have applied, skips the steps never reached, and starts the first one;
// with nothing to undo the operation fails.
func (m *machine) compensate(why, failed string) {
	o := m.op()
	var plan []*sagadriver.StepRecord
	for i := range o.Steps {
		st := &o.Steps[i]
		switch st.Status {
		case sagadriver.StepPending, sagadriver.StepRetrying:
			m.setStep(st, sagadriver.StepSkipped, "step_skipped", "", st.Attempts)
		case sagadriver.StepCompleted, sagadriver.StepUncertain, sagadriver.StepRunning, sagadriver.StepFailed:
			if st.Compensable && (st.Status != sagadriver.StepFailed || st.Name == failed) {
				plan = append(plan, st)
			}
		}
	}
	if len(plan) == 0 {
		m.setOp(sagadriver.StatusFailed, why+"; nothing to compensate")
		return
	}
	slices.SortFunc(plan, func(a, b *sagadriver.StepRecord) int { return cmp.Compare(a.CompSeq, b.CompSeq) })
	names := make([]string, len(plan))
	for i, st := range plan {
		st.CompStatus = sagadriver.CompPending
		st.CompAttempts, st.CompError = 0, ""
		m.setStep(st, sagadriver.StepCompensating, "compensation_planned", fmt.Sprintf("position %d", i+1), st.Attempts)
		names[i] = st.Name
	}
	m.setOp(sagadriver.StatusCompensating, fmt.Sprintf("%s; compensating %v", why, names))
	m.nextCompensation()
}

// nextCompensation starts the next planned compensation, or ends the
// operation compensated. It halts at a failed one (the operation is then
// review_required already).
func (m *machine) nextCompensation() {
	o := m.op()
	var next *sagadriver.StepRecord
	for i := range o.Steps {
		st := &o.Steps[i]
		if st.CompStatus == sagadriver.CompPending && (next == nil || st.CompSeq < next.CompSeq) {
			next = st
		}
	}
	if next == nil {
		m.setOp(sagadriver.StatusCompensated, "every compensation completed")
		return
	}
	o.CurrentStep = next.Name
	m.enqueue(jobCompensate, next, 0)
}

func (m *machine) verified(st *sagadriver.StepRecord) {
	s := m.s
	if st.Status != sagadriver.StepUncertain || m.op().Status != sagadriver.StatusRunning {
		m.d.noop = fmt.Sprintf("step %s is %s, operation %s: verification not needed", st.Name, st.Status, m.op().Status)
		return
	}
	switch s.outcome {
	case Applied:
		st.Verifications++
		m.complete(st, s.result, "verified", "verification found the effect: "+s.note)
	case NotApplied:
		st.Verifications++
		if st.Attempts >= st.MaxAttempts {
			m.failStep(st, "retries_exhausted", "verification found no effect after the last attempt", false)
			return
		}
		m.setStep(st, sagadriver.StepPending, "verified", "verification found no effect: executing again with the same key", st.Attempts)
		m.enqueue(jobStep, st, 0)
	default:
		st.Verifications++
		if st.Verifications >= s.maxVerifications {
			m.event(st.Name, "verified", string(st.Status), string(st.Status), "inconclusive: "+s.note, st.Attempts)
			m.review("uncertain_unresolved", fmt.Sprintf("step %s: outcome still unknown after %d verification(s): %s", st.Name, st.Verifications, s.note))
			return
		}
		m.event(st.Name, "verified", string(st.Status), string(st.Status), "inconclusive: "+s.note, st.Attempts)
		m.d.snooze = s.verifyAfter
	}
}

func (m *machine) compBegin(st *sagadriver.StepRecord) {
	if m.op().Status != sagadriver.StatusCompensating {
		m.d.noop = fmt.Sprintf("operation is %s", m.op().Status)
		return
	}
	switch st.CompStatus {
	case sagadriver.CompPending, sagadriver.CompRetrying, sagadriver.CompRunning:
	default:
		m.d.noop = fmt.Sprintf("compensation of %s is %q", st.Name, st.CompStatus)
		return
	}
	m.op().CurrentStep = st.Name
	st.CompStatus = sagadriver.CompRunning
	st.CompAttempts++
	st.UpdatedAt = m.s.now
	m.event(st.Name, "compensation_begun", string(st.Status), string(st.Status), "", st.CompAttempts)
	m.d.proceed = true
}

func (m *machine) compFailed(st *sagadriver.StepRecord) {
	s := m.s
	st.CompError = s.err
	if s.class != sagadriver.ClassPermanent && st.CompAttempts < st.CompMaxAttempts {
		st.CompStatus = sagadriver.CompRetrying
		st.UpdatedAt = s.now
		m.event(st.Name, "compensation_retrying", string(st.Status), string(st.Status), s.err, st.CompAttempts)
		m.d.retry = true
		return
	}
	st.CompStatus = sagadriver.CompFailed
	m.setStep(st, sagadriver.StepCompensationFailed, "compensation_failed", s.err, st.CompAttempts)
	m.review("compensation_failed", fmt.Sprintf("compensation of step %s failed after %d attempt(s): %s (external id %q)", st.Name, st.CompAttempts, s.err, st.ExternalID))
}

func (m *machine) operatorRetry(st *sagadriver.StepRecord) error {
	o := m.op()
	const action = "retry step"
	if st == nil {
		return m.illegal(action, nil, "a step is required")
	}
	if o.Status != sagadriver.StatusReviewRequired {
		return m.illegal(action, st, "only an operation under review can be retried")
	}
	switch st.Status {
	case sagadriver.StepFailed, sagadriver.StepUncertain, sagadriver.StepRunning, sagadriver.StepRetrying:
		for _, other := range o.Steps {
			if other.CompStatus != sagadriver.CompNone {
				return m.illegal(action, st, "compensation has started; retry the failed compensation instead")
			}
		}
		st.Attempts, st.Verifications = 0, 0
		st.LastError, st.LastErrorClass = "", ""
		st.FinishedAt = nil
		m.event(st.Name, "operator_retry", string(st.Status), string(sagadriver.StepPending), m.s.note, 0)
		m.setStep(st, sagadriver.StepPending, "step_reset", "", 0)
		m.setOp(sagadriver.StatusRunning, "operator retry of "+st.Name)
		o.CurrentStep = st.Name
		m.enqueue(jobStep, st, 0)
	case sagadriver.StepCompensationFailed:
		st.CompStatus, st.CompAttempts, st.CompError = sagadriver.CompPending, 0, ""
		st.FinishedAt = nil
		// The failure that sent the operation to review is in its
		// history; the record shows the failure of the retry, if any.
		o.LastError = ""
		m.event(st.Name, "operator_retry", string(st.Status), string(sagadriver.StepCompensating), m.s.note, 0)
		m.setStep(st, sagadriver.StepCompensating, "compensation_reset", "", 0)
		m.setOp(sagadriver.StatusCompensating, "operator retry of the compensation of "+st.Name)
		m.nextCompensation()
	default:
		return m.illegal(action, st, "only a failed, uncertain or stuck step or a failed compensation can be retried")
	}
	return nil
}

func (m *machine) operatorConfirm(st *sagadriver.StepRecord) error {
	o := m.op()
	const action = "confirm outcome"
	if st == nil {
		return m.illegal(action, nil, "a step is required")
	}
	if o.Status != sagadriver.StatusReviewRequired {
		return m.illegal(action, st, "only an operation under review can have a step confirmed")
	}
	if m.s.note == "" {
		return m.illegal(action, st, "a note with the evidence is required")
	}
	switch st.Status {
	case sagadriver.StepUncertain, sagadriver.StepFailed, sagadriver.StepRunning, sagadriver.StepRetrying:
		for _, other := range o.Steps {
			if other.CompStatus != sagadriver.CompNone {
				return m.illegal(action, st, "compensation has started")
			}
		}
		m.event(st.Name, "operator_confirm", string(st.Status), "", fmt.Sprintf("happened=%t external id %q: %s", m.s.happened, m.s.result.ExternalID, m.s.note), st.Attempts)
		if m.s.happened {
			m.setOp(sagadriver.StatusRunning, "operator confirmed "+st.Name+" happened")
			m.complete(st, m.s.result, "step_completed", "confirmed by operator")
			return nil
		}
		m.setOp(sagadriver.StatusRunning, "operator confirmed "+st.Name+" did not happen")
		m.failStep(st, "permanent_failure", "confirmed by operator as not done: "+m.s.note, false)
	case sagadriver.StepCompensationFailed:
		if !m.s.happened {
			return m.illegal(action, st, "a compensation that did not happen is retried, not confirmed")
		}
		m.event(st.Name, "operator_confirm", string(st.Status), string(sagadriver.StepCompensated), m.s.note, st.CompAttempts)
		o.LastError = ""
		st.CompStatus, st.CompError = sagadriver.CompCompleted, ""
		m.setStep(st, sagadriver.StepCompensated, "compensated", "confirmed by operator", st.CompAttempts)
		m.setOp(sagadriver.StatusCompensating, "operator confirmed the compensation of "+st.Name)
		m.nextCompensation()
	default:
		return m.illegal(action, st, "only an uncertain, failed or stuck step or a failed compensation can be confirmed")
	}
	return nil
}

func (m *machine) operatorCompensate() error {
	o := m.op()
	if o.Status != sagadriver.StatusReviewRequired && o.Status != sagadriver.StatusRunning {
		return m.illegal("start compensation", nil, "only a running operation or one under review can be compensated")
	}
	for _, st := range o.Steps {
		if st.CompStatus != sagadriver.CompNone {
			return m.illegal("start compensation", nil, "compensation has started already; retry or confirm the failed compensation")
		}
	}
	m.event("", "operator_compensate", string(o.Status), string(sagadriver.StatusCompensating), m.s.note, 0)
	for i := range o.Steps {
		if st := &o.Steps[i]; st.Status == sagadriver.StepFailed || st.Status == sagadriver.StepRetrying {
			// A failed step took no effect; one retrying is stopped.
			if st.Status == sagadriver.StepRetrying {
				m.setStep(st, sagadriver.StepSkipped, "step_skipped", "stopped by operator", st.Attempts)
			}
		}
	}
	m.compensate("operator started compensation: "+m.s.note, "")
	return nil
}

func (m *machine) operatorResolve() error {
	o := m.op()
	if o.Status != sagadriver.StatusReviewRequired {
		return m.illegal("resolve", nil, "only an operation under review can be resolved")
	}
	if m.s.note == "" {
		return m.illegal("resolve", nil, "a note is required")
	}
	switch m.s.resolveTo {
	case sagadriver.StatusCompleted, sagadriver.StatusFailed, sagadriver.StatusCompensated:
	default:
		return m.illegal("resolve", nil, fmt.Sprintf("resolve to completed, failed or compensated, not %q", m.s.resolveTo))
	}
	o.Resolution = m.s.note
	m.event("", "operator_resolve", string(o.Status), string(m.s.resolveTo), m.s.note, 0)
	m.setOp(m.s.resolveTo, "resolved by operator")
	return nil
}

// operatorRedrive applies a redrive planned by planRedrive, which checked
// that it is legal: the operation is stopped and no compensation is
// unfinished.
func (m *machine) operatorRedrive(spec *redriveSpec) {
	o := m.op()
	plan := spec.plan
	msg := fmt.Sprintf("%s from %s", plan.Mode, cmp.Or(plan.From, "the appended steps"))
	if plan.ToDefinition != plan.FromDefinition {
		msg += fmt.Sprintf(", definition version %d to %d", plan.FromDefinition, plan.ToDefinition)
	}
	if m.s.note != "" {
		msg += ": " + m.s.note
	}
	m.event(plan.From, "operator_redrive", string(o.Status), "", msg, 0)
	for i := range o.Steps {
		if rec, ok := spec.refresh[o.Steps[i].Name]; ok && i >= spec.from && spec.from >= 0 {
			st := &o.Steps[i]
			st.Kind, st.System, st.MaxAttempts, st.Compensable = rec.Kind, rec.System, rec.MaxAttempts, rec.Compensable
			st.CompSeq, st.CompMaxAttempts = rec.CompSeq, rec.CompMaxAttempts
			st.Unkeyed, st.Verifiable = rec.Unkeyed, rec.Verifiable
		}
	}
	if spec.plan.ToDefinition != o.DefinitionVersion {
		o.DefinitionVersion = spec.plan.ToDefinition
		for _, rec := range spec.appended {
			rec.Seq = len(o.Steps)
			rec.UpdatedAt = m.s.now
			o.Steps = append(o.Steps, rec)
			m.event(rec.Name, "step_appended", "", string(sagadriver.StepPending), fmt.Sprintf("definition version %d", plan.ToDefinition), 0)
		}
	}
	o.LastError, o.ReviewReason = "", ""
	if plan.Mode == RedriveCompensate {
		var names []string
		for i, sp := range plan.Steps {
			st := &o.Steps[i]
			switch sp.Action {
			case StepCompensates:
				st.CompStatus, st.CompAttempts, st.CompError = sagadriver.CompPending, 0, ""
				m.setStep(st, sagadriver.StepCompensating, "compensation_planned", "redrive", st.Attempts)
				names = append(names, st.Name)
			case StepNotRun:
				if st.Status == sagadriver.StepPending || st.Status == sagadriver.StepRetrying {
					m.setStep(st, sagadriver.StepSkipped, "step_skipped", "redrive", st.Attempts)
				}
			}
		}
		m.setOp(sagadriver.StatusCompensating, fmt.Sprintf("redrive: compensating %v", names))
		m.nextCompensation()
		return
	}
	var first *sagadriver.StepRecord
	verify := false
	for i, sp := range plan.Steps {
		if i >= len(o.Steps) || sp.Action == StepKept {
			continue
		}
		st := &o.Steps[i]
		if sp.Action == StepRunsNewKey {
			st.Key, st.CompKey = redriveKey(*o, *st)
		}
		st.Attempts, st.Verifications = 0, 0
		st.LastError, st.LastErrorClass = "", ""
		st.CompStatus, st.CompAttempts, st.CompError = sagadriver.CompNone, 0, ""
		st.StartedAt, st.FinishedAt = nil, nil
		to := sagadriver.StepPending
		if sp.Action == StepVerifiesFirst {
			to, verify = sagadriver.StepUncertain, true
		} else {
			st.ExternalID, st.Result = "", nil
		}
		m.setStep(st, to, "step_reset", "redrive: "+string(sp.Action), 0)
		if first == nil {
			first = st
		}
	}
	if first == nil {
		// A resume into the appended steps only.
		for i := range o.Steps {
			if o.Steps[i].Status == sagadriver.StepPending {
				first = &o.Steps[i]
				break
			}
		}
	}
	m.setOp(sagadriver.StatusRunning, "redrive: "+msg)
	o.CurrentStep = first.Name
	if verify {
		m.enqueue(jobVerify, first, 0)
		return
	}
	m.enqueue(jobStep, first, 0)
}
