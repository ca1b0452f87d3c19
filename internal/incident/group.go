package incident

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Kinds of incident group: of idempotency keys or of saga operations.
const (
	KindKey       = "key"
	KindOperation = "operation"
)

// KeyStates are the key states that make incidents, in display order:
// "stuck" is processing past its lease.
var KeyStates = []string{"stuck", "pending", "unavailable", "failed"}

// OperationStates are the operation statuses that make incidents.
var OperationStates = []sagadriver.Status{sagadriver.StatusReviewRequired, sagadriver.StatusFailed}

// consoleOperationPrefix marks the console's own decision records (the
// idempotency of its forms): never a customer's incident.
const consoleOperationPrefix = "console "

// Fields is what identifies an incident group: two records with equal
// Fields are one group.
type Fields struct {
	// Kind is KindKey or KindOperation.
	Kind string
	// State is the key's state (stuck, pending, unavailable, failed) or the
	// operation's status (review_required, failed).
	State string
	// Operation is the key's operation (route or job) or the saga type.
	Operation string
	// Step is the operation's current step; "" for keys.
	Step string
	// Class is the error class: the review reason of an operation, else
	// its state; the state for keys.
	Class string
	// Message is the normalized message ([Normalize]).
	Message string
	// System is the external system of the operation's step, where known.
	System string
}

// Key is the group's identity: 24 hex digits of the SHA-256 of the fields.
// It is safe in a URL and says nothing of the messages.
func (f Fields) Key() string {
	h := sha256.New()
	for _, s := range []string{f.Kind, f.State, f.Operation, f.Step, f.Class, f.Message, f.System} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// ValidKey reports whether s looks like a [Fields.Key].
func ValidKey(s string) bool {
	if len(s) != 24 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// KeyState is the incident state of a key record: "stuck" for processing
// past its lease (by the store's clock, rec.ReadAt), else its status; ok is
// false for a record that makes no incident (completed, processing under
// a live lease, or one of the console's own).
func KeyState(rec idemdriver.Record) (state string, ok bool) {
	if strings.HasPrefix(rec.Operation, consoleOperationPrefix) {
		return "", false
	}
	switch rec.Status {
	case idemdriver.StatusProcessing:
		if rec.LeaseLive() {
			return "", false
		}
		return "stuck", true
	case idemdriver.StatusPending, idemdriver.StatusUnavailable, idemdriver.StatusFailed:
		return string(rec.Status), true
	}
	return "", false
}

// KeyMessage is the message a key record is grouped by: its LastError,
// else what its state says.
func KeyMessage(rec idemdriver.Record, state string) string {
	switch {
	case rec.LastError != "":
		return rec.LastError
	case state == "stuck":
		return "processing past its lease: its owner is presumably gone"
	case rec.ResponseCode != 0:
		return "HTTP " + strconv.Itoa(rec.ResponseCode)
	}
	return state
}

// KeyFields returns the group of a key record; ok is false when it makes
// no incident (see [KeyState]).
func KeyFields(rec idemdriver.Record) (Fields, bool) {
	state, ok := KeyState(rec)
	if !ok {
		return Fields{}, false
	}
	return Fields{Kind: KindKey, State: state, Operation: rec.Operation, Class: state,
		Message: Normalize(KeyMessage(rec, state))}, true
}

// OperationFields returns the group of an operation in one of
// OperationStates; system is its current step's external system ("" if
// unknown). ok is false for an operation in another status.
func OperationFields(op sagadriver.Operation, system string) (Fields, bool) {
	if op.Status != sagadriver.StatusReviewRequired && op.Status != sagadriver.StatusFailed {
		return Fields{}, false
	}
	class := op.ReviewReason
	if class == "" {
		class = string(op.Status)
	}
	msg := op.LastError
	if msg == "" {
		msg = class
	}
	return Fields{Kind: KindOperation, State: string(op.Status), Operation: op.Type, Step: op.CurrentStep, Class: class,
		Message: Normalize(msg), System: system}, true
}
