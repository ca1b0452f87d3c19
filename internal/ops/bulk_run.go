package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Run decides the pending items of request id, a batch at a time, for at
// most slice (no bound when <= 0), and reports whether the run is over
// (the request is done, or not running: paused, cancelled, or never
// approved). It stops early, without error, when ctx ends. Each item is
// decided in one transaction that first sets its outcome (if still
// pending: else it rolls back, another run decided it), then reads the
// item, checks its version against the one frozen in the request, applies
// the engine's transition and appends the item's audit entry, pointing at
// the request ([BulkRequestID]). A stale item is skipped and an illegal
// one refused, each with its outcome and a conflict entry in a transaction
// of their own. Runs of the same request may overlap (a crashed run's job
// rescued beside its resumption): no item is decided twice.
//
// The first batch is the request's canary (SPEC K23); after it and after
// every batch, the run pauses itself when more than PauseRate of the batch
// failed, and at once when PauseStreak items in a row failed.
func (b *Bulks[TTx]) Run(ctx context.Context, id int64, slice time.Duration) (bool, error) {
	start := b.now()
	streak := 0
	for {
		req, ok, err := b.store.BulkByID(ctx, id)
		switch {
		case err != nil:
			return false, err
		case !ok || req.Status != store.BulkRunning:
			return true, nil
		}
		size, batch := b.cfg.Batch, "a batch"
		if req.Counts[store.ItemPending] == req.Total && req.Canary > 0 {
			size, batch = req.Canary, "the canary batch"
		}
		items, err := b.store.BulkItems(ctx, id, store.ItemPending, 0, size)
		if err != nil {
			return false, err
		}
		if len(items) == 0 {
			if _, err := b.store.SetBulkStatus(ctx, id, []string{store.BulkRunning}, store.BulkDone, "", ""); err != nil {
				return false, err
			}
			return true, nil
		}
		var params map[string]string
		if req.Params != "" {
			if err := json.Unmarshal([]byte(req.Params), &params); err != nil {
				return false, fmt.Errorf("ops: bulk request %d: params: %w", id, err)
			}
		}
		failed, decided := 0, 0
		for i, it := range items {
			if ctx.Err() != nil {
				return false, nil
			}
			// A cancel or pause is seen within 50 items.
			if i > 0 && i%50 == 0 {
				status, ok, err := b.store.BulkStatus(ctx, id)
				if err != nil {
					return false, err
				}
				if !ok || status != store.BulkRunning {
					return true, nil
				}
			}
			outcome, err := b.item(ctx, req, params, it)
			if err != nil {
				return false, err
			}
			switch outcome {
			case "":
				continue // decided by another run of this request
			case store.ItemFailed:
				failed++
				streak++
			default:
				streak = 0
			}
			decided++
			if streak >= b.cfg.PauseStreak {
				return true, b.autoPause(ctx, req, fmt.Sprintf("%d items in a row failed", streak))
			}
		}
		if decided > 0 && float64(failed) > b.cfg.PauseRate*float64(decided) {
			return true, b.autoPause(ctx, req, fmt.Sprintf("%d of %d items of %s failed (more than %g %%)", failed, decided, batch, b.cfg.PauseRate*100))
		}
		if slice > 0 && b.now().Sub(start) >= slice {
			return false, nil
		}
		if b.cfg.Pause > 0 {
			t := time.NewTimer(b.cfg.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, nil
			case <-t.C:
			}
		}
	}
}

// autoPause pauses req's run because its failures crossed the threshold,
// audited as the system's decision.
func (b *Bulks[TTx]) autoPause(ctx context.Context, req store.Bulk, why string) error {
	why = "paused automatically: " + why
	moved, err := b.store.SetBulkStatus(ctx, req.ID, []string{store.BulkRunning}, store.BulkPaused, "system", why)
	if err != nil || !moved {
		return err
	}
	b.db.log.WarnContext(ctx, "ops: bulk run paused itself", "bulk", req.ID, "why", why)
	req.Status = store.BulkPaused
	_, err = b.db.trail.Append(ctx, b.entry(Actor{Username: "system", Role: "system"}, req, "bulk.pause", why,
		map[string]any{"status": store.BulkPaused}, audit.OutcomeApplied))
	return err
}

// item decides one item of req, and returns its outcome ("" when another
// run decided it).
func (b *Bulks[TTx]) item(ctx context.Context, req store.Bulk, params map[string]string, it store.BulkItem) (string, error) {
	actor := Actor{Username: req.RequestedBy, Role: req.RequestedRole, RequestID: BulkRequestID(req.ID)}
	reason := req.Reason + " (bulk request " + strconv.FormatInt(req.ID, 10) + ")"
	if req.Single {
		reason = req.Reason + " (approved request " + strconv.FormatInt(req.ID, 10) + ")"
	}
	if req.DecidedBy != "" {
		reason += ", approved by " + req.DecidedBy
	}
	// mark is the item with its outcome, set first in the decision's
	// transaction.
	mark := func(outcome, detail string) *bulkItem {
		return &bulkItem{bulk: req.ID, seq: it.Seq, outcome: outcome, detail: detail}
	}
	var (
		err     error
		refusal audit.Entry
		before  any
	)
	switch {
	case req.Kind == BulkKeys && req.Action == BulkVerify:
		id, perr := strconv.ParseInt(it.TargetID, 10, 64)
		if perr != nil || b.verify == nil {
			return b.refuse(ctx, req, it, store.ItemFailed, "not a key record, or no verification on this console", nil, mark)
		}
		refusal = audit.Entry{Actor: actor.Username, Role: actor.Role, Action: verifyAction, TargetKind: "key", TargetID: it.TargetID,
			Reason: reason, Outcome: audit.OutcomeConflict, RequestID: actor.RequestID}
		_, err = b.verify.request(ctx, actor, id, it.Version, reason, mark(store.ItemApplied, "verification requested"))
	case req.Kind == BulkKeys:
		d := KeyDecision{Version: it.Version, Action: keyAction(req.Action), Reason: reason, AcknowledgeRerun: params[FieldAcknowledgeRerun] == "true"}
		if req.Single && req.Action == "confirm" && params["happened"] == "true" {
			d.Action, d.ExternalRef = idem.OperatorConfirmHappened, params["external_ref"]
		}
		// A bulk "confirm happened" takes each record's own reference,
		// read below; the rest of the decision is checked now.
		ownRef := req.Action == BulkConfirmHappened
		d.RecordID, err = strconv.ParseInt(it.TargetID, 10, 64)
		if err == nil && !ownRef {
			err = d.Validate()
		}
		if err != nil {
			return b.refuse(ctx, req, it, store.ItemFailed, err.Error(), nil, mark)
		}
		refusal = entry(actor, d, it.TargetID, nil, nil, audit.OutcomeConflict)
		found, ok, ferr := b.keys.records.KeyByID(ctx, d.RecordID)
		switch {
		case ferr != nil:
			return "", ferr
		case !ok:
			err = fmt.Errorf("%w: the record no longer exists", ErrStale)
		default:
			before = snapshot(found)
			if ownRef {
				// The decision's transaction checks the version, so this is
				// the reference of the record the request was made for.
				d.ExternalRef = found.ExternalRef
				err = d.Validate()
			}
			if err == nil {
				_, err = b.keys.decide(ctx, actor, d, it.TargetID, found, mark(store.ItemApplied, ""))
			}
		}
	case req.Kind == BulkOperations:
		if b.ops == nil {
			return b.refuse(ctx, req, it, store.ItemFailed, "this console has no saga records", nil, mark)
		}
		d := OperationDecision{ID: it.TargetID, Version: it.Version, Action: OperationAction(req.Action), Step: it.Step,
			ResolveTo: sagadriver.Status(params["resolve_to"]), Happened: params["happened"] == "true", ExternalID: params["external_id"], Reason: reason}
		if d.Action == OperationRedrive {
			d.Mode = saga.RedriveResume
		}
		if err := d.Validate(); err != nil {
			return b.refuse(ctx, req, it, store.ItemFailed, err.Error(), nil, mark)
		}
		refusal = operationEntry(actor, d, nil, nil, audit.OutcomeConflict)
		var seen *sagadriver.Operation
		_, seen, err = b.ops.decide(ctx, actor, d, mark(store.ItemApplied, ""))
		if seen != nil {
			before = operationSnapshot(*seen)
		}
	default:
		return b.refuse(ctx, req, it, store.ItemFailed, "unknown kind "+req.Kind, nil, mark)
	}
	var fe *fielderr.Error
	switch {
	case err == nil:
		return store.ItemApplied, nil
	case errors.Is(err, errAlreadyDecided):
		return "", nil
	case errors.Is(err, ErrStale), errors.Is(err, ErrNotFound):
		refusal.Before = mustJSON(before)
		why := "changed since the request: " + err.Error()
		other, found, derr := b.store.DecidedBy(ctx, req.Kind, it.TargetID, req.ID)
		if derr != nil {
			return "", derr
		}
		if found {
			why = "decided by request " + strconv.FormatInt(other, 10)
		}
		return b.refuse(ctx, req, it, store.ItemSkipped, why, &refusal, mark)
	case errors.Is(err, ErrIllegal), errors.As(err, &fe):
		refusal.Before = mustJSON(before)
		return b.refuse(ctx, req, it, store.ItemRefused, err.Error(), &refusal, mark)
	case ctx.Err() != nil:
		return "", nil
	default:
		b.db.log.ErrorContext(ctx, "ops: bulk item failed", "bulk", req.ID, "target", it.TargetID, "error", err.Error())
		return b.refuse(ctx, req, it, store.ItemFailed, err.Error(), nil, mark)
	}
}

// refuse sets an item's outcome other than applied, with its conflict
// entry if e is not nil, in one transaction of the decisions' database,
// and returns the outcome ("" when another run decided the item).
func (b *Bulks[TTx]) refuse(ctx context.Context, req store.Bulk, it store.BulkItem, outcome, why string, e *audit.Entry, mark func(outcome, detail string) *bulkItem) (string, error) {
	err := b.db.within(ctx, func(ctx context.Context, tx TTx) error {
		if err := b.db.markItem(ctx, tx, mark(outcome, why)); err != nil {
			return err
		}
		if e == nil {
			return nil
		}
		e.Reason = cut(e.Reason+" — refused: "+why, maxEntryReason)
		_, err := b.db.appendTx(ctx, tx, *e)
		return err
	})
	if errors.Is(err, errAlreadyDecided) || (err != nil && ctx.Err() != nil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return outcome, nil
}
