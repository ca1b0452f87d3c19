package saga

import (
	"context"
	"errors"
	"fmt"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// classifiedError carries a class chosen by the step function.
type classifiedError struct {
	class sagadriver.Class
	err   error
}

func (e *classifiedError) Error() string { return e.err.Error() }
func (e *classifiedError) Unwrap() error { return e.err }

// Transient marks err as transient: retry with the same key. Nil stays nil.
func Transient(err error) error { return mark(sagadriver.ClassTransient, err) }

// Permanent marks err as permanent: the step cannot succeed. Nil stays nil.
func Permanent(err error) error { return mark(sagadriver.ClassPermanent, err) }

// Uncertain marks err as an unknown outcome: the effect may have happened.
// Nil stays nil.
func Uncertain(err error) error { return mark(sagadriver.ClassUncertain, err) }

func mark(c sagadriver.Class, err error) error {
	if err == nil {
		return nil
	}
	return &classifiedError{class: c, err: err}
}

// Classify is the default classification: the class given by [Transient],
// [Permanent] or [Uncertain] anywhere in err's chain (the outermost wins);
// otherwise a deadline exceeded is uncertain (the step's Timeout ran out
// while the call was in flight); anything else is transient.
func Classify(err error) sagadriver.Class {
	var ce *classifiedError
	if errors.As(err, &ce) {
		return ce.class
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return sagadriver.ClassUncertain
	}
	return sagadriver.ClassTransient
}

// TransitionError is returned for an action that the operation's or the
// step's current status does not allow. Nothing was applied.
type TransitionError struct {
	Action     string
	Operation  sagadriver.Status
	Step       string
	StepStatus sagadriver.StepStatus
	Reason     string
}

func (e *TransitionError) Error() string {
	if e.Step != "" {
		return fmt.Sprintf("saga: cannot %s: operation is %s, step %s is %s: %s", e.Action, e.Operation, e.Step, e.StepStatus, e.Reason)
	}
	return fmt.Sprintf("saga: cannot %s: operation is %s: %s", e.Action, e.Operation, e.Reason)
}
