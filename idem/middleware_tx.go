package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// CodeTransactionFailed answers a transactional request whose transaction
// could not commit: nothing it wrote is stored, unless the commit's answer
// was lost, in which case a retry with the same key replays it.
const CodeTransactionFailed = "idempotency_transaction_failed"

var (
	errNotOwner   = errors.New("idem: not the owner")
	errRolledBack = errors.New("idem: response not stored")
)

type handlerPanic struct{ value any }

func (handlerPanic) Error() string { return "idem: handler panicked" }

// serveTx runs the handler inside one store transaction (SPEC H17): the
// record's reservation, the handler's writes through the transaction in
// its context, and the completion commit together, or not at all. The
// response is buffered and delivered after the commit, so a client never
// sees a response whose writes were rolled back.
func (m *Middleware) serveTx(w http.ResponseWriter, r *http.Request, next http.Handler, rq request, rc routeConfig) {
	txs := m.engine.store.(idemdriver.TxStore) // checked in NewMiddleware
	var (
		answer   claim
		notOwner bool
		rec      *recorder
	)
	err := txs.WithinTx(r.Context(), func(ctx context.Context, tx idemdriver.Store) (err error) {
		c, err := m.engine.acquire(ctx, tx, rq.id, rq.req, rc.ttl, rc.lease, rc.recovery, true)
		if err != nil {
			return err
		}
		if !c.owned() {
			answer, notOwner = c, true
			if c.wrote {
				return nil // an escalation or a verified effect commits
			}
			return errNotOwner
		}
		st := m.engine.newRunState(tx, c.rec)
		st.inTx = true
		rec = newRecorder(w, m.cfg.MaxResponseBytes, true, m.replay, nil)
		if p := serveRecovering(rec, r.WithContext(withRunState(ctx, st)), next); p != nil {
			return p
		}
		status := rec.statusCode()
		if st.uncertainReason() == "" && (status >= 500 && !m.cfg.StoreServerErrors || status >= 400 && status < 500 && m.cfg.DiscardClientErrors) {
			return errRolledBack // the handler's writes go with the key
		}
		if err := m.finish(ctx, st, rec); err != nil {
			return fmt.Errorf("idem: complete: %w", err)
		}
		return nil
	})
	var hp *handlerPanic
	switch {
	case notOwner && (err == nil || errors.Is(err, errNotOwner)):
		m.answer(w, r, rq, answer)
	case err == nil, errors.Is(err, errRolledBack):
		rec.deliver()
	case errors.As(err, &hp):
		panic(hp.value)
	case rec == nil:
		m.storeFailed(w, r, rq, err)
	default:
		m.log.Error("idem: transaction failed", "key_id", SafeKeyID(rq.id.KeyDigest), "operation", rq.route, "error", err.Error())
		m.reject(w, r, RejectedEvent{Code: CodeTransactionFailed, Status: http.StatusInternalServerError, KeyID: SafeKeyID(rq.id.KeyDigest), Scope: rq.scope, Route: rq.route},
			"The request's transaction could not be committed; nothing was stored. Retry with the same Idempotency-Key.", 0)
	}
}

// serveRecovering calls next and turns a panic into an error, so the
// transaction is rolled back before the panic goes on.
func serveRecovering(w http.ResponseWriter, r *http.Request, next http.Handler) (p *handlerPanic) {
	defer func() {
		if v := recover(); v != nil {
			p = &handlerPanic{value: v}
		}
	}()
	next.ServeHTTP(w, r)
	return nil
}
