package web

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga"
)

// handleRedrivePage renders the redrive page of an operation (SPEC G12):
// the redrives its record allows and, for the one chosen (?mode=&step=,
// by default the first), what happens to each step and the form that
// applies it. It changes nothing.
func handleRedrivePage(reader operationReader, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		renderRedrive(w, r, http.StatusOK, reader, log, views.RedriveVM{Mode: saga.RedriveMode(q.Get("mode")), Step: q.Get("step")})
	})
}

// renderRedrive renders the redrive page of the route's operation as it
// is now, with what vm holds of the chosen redrive and a refused form.
func renderRedrive(w http.ResponseWriter, r *http.Request, status int, reader operationReader, log *slog.Logger, vm views.RedriveVM) {
	id := operationIDParam(r)
	det, ok, err := readOperation(r.Context(), reader, id)
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	if !ok || id == "" {
		writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
		return
	}
	vm.Operation = det.Operation
	vm.Choices = saga.RedriveChoices(det.Operation)
	if vm.Mode == "" && len(vm.Choices) > 0 {
		vm.Mode, vm.Step = vm.Choices[0].Mode, vm.Choices[0].Steps[0]
	}
	if vm.Mode != "" {
		step := vm.Step
		if vm.Mode == saga.RedriveResume {
			step = ""
		}
		plan, err := saga.PlanRedriveOf(det.Operation, saga.RedriveParams{ActionParams: saga.ActionParams{Step: step}, Mode: vm.Mode})
		var te *saga.TransitionError
		switch {
		case err == nil:
			vm.Plan = &plan
		case errors.As(err, &te):
			vm.PlanError = "Not possible now: " + te.Reason + "."
		case errors.Is(err, saga.ErrNotFound):
			vm.PlanError = "The operation has no step " + strconv.Quote(vm.Step) + "."
		default:
			writeError(w, r, log, err)
			return
		}
	}
	v := viewerFrom(r.Context())
	vm.CanApply = v != nil && v.Can(views.OperationURL(id)+"/redrive", http.MethodPost)
	vm.FormKey = formKey()
	page := pageFor(r, views.DecisionRedrive+" operation "+id, "operations")
	page.URL = views.OperationURL(id) + "/redrive"
	render(w, r, status, page, views.Redrive(page, vm))
}

// handleRedrive applies a redrive posted from the redrive page and
// redirects to the operation, or renders the redrive page again with why
// it was refused: 400 for an invalid form (an unacknowledged unprotected
// step among them), 409 when the operation changed or the redrive is no
// longer legal.
func handleRedrive(reader operationReader, decider OperationDecider, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := operationIDParam(r)
		if id == "" {
			writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
			return
		}
		version, _ := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
		d := ops.OperationDecision{ID: id, Version: version, Action: ops.OperationRedrive, Reason: r.PostFormValue("reason"),
			Step: r.PostFormValue("step"), Mode: saga.RedriveMode(r.PostFormValue("mode")),
			AcceptUnprotected: r.PostFormValue("accept_unprotected") == "yes"}
		if d.Mode == saga.RedriveResume {
			d.Step = ""
		}
		res, err := decider.Decide(r.Context(), actorOf(r), d)
		if apiRequest(r) {
			decisionOutcome(w, r, log, err, apiDecision{Action: "operation.redrive", TargetKind: "operation", TargetID: id,
				Version: res.After.Version}, operationVersion(r.Context(), reader, id))
			return
		}
		kept := views.RedriveVM{Mode: d.Mode, Step: r.PostFormValue("step"), Reason: d.Reason, Accepted: d.AcceptUnprotected}
		var fe *fielderr.Error
		switch {
		case err == nil:
			http.Redirect(w, r, views.OperationURL(id)+"?done=redrive", http.StatusSeeOther)
		case errors.As(err, &fe):
			kept.Error, kept.FieldErr = "Not applied: "+fe.Reason+".", fe.Field
			renderRedrive(w, r, http.StatusBadRequest, reader, log, kept)
		case errors.Is(err, ops.ErrNotFound):
			writeError(w, r, log, appError(ENotFound, "There is no operation with this ID."))
		case errors.Is(err, ops.ErrStale), errors.Is(err, ops.ErrIllegal):
			kept.Error = "Not applied: the operation changed since you opened the page. This is its current state; preview again if still needed."
			if errors.Is(err, ops.ErrIllegal) {
				kept.Error = "Not applied: this redrive is not allowed in the operation's current state."
			}
			renderRedrive(w, r, http.StatusConflict, reader, log, kept)
		default:
			writeError(w, r, log, err)
		}
	})
}
