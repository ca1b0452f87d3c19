package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/views"
)

// KeyDecider is what the key decision routes need.
type KeyDecider interface {
	Decide(ctx context.Context, actor ops.Actor, d ops.KeyDecision) (ops.KeyResult, error)
	Denied(ctx context.Context, actor ops.Actor, action, targetKind, targetID string) error
	History(ctx context.Context, recordID int64, limit int) ([]audit.Entry, error)
	ResponseViewed(ctx context.Context, actor ops.Actor, recordID int64) error
}

// actorOf is who acts in r: the signed-in user, or through the API the
// token's user (a service token: "token:<name>"). An API request's audit
// entries name the token in the user agent field: "api-token <name>;"
// and the client's user agent, never the token itself.
func actorOf(r *http.Request) ops.Actor {
	a := ops.Actor{RequestID: middleware.GetReqID(r.Context()), ClientAddr: clientAddr(r), UserAgent: r.UserAgent()}
	if v := viewerFrom(r.Context()); v != nil {
		a.Username, a.Role = v.Username, v.Role
	}
	if t := apiTokenFrom(r.Context()); t != nil {
		a.UserAgent = auditText(TokenAgentPrefix+t.Name+"; "+r.UserAgent(), maxAgent)
	}
	return a
}

// TokenAgentPrefix starts the user agent field of an audit entry written
// through the API, followed by the token's name.
const TokenAgentPrefix = "api-token "

// maxAgent bounds the user agent field an API request's entry records.
const maxAgent = 512

// keyActions are the decisions the viewer may take on rec now: allowed by
// the policy and legal in the record's state.
func keyActions(v *views.Viewer, rec idemdriver.Record) []views.ActionForm {
	id := strconv.FormatInt(rec.ID, 10)
	var forget, confirm []views.ActionForm
	if v.Can("/keys/"+id+"/forget", http.MethodPost) && idem.CheckOperator(rec, idem.OperatorForget) == nil {
		f := views.ActionForm{Name: "forget", Title: views.KeyTarget(views.DecisionForget, id), URL: "/keys/" + id + "/forget", Version: rec.Version, FormKey: formKey(),
			Consequence: "Deletes this record. The next request with this key runs again, as if it had never been seen. Do this only when you are sure the effect did not happen, or may safely happen again."}
		if why := ops.ForgetRisk(rec); why != "" {
			f.Acknowledge = "The effect may have happened: " + why + ". " + ops.RerunConsequence(rec)
		}
		forget = append(forget, f)
	}
	if v.Can("/keys/"+id+"/confirm", http.MethodPost) && idem.CheckOperator(rec, idem.OperatorConfirmHappened) == nil {
		confirm = append(confirm,
			views.ActionForm{Name: "confirm_happened", Title: views.KeyTarget(views.DecisionConfirmHappened, id), URL: "/keys/" + id + "/confirm", Version: rec.Version, FormKey: formKey(), Outcome: "happened",
				Consequence: "The key completes with the external reference and is never run again (repeats get 409: no response to replay)."},
			views.ActionForm{Name: "confirm", Title: views.KeyTarget(views.DecisionConfirmNotHappened, id), URL: "/keys/" + id + "/confirm", Version: rec.Version, FormKey: formKey(), Outcome: "did_not_happen",
				Consequence: "The record goes and the next request with this key runs, once."})
	}
	// A key whose effect may have happened leads with the confirmation
	// (SPEC K20); forget comes last, behind its acknowledgement.
	if ops.ForgetRisk(rec) != "" {
		return append(confirm, forget...)
	}
	return append(forget, confirm...)
}

// formKey mints the idempotency key of one rendered form, so that a form
// submitted twice applies once (SPEC CON K4).
func formKey() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// formKeyHeader copies the form's form_key field into the Idempotency-Key
// header for the idempotency middleware: an HTML form cannot set headers.
// The body is read (at most 64 KiB) and put back.
func formKeyHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		if err != nil {
			idem.WriteProblem(w, idem.Problem{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large", Detail: "The form is too large."})
			return
		}
		form, err := url.ParseQuery(string(body))
		if key := form.Get("form_key"); err == nil && key != "" && !strings.ContainsAny(key, `"\`) {
			r.Header.Set("Idempotency-Key", `"`+key+`"`)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// handleKeyDecision applies a decision posted from a key's detail page and
// redirects to the fresh page, or renders the page again with why it was
// refused.
func handleKeyDecision(action string, keys keyReader, decider KeyDecider, opener resultOpener, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			writeError(w, r, log, appError(ENotFound, "There is no key with this ID."))
			return
		}
		version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
		d := ops.KeyDecision{RecordID: id, Version: version, Reason: r.PostFormValue("reason"), ExternalRef: r.PostFormValue("external_ref"),
			AcknowledgeRerun: r.PostFormValue(ops.FieldAcknowledgeRerun) == "yes"}
		switch {
		case action == "forget":
			d.Action = idem.OperatorForget
		case r.PostFormValue("outcome") == "happened":
			d.Action = idem.OperatorConfirmHappened
		case r.PostFormValue("outcome") == "did_not_happen":
			d.Action = idem.OperatorConfirmNotHappened
		default:
			d.Action = "" // Validate names the field
		}
		res, err := decider.Decide(r.Context(), actorOf(r), d)
		if apiRequest(r) {
			done := apiDecision{Action: "key." + string(d.Action), TargetKind: "key", TargetID: strconv.FormatInt(id, 10)}
			if err == nil {
				done.Removed = res.After == nil
				if res.After != nil {
					done.Version = res.After.Version
				}
			}
			decisionOutcome(w, r, log, err, done, keyVersion(r.Context(), keys, id))
			return
		}
		var fe *fielderr.Error
		switch {
		case err == nil && res.After == nil:
			// To the removed key's page, which says what was done (SPEC K21).
			http.Redirect(w, r, "/keys/"+strconv.FormatInt(id, 10)+"?done=removed", http.StatusSeeOther)
		case err == nil:
			http.Redirect(w, r, "/keys/"+strconv.FormatInt(id, 10)+"?done=confirmed", http.StatusSeeOther)
		case errors.As(err, &fe):
			status := http.StatusBadRequest
			if fe.Field == ops.FieldAcknowledgeRerun {
				// Well-formed, refused for the record's state (SPEC K20).
				status = http.StatusUnprocessableEntity
			}
			renderKeyDetail(w, r, status, id, keys, decider, opener, log, func(vm *views.KeyVM) {
				vm.Error, vm.FieldErr, vm.Reason = "Not applied: "+fe.Reason+".", fe.Field, d.Reason
			})
		case errors.Is(err, ops.ErrNotFound):
			// A stale form: say who removed the key and when, as the
			// operations do with a 409, not a bare 404.
			writeError(w, r, log, appError(EConflict, goneMessage(r.Context(), decider, id, log)))
		case errors.Is(err, ops.ErrStale), errors.Is(err, ops.ErrIllegal):
			msg := "Not applied: the record changed since you opened the page. This is its current state; decide again if still needed."
			if errors.Is(err, ops.ErrIllegal) {
				msg = "Not applied: this action is not allowed in the record's current state."
			}
			renderKeyDetail(w, r, http.StatusConflict, id, keys, decider, opener, log, func(vm *views.KeyVM) {
				vm.Error, vm.Reason = msg, d.Reason
			})
		default:
			writeError(w, r, log, err)
		}
	})
}

// keyVersion returns what reads key id's version now (ok false when it
// is gone), for a stale decision's answer.
func keyVersion(ctx context.Context, keys keyReader, id int64) func() (int64, bool) {
	return func() (int64, bool) {
		rec, ok, err := keys.KeyByID(ctx, id)
		return rec.Version, ok && err == nil
	}
}

// denier records a refused attempt in the audit trail (ops.Keys and
// ops.Operations).
type denier interface {
	Denied(ctx context.Context, actor ops.Actor, action, targetKind, targetID string) error
}

// auditedDenial records a refused unsafe request in the audit trail, with
// d; nil records nothing. The path comes from the client: it is made valid
// UTF-8 without NUL bytes and cut to the trail's limits (the action to
// maxDeniedAction bytes, the target ID to maxDeniedTarget), so that no
// path is too long or too odd to be recorded.
func auditedDenial(d denier, log *slog.Logger) func(r *http.Request) {
	return func(r *http.Request) {
		if d == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
			return
		}
		path := auditText(r.URL.Path, maxDeniedAction)
		kind, id := "route", path
		if parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, APIPrefix), "/"), "/"); len(parts) >= 2 {
			kind, id = auditText(strings.TrimSuffix(parts[0], "s"), maxDeniedTarget), auditText(parts[1], maxDeniedTarget)
		}
		if kind == "" {
			kind = "route"
		}
		action := auditText(r.Method+" "+path, maxDeniedAction)
		if err := d.Denied(context.WithoutCancel(r.Context()), actorOf(r), action, kind, id); err != nil {
			log.Error("audit of a denied request failed", "error", err.Error())
		}
	}
}

// Limits of what a denied request records of its path, in bytes: those of
// the trail's name fields.
const (
	maxDeniedAction = 256
	maxDeniedTarget = 256
)

// auditText makes client text storable in the trail: invalid UTF-8
// replaced, NUL bytes dropped, and cut to max bytes on a rune boundary,
// ending with "…" when cut.
func auditText(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// removal finds, in a key's audit history (newest first), the applied
// decision that removed it: a forget or a "did not happen".
func removal(hist []audit.Entry) (audit.Entry, bool) {
	for _, e := range hist {
		if e.Outcome == audit.OutcomeApplied && (e.Action == "key."+string(idem.OperatorForget) || e.Action == "key."+string(idem.OperatorConfirmNotHappened)) {
			return e, true
		}
	}
	return audit.Entry{}, false
}

// removedVM is the page of key id, removed by e.
func removedVM(id int64, e audit.Entry, hist []audit.Entry) views.KeyRemovedVM {
	vm := views.KeyRemovedVM{ID: id, Released: e.Action == "key."+string(idem.OperatorConfirmNotHappened), Actor: e.Actor, Role: e.Role,
		Reason: e.Reason, At: e.At, Seq: e.Seq}
	var before struct {
		Scope       string `json:"scope"`
		Operation   string `json:"operation"`
		Status      string `json:"status"`
		ExternalRef string `json:"external_ref"`
	}
	var after struct {
		Acknowledged struct {
			Consequence string `json:"consequence"`
		} `json:"acknowledged"`
	}
	// Entries the console wrote: a document that does not parse leaves
	// the fields empty rather than hiding the decision.
	_ = json.Unmarshal(e.Before, &before)
	_ = json.Unmarshal(e.After, &after)
	vm.Scope, vm.Operation, vm.Status, vm.ExternalRef = before.Scope, before.Operation, before.Status, before.ExternalRef
	vm.Acknowledged = after.Acknowledged.Consequence
	for _, h := range hist {
		vm.History = append(vm.History, views.AuditRow{Seq: h.Seq, At: h.At, Actor: h.Actor, Role: h.Role, Action: h.Action, Reason: h.Reason, Outcome: h.Outcome})
	}
	return vm
}

// goneMessage says why key id is no longer there: forgotten by whom and
// when, from its audit history, or expired.
func goneMessage(ctx context.Context, decider KeyDecider, id int64, log *slog.Logger) string {
	msg := "Not applied: key " + strconv.FormatInt(id, 10) + " is no longer there"
	hist, err := decider.History(ctx, id, 50)
	if err != nil {
		log.Warn("history of a removed key", "record_id", id, "error", err.Error())
	}
	last, ok := removal(hist)
	if !ok {
		return msg + ": it expired or was removed. Nothing was changed."
	}
	how := "forgotten"
	if last.Action != "key."+string(idem.OperatorForget) {
		how = "confirmed not to have happened"
	}
	return msg + ": it was " + how + " by " + last.Actor + " " + views.Ago(time.Now(), last.At) + " (" + views.UTC(last.At) +
		", audit entry " + strconv.FormatInt(last.Seq, 10) + "). Nothing was changed."
}
