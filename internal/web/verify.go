package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/views"
)

// KeyVerifier asks the applications' verifiers about keys (ops.Verifications).
type KeyVerifier interface {
	Request(ctx context.Context, actor ops.Actor, id, version int64, reason string) (audit.Entry, error)
}

// verifyOnKey is the context key that says the console verifies keys.
type verifyOnKey struct{}

// withVerify says in every request's context whether the console can ask
// the applications' verifiers (SPEC K19), for the key page's actions.
func withVerify(on bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifyOnKey{}, on)))
		})
	}
}

func verifyOn(ctx context.Context) bool {
	on, _ := ctx.Value(verifyOnKey{}).(bool)
	return on
}

// verifyAction is "Verify with the provider" on rec, when the viewer may
// and rec's outcome is unknown.
func verifyAction(ctx context.Context, v *views.Viewer, rec idemdriver.Record) (views.ActionForm, bool) {
	id := strconv.FormatInt(rec.ID, 10)
	if !verifyOn(ctx) || !v.Can("/keys/"+id+"/verify", http.MethodPost) || ops.Verifiable(rec) != "" {
		return views.ActionForm{}, false
	}
	return views.ActionForm{Name: "verify", Title: views.KeyTarget(views.DecisionVerify, id), URL: "/keys/" + id + "/verify", Version: rec.Version, FormKey: formKey(),
		Consequence: "Asks the application's verifier of " + rec.Operation + " whether the effect happened, by the key's reference. Its answer is applied in your name: happened → the key completes with the provider's reference and is never run again; did not happen → the key is released and the client's retry runs it once; unknown → the key stays as it is and the answer is shown here."}, true
}

// handleKeyVerify asks the applications to verify a key and redirects to
// its page, which shows the answer when it comes.
func handleKeyVerify(keys keyReader, decider KeyDecider, verify KeyVerifier, opener resultOpener, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			writeError(w, r, log, appError(ENotFound, "There is no key with this ID."))
			return
		}
		version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
		reason := r.PostFormValue("reason")
		_, err = verify.Request(r.Context(), actorOf(r), id, version, reason)
		if apiRequest(r) {
			// Applied: the request to the verifier is recorded; its answer
			// comes later, as on the page.
			decisionOutcome(w, r, log, err, apiDecision{Action: "key.verify", TargetKind: "key", TargetID: strconv.FormatInt(id, 10)},
				keyVersion(r.Context(), keys, id))
			return
		}
		var fe *fielderr.Error
		switch {
		case err == nil:
			http.Redirect(w, r, "/keys/"+strconv.FormatInt(id, 10)+"?done=verify", http.StatusSeeOther)
		case errors.As(err, &fe):
			renderKeyDetail(w, r, http.StatusBadRequest, id, keys, decider, opener, log, func(vm *views.KeyVM) {
				vm.Error, vm.FieldErr, vm.Reason = "Not requested: "+fe.Reason+".", fe.Field, reason
			})
		case errors.Is(err, ops.ErrNotFound):
			writeError(w, r, log, appError(EConflict, goneMessage(r.Context(), decider, id, log)))
		case errors.Is(err, ops.ErrStale), errors.Is(err, ops.ErrIllegal):
			msg := "Not requested: the record changed since you opened the page. This is its current state."
			if errors.Is(err, ops.ErrIllegal) {
				msg = "Not requested: only a key whose outcome is unknown can be verified."
			}
			renderKeyDetail(w, r, http.StatusConflict, id, keys, decider, opener, log, func(vm *views.KeyVM) {
				vm.Error, vm.Reason = msg, reason
			})
		default:
			writeError(w, r, log, err)
		}
	})
}

// verificationNote says where the key's latest verification stands, from
// its history (newest first): waiting for the answer, or the answer when
// it was a finding. A decision applied via a verifier is in the history
// itself.
func verificationNote(now time.Time, hist []audit.Entry) string {
	// Newest first: an answer (to this request or to the one it
	// joined) newer than the latest request settles it.
	answered := false
	for _, e := range hist {
		if strings.HasPrefix(e.RequestID, "verify-") && e.Outcome != ops.OutcomeRequested && e.Outcome != ops.OutcomeFinding {
			answered = true
		}
		switch {
		case e.Action != "key.verify":
			continue
		case e.Outcome == ops.OutcomeRequested:
			if answered {
				return ""
			}
			return "Verification requested by " + e.Actor + " " + views.Ago(now, e.At) + " ago: waiting for the application's answer. Reload this page to see it."
		case e.Outcome == ops.OutcomeFinding:
			var f struct {
				Verification struct {
					Verdict, Verifier, Evidence, Error string
				} `json:"verification"`
			}
			_ = json.Unmarshal(e.After, &f)
			v := f.Verification
			note := "Verified " + views.Ago(now, e.At) + " ago"
			if v.Verifier != "" {
				note += " by verifier " + v.Verifier
			}
			note += ": " + v.Verdict
			if v.Error != "" {
				note += " (" + v.Error + ")"
			}
			if v.Evidence != "" {
				note += " — " + v.Evidence
			}
			return note + ". Nothing was decided: decide by hand, or verify again later."
		}
	}
	return ""
}
