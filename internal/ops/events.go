package ops

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// EventInserter inserts a decision's event job in the decision's
// transaction: an insert-only River client on the application's River
// tables (*river.Client[TTx]), the one the saga runner inserts with.
type EventInserter[TTx any] interface {
	InsertTx(ctx context.Context, tx TTx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// eventMarker is what the After of a decision's audit entry carries when
// the decision emitted an event: the next event on the same target finds
// its Previous by it (audit.Trail.LastMarkedPgxTx).
const eventMarker = `"decision_event":true`

// EventMarker is eventMarker, for the readers of the trail: an applied
// entry whose After contains it emitted a decision event.
const EventMarker = eventMarker

// eventDataKey is the member of a marked entry's After that holds what the
// entry alone does not say of its event: type, subject and outcome
// (eventData). The webhook relay rebuilds the event from it ([EventOf]).
const eventDataKey = "decision_event_data"

// eventData is the part of an event recorded in its entry's After.
type eventData struct {
	Type    string           `json:"type"`
	Subject decision.Subject `json:"subject"`
	Outcome string           `json:"outcome,omitempty"`
}

// EventID is the ID of the event of the decision audited as entry seq.
func EventID(seq int64) string { return "dec_" + strconv.FormatInt(seq, 10) }

// EventOf rebuilds the event of e, an entry marked with EventMarker, as
// appendDecision made it, but for Previous and PreviousTime, which the
// caller finds (the newest earlier marked entry on e's target). ok is
// false for an entry that carries no event data (one appended before the
// data was recorded, or not a decision's).
func EventOf(e audit.Entry) (ev decision.Event, ok bool) {
	var after map[string]json.RawMessage
	if json.Unmarshal(e.After, &after) != nil || string(after["decision_event"]) != "true" {
		return ev, false
	}
	var data eventData
	if raw, has := after[eventDataKey]; !has || json.Unmarshal(raw, &data) != nil || data.Type == "" {
		return ev, false
	}
	return decision.Event{ID: EventID(e.Seq), Type: data.Type, Subject: data.Subject, Outcome: data.Outcome,
		Actor: e.Actor, Reason: e.Reason, RequestID: e.RequestID, Time: e.At}, true
}

// EmitEvents makes every decision applied on d from now on emit a
// decision event (package decision) in its transaction, after its audit
// entry: a job of kind decision.Kind inserted with ins on queue (""
// decision.DefaultQueue). A decision that rolls back emits nothing. Call
// it before decisions are served; MySQL (no River) is refused.
func (d *DB[TTx]) EmitEvents(ins EventInserter[TTx], queue string) error {
	if ins == nil {
		return errors.New("ops: decision events need a River client")
	}
	if d.trail.Dialect() == audit.DialectMySQL {
		return errors.New("ops: decision events need River, which has no MySQL driver")
	}
	if queue == "" {
		queue = decision.DefaultQueue
	}
	d.events, d.eventQueue = ins, queue
	return nil
}

// appendDecision appends e, an applied decision's entry, in tx, and with
// events on inserts its event of type typ on subj in tx: its ID from the
// entry's seq, its Previous the newest earlier entry on the same target
// that emitted one. ev brings the type, subject and outcome; the rest is
// the entry's.
func (d *DB[TTx]) appendDecision(ctx context.Context, tx TTx, e audit.Entry, ev decision.Event) (audit.Entry, error) {
	if d.events == nil {
		return d.appendTx(ctx, tx, e)
	}
	data, err := json.Marshal(eventData{Type: ev.Type, Subject: ev.Subject, Outcome: ev.Outcome})
	if err != nil {
		return audit.Entry{}, err
	}
	e.After = withMarker(e.After, data)
	out, err := d.appendTx(ctx, tx, e)
	if err != nil {
		return out, err
	}
	prev, ok, err := d.tx.lastMarkedTx(ctx, tx, out.TargetKind, out.TargetID, eventMarker, out.Seq)
	if err != nil {
		return out, err
	}
	ev.ID, ev.Actor, ev.Reason, ev.RequestID, ev.Time = EventID(out.Seq), out.Actor, out.Reason, out.RequestID, out.At
	if ok {
		ev.Previous, ev.PreviousTime = EventID(prev.Seq), prev.At
	}
	_, err = d.events.InsertTx(ctx, tx, decision.JobArgs{Event: ev}, &river.InsertOpts{Queue: d.eventQueue})
	return out, err
}

// withMarker is after, a JSON object or nothing, with the event's data
// (a JSON object, under eventDataKey) and eventMarker added.
func withMarker(after, data []byte) []byte {
	tail := `"` + eventDataKey + `":` + string(data) + "," + eventMarker + "}"
	n := len(after)
	if n <= 2 || after[n-1] != '}' {
		return []byte("{" + tail)
	}
	out := make([]byte, 0, n+len(tail)+1)
	out = append(out, after[:n-1]...)
	out = append(out, ',')
	return append(out, tail...)
}

// keyEvent is the event of d on rec: its type, subject and outcome.
func keyEvent(d KeyDecision, target string, rec idemdriver.Record) decision.Event {
	ev := decision.Event{Type: decision.KeyConfirmed}
	switch d.Action {
	case idem.OperatorForget:
		ev.Type = decision.KeyForgotten
	case idem.OperatorConfirmHappened:
		ev.Outcome = decision.Happened
	case idem.OperatorConfirmNotHappened:
		ev.Outcome = decision.NotHappened
	}
	if d.Verification != nil {
		ev.Type = decision.KeyVerified
	}
	ref := d.ExternalRef
	if ref == "" {
		ref = rec.ExternalRef
	}
	ev.Subject = decision.Subject{Kind: decision.SubjectKey, ID: target, Scope: rec.Scope, Operation: rec.Operation,
		CorrelationID: rec.CorrelationID, ExternalRef: ref}
	return ev
}

// operationEventTypes are the event types of the operation actions.
var operationEventTypes = map[OperationAction]string{
	OperationRetry:      decision.OperationRetried,
	OperationConfirm:    decision.OperationConfirmed,
	OperationCompensate: decision.OperationCompensated,
	OperationResolve:    decision.OperationResolved,
	OperationRedrive:    decision.OperationRedriven,
}

// operationEvent is the event of d on op: its type, subject and outcome.
func operationEvent(d OperationDecision, op sagadriver.Operation) decision.Event {
	ev := decision.Event{Type: operationEventTypes[d.Action], Subject: decision.Subject{Kind: decision.SubjectOperation, ID: d.ID,
		Operation: op.Type, CorrelationID: op.CorrelationID, ExternalRef: d.ExternalID}}
	switch d.Action {
	case OperationConfirm:
		ev.Outcome = decision.NotHappened
		if d.Happened {
			ev.Outcome = decision.Happened
		}
	case OperationResolve:
		ev.Outcome = string(d.ResolveTo)
	case OperationRedrive:
		ev.Outcome = string(d.Mode)
	}
	return ev
}
