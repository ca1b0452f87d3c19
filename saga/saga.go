package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Definition is an operation type: a name and its ordered steps. Register
// it with [Config.Definitions]; it must not change while operations of its
// type are running, except by appending steps.
type Definition struct {
	// Type names the operation type, e.g. "tenant_signup". Required.
	Type string
	// Steps run in order. At least one; names are unique.
	Steps []Step
	// CompensationOrder, when not empty, lists the names of the steps
	// with a Compensate in the order their compensations run. By default
	// they run in reverse step order.
	CompensationOrder []string
	// Version numbers the definition (SPEC G13); 0 means 1. An operation
	// records the version it started on. Raise it when steps are
	// appended: a redrive with [RedriveParams.Upgrade] moves an operation
	// to the registered version if that version's steps begin with the
	// operation's steps, name for name; any other change is refused.
	Version int
}

func (d Definition) version() int { return max(d.Version, 1) }

// StepFunc performs a step's effect. It must be idempotent under
// StepInput.Key: the external system must recognise a repeated call with
// the same key (a retry after a lost answer) and return the first effect.
// It returns the step's result; an error is classified by [Step.Classify].
// With an error, a Result whose ExternalID names what a partial effect
// left behind is recorded on the step, for its compensation and for
// operators.
type StepFunc func(ctx context.Context, in StepInput) (Result, error)

// VerifyFunc asks the external system whether the step's effect exists,
// using the step's key. It returns Applied with the result, NotApplied, or
// Unknown (or an error, taken as Unknown) when the system cannot tell yet.
type VerifyFunc func(ctx context.Context, in StepInput) (Verification, error)

// CompensateFunc undoes a completed (or possibly applied) step. It must be
// idempotent under StepInput.Key (the compensation's own key), and must
// succeed as a no-op when the effect does not exist (null compensation).
// An error is classified by [Step.Classify]; an uncertain compensation is
// retried, which its idempotency makes safe.
type CompensateFunc func(ctx context.Context, in StepInput) error

// Step declares one step of a [Definition] (SPEC G1).
type Step struct {
	// Name is unique within the definition. Required.
	Name string
	// System names the system the step changes, for the console.
	System string
	// Kind is compensatable (the default), pivot or retriable.
	Kind sagadriver.Kind
	// Do performs the effect. Required.
	Do StepFunc
	// Verify checks the external status by the step's key. Optional, but
	// without it an uncertain outcome goes straight to review_required.
	Verify VerifyFunc
	// Compensate undoes the effect. Optional: a step without it has
	// nothing to undo. It runs for steps that completed or whose outcome
	// is uncertain when a later step fails; a retriable step's own failure
	// never compensates.
	Compensate CompensateFunc
	// CompensateOnFailure says that Do makes several calls, so a failure
	// may leave part of the effect behind: the step's own permanent
	// failure (or exhausted retries) then compensates it too, first.
	CompensateOnFailure bool
	// Retry bounds the executions of Do. Zero fields take the defaults of
	// [DefaultRetry].
	Retry RetryPolicy
	// CompensationRetry bounds the executions of Compensate. Zero fields
	// take the defaults of [DefaultRetry].
	CompensationRetry RetryPolicy
	// Timeout bounds one call of Do, Verify or Compensate; a call that
	// runs out of time has an uncertain outcome. Default 30s.
	Timeout time.Duration
	// VerifyAfter is the wait before the first and between verifications
	// of an uncertain step. Default 5s.
	VerifyAfter time.Duration
	// MaxVerifications caps the verifications of one uncertain outcome;
	// after that the operation is review_required. Default 5.
	MaxVerifications int
	// Classify overrides the classification of Do's and Compensate's
	// errors. Nil uses [Classify].
	Classify func(error) sagadriver.Class
	// Unkeyed declares that Do does not pass StepInput.Key to its system,
	// so a repeated call makes a second effect. A redrive that would run
	// such a step again after its effect happened names it and is refused
	// unless the operator acknowledges it
	// ([RedriveParams.AcceptUnprotected]).
	Unkeyed bool
}

// RetryPolicy bounds the attempts of a step and spaces them out: the n-th
// retry waits Initial·2^(n-1), capped at Max, with ±20% jitter.
type RetryPolicy struct {
	MaxAttempts int
	Initial     time.Duration
	Max         time.Duration
}

// DefaultRetry is the policy for zero fields of a step's RetryPolicy:
// 5 attempts, 1s, 2s, 4s, 8s apart (River's own default, 25 attempts over
// some 20 days, is far too long for provisioning flows).
var DefaultRetry = RetryPolicy{MaxAttempts: 5, Initial: time.Second, Max: time.Minute}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultRetry.MaxAttempts
	}
	if p.Initial <= 0 {
		p.Initial = DefaultRetry.Initial
	}
	if p.Max <= 0 {
		p.Max = max(DefaultRetry.Max, p.Initial)
	}
	return p
}

// Backoff returns the wait before the retry that follows failed attempt
// number attempt (1-based).
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	p = p.withDefaults()
	d := p.Initial
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	jitter := time.Duration(float64(d) * 0.2 * (2*rand.Float64() - 1))
	return max(d+jitter, time.Millisecond)
}

// StepInput is what a step function is given.
type StepInput struct {
	// OperationID and Type identify the operation.
	OperationID string
	Type        string
	// Step is the step's name.
	Step string
	// Key is the stable idempotency key of this action: the step's key
	// ("<operation id>/<step>") for Do and Verify, the compensation's own
	// key ("<operation id>/<step>/compensate") for Compensate (SPEC G1, G6).
	// A redrive that runs a compensated step again gives it a new key
	// ("<operation id>/<step>/redrive-<n>", and "…/compensate" for its
	// compensation): the old one names the effect that was undone.
	Key string
	// StepKey is the step's own key, also when Key is the compensation's:
	// what the external system knows the effect by.
	StepKey string
	// Attempt counts the executions of this action, from 1.
	Attempt int
	// Input is the operation's input as given to Start.
	Input json.RawMessage
	// Results holds the results of the steps completed so far, by name.
	// For Compensate it includes the step's own result.
	Results map[string]Result
}

// Decode unmarshals the operation's input into v.
func (in StepInput) Decode(v any) error {
	if err := json.Unmarshal(in.Input, v); err != nil {
		return fmt.Errorf("saga: decode input of %s: %w", in.OperationID, err)
	}
	return nil
}

// Result is what a completed step recorded.
type Result struct {
	// ExternalID is the identifier of the effect in the external system
	// (a workspace id), shown to operators and used by compensation.
	ExternalID string `json:"external_id,omitempty"`
	// Data is any JSON the later steps or the compensation need.
	Data json.RawMessage `json:"data,omitempty"`
}

// Verification is the answer of a [VerifyFunc].
type Verification struct {
	Outcome Outcome
	// Result is the effect found, when Outcome is Applied.
	Result Result
	// Detail explains the answer, for the event history.
	Detail string
}

// Outcome is what verification found.
type Outcome int

const (
	// Unknown: the external system cannot tell yet.
	Unknown Outcome = iota
	// Applied: the effect exists.
	Applied
	// NotApplied: the effect does not exist; executing the step again with
	// the same key is safe.
	NotApplied
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case NotApplied:
		return "not_applied"
	}
	return "unknown"
}

func validateDefinition(d Definition) error {
	if d.Type == "" {
		return errors.New("saga: definition without a type")
	}
	if len(d.Steps) == 0 {
		return fmt.Errorf("saga: definition %q has no steps", d.Type)
	}
	if d.Version < 0 {
		return fmt.Errorf("saga: definition %q: negative version %d", d.Type, d.Version)
	}
	seen := map[string]bool{}
	for i, s := range d.Steps {
		if s.Name == "" {
			return fmt.Errorf("saga: definition %q: step %d has no name", d.Type, i)
		}
		if seen[s.Name] {
			return fmt.Errorf("saga: definition %q: duplicate step %q", d.Type, s.Name)
		}
		seen[s.Name] = true
		if s.Do == nil {
			return fmt.Errorf("saga: definition %q: step %q has no Do", d.Type, s.Name)
		}
		switch s.Kind {
		case "", sagadriver.Compensatable, sagadriver.Pivot, sagadriver.Retriable:
		default:
			return fmt.Errorf("saga: definition %q: step %q has unknown kind %q", d.Type, s.Name, s.Kind)
		}
	}
	comp := map[string]bool{}
	for _, name := range d.CompensationOrder {
		i := d.stepIndex(name)
		if i < 0 || d.Steps[i].Compensate == nil {
			return fmt.Errorf("saga: definition %q: compensation order names %q, which is not a step with Compensate", d.Type, name)
		}
		if comp[name] {
			return fmt.Errorf("saga: definition %q: compensation order names %q twice", d.Type, name)
		}
		comp[name] = true
	}
	if len(d.CompensationOrder) > 0 {
		for _, s := range d.Steps {
			if s.Compensate != nil && !comp[s.Name] {
				return fmt.Errorf("saga: definition %q: compensation order misses %q", d.Type, s.Name)
			}
		}
	}
	return nil
}

func (d Definition) stepIndex(name string) int {
	for i, s := range d.Steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

func (d Definition) step(name string) (Step, bool) {
	i := d.stepIndex(name)
	if i < 0 {
		return Step{}, false
	}
	return d.Steps[i], true
}

func (s Step) kind() sagadriver.Kind {
	if s.Kind == "" {
		return sagadriver.Compensatable
	}
	return s.Kind
}

func (s Step) timeout() time.Duration {
	if s.Timeout <= 0 {
		return 30 * time.Second
	}
	return s.Timeout
}

func (s Step) verifyAfter() time.Duration {
	if s.VerifyAfter <= 0 {
		return 5 * time.Second
	}
	return s.VerifyAfter
}

func (s Step) maxVerifications() int {
	if s.MaxVerifications <= 0 {
		return 5
	}
	return s.MaxVerifications
}

func (s Step) classify(err error) sagadriver.Class {
	if s.Classify != nil {
		return s.Classify(err)
	}
	return Classify(err)
}
