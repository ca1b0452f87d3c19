package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
)

// Bounds of a decision's reason (SPEC CON K4).
const (
	MinReason = 10
	MaxReason = 2000
)

// Errors of a decision, matched with errors.Is.
var (
	ErrNotFound = errors.New("ops: no such item")
	ErrStale    = errors.New("ops: the item changed since the page was rendered")
	ErrInvalid  = errors.New("ops: invalid decision")
	ErrIllegal  = errors.New("ops: the action is not allowed in the item's state")
)

// FieldError names the form field of an invalid decision; it matches
// ErrInvalid.
type FieldError struct {
	Field, Reason string
}

func (e *FieldError) Error() string      { return "ops: " + e.Field + ": " + e.Reason }
func (e *FieldError) Is(err error) bool  { return err == ErrInvalid }
func invalid(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// Actor is who decides, and from where (for the audit entry).
type Actor struct {
	Username   string
	Role       string
	RequestID  string
	ClientAddr string
	UserAgent  string
}

// recordFinder finds a key record by its console ID.
type recordFinder interface {
	KeyByID(ctx context.Context, id int64) (idemdriver.Record, bool, error)
}

// Keys decides on idempotency keys of a store whose transactions are of
// type TTx: forget, confirm happened, confirm not happened.
type Keys[TTx any] struct {
	db      *DB[TTx]
	engine  *idem.Engine
	records recordFinder
	// stores binds the idempotency store to a decision's transaction; nil
	// when the records are kept outside db (outside).
	stores txStores[TTx]
	// outside is the store of records kept outside db's transactions
	// (idemredis, [NewKeysOnStore]); nil otherwise.
	outside idemdriver.Store
}

// txStores binds an idempotency store to a transaction of type TTx: the
// *Store of idempgx (pgx.Tx), idemsqlite and idemmysql (*sql.Tx).
type txStores[TTx any] interface {
	Tx(tx TTx) idemdriver.Store
}

// NewKeys returns the key decisions of engine on db. stores binds the
// idempotency driver's primitives to a transaction of db (idempgx's,
// idemsqlite's or idemmysql's *Store, on the database of the engine's
// store), so that each decision's read, transition, tombstone (SPEC K21)
// and audit entry commit together in db's transaction. records finds a key
// record by its console ID.
func NewKeys[TTx any](db *DB[TTx], engine *idem.Engine, stores txStores[TTx], records recordFinder) (*Keys[TTx], error) {
	if db == nil || engine == nil || stores == nil || records == nil {
		return nil, errors.New("ops: key decisions need a database, an engine, a store and a record finder")
	}
	return &Keys[TTx]{db: db, engine: engine, records: records, stores: stores}, nil
}

// DB returns the database k decides on: the one its operation decisions
// and bulk requests share.
func (k *Keys[TTx]) DB() *DB[TTx] { return k.db }

// KeyDecision is an operator's decision on one key record, as the form
// submitted it.
type KeyDecision struct {
	RecordID    int64
	Version     int64 // the record's version when the page was rendered
	Action      idem.OperatorAction
	ExternalRef string // for OperatorConfirmHappened: required
	Reason      string
	// AcknowledgeRerun: the operator acknowledged that forgetting a
	// record whose effect may have happened ([ForgetRisk]) lets the
	// client's retry run it again. A forget of such a record without it
	// is refused (a *FieldError on [FieldAcknowledgeRerun]).
	AcknowledgeRerun bool
	// Verification, when set, is the verifier's answer the decision
	// applies (SPEC K19): recorded in its audit entry's after-state.
	Verification any
}

// KeyResult is an applied decision: the record before, and after unless
// the decision removed it.
type KeyResult struct {
	Before idemdriver.Record
	After  *idemdriver.Record
}

// Validate checks the decision's fields before anything is read.
func (d *KeyDecision) Validate() error {
	d.ExternalRef = strings.TrimSpace(d.ExternalRef)
	var err error
	if d.Reason, err = validReason("reason", d.Reason); err != nil {
		return err
	}
	switch {
	case d.Version <= 0:
		return invalid("version", "the form has no record version; reload the page")
	case len(d.ExternalRef) > 255:
		return invalid("external_ref", "at most 255 characters")
	}
	switch d.Action {
	case idem.OperatorForget, idem.OperatorConfirmNotHappened:
	case idem.OperatorConfirmHappened:
		if d.ExternalRef == "" {
			return invalid("external_ref", "say where the effect shows: the provider's reference")
		}
	default:
		return invalid("outcome", "unknown action")
	}
	return nil
}

// Decide applies d as actor: in one transaction it reads the record,
// refuses it if its version is not d.Version (ErrStale) or the engine's
// rules forbid the action (ErrIllegal), applies it, and appends the audit
// entry. A refused attempt is audited as a conflict.
func (k *Keys[TTx]) Decide(ctx context.Context, actor Actor, d KeyDecision) (KeyResult, error) {
	target := strconv.FormatInt(d.RecordID, 10)
	if err := d.Validate(); err != nil {
		return KeyResult{}, err
	}
	found, ok, err := k.records.KeyByID(ctx, d.RecordID)
	if err != nil {
		return KeyResult{}, err
	}
	if !ok {
		k.refused(ctx, actor, d, target, nil, "the record no longer exists")
		return KeyResult{}, ErrNotFound
	}
	res, err := k.decide(ctx, actor, d, target, found, nil)
	var fe *FieldError
	switch {
	case errors.Is(err, ErrStale), errors.Is(err, ErrIllegal):
		k.refused(ctx, actor, d, target, snapshot(found), err.Error())
		return KeyResult{}, err
	case errors.As(err, &fe) && fe.Field == FieldAcknowledgeRerun:
		k.refused(ctx, actor, d, target, snapshot(found), fe.Reason)
		return KeyResult{}, fe
	case err != nil:
		return KeyResult{}, fmt.Errorf("ops: %s key %d: %w", d.Action, d.RecordID, err)
	}
	return res, nil
}

// decide runs d on the record found by its ID: in one transaction of db
// when the records are in it, else in three steps (decideOutside). item,
// if not nil, is the bulk item whose outcome the decision sets first in
// its transaction.
func (k *Keys[TTx]) decide(ctx context.Context, actor Actor, d KeyDecision, target string, found idemdriver.Record, item *bulkItem) (KeyResult, error) {
	if k.outside != nil {
		return k.decideOutside(ctx, actor, d, target, found, item)
	}
	return k.decideTx(ctx, actor, d, target, found, item)
}

// decideTx runs d in one transaction: the bulk item's outcome, the record
// read and its version checked, the engine's transition, the tombstone of
// a removed record, and the audit entry.
func (k *Keys[TTx]) decideTx(ctx context.Context, actor Actor, d KeyDecision, target string, found idemdriver.Record, item *bulkItem) (res KeyResult, err error) {
	err = k.db.within(ctx, func(ctx context.Context, tx TTx) error {
		if err := k.db.markItem(ctx, tx, item); err != nil {
			return err
		}
		store := k.stores.Tx(tx)
		cur, ok, err := store.Get(ctx, found.Ident)
		switch {
		case err != nil:
			return err
		case !ok || cur.ID != d.RecordID:
			return ErrStale
		case cur.Version != d.Version:
			return ErrStale
		}
		if err := checkForget(d, cur); err != nil {
			return err
		}
		after, kept, err := k.engine.Settle(ctx, store, cur, d.Action, d.ExternalRef, d.Reason)
		switch {
		case errors.Is(err, idemdriver.ErrStale):
			return ErrStale
		case errors.Is(err, idem.ErrIllegalTransition):
			return fmt.Errorf("%w: %w", ErrIllegal, err)
		case err != nil:
			return err
		}
		res.Before = cur
		afterState := deletedState(d, cur)
		if kept {
			res.After = &after
			afterState = snapshot(after)
		} else if err := k.db.console.AddTombstoneTx(ctx, tx, tombstone(actor, d, cur)); err != nil {
			return err
		}
		if d.Verification != nil {
			afterState["verification"] = d.Verification
		}
		_, err = k.db.appendTx(ctx, tx, entry(actor, d, target, snapshot(cur), afterState, audit.OutcomeApplied))
		return err
	})
	return res, err
}

// RecordDenied audits an attempt the authorization refused.
func RecordDenied(ctx context.Context, trail *audit.Trail, actor Actor, action, targetKind, targetID string) error {
	_, err := trail.Append(ctx, audit.Entry{Actor: actor.Username, Role: actor.Role, Action: action, TargetKind: targetKind, TargetID: targetID,
		Reason: "refused: the role may not do this", Outcome: audit.OutcomeDenied,
		RequestID: actor.RequestID, ClientAddr: actor.ClientAddr, UserAgent: actor.UserAgent})
	return err
}

// refused audits a decision that was not applied.
func (k *Keys[TTx]) refused(ctx context.Context, actor Actor, d KeyDecision, target string, before any, why string) {
	appendRefusal(ctx, k.db.trail, k.db.log, entry(actor, d, target, before, nil, audit.OutcomeConflict), why)
}

// appendRefusal appends e, a refused decision's entry, with why after its
// reason, in a transaction of its own that the request's cancellation does
// not stop. A failure to audit is not the operator's problem (the decision
// was refused either way), so it is logged, with the entry's action and
// target but not its reason or states, and not returned.
func appendRefusal(ctx context.Context, trail *audit.Trail, log *slog.Logger, e audit.Entry, why string) {
	e.Reason = cut(e.Reason+" — refused: "+why, maxEntryReason)
	ctx = context.WithoutCancel(ctx)
	if _, err := trail.Append(ctx, e); err != nil {
		log.ErrorContext(ctx, "ops: the audit entry of a refused decision was not appended",
			"action", e.Action, "target_kind", e.TargetKind, "target_id", e.TargetID, "actor", e.Actor, "error", err.Error())
	}
}

func entry(actor Actor, d KeyDecision, target string, before, after any, outcome string) audit.Entry {
	return audit.Entry{Actor: actor.Username, Role: actor.Role, Action: "key." + string(d.Action), TargetKind: "key", TargetID: target,
		Reason: d.Reason, Before: mustJSON(before), After: mustJSON(after), Outcome: outcome,
		RequestID: actor.RequestID, ClientAddr: actor.ClientAddr, UserAgent: actor.UserAgent}
}

// snapshot is the audited state of a record: no result, no owner token.
func snapshot(r idemdriver.Record) map[string]any {
	s := map[string]any{
		"id": r.ID, "scope": r.Scope, "operation": r.Operation, "key_digest": r.KeyDigest, "status": string(r.Status),
		"external_ref": r.ExternalRef, "correlation_id": r.CorrelationID, "last_error": r.LastError,
		"version": r.Version, "fence": r.Fence, "attempts": r.Attempts, "updated_at": r.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if !r.LeaseExpiresAt.IsZero() {
		s["lease_expires_at"] = r.LeaseExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return s
}

func mustJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Denied audits an attempt the authorization refused.
func (k *Keys[TTx]) Denied(ctx context.Context, actor Actor, action, targetKind, targetID string) error {
	return RecordDenied(ctx, k.db.trail, actor, action, targetKind, targetID)
}

// History returns the audit entries of one key record, newest first.
func (k *Keys[TTx]) History(ctx context.Context, recordID int64, limit int) ([]audit.Entry, error) {
	return k.db.trail.History(ctx, "key", strconv.FormatInt(recordID, 10), limit)
}

// ResponseViewed audits that actor was shown a key's stored response: a
// read of possibly personal data (SPEC CON K7).
func (k *Keys[TTx]) ResponseViewed(ctx context.Context, actor Actor, recordID int64) error {
	_, err := k.db.trail.Append(ctx, audit.Entry{Actor: actor.Username, Role: actor.Role, Action: "key.view_response", TargetKind: "key",
		TargetID: strconv.FormatInt(recordID, 10), Reason: "stored response shown on the key's page", Outcome: audit.OutcomeRead,
		RequestID: actor.RequestID, ClientAddr: actor.ClientAddr, UserAgent: actor.UserAgent})
	return err
}
