package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// OperationDecider is what the operation decision routes need (an
// *ops.Operations).
type OperationDecider interface {
	Decide(ctx context.Context, actor ops.Actor, d ops.OperationDecision) (ops.OperationResult, error)
	Denied(ctx context.Context, actor ops.Actor, action, targetKind, targetID string) error
	History(ctx context.Context, id string, limit int) ([]audit.Entry, error)
	DataViewed(ctx context.Context, actor ops.Actor, id string) error
}

// operationIDParam is the operation ID of the route, or "" when there is
// none. chi routes on the escaped path when there is one (an ID with an
// escaped slash); the parameter is then still escaped.
func operationIDParam(r *http.Request) string {
	id := chi.URLParam(r, "id")
	if r.URL.RawPath != "" {
		var err error
		if id, err = url.PathUnescape(id); err != nil {
			return ""
		}
	}
	if len(id) > maxOperationID {
		return ""
	}
	return id
}

// The consequences of the actions, shown before the operator submits.
const (
	retryConsequence = "Runs the chosen step again with fresh attempts and the same idempotency key, so the external system " +
		"sees a repeat of the same request rather than a new one, and resumes the operation from there. For a step whose " +
		"compensation failed, the compensation runs again and the operation goes on compensating."
	confirmConsequence = "Records what really happened to the chosen step, as you established it in the external system. " +
		"Happened: the step completes with the external ID and the operation moves on to its next step. Did not happen: " +
		"the step fails and the operation compensates what it had done. For a failed compensation, happened records the " +
		"undo as done and the compensation goes on."
	resolveConsequence = "Closes the review with the status you choose and your reason as its resolution. The engine does " +
		"nothing else: no step runs and nothing is compensated, because you have settled the external systems yourself. " +
		"The operation is shown as resolved manually."
)

// operationActions are the decisions the viewer may take on op now:
// allowed by the policy and legal in the saga's state machine.
func operationActions(v *views.Viewer, op sagadriver.Operation) []views.OperationActionForm {
	legal := ops.Legal(op)
	base := views.OperationURL(op.ID)
	can := func(action string) bool { return v != nil && v.Can(base+"/"+action, http.MethodPost) }
	choices := func(cs []ops.StepChoice) []views.OperationStepChoice {
		out := make([]views.OperationStepChoice, len(cs))
		for i, c := range cs {
			out[i] = views.OperationStepChoice{Name: c.Name, Label: c.Name + " (" + string(c.Status) + ")", Selected: c.Name == op.CurrentStep}
		}
		return out
	}
	var out []views.OperationActionForm
	if len(legal.Retry) > 0 && can("retry") {
		out = append(out, views.OperationActionForm{Name: "retry", Title: "Retry a step of operation " + op.ID, URL: base + "/retry",
			Version: op.Version, FormKey: formKey(), Steps: choices(legal.Retry), Consequence: retryConsequence})
	}
	if len(legal.Confirm) > 0 && can("confirm") {
		notHappened := true
		for _, c := range legal.Confirm {
			notHappened = notHappened && c.NotHappened
		}
		title := views.DecisionConfirmHappened + " — a step of operation " + op.ID
		if notHappened {
			title = views.DecisionConfirmHappened + ", or " + strings.TrimPrefix(views.DecisionConfirmNotHappened, "Confirm ") + " — a step of operation " + op.ID
		}
		out = append(out, views.OperationActionForm{Name: "confirm", Title: title, URL: base + "/confirm",
			Version: op.Version, FormKey: formKey(), Steps: choices(legal.Confirm), Outcomes: true, NotHappened: notHappened, Consequence: confirmConsequence})
	}
	if legal.Compensate && can("compensate") {
		out = append(out, views.OperationActionForm{Name: "compensate", Title: "Compensate operation " + op.ID, URL: base + "/compensate",
			Version: op.Version, FormKey: formKey(), Consequence: compensateConsequence(op)})
	}
	if legal.Resolve && can("resolve") {
		out = append(out, views.OperationActionForm{Name: "resolve", Title: "Resolve operation " + op.ID + " manually", URL: base + "/resolve",
			Version: op.Version, FormKey: formKey(), Resolve: true, Consequence: resolveConsequence})
	}
	return out
}

// compensateConsequence says what compensation will undo: every step that
// completed or may have applied, in the order of the definition's plan.
func compensateConsequence(op sagadriver.Operation) string {
	var undo []string
	for _, st := range op.Steps {
		switch st.Status {
		case sagadriver.StepCompleted, sagadriver.StepUncertain, sagadriver.StepRunning:
			if st.Compensable {
				undo = append(undo, st.Name)
			}
		}
	}
	what := "nothing: no step that can be undone has taken effect, so the operation ends failed"
	if len(undo) > 0 {
		what = "the steps " + strings.Join(undo, ", ") + " (each by its own compensation, under its own idempotency key)"
	}
	return "Stops going forward and undoes the operation: compensates " + what + ". Steps not reached are skipped. " +
		"The operation ends compensated, or comes back for review if an undo fails."
}

// handleOperationDetailDecisions renders an operation with the viewer's
// decisions and its audit history.
func handleOperationDetailDecisions(reader operationReader, decider OperationDecider, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := operationIDParam(r)
		if id == "" {
			writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
			return
		}
		renderOperationDetail(w, r, http.StatusOK, id, reader, decider, log, func(d *views.OperationDecisionsVM) {
			if n, ok := operationNotices[r.URL.Query().Get("done")]; ok {
				d.Notice = n
			}
		})
	})
}

// operationNotices are the notices after each applied decision's redirect.
var operationNotices = map[string]string{
	"retry":      "Retry applied and recorded in the audit trail: the step runs again under its key.",
	"confirm":    "Outcome confirmed and recorded in the audit trail.",
	"compensate": "Compensation started and recorded in the audit trail.",
	"resolve":    "Review resolved manually and recorded in the audit trail.",
	"redrive":    "Redrive applied and recorded in the audit trail: the application's workers take the operation up again.",
}

// renderOperationDetail renders the current state of operation id, with
// the viewer's actions and the operation's audit history; adjust sets a
// notice or an error.
func renderOperationDetail(w http.ResponseWriter, r *http.Request, status int, id string, reader operationReader, decider OperationDecider, log *slog.Logger, adjust func(*views.OperationDecisionsVM)) {
	det, ok, err := readOperation(r.Context(), reader, id)
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	if !ok {
		writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
		return
	}
	vm := views.OperationVM{Operation: det.Operation, Events: det.Events, EventsOmitted: det.EventsOmitted, Findings: det.Findings}
	gateOperationData(r, &vm, decider, log)
	d := views.OperationDecisionsVM{Enabled: true, Actions: operationActions(viewerFrom(r.Context()), det.Operation)}
	if v := viewerFrom(r.Context()); v != nil && v.Can(views.OperationURL(id)+"/redrive", http.MethodGet) {
		d.Redrive = ops.Legal(det.Operation).Redrive
	}
	hist, err := decider.History(r.Context(), id, 50)
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	for _, e := range hist {
		d.History = append(d.History, views.AuditRow{Seq: e.Seq, At: e.At, Actor: e.Actor, Role: e.Role, Action: e.Action, Reason: e.Reason, Outcome: e.Outcome})
	}
	adjust(&d)
	for i := range d.Actions {
		d.Actions[i].Open = d.Action != "" && d.Actions[i].Name == d.Action
	}
	if d.Error == "" {
		// A refused decision's page keeps what the form held: no refresh.
		liveOperation(r, &vm)
	}
	page := pageFor(r, "Operation "+id, "operations")
	page.URL = views.OperationURL(id)
	render(w, r, status, page, views.OperationPage(page, vm, d), "live")
}

// handleOperationDecision applies a decision posted from an operation's
// page and redirects to the fresh page, or renders the page again with why
// it was refused: 400 for an invalid form, 409 when the operation changed
// or the action is no longer legal.
func handleOperationDecision(action ops.OperationAction, reader operationReader, decider OperationDecider, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := operationIDParam(r)
		if id == "" {
			writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
			return
		}
		version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
		d := ops.OperationDecision{ID: id, Version: version, Action: action, Reason: r.PostFormValue("reason"),
			Step: r.PostFormValue("step"), ExternalID: r.PostFormValue("external_ref"), ResolveTo: sagadriver.Status(r.PostFormValue("status"))}
		kept := func(vm *views.OperationDecisionsVM) {
			vm.Action, vm.Reason, vm.Outcome, vm.ExternalRef, vm.ResolveTo = string(action), d.Reason, r.PostFormValue("outcome"), d.ExternalID, string(d.ResolveTo)
		}
		var err error
		switch outcome := r.PostFormValue("outcome"); {
		case action != ops.OperationConfirm:
		case outcome == "happened":
			d.Happened = true
		case outcome == "did_not_happen":
		default:
			err = ops.InvalidField("outcome", "say whether the step's effect happened")
		}
		var res ops.OperationResult
		if err == nil {
			res, err = decider.Decide(r.Context(), actorOf(r), d)
		}
		if apiRequest(r) {
			decisionOutcome(w, r, log, err, apiDecision{Action: "operation." + string(action), TargetKind: "operation", TargetID: id,
				Version: res.After.Version}, operationVersion(r.Context(), reader, id))
			return
		}
		var fe *fielderr.Error
		switch {
		case err == nil:
			http.Redirect(w, r, views.OperationURL(id)+"?done="+string(action), http.StatusSeeOther)
		case errors.As(err, &fe):
			renderOperationDetail(w, r, http.StatusBadRequest, id, reader, decider, log, func(vm *views.OperationDecisionsVM) {
				kept(vm)
				vm.Error, vm.FieldErr = "Not applied: "+fe.Reason+".", fe.Field
			})
		case errors.Is(err, ops.ErrNotFound):
			writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
		case errors.Is(err, ops.ErrStale), errors.Is(err, ops.ErrIllegal):
			msg := "Not applied: the operation changed since you opened the page. This is its current state; decide again if still needed."
			if errors.Is(err, ops.ErrIllegal) {
				msg = "Not applied: this action is not allowed in the operation's current state."
			}
			renderOperationDetail(w, r, http.StatusConflict, id, reader, decider, log, func(vm *views.OperationDecisionsVM) {
				kept(vm)
				vm.Error = msg
			})
		default:
			writeError(w, r, log, err)
		}
	})
}

// operationVersion returns what reads operation id's version now (ok
// false when it is gone), for a stale decision's answer.
func operationVersion(ctx context.Context, reader operationReader, id string) func() (int64, bool) {
	return func() (int64, bool) {
		det, ok, err := readOperation(ctx, reader, id)
		return det.Operation.Version, ok && err == nil
	}
}

// deniedAuditor returns what authorize calls on a refused request: the
// key decider's audit when there is one, else the operation decider's.
func deniedAuditor(keys KeyDecider, operations OperationDecider, log *slog.Logger) func(r *http.Request) {
	switch {
	case keys != nil:
		return auditedDenial(keys, log)
	case operations != nil:
		return auditedDenial(operations, log)
	}
	return auditedDenial(nil, log)
}

// dataViewer audits that an operation's data was shown (ops.Operations).
type dataViewer interface {
	DataViewed(ctx context.Context, actor ops.Actor, id string) error
}

// gateOperationData leaves an operation's input and its steps' results in
// vm only for a role with the "operation_data view" permission that asked
// for them (?data=show, a link on the page), and only once their viewing
// is recorded in the audit trail by viewer (nil: no trail, not shown), as
// stored responses are: they may hold personal data (a signup's email).
// Otherwise it clears them and says why in vm.DataNote, with vm.DataURL
// to ask for them where the role may. An operation without either records
// nothing.
func gateOperationData(r *http.Request, vm *views.OperationVM, viewer dataViewer, log *slog.Logger) {
	op := &vm.Operation
	has := len(op.Input) > 0
	for _, st := range op.Steps {
		has = has || len(st.Result) > 0
	}
	if !has {
		return
	}
	v := viewerFrom(r.Context())
	switch {
	case v == nil || !v.Can("operation_data", "view"):
		vm.DataNote = "Your role may not see the inputs and step results of operations."
	case viewer == nil:
		vm.DataNote = "Inputs and step results are not shown: this console has no audit trail to record their viewing."
	case r.URL.Query().Get("data") != "show":
		vm.DataNote = "The input and the step results may hold personal data: they are shown on request, and each showing is recorded in the audit trail."
		vm.DataURL = views.OperationURL(op.ID) + "?data=show"
	default:
		err := viewer.DataViewed(r.Context(), actorOf(r), op.ID)
		if err == nil {
			return
		}
		log.Error("audit of an operation data view failed", "error", err.Error())
		vm.DataNote = "Inputs and step results are not shown: their viewing could not be recorded in the audit trail."
	}
	op.Input = nil
	steps := make([]sagadriver.StepRecord, len(op.Steps))
	for i, st := range op.Steps {
		st.Result = nil
		steps[i] = st
	}
	op.Steps = steps
}
