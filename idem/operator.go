package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// OperatorAction is a decision an operator takes on a record.
type OperatorAction string

const (
	// OperatorForget releases the key so that the next request runs. It is
	// refused while a live lease holds the record.
	OperatorForget OperatorAction = "forget"
	// OperatorConfirmHappened records that the effect of a pending or
	// unavailable record happened (with the external reference): the key
	// completes without a replayable response, and is never run again.
	OperatorConfirmHappened OperatorAction = "confirm_happened"
	// OperatorConfirmNotHappened records that the effect of a pending or
	// unavailable record did not happen: the key is released and the next
	// request runs.
	OperatorConfirmNotHappened OperatorAction = "confirm_not_happened"
)

// TransitionError says why an operator action is not legal in a record's
// state. It matches ErrIllegalTransition.
type TransitionError struct {
	Action OperatorAction
	Status string // the record's status as the operator sees it ("stuck" for processing past its lease)
	Reason string
}

// ErrIllegalTransition is matched by every *TransitionError.
var ErrIllegalTransition = errors.New("idem: action not allowed in this state")

func (e *TransitionError) Error() string {
	return fmt.Sprintf("idem: %s is not allowed on a %s record: %s", e.Action, e.Status, e.Reason)
}

// Is reports a match with ErrIllegalTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// CheckOperator is the operator part of the decision table: whether act is
// legal on rec as read (leases judged by rec.ReadAt, the store's clock).
//
//   - forget: any record but one processing under a live lease (its owner
//     is working; forgetting would let a second run start beside it)
//   - confirm (happened or not): pending and unavailable records, and
//     processing records past their lease (a crashed owner)
func CheckOperator(rec idemdriver.Record, act OperatorAction) error {
	status := string(rec.Status)
	if rec.Status == idemdriver.StatusProcessing && !rec.LeaseLive() {
		status = "stuck"
	}
	switch act {
	case OperatorForget:
		if rec.LeaseLive() {
			return &TransitionError{Action: act, Status: status, Reason: "a live lease holds it; wait until " + rec.LeaseExpiresAt.UTC().Format(time.RFC3339)}
		}
		return nil
	case OperatorConfirmHappened, OperatorConfirmNotHappened:
		switch {
		case rec.Status == idemdriver.StatusPending, rec.Status == idemdriver.StatusUnavailable, status == "stuck":
			return nil
		case rec.LeaseLive():
			return &TransitionError{Action: act, Status: status, Reason: "its owner is still running under a live lease"}
		default:
			return &TransitionError{Action: act, Status: status, Reason: "only pending, unavailable or stuck records have an unknown outcome"}
		}
	default:
		return &TransitionError{Action: act, Status: status, Reason: "unknown action"}
	}
}

// Settle applies an operator's decision to rec, which the caller read (in
// the same transaction, through s) and showed to the operator at version
// rec.Version. It checks the transition ([CheckOperator]) and applies it
// with a compare-and-swap on the version: ErrStale if the record changed
// meanwhile. It returns the record after the decision (ok = false when the
// decision removed it). Pass the store of a transaction
// ([idemdriver.TxStore.WithinTx]) to commit the decision with an audit entry.
func (e *Engine) Settle(ctx context.Context, s idemdriver.Store, rec idemdriver.Record, act OperatorAction, externalRef, note string) (idemdriver.Record, bool, error) {
	if err := CheckOperator(rec, act); err != nil {
		return idemdriver.Record{}, false, err
	}
	st := idemdriver.Settlement{Version: rec.Version, Now: e.now()}
	switch act {
	case OperatorForget, OperatorConfirmNotHappened:
		st.Delete = true
	case OperatorConfirmHappened:
		st.Status = idemdriver.StatusCompleted
		st.ExternalRef = externalRef
		st.LastError = shortError(fmt.Errorf("confirmed by an operator: the effect happened; no response to replay. %s", note))
	}
	bctx, cancel := e.bound(ctx)
	defer cancel()
	after, ok, err := s.Settle(bctx, rec.Ident, st)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idem: settle: %w", storeError(err))
	}
	e.log.Info("idem: operator decision applied", "key_id", SafeKeyID(rec.KeyDigest), "operation", rec.Operation, "action", string(act))
	return after, ok, nil
}
