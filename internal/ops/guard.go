package ops

import (
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/store"
)

// FieldAcknowledgeRerun is the form field of a forget's acknowledgement
// that the client's retry runs the operation again (SPEC K20).
const FieldAcknowledgeRerun = "acknowledge_rerun"

// ForgetRisk says why forgetting r may cause the duplicate the engine
// prevents: its effect may have happened, so the client's next request
// with the key runs the operation again (SPEC K20). It is "" only for a
// record whose callback failed before any effect (failed, no external
// reference). Completed and unavailable records ran; pending and stuck
// ones have an unknown outcome; an external reference shows where an
// effect landed.
func ForgetRisk(r idemdriver.Record) string {
	switch {
	case r.ExternalRef != "":
		return "it carries the external reference " + r.ExternalRef + ": the effect may exist there"
	case r.Status == idemdriver.StatusCompleted:
		return "it completed: the effect happened"
	case r.Status == idemdriver.StatusUnavailable:
		return "it ran, and its result could not be stored: the effect happened"
	case r.Status == idemdriver.StatusPending:
		return "its outcome is unknown: the effect may have happened"
	case r.Status == idemdriver.StatusProcessing:
		return "its owner stopped without an outcome: the effect may have happened"
	}
	return ""
}

// RerunConsequence is what forgetting r, whose effect may have happened,
// does: the words an operator acknowledges.
func RerunConsequence(r idemdriver.Record) string {
	return "The client's next request with this key runs the operation (" + r.Operation + ") again: the effect happens a second time (for a payment, a second charge)."
}

// checkForget refuses a forget of a record whose effect may have happened
// unless d acknowledges the rerun; every other decision passes.
func checkForget(d KeyDecision, r idemdriver.Record) error {
	if d.Action != idem.OperatorForget || d.AcknowledgeRerun {
		return nil
	}
	if why := ForgetRisk(r); why != "" {
		return invalid(FieldAcknowledgeRerun, "not forgotten: "+why+"; verify it or confirm that it happened, or acknowledge that the client's retry runs the operation again")
	}
	return nil
}

// deletedState is the audited state after a decision that removed r:
// for a forget of a record whose effect may have happened, with what the
// operator acknowledged.
func deletedState(d KeyDecision, r idemdriver.Record) map[string]any {
	s := map[string]any{"deleted": true}
	if why := ForgetRisk(r); d.Action == idem.OperatorForget && why != "" {
		s["acknowledged"] = map[string]string{"risk": why, "consequence": RerunConsequence(r)}
	}
	return s
}

// tombstone is what remains of r, removed by d as actor.
func tombstone(actor Actor, d KeyDecision, r idemdriver.Record) store.Tombstone {
	return store.Tombstone{RecordID: r.ID, Scope: r.Scope, Operation: r.Operation, KeyDigest: r.KeyDigest, KeyHash: r.KeyHash,
		Status: string(r.Status), ExternalRef: r.ExternalRef, Action: string(d.Action), Actor: actor.Username, Reason: d.Reason, At: time.Now().UTC()}
}
