package web

// The API's JSON of the console's pages: the same handlers read and
// filter, and answer with these documents instead of HTML when the request
// came through the API. Stored responses, operations' inputs and steps'
// results are not in them: the API reads state, not data.

import (
	"net/http"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/views"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

type keyJSON struct {
	ID             int64      `json:"id"`
	Scope          string     `json:"scope"`
	Operation      string     `json:"operation"`
	KeyDigest      string     `json:"key_digest"`
	Status         string     `json:"status"`
	ResponseCode   int        `json:"response_code,omitempty"`
	CorrelationID  string     `json:"correlation_id,omitempty"`
	ExternalRef    string     `json:"external_ref,omitempty"`
	ResourceIDs    []string   `json:"resource_ids,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	Attempts       int        `json:"attempts"`
	Version        int64      `json:"version"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	TraceID        string     `json:"trace_id,omitempty"`
}

func keyOf(rec idemdriver.Record) keyJSON {
	k := keyJSON{ID: rec.ID, Scope: rec.Scope, Operation: rec.Operation, KeyDigest: rec.KeyDigest, Status: string(rec.Status),
		ResponseCode: rec.ResponseCode, CorrelationID: rec.CorrelationID, ExternalRef: rec.ExternalRef, ResourceIDs: rec.ResourceIDs,
		LastError: rec.LastError, Attempts: rec.Attempts, Version: rec.Version, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt,
		ExpiresAt: rec.ExpiresAt, TraceID: rec.TraceID}
	if !rec.LeaseExpiresAt.IsZero() {
		k.LeaseExpiresAt = &rec.LeaseExpiresAt
	}
	return k
}

type stepJSON struct {
	Name        string `json:"name"`
	Seq         int    `json:"seq"`
	Status      string `json:"status"`
	System      string `json:"system,omitempty"`
	ExternalID  string `json:"external_id,omitempty"`
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	LastError   string `json:"last_error,omitempty"`
	Compensable bool   `json:"compensable"`
}

type operationJSON struct {
	ID                string     `json:"id"`
	Type              string     `json:"type"`
	DefinitionVersion int        `json:"definition_version"`
	Status            string     `json:"status"`
	CorrelationID     string     `json:"correlation_id,omitempty"`
	CurrentStep       string     `json:"current_step,omitempty"`
	LastError         string     `json:"last_error,omitempty"`
	ReviewReason      string     `json:"review_reason,omitempty"`
	Resolution        string     `json:"resolution,omitempty"`
	Version           int64      `json:"version"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	FinishedAt        *time.Time `json:"finished_at,omitempty"`
	Steps             []stepJSON `json:"steps,omitempty"`
}

func operationOf(op sagadriver.Operation, steps bool) operationJSON {
	o := operationJSON{ID: op.ID, Type: op.Type, DefinitionVersion: op.DefinitionVersion, Status: string(op.Status), CorrelationID: op.CorrelationID,
		CurrentStep: op.CurrentStep, LastError: op.LastError, ReviewReason: op.ReviewReason, Resolution: op.Resolution, Version: op.Version,
		CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt, FinishedAt: op.FinishedAt}
	if steps {
		for _, st := range op.Steps {
			o.Steps = append(o.Steps, stepJSON{Name: st.Name, Seq: st.Seq, Status: string(st.Status), System: st.System, ExternalID: st.ExternalID,
				Attempts: st.Attempts, MaxAttempts: st.MaxAttempts, LastError: st.LastError, Compensable: st.Compensable})
		}
	}
	return o
}

// listJSON is a page of a list: its items, how many the filter selects
// (at least, when not exact; absent where the page does not count) and
// the API's links to the pages around it.
type listJSON[T any] struct {
	Items []T    `json:"items"`
	Total *int64 `json:"total,omitempty"`
	Exact *bool  `json:"total_exact,omitempty"`
	Next  string `json:"next,omitempty"`
	Prev  string `json:"prev,omitempty"`
	First string `json:"first,omitempty"`
}

// writeList answers a list page: its error as a problem naming the field,
// or the items mapped by of, with the pager's links under the API.
func writeList[S, T any](w http.ResponseWriter, r *http.Request, status int, errMsg, field string, items []S, total views.CountVM, p views.PagerVM, of func(S) T) {
	if errMsg != "" {
		writeError(w, r, nil, &AppError{Code: EInvalid, Message: errMsg, Field: field})
		return
	}
	out := listJSON[T]{Items: make([]T, 0, len(items))}
	if total.Known {
		out.Total, out.Exact = &total.N, &total.Exact
	}
	for _, it := range items {
		out.Items = append(out.Items, of(it))
	}
	link := func(u string) string {
		if u == "" {
			return ""
		}
		return APIPrefix + u
	}
	out.Next, out.Prev, out.First = link(p.NextURL), link(p.PrevURL), link(p.FirstURL)
	writeJSON(w, status, out)
}

// auditRowJSON is an entry of a target's history.
type auditRowJSON struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Role    string    `json:"role"`
	Action  string    `json:"action"`
	Reason  string    `json:"reason,omitempty"`
	Outcome string    `json:"outcome"`
}

func historyOf(rows []views.AuditRow) []auditRowJSON {
	out := make([]auditRowJSON, 0, len(rows))
	for _, h := range rows {
		out = append(out, auditRowJSON{Seq: h.Seq, At: h.At, Actor: h.Actor, Role: h.Role, Action: h.Action, Reason: h.Reason, Outcome: h.Outcome})
	}
	return out
}

// incidentJSON is an incident group: what its items share, how many
// there are, and their count per hour over 24 hours (oldest first).
type incidentJSON struct {
	Key       string    `json:"key"`
	Kind      string    `json:"kind"`
	State     string    `json:"state"`
	Operation string    `json:"operation"`
	Step      string    `json:"step,omitempty"`
	Class     string    `json:"class,omitempty"`
	Message   string    `json:"message,omitempty"`
	System    string    `json:"system,omitempty"`
	Count     int64     `json:"count"`
	Exact     bool      `json:"count_exact"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Hourly    []int64   `json:"hourly"`
}

func incidentsOf(vm views.IncidentsVM) any {
	out := struct {
		Groups []incidentJSON `json:"groups"`
		AsOf   *time.Time     `json:"as_of,omitempty"`
	}{Groups: make([]incidentJSON, 0, len(vm.Groups))}
	if !vm.AsOf.IsZero() {
		out.AsOf = &vm.AsOf
	}
	for _, g := range vm.Groups {
		out.Groups = append(out.Groups, incidentJSON{Key: g.Key, Kind: g.Kind, State: g.State, Operation: g.Operation, Step: g.Step, Class: g.Class,
			Message: g.Message, System: g.System, Count: g.Count, Exact: g.Exact, FirstSeen: g.FirstSeen, LastSeen: g.LastSeen, Hourly: g.Spark.Points})
	}
	return out
}

// auditEntryOf is an entry of the audit trail in the API: the trail's own
// JSON form, as its export writes it (hashes included, so that an entry
// read here can be checked against the chain).
func auditEntryOf(e audit.Entry) audit.Entry { return e }
