package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
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
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/views"
)

// keyDecider is what the key decision routes need.
type keyDecider interface {
	Decide(ctx context.Context, actor ops.Actor, d ops.KeyDecision) (ops.KeyResult, error)
	Denied(ctx context.Context, actor ops.Actor, action, targetKind, targetID string) error
	History(ctx context.Context, recordID int64, limit int) ([]audit.Entry, error)
	ResponseViewed(ctx context.Context, actor ops.Actor, recordID int64) error
}

func actorOf(r *http.Request) ops.Actor {
	a := ops.Actor{RequestID: middleware.GetReqID(r.Context()), ClientAddr: clientAddr(r), UserAgent: r.UserAgent()}
	if v := viewerFrom(r.Context()); v != nil {
		a.Username, a.Role = v.Username, v.Role
	}
	return a
}

// keyActions are the decisions the viewer may take on rec now: allowed by
// the policy and legal in the record's state.
func keyActions(v *views.Viewer, rec idemdriver.Record) []views.ActionForm {
	id := strconv.FormatInt(rec.ID, 10)
	var out []views.ActionForm
	if v.Can("/keys/"+id+"/forget", http.MethodPost) && idem.CheckOperator(rec, idem.OperatorForget) == nil {
		out = append(out, views.ActionForm{Name: "forget", Title: "Forget key " + id, URL: "/keys/" + id + "/forget", Version: rec.Version, FormKey: formKey(),
			Consequence: "Deletes this record. The next request with this key runs again, as if it had never been seen. Do this only when you are sure the effect did not happen, or may safely happen again."})
	}
	if v.Can("/keys/"+id+"/confirm", http.MethodPost) && idem.CheckOperator(rec, idem.OperatorConfirmHappened) == nil {
		out = append(out, views.ActionForm{Name: "confirm", Title: "Confirm the outcome of key " + id, URL: "/keys/" + id + "/confirm", Version: rec.Version, FormKey: formKey(), Outcomes: true,
			Consequence: "If the effect happened, the key completes with the external reference and is never run again (repeats get 409: no response to replay). If it did not happen, the key is released and the next request runs."})
	}
	return out
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
func handleKeyDecision(action string, keys keyReader, decider keyDecider, opener resultOpener, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
		if err != nil || id <= 0 {
			writeError(w, r, log, appError(ENotFound, "There is no key with this ID."))
			return
		}
		version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
		d := ops.KeyDecision{RecordID: id, Version: version, Reason: r.PostFormValue("reason"), ExternalRef: r.PostFormValue("external_ref")}
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
		var fe *ops.FieldError
		switch {
		case err == nil && res.After == nil:
			http.Redirect(w, r, "/keys?released="+strconv.FormatInt(id, 10), http.StatusSeeOther)
		case err == nil:
			http.Redirect(w, r, "/keys/"+strconv.FormatInt(id, 10)+"?done=confirmed", http.StatusSeeOther)
		case errors.As(err, &fe):
			renderKeyDetail(w, r, http.StatusBadRequest, id, keys, decider, opener, log, func(vm *views.KeyVM) {
				vm.Error, vm.FieldErr, vm.Reason = "Not applied: "+fe.Reason+".", fe.Field, d.Reason
			})
		case errors.Is(err, ops.ErrNotFound):
			// A stale form: say who removed the key and when, as the
			// operations do with a 409, not a bare 404 (issue 13 defect 10).
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
		if parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/"); len(parts) >= 2 {
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

// goneMessage says why key id is no longer there: forgotten by whom and
// when, from its audit history, or expired.
func goneMessage(ctx context.Context, decider keyDecider, id int64, log *slog.Logger) string {
	msg := "Not applied: key " + strconv.FormatInt(id, 10) + " is no longer there"
	hist, err := decider.History(ctx, id, 50)
	if err != nil {
		log.Warn("history of a removed key", "record_id", id, "error", err.Error())
	}
	var last *audit.Entry
	for i, e := range hist {
		if e.Action == "key.forget" && e.Outcome == audit.OutcomeApplied && (last == nil || e.Seq > last.Seq) {
			last = &hist[i]
		}
	}
	if last == nil {
		return msg + ": it expired or was removed. Nothing was changed."
	}
	return msg + ": it was forgotten by " + last.Actor + " " + views.Ago(time.Now(), last.At) + " (" + views.UTC(last.At) +
		", audit entry " + strconv.FormatInt(last.Seq, 10) + "). Nothing was changed."
}
