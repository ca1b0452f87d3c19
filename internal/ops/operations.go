package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// OperationAction is an operator action on a saga operation.
type OperationAction string

// The operator actions on operations, as the console's routes name them.
const (
	// OperationRetry retries a failed, uncertain or stuck step of an
	// operation under review with fresh attempts and the same key, or a
	// step's failed compensation (saga.Runner.RetryStep).
	OperationRetry OperationAction = "retry"
	// OperationConfirm records a step's real outcome as the operator
	// established it (saga.Runner.ConfirmStep).
	OperationConfirm OperationAction = "confirm"
	// OperationCompensate starts compensation (saga.Runner.StartCompensation).
	OperationCompensate OperationAction = "compensate"
	// OperationResolve closes a review with a terminal status and the
	// reason as its resolution (saga.Runner.Resolve).
	OperationResolve OperationAction = "resolve"
	// OperationRedrive resumes at the failed step, re-runs from a step or
	// compensates from a step (saga.Runner.Redrive, SPEC G12).
	OperationRedrive OperationAction = "redrive"
)

// maxOperationID bounds the operation IDs a decision may name.
const maxOperationID = 512

// OperationDecision is an operator's decision on one operation, as the
// form submitted it.
type OperationDecision struct {
	ID      string
	Version int64 // the operation's version when the page was rendered
	Action  OperationAction
	// Step names the step, for OperationRetry and OperationConfirm.
	Step string
	// Happened and ExternalID are the outcome an OperationConfirm records:
	// whether the step's effect exists, and its identifier in the external
	// system (optional).
	Happened   bool
	ExternalID string
	// ResolveTo is the terminal status of an OperationResolve: completed,
	// failed or compensated.
	ResolveTo sagadriver.Status
	// Mode is an OperationRedrive's mode; Step is then the step it starts
	// from (empty for a resume: the failed step).
	Mode saga.RedriveMode
	// AcceptUnprotected acknowledges that an OperationRedrive runs again
	// the steps its plan names unprotected (they pass no key to their
	// system, so a repeat makes a second effect).
	AcceptUnprotected bool
	Reason            string
}

// OperationResult is an applied decision: the operation before and after.
type OperationResult struct {
	Before sagadriver.Operation
	After  sagadriver.Operation
}

// Validate checks the decision's fields before anything is read.
func (d *OperationDecision) Validate() error {
	d.Step = strings.TrimSpace(d.Step)
	d.ExternalID = strings.TrimSpace(d.ExternalID)
	var err error
	if d.Reason, err = validReason("reason", d.Reason); err != nil {
		return err
	}
	switch {
	case d.ID == "" || len(d.ID) > maxOperationID || !utf8.ValidString(d.ID):
		return invalid("id", "not an operation ID")
	case d.Version <= 0:
		return invalid("version", "the form has no operation version; reload the page")
	case len(d.Step) > 255:
		return invalid("step", "at most 255 characters")
	case len(d.ExternalID) > 255 || !utf8.ValidString(d.ExternalID):
		return invalid("external_ref", "at most 255 characters of text")
	}
	switch d.Action {
	case OperationRetry, OperationConfirm:
		if d.Step == "" {
			return invalid("step", "choose the step")
		}
	case OperationCompensate:
	case OperationRedrive:
		switch {
		case !slices.Contains(saga.RedriveModes, d.Mode):
			return invalid("mode", "choose resume, rerun or compensate")
		case d.Mode != saga.RedriveResume && d.Step == "":
			return invalid("step", "choose the step to start from")
		}
	case OperationResolve:
		switch d.ResolveTo {
		case sagadriver.StatusCompleted, sagadriver.StatusFailed, sagadriver.StatusCompensated:
		default:
			return invalid("status", "resolve as completed, failed or compensated")
		}
	default:
		return invalid("action", "unknown action")
	}
	if d.Action != OperationConfirm {
		d.Happened, d.ExternalID = false, ""
	}
	if d.Action != OperationRetry && d.Action != OperationConfirm && d.Action != OperationRedrive {
		d.Step = ""
	}
	if d.Action != OperationRedrive {
		d.Mode, d.AcceptUnprotected = "", false
	}
	if d.Action != OperationResolve {
		d.ResolveTo = ""
	}
	return nil
}

// Operations decides on saga operations whose records are on a database
// of transaction type TTx: retry a step, confirm a step's outcome, start
// compensation, resolve a review. Each decision runs the saga runner's
// operator action (its state machine and version check) and appends the
// audit entry in one transaction.
type Operations[TTx any] struct {
	db     *DB[TTx]
	runner *saga.Runner[TTx]
}

// NewOperations returns the operation decisions of runner on db: each
// runs the runner's operator action (its state machine and version check,
// the …Tx methods) and appends the audit entry in one transaction of db,
// which must be on the runner's database.
//
// The runner needs a River client able to insert jobs (an insert-only
// client is enough: the application's workers run them, on the runner's
// Queue) but no definitions: operator actions use only the records.
func NewOperations[TTx any](db *DB[TTx], runner *saga.Runner[TTx]) (*Operations[TTx], error) {
	if db == nil || runner == nil {
		return nil, errors.New("ops: operations need a database and a saga runner")
	}
	return &Operations[TTx]{db: db, runner: runner}, nil
}

// Decide applies d as actor: in one transaction of its DB it reads and
// locks the operation, refuses the decision if its version is not
// d.Version (ErrStale) or the saga's state machine forbids it
// (ErrIllegal), applies it through the runner (its records, events and
// River jobs), and appends the audit entry. A refused attempt is audited
// as a conflict; an invalid one (a *FieldError) is not a decision and is
// not audited.
func (o *Operations[TTx]) Decide(ctx context.Context, actor Actor, d OperationDecision) (OperationResult, error) {
	if err := d.Validate(); err != nil {
		return OperationResult{}, err
	}
	res, seen, err := o.decide(ctx, actor, d, nil)
	var fe *FieldError
	switch {
	case errors.As(err, &fe):
		return OperationResult{}, err
	case errors.Is(err, ErrNotFound):
		o.refused(ctx, actor, d, nil, "the operation does not exist")
		return OperationResult{}, err
	case errors.Is(err, ErrStale), errors.Is(err, ErrIllegal):
		var before any
		if seen != nil {
			before = operationSnapshot(*seen)
		}
		o.refused(ctx, actor, d, before, err.Error())
		return OperationResult{}, err
	case err != nil:
		return OperationResult{}, fmt.Errorf("ops: %s operation %s: %w", d.Action, d.ID, err)
	}
	return res, nil
}

// Denied audits an attempt the authorization refused.
func (o *Operations[TTx]) Denied(ctx context.Context, actor Actor, action, targetKind, targetID string) error {
	return RecordDenied(ctx, o.db.trail, actor, action, targetKind, targetID)
}

// DataViewed audits that actor was shown an operation's input and its
// steps' results: a read of possibly personal data (SPEC CON K7), as
// Keys.ResponseViewed is for stored responses.
func (o *Operations[TTx]) DataViewed(ctx context.Context, actor Actor, id string) error {
	_, err := o.db.trail.Append(ctx, audit.Entry{Actor: actor.Username, Role: actor.Role, Action: "operation.view_data", TargetKind: "operation",
		TargetID: id, Reason: "input and step results shown on the operation's page", Outcome: audit.OutcomeRead,
		RequestID: actor.RequestID, ClientAddr: actor.ClientAddr, UserAgent: actor.UserAgent})
	return err
}

// History returns the audit entries of one operation, newest first.
func (o *Operations[TTx]) History(ctx context.Context, id string, limit int) ([]audit.Entry, error) {
	return o.db.trail.History(ctx, "operation", id, limit)
}

// refused audits a decision that was not applied, in a transaction of its
// own (appendRefusal).
func (o *Operations[TTx]) refused(ctx context.Context, actor Actor, d OperationDecision, before any, why string) {
	appendRefusal(ctx, o.db.trail, o.db.log, operationEntry(actor, d, before, nil, audit.OutcomeConflict), why)
}

// decide runs d in one transaction: the bulk item's outcome (item, if not
// nil, first), the operation read and its version checked, the runner's
// action, and the audit entry. seen is the operation as read in it, when
// it was read, for the audit entry of a refusal.
func (o *Operations[TTx]) decide(ctx context.Context, actor Actor, d OperationDecision, item *bulkItem) (res OperationResult, seen *sagadriver.Operation, err error) {
	err = o.db.within(ctx, func(ctx context.Context, tx TTx) error {
		if err := o.db.markItem(ctx, tx, item); err != nil {
			return err
		}
		cur, err := o.runner.GetTx(ctx, tx, d.ID)
		switch {
		case errors.Is(err, saga.ErrNotFound):
			return ErrNotFound
		case err != nil:
			return err
		}
		seen = &cur
		if cur.Version != d.Version {
			return ErrStale
		}
		if d.Step != "" {
			if _, ok := cur.Step(d.Step); !ok {
				return invalid("step", fmt.Sprintf("the operation has no step %q", d.Step))
			}
		}
		p := saga.ActionParams{OperationID: d.ID, Step: d.Step, Version: d.Version, Actor: actor.Username, Note: d.Reason}
		var ch saga.Change
		switch d.Action {
		case OperationRetry:
			ch, err = o.runner.RetryStepTx(ctx, tx, p)
		case OperationConfirm:
			ch, err = o.runner.ConfirmStepTx(ctx, tx, saga.ConfirmParams{ActionParams: p, Happened: d.Happened, ExternalID: d.ExternalID})
		case OperationCompensate:
			ch, err = o.runner.StartCompensationTx(ctx, tx, p)
		case OperationResolve:
			ch, err = o.runner.ResolveTx(ctx, tx, p, d.ResolveTo)
		case OperationRedrive:
			ch, err = o.runner.RedriveTx(ctx, tx, saga.RedriveParams{ActionParams: p, Mode: d.Mode, AcceptUnprotected: d.AcceptUnprotected})
			if errors.Is(err, saga.ErrUnprotected) {
				return invalid("accept_unprotected", strings.TrimPrefix(err.Error(), "saga: "))
			}
		default:
			return invalid("action", "unknown action")
		}
		var te *saga.TransitionError
		switch {
		case errors.Is(err, saga.ErrStale):
			return ErrStale
		case errors.As(err, &te):
			return fmt.Errorf("%w: %w", ErrIllegal, err)
		case err != nil:
			return err
		}
		res = OperationResult{Before: ch.Before, After: ch.After}
		after := operationSnapshot(ch.After)
		if d.Action == OperationRedrive {
			after["redrive"] = redriveSnapshot(d, ch.Before)
		}
		// Last, just before the commit: the append serialises with every
		// other append until this transaction ends.
		_, err = o.db.appendTx(ctx, tx, operationEntry(actor, d, operationSnapshot(ch.Before), after, audit.OutcomeApplied))
		return err
	})
	return res, seen, err
}

func operationEntry(actor Actor, d OperationDecision, before, after any, outcome string) audit.Entry {
	return audit.Entry{Actor: actor.Username, Role: actor.Role, Action: "operation." + string(d.Action), TargetKind: "operation", TargetID: d.ID,
		Reason: d.Reason, Before: mustJSON(before), After: mustJSON(after), Outcome: outcome,
		RequestID: actor.RequestID, ClientAddr: actor.ClientAddr, UserAgent: actor.UserAgent}
}

// operationSnapshot is the audited state of an operation: its status and
// its steps', without its input or the steps' results, which may hold
// personal data.
func operationSnapshot(op sagadriver.Operation) map[string]any {
	steps := make([]map[string]any, 0, len(op.Steps))
	for _, st := range op.Steps {
		s := map[string]any{"name": st.Name, "status": string(st.Status), "attempts": st.Attempts, "external_id": st.ExternalID}
		if st.LastError != "" {
			s["last_error"] = st.LastError
		}
		if st.CompStatus != sagadriver.CompNone {
			s["compensation"] = string(st.CompStatus)
			s["compensation_attempts"] = st.CompAttempts
		}
		steps = append(steps, s)
	}
	s := map[string]any{
		"id": op.ID, "type": op.Type, "status": string(op.Status), "version": op.Version, "current_step": op.CurrentStep,
		"correlation_id": op.CorrelationID, "review_reason": op.ReviewReason, "resolution": op.Resolution, "last_error": op.LastError,
		"updated_at": op.UpdatedAt.UTC().Format(time.RFC3339Nano), "steps": steps,
		"definition_version": max(op.DefinitionVersion, 1),
	}
	return s
}

// redriveSnapshot is what the audit entry of a redrive records of it: the
// mode, the step it started from, and what it did with each step, with
// the unprotected steps the operator acknowledged.
func redriveSnapshot(d OperationDecision, before sagadriver.Operation) map[string]any {
	out := map[string]any{"mode": string(d.Mode), "from": d.Step}
	plan, err := saga.PlanRedriveOf(before, saga.RedriveParams{ActionParams: saga.ActionParams{Step: d.Step}, Mode: d.Mode})
	if err != nil {
		return out
	}
	out["from"] = plan.From
	steps := map[string]string{}
	for _, sp := range plan.Steps {
		steps[sp.Step] = string(sp.Action)
	}
	out["steps"] = steps
	if len(plan.Unprotected) > 0 {
		out["unprotected_acknowledged"] = plan.Unprotected
	}
	return out
}

// StepChoice is a step an action may name.
type StepChoice struct {
	Name   string
	Status sagadriver.StepStatus
	// NotHappened says whether a confirmation may say the effect did not
	// happen (not for a failed compensation: that one is retried).
	NotHappened bool
}

// LegalActions are the operator actions the saga's state machine accepts
// on an operation in its current state.
type LegalActions struct {
	// Retry lists the steps that can be retried (a forward step, or a
	// failed compensation).
	Retry []StepChoice
	// Confirm lists the steps whose outcome can be confirmed.
	Confirm []StepChoice
	// Compensate says whether compensation can be started.
	Compensate bool
	// Resolve says whether the review can be closed.
	Resolve bool
	// Redrive lists the redrives legal on the operation's record.
	Redrive []saga.RedriveChoice
}

// Any reports whether some action is legal.
func (l LegalActions) Any() bool {
	return len(l.Retry) > 0 || len(l.Confirm) > 0 || l.Compensate || l.Resolve || len(l.Redrive) > 0
}

// Legal returns the operator actions the saga's state machine
// (saga/machine.go) accepts on op: the console offers only these. The
// engine still decides when the decision is applied; a state that moved
// on in between is refused there (ErrStale or ErrIllegal).
func Legal(op sagadriver.Operation) LegalActions {
	var l LegalActions
	compStarted := false
	for _, st := range op.Steps {
		if st.CompStatus != sagadriver.CompNone {
			compStarted = true
		}
	}
	if op.Status == sagadriver.StatusReviewRequired {
		for _, st := range op.Steps {
			switch st.Status {
			case sagadriver.StepFailed, sagadriver.StepUncertain, sagadriver.StepRunning, sagadriver.StepRetrying:
				if !compStarted {
					l.Retry = append(l.Retry, StepChoice{Name: st.Name, Status: st.Status, NotHappened: true})
					l.Confirm = append(l.Confirm, StepChoice{Name: st.Name, Status: st.Status, NotHappened: true})
				}
			case sagadriver.StepCompensationFailed:
				l.Retry = append(l.Retry, StepChoice{Name: st.Name, Status: st.Status})
				l.Confirm = append(l.Confirm, StepChoice{Name: st.Name, Status: st.Status})
			}
		}
		l.Resolve = true
	}
	l.Compensate = (op.Status == sagadriver.StatusReviewRequired || op.Status == sagadriver.StatusRunning) && !compStarted
	l.Redrive = saga.RedriveChoices(op)
	return l
}
