package saga

import (
	"context"
	"errors"
	"fmt"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"slices"
	"strconv"
	"strings"
)

// RedriveMode says what a redrive does (SPEC G12).
type RedriveMode string

const (
	// RedriveResume resumes the operation at the step that failed, with
	// the recorded input and the same operation ID; the steps before it
	// are not run again.
	RedriveResume RedriveMode = "resume"
	// RedriveRerun runs the steps from RedriveParams.Step onward again,
	// each with its own idempotency key: a step whose effect happened
	// replays it, a step whose effect was compensated runs with a new key.
	RedriveRerun RedriveMode = "rerun"
	// RedriveCompensate compensates the steps from RedriveParams.Step
	// onward whose effect happened, in the definition's compensation
	// order; the steps before it keep their effects.
	RedriveCompensate RedriveMode = "compensate"
)

// RedriveModes are the modes in the order a console offers them.
var RedriveModes = []RedriveMode{RedriveResume, RedriveRerun, RedriveCompensate}

// RedriveParams identify a redrive. ActionParams.Step is step k: where a
// rerun or a compensation starts; for a resume it may be left empty (the
// failed step) or name the failed step.
type RedriveParams struct {
	ActionParams
	Mode RedriveMode
	// Upgrade moves the operation to the registered version of its
	// definition (SPEC G13), whose steps must begin with the operation's;
	// appended steps run after the operation's own.
	Upgrade bool
	// AcceptUnprotected acknowledges the steps the plan marks
	// [StepRunsUnprotected]: without it such a redrive is refused with
	// [ErrUnprotected].
	AcceptUnprotected bool
}

// StepAction is what a redrive does with one step.
type StepAction string

const (
	// StepKept: before step k; its effect stays and it does not run.
	StepKept StepAction = "kept"
	// StepReplays: its effect happened; it runs again with its recorded
	// key, so the system answers with the first effect instead of making
	// a second.
	StepReplays StepAction = "replays"
	// StepVerifiesFirst: its outcome is uncertain; its Verify asks the
	// system by the step's key before anything runs.
	StepVerifiesFirst StepAction = "verifies_first"
	// StepRunsAgain: no effect of it is recorded; it runs with its key.
	StepRunsAgain StepAction = "runs_again"
	// StepRunsNewKey: its effect was compensated; it runs again with a new
	// key, which makes a new effect.
	StepRunsNewKey StepAction = "runs_new_key"
	// StepRunsUnprotected: its effect happened (or may have) and it passes
	// no key to its system ([Step.Unkeyed]): running it again makes a
	// second effect.
	StepRunsUnprotected StepAction = "runs_unprotected"
	// StepAppended: the newer definition's step, run for the first time.
	StepAppended StepAction = "appended"
	// StepCompensates: its effect is undone.
	StepCompensates StepAction = "compensates"
	// StepNotRun: not reached; it is skipped.
	StepNotRun StepAction = "not_run"
)

// StepPlan is what a redrive does with one step, and why.
type StepPlan struct {
	Step   string
	Status sagadriver.StepStatus
	Action StepAction
	Why    string
}

// RedrivePlan is the preview of a redrive: what happens to each step.
type RedrivePlan struct {
	OperationID string
	// Version is the operation's version the plan was made from.
	Version int64
	Mode    RedriveMode
	// From is step k.
	From string
	// FromDefinition and ToDefinition are the definition versions before
	// and after; they differ only with an upgrade.
	FromDefinition, ToDefinition int
	Steps                        []StepPlan
	// Unprotected names the steps that would make a second effect.
	Unprotected []string
}

// ErrUnprotected is returned for a redrive that would run a step again
// without the protection of its key ([Step.Unkeyed]) and was not
// acknowledged ([RedriveParams.AcceptUnprotected]). Nothing was applied.
var ErrUnprotected = errors.New("saga: redrive would repeat an effect without an idempotency key")

// PlanRedrive previews a redrive of the operation as it is now, without
// changing anything. A redrive that is not legal returns the
// *TransitionError that Redrive would.
func (r *Runner[TTx]) PlanRedrive(ctx context.Context, p RedriveParams) (RedrivePlan, error) {
	op, err := r.Get(ctx, p.OperationID)
	if err != nil {
		return RedrivePlan{}, err
	}
	plan, _, err := r.planRedrive(op, p)
	return plan, err
}

// Redrive resumes, re-runs from step k or compensates from step k an
// operation that is failed or under review, or re-runs a compensated one
// from step k (SPEC G12), in one transaction of its own. A completed
// operation is not redriven.
func (r *Runner[TTx]) Redrive(ctx context.Context, p RedriveParams) (Change, error) {
	return r.within(ctx, func(ctx context.Context, tx TTx) (Change, error) { return r.RedriveTx(ctx, tx, p) })
}

// RedriveTx is Redrive in the caller's transaction, with the River job
// inserted in it; the caller commits. The operation must be at
// p.Version (ErrStale otherwise), not moving (running, pending or
// compensating), and the plan's unprotected steps acknowledged.
func (r *Runner[TTx]) RedriveTx(ctx context.Context, tx TTx, p RedriveParams) (Change, error) {
	return r.act(ctx, tx, p.ActionParams, func(op sagadriver.Operation) (signal, error) {
		plan, spec, err := r.planRedrive(op, p)
		if err != nil {
			return signal{}, err
		}
		if len(plan.Unprotected) > 0 && !p.AcceptUnprotected {
			return signal{}, fmt.Errorf("%w: %s would run again and make a second effect; acknowledge it to redrive",
				ErrUnprotected, strings.Join(plan.Unprotected, ", "))
		}
		return signal{kind: opRedrive, note: p.Note, redrive: spec}, nil
	})
}

// redriveSpec is a planned redrive as the state machine applies it.
type redriveSpec struct {
	plan RedrivePlan
	// from is step k's index.
	from int
	// appended are the records of the newer definition's new steps.
	appended []sagadriver.StepRecord
	// refresh are the records of steps from k onward as the newer
	// definition declares them (kind, retries, compensation), by name.
	refresh map[string]sagadriver.StepRecord
}

// PlanRedriveOf previews a redrive of op from its record alone, as a
// process without op's definition (a console) plans it: every redrive but
// an upgrade, which needs the definition.
func PlanRedriveOf(op sagadriver.Operation, p RedriveParams) (RedrivePlan, error) {
	plan, _, err := planRedrive(op, p, nil)
	return plan, err
}

// RedriveChoice is a redrive legal on an operation: a mode and the steps
// it may start from.
type RedriveChoice struct {
	Mode  RedriveMode
	Steps []string
}

// RedriveChoices lists the redrives legal on op as its record stands, in
// the order of RedriveModes; none for an operation that is moving.
func RedriveChoices(op sagadriver.Operation) []RedriveChoice {
	var out []RedriveChoice
	for _, mode := range RedriveModes {
		c := RedriveChoice{Mode: mode}
		if mode == RedriveResume {
			if plan, err := PlanRedriveOf(op, RedriveParams{Mode: mode}); err == nil {
				c.Steps = []string{plan.From}
			}
		} else {
			for _, st := range op.Steps {
				if _, err := PlanRedriveOf(op, RedriveParams{ActionParams: ActionParams{Step: st.Name}, Mode: mode}); err == nil {
					c.Steps = append(c.Steps, st.Name)
				}
			}
		}
		if len(c.Steps) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// planRedrive decides what a redrive of op does with each step, with the
// registered definition of its type if there is one.
func (r *Runner[TTx]) planRedrive(op sagadriver.Operation, p RedriveParams) (RedrivePlan, *redriveSpec, error) {
	var def *Definition
	if d, ok := r.defs[op.Type]; ok {
		def = &d
	}
	return planRedrive(op, p, def)
}

// planRedrive decides what a redrive of op does with each step; def, when
// not nil, is the registered definition of its type (for an upgrade).
func planRedrive(op sagadriver.Operation, p RedriveParams, def *Definition) (RedrivePlan, *redriveSpec, error) {
	mode := p.Mode
	if mode == "" {
		mode = RedriveResume
	}
	action := "redrive (" + string(mode) + ")"
	illegal := func(reason string) error {
		return &TransitionError{Action: action, Operation: op.Status, Reason: reason}
	}
	if !slices.Contains(RedriveModes, mode) {
		return RedrivePlan{}, nil, illegal(fmt.Sprintf("unknown mode %q: resume, rerun or compensate", mode))
	}
	switch op.Status {
	case sagadriver.StatusFailed, sagadriver.StatusReviewRequired:
	case sagadriver.StatusCompensated:
		if mode != RedriveRerun {
			return RedrivePlan{}, nil, illegal("a compensated operation can only be re-run from a step")
		}
	default:
		return RedrivePlan{}, nil, illegal("the operation is moving; redrive it once it has stopped")
	}
	for _, st := range op.Steps {
		if st.CompStatus == sagadriver.CompFailed || st.CompStatus == sagadriver.CompPending || st.CompStatus == sagadriver.CompRunning || st.CompStatus == sagadriver.CompRetrying {
			return RedrivePlan{}, nil, illegal("the compensation of " + st.Name + " is unfinished; retry or confirm it first")
		}
	}
	spec := &redriveSpec{from: -1}
	plan := RedrivePlan{OperationID: op.ID, Version: op.Version, Mode: mode,
		FromDefinition: max(op.DefinitionVersion, 1)}
	plan.ToDefinition = plan.FromDefinition
	if p.Upgrade {
		if def == nil {
			return RedrivePlan{}, nil, illegal("this process has no definition of type " + op.Type + ": only the application that registers it can move operations to its newer version")
		}
		if err := upgrade(op, *def, spec, &plan); err != nil {
			return RedrivePlan{}, nil, illegal(err.Error())
		}
	}
	switch mode {
	case RedriveResume:
		for i, st := range op.Steps {
			if st.Status != sagadriver.StepCompleted {
				spec.from = i
				break
			}
		}
		if spec.from < 0 && len(spec.appended) == 0 {
			return RedrivePlan{}, nil, illegal("every step completed; nothing to resume")
		}
		if spec.from >= 0 && op.Steps[spec.from].Status == sagadriver.StepCompensated {
			return RedrivePlan{}, nil, illegal("its steps were compensated; re-run from a step instead")
		}
		if p.Step != "" && (spec.from < 0 || op.Steps[spec.from].Name != p.Step) {
			return RedrivePlan{}, nil, illegal("a resume starts at the failed step, not at " + p.Step + "; re-run from it instead")
		}
	default:
		if p.Step == "" {
			return RedrivePlan{}, nil, illegal("name the step to start from")
		}
		spec.from = slices.IndexFunc(op.Steps, func(st sagadriver.StepRecord) bool { return st.Name == p.Step })
		if spec.from < 0 {
			return RedrivePlan{}, nil, fmt.Errorf("%w: step %q of operation %s", ErrNotFound, p.Step, op.ID)
		}
	}
	from := spec.from
	if from < 0 {
		from = len(op.Steps) // resume straight into the appended steps
	} else {
		plan.From = op.Steps[from].Name
	}
	for i, st := range op.Steps {
		sp := StepPlan{Step: st.Name, Status: st.Status}
		switch {
		case i < from && mode != RedriveCompensate && st.Status != sagadriver.StepCompleted:
			return RedrivePlan{}, nil, illegal(fmt.Sprintf("step %s before %s is %s: re-run from %s or earlier", st.Name, plan.From, st.Status, st.Name))
		case i < from:
			sp.Action, sp.Why = StepKept, "before "+plan.From+": its effect stays"
		case mode == RedriveCompensate:
			effect := st.Status == sagadriver.StepCompleted || st.Status == sagadriver.StepUncertain || st.Status == sagadriver.StepRunning
			switch {
			case effect && st.Compensable:
				sp.Action, sp.Why = StepCompensates, "its effect is undone with the compensation's own key"
			case effect:
				sp.Action, sp.Why = StepKept, "its effect stays: the step has no compensation"
			default:
				sp.Action, sp.Why = StepNotRun, "no effect to undo"
			}
		default:
			if rec, ok := spec.refresh[st.Name]; ok {
				// As the newer definition declares the step.
				st.Unkeyed, st.Verifiable = rec.Unkeyed, rec.Verifiable
			}
			sp.Action, sp.Why = rerunAction(st, i == from)
			if sp.Action == StepRunsUnprotected {
				plan.Unprotected = append(plan.Unprotected, st.Name)
			}
		}
		plan.Steps = append(plan.Steps, sp)
	}
	if mode == RedriveCompensate && !slices.ContainsFunc(plan.Steps, func(sp StepPlan) bool { return sp.Action == StepCompensates }) {
		return RedrivePlan{}, nil, illegal("no step from " + plan.From + " on has an effect to undo")
	}
	for _, st := range spec.appended {
		plan.Steps = append(plan.Steps, StepPlan{Step: st.Name, Status: st.Status, Action: StepAppended,
			Why: fmt.Sprintf("new in version %d of the definition", plan.ToDefinition)})
	}
	spec.plan = plan
	return plan, spec, nil
}

// rerunAction is what a re-run does with step st at or after step k, from
// its record alone; first says it is step k, where an uncertain outcome
// is verified before anything runs.
func rerunAction(st sagadriver.StepRecord, first bool) (StepAction, string) {
	switch st.Status {
	case sagadriver.StepCompensated:
		return StepRunsNewKey, "its effect was compensated: a new key makes a new effect"
	case sagadriver.StepCompleted:
		if st.Unkeyed {
			return StepRunsUnprotected, "its effect happened and it passes no key to " + system(st)
		}
		return StepReplays, "its effect happened: " + system(st) + " answers its key " + st.Key + " with the first effect"
	case sagadriver.StepUncertain, sagadriver.StepRunning, sagadriver.StepRetrying:
		if first && st.Verifiable {
			return StepVerifiesFirst, "its outcome is uncertain: verified by its key before it runs"
		}
		if st.Unkeyed {
			return StepRunsUnprotected, "its effect may have happened and it passes no key to " + system(st)
		}
		return StepReplays, "its outcome is uncertain: its key " + st.Key + " makes a repeat safe"
	default:
		return StepRunsAgain, "no effect of it is recorded"
	}
}

func system(st sagadriver.StepRecord) string {
	if st.System != "" {
		return st.System
	}
	return "its system"
}

// upgrade checks that def can take over op and records what it changes.
func upgrade(op sagadriver.Operation, def Definition, spec *redriveSpec, plan *RedrivePlan) error {
	have, want := max(op.DefinitionVersion, 1), def.version()
	if want < have {
		return fmt.Errorf("the registered definition is version %d, older than the operation's %d", want, have)
	}
	if len(def.Steps) < len(op.Steps) {
		return fmt.Errorf("version %d has %d steps, the operation %d: steps may only be appended", want, len(def.Steps), len(op.Steps))
	}
	for i, st := range op.Steps {
		if def.Steps[i].Name != st.Name {
			return fmt.Errorf("version %d has step %q where the operation has %q (position %d): only appended steps are compatible",
				want, def.Steps[i].Name, st.Name, i+1)
		}
	}
	plan.ToDefinition = want
	spec.refresh = map[string]sagadriver.StepRecord{}
	for i := range def.Steps {
		rec := stepRecord(op.ID, def, i, op.UpdatedAt)
		if i < len(op.Steps) {
			spec.refresh[rec.Name] = rec
		} else {
			spec.appended = append(spec.appended, rec)
		}
	}
	return nil
}

// redriveKey is the key of a step that runs again after its effect was
// compensated: the old key would make the system answer with the undone
// effect.
func redriveKey(op sagadriver.Operation, st sagadriver.StepRecord) (key, compKey string) {
	base := op.ID + "/" + st.Name + "/redrive-" + strconv.FormatInt(op.Version, 10)
	return base, base + "/compensate"
}
