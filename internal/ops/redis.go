package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
)

// OutcomeIntent is the outcome of the first audit entry of a decision on
// a key in a store that cannot share the audit trail's transaction (a
// Redis store, idemredis): the decision is about to be applied. The entry
// that follows it for the same key carries "intent_seq" in its After.
const OutcomeIntent = "intent"

// ResolverActor is the actor of the outcome entries that
// [ResolveKeyIntents] appends.
const ResolverActor = "system:intent-resolver"

// testHookAfterIntent, when set by a test, runs after a decision's intent
// is committed and before the store is written; an error stops the
// decision there, as a crash would.
var testHookAfterIntent func() error

// NewKeysOnStore returns the key decisions of engine on records kept in s,
// a store outside db (idemredis): a decision and its audit entry cannot
// be one transaction, so each decision is three steps:
//
//  1. intent: in one transaction of db, the bulk item's outcome (applied)
//     when the decision is a bulk item's, which claims the item for this
//     worker, and an audit entry with outcome [OutcomeIntent], the record
//     as seen (its version) and the action;
//  2. the decision, applied by the engine to s by a compare-and-swap on the
//     record's version (idemdriver.Store.Settle): applied once or not at
//     all;
//  3. outcome: an audit entry applied (with the record after) naming the
//     intent's seq; or, when the compare-and-swap found the record
//     changed, a conflict: audited by Decide for a single decision (the
//     intent is then resolved as a conflict at the next start), here,
//     naming the intent, for a bulk item.
//
// A crash between steps leaves an intent without its outcome;
// [ResolveKeyIntents], run at start-up, appends it from the record's state.
// The guarantee: every applied decision has its intent in the trail before
// it; its outcome entry follows, at the latest at the next start. A bulk
// item is claimed with its intent, so overlapping workers apply it once;
// should the record change between the claim and the compare-and-swap (an
// operator's decision on the same record in those milliseconds), the item
// reads applied while the trail shows the conflict.
func NewKeysOnStore[TTx any](db *DB[TTx], engine *idem.Engine, s idemdriver.Store, records recordFinder) (*Keys[TTx], error) {
	if db == nil || engine == nil || s == nil || records == nil {
		return nil, errors.New("ops: key decisions need a database, an engine, a store and a record finder")
	}
	// No tombstones: the record is removed outside the decisions'
	// database; its page finds the decision in the audit trail.
	return &Keys[TTx]{db: db, engine: engine, records: records, outside: s}, nil
}

// intentAfter is the After of an intent entry: what the decision will do.
type intentAfter struct {
	Action      idem.OperatorAction `json:"action"`
	ExternalRef string              `json:"external_ref,omitempty"`
}

// decideOutside runs d on found, a record of k.outside, in the three steps
// of [NewKeysOnStore]. item, if not nil, is the bulk item whose outcome
// the intent's transaction sets first, claiming it.
func (k *Keys[TTx]) decideOutside(ctx context.Context, actor Actor, d KeyDecision, target string, found idemdriver.Record, item *bulkItem) (KeyResult, error) {
	if found.Version != d.Version {
		return KeyResult{}, ErrStale
	}
	if err := idem.CheckOperator(found, d.Action); err != nil {
		return KeyResult{}, fmt.Errorf("%w: %w", ErrIllegal, err)
	}
	if err := checkForget(d, found); err != nil {
		return KeyResult{}, err
	}
	var intent audit.Entry
	err := k.db.within(ctx, func(ctx context.Context, tx TTx) error {
		if err := k.db.markItem(ctx, tx, item); err != nil {
			return err
		}
		var err error
		intent, err = k.db.appendTx(ctx, tx, entry(actor, d, target, snapshot(found),
			intentAfter{Action: d.Action, ExternalRef: d.ExternalRef}, OutcomeIntent))
		return err
	})
	if err != nil {
		return KeyResult{}, err
	}
	if testHookAfterIntent != nil {
		if err := testHookAfterIntent(); err != nil {
			return KeyResult{}, err
		}
	}
	// The outcome is written whatever happens to the request now.
	ctx = context.WithoutCancel(ctx)
	after, kept, err := k.engine.Settle(ctx, k.outside, found, d.Action, d.ExternalRef, d.Reason)
	switch {
	case errors.Is(err, idemdriver.ErrStale) && item != nil:
		// A bulk item claimed with the intent: its refusal cannot be
		// marked any more, so the conflict is audited here, naming the
		// intent.
		e := entry(actor, d, target, snapshot(found), map[string]any{"intent_seq": intent.Seq}, audit.OutcomeConflict)
		e.Reason += " — refused: the record changed between the intent and its compare-and-swap"
		if _, aerr := k.db.trail.Append(ctx, e); aerr != nil {
			return KeyResult{}, fmt.Errorf("%w (its conflict was not audited: %w; resolved at the next start)", ErrStale, aerr)
		}
		return KeyResult{}, ErrStale
	case errors.Is(err, idemdriver.ErrStale):
		// Decide audits the refusal; the intent itself is resolved (as a
		// conflict) at the next start.
		return KeyResult{}, ErrStale
	case errors.Is(err, idem.ErrIllegalTransition):
		return KeyResult{}, fmt.Errorf("%w: %w", ErrIllegal, err)
	case err != nil:
		return KeyResult{}, fmt.Errorf("apply (the intent #%d is resolved at the next start if the outcome is unknown): %w", intent.Seq, err)
	}
	res := KeyResult{Before: found}
	afterState := deletedState(d, found)
	afterState["intent_seq"] = intent.Seq
	if kept {
		res.After = &after
		afterState = snapshot(after)
		afterState["intent_seq"] = intent.Seq
	}
	if d.Verification != nil {
		afterState["verification"] = d.Verification
	}
	if err := k.appendOutcome(ctx, entry(actor, d, target, snapshot(found), afterState, audit.OutcomeApplied), d, target, found); err != nil {
		return res, fmt.Errorf("the decision is applied but its outcome was not audited (intent #%d; resolved at the next start): %w", intent.Seq, err)
	}
	return res, nil
}

// ResolveKeyIntents appends the missing outcome of every key decision
// whose intent (outcome [OutcomeIntent]) has no outcome entry after it,
// judged from the record's state now, read through records: if the record
// is still at the intent's version the decision was not applied
// (conflict: the operator may decide again); if it is gone after a forget
// or "did not happen", or completed with the reference after "happened",
// it was applied (applied); otherwise it changed by another hand
// (conflict). Run it at start-up, before decisions are served; it returns
// how many intents it resolved. Entries are appended as [ResolverActor].
func ResolveKeyIntents(ctx context.Context, trail *audit.Trail, records recordFinder) (int, error) {
	resolved := 0
	var after int64
	for {
		page, next, err := trail.List(ctx, audit.Filter{TargetKind: "key", Outcome: OutcomeIntent, After: after, Limit: audit.MaxLimit})
		if err != nil {
			return resolved, fmt.Errorf("ops: resolve intents: %w", err)
		}
		for _, in := range page {
			done, err := hasOutcome(ctx, trail, in)
			if err != nil {
				return resolved, err
			}
			if done {
				continue
			}
			if err := resolveIntent(ctx, trail, records, in); err != nil {
				return resolved, err
			}
			resolved++
		}
		if next == 0 {
			return resolved, nil
		}
		after = next
	}
}

// hasOutcome reports whether an entry after in names it as its intent.
func hasOutcome(ctx context.Context, trail *audit.Trail, in audit.Entry) (bool, error) {
	hist, err := trail.History(ctx, in.TargetKind, in.TargetID, audit.MaxLimit)
	if err != nil {
		return false, fmt.Errorf("ops: resolve intents: %w", err)
	}
	for _, e := range hist {
		if e.Seq <= in.Seq || e.Outcome == OutcomeIntent {
			continue
		}
		var a struct {
			IntentSeq int64 `json:"intent_seq"`
		}
		if json.Unmarshal(e.After, &a) == nil && a.IntentSeq == in.Seq {
			return true, nil
		}
	}
	return false, nil
}

// resolveIntent appends the outcome of intent in from the record's state.
func resolveIntent(ctx context.Context, trail *audit.Trail, records recordFinder, in audit.Entry) error {
	var before struct {
		Version int64 `json:"version"`
	}
	var plan intentAfter
	if err := json.Unmarshal(in.Before, &before); err != nil {
		return fmt.Errorf("ops: resolve intent #%d: its before state: %w", in.Seq, err)
	}
	if err := json.Unmarshal(in.After, &plan); err != nil {
		return fmt.Errorf("ops: resolve intent #%d: its action: %w", in.Seq, err)
	}
	id, err := strconv.ParseInt(in.TargetID, 10, 64)
	if err != nil {
		return fmt.Errorf("ops: resolve intent #%d: target %q: %w", in.Seq, in.TargetID, err)
	}
	rec, ok, err := records.KeyByID(ctx, id)
	if err != nil {
		return fmt.Errorf("ops: resolve intent #%d: %w", in.Seq, err)
	}
	outcome, why := audit.OutcomeConflict, ""
	state := map[string]any{"intent_seq": in.Seq}
	switch {
	case !ok && (plan.Action == idem.OperatorForget || plan.Action == idem.OperatorConfirmNotHappened):
		outcome, why = audit.OutcomeApplied, "the record is gone, as the decision leaves it"
		state["deleted"] = true
	case !ok:
		why = "the record is gone: not by this decision"
		state["deleted"] = true
	case rec.Version == before.Version:
		why = "the record is still at the version of the intent: the decision was not applied; decide again"
	case plan.Action == idem.OperatorConfirmHappened && rec.Status == idemdriver.StatusCompleted && rec.ExternalRef == plan.ExternalRef &&
		rec.Token == "" && rec.Version == before.Version+1:
		outcome, why = audit.OutcomeApplied, "the record is completed with the reference, one version after the intent"
	default:
		why = "the record changed since the intent, not as the decision would leave it"
	}
	if ok {
		for k, v := range snapshot(rec) {
			state[k] = v
		}
	}
	b, _ := json.Marshal(state)
	_, err = trail.Append(context.WithoutCancel(ctx), audit.Entry{Actor: ResolverActor, Role: in.Role, Action: in.Action,
		TargetKind: in.TargetKind, TargetID: in.TargetID, Reason: "resolved at start-up: " + why,
		Before: in.Before, After: b, Outcome: outcome})
	if err != nil {
		return fmt.Errorf("ops: resolve intent #%d: %w", in.Seq, err)
	}
	return nil
}

// appendOutcome appends e, the applied outcome of a decision on a record
// outside the database, with its event when events are on, in one
// transaction of the database. A decision whose outcome entry is appended
// by [ResolveKeyIntents] (a crash after the store's write) emits no event.
func (k *Keys[TTx]) appendOutcome(ctx context.Context, e audit.Entry, d KeyDecision, target string, found idemdriver.Record) error {
	if k.db.events == nil {
		_, err := k.db.trail.Append(ctx, e)
		return err
	}
	return k.db.within(ctx, func(ctx context.Context, tx TTx) error {
		_, err := k.db.appendDecision(ctx, tx, e, keyEvent(d, target, found))
		return err
	})
}
