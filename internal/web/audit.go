package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/views"
)

// AuditTrail is what the audit pages need of the trail; *audit.Trail
// (built with its keys) satisfies it.
type AuditTrail interface {
	auditVerifier
	List(ctx context.Context, f audit.Filter) ([]audit.Entry, int64, error)
	Export(ctx context.Context, f audit.Filter, w io.Writer, format string) error
	Append(ctx context.Context, e audit.Entry) (audit.Entry, error)
}

// Defaults of the chain's verification status on /audit.
const (
	// DefaultAuditVerifyEvery is how long a verification of the chain is
	// shown before the next page view starts a new one.
	DefaultAuditVerifyEvery = 5 * time.Minute
	// auditVerifyWait is how long a page view waits for a verification it
	// started (or found running) before it renders without it.
	auditVerifyWait = 2 * time.Second
	// auditVerifyTimeout bounds one verification, which runs detached from
	// the request that started it.
	auditVerifyTimeout = 10 * time.Minute
	// auditVerifyErrorEvery is how long a failed verification (the query
	// failed, not the chain) is shown before it is retried.
	auditVerifyErrorEvery = 30 * time.Second
	// auditExportDeadline replaces the server's write timeout for an
	// export, which streams the whole filtered trail.
	auditExportDeadline = 30 * time.Minute
)

// auditOutcomes are the outcomes the filter offers and accepts.
var auditOutcomes = []string{audit.OutcomeApplied, audit.OutcomeDenied, audit.OutcomeConflict, audit.OutcomeRead}

// maxRequestIDBytes bounds a client's X-Request-Id that is kept as the
// request's ID.
const maxRequestIDBytes = 64

// validRequestID reports whether a client's X-Request-Id is kept as the
// request's ID (in logs and the audit trail): 1 to 64 of A-Z, a-z, 0-9,
// '.', '_', ':' and '-'.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDBytes {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// requestID gives every request an ID, which middleware.GetReqID returns
// and the response's X-Request-Id carries: the client's X-Request-Id when
// it is in the bounded, safe form validRequestID accepts, else a random
// one, so that a client can never write arbitrary text as the audit
// trail's request ID. It replaces chi's middleware.RequestID, which keeps
// any header verbatim.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(middleware.RequestIDHeader)
		if !validRequestID(id) {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set(middleware.RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), middleware.RequestIDKey, id)))
	})
}

// auditVerifier is the part of the trail the chain status uses.
type auditVerifier interface {
	Verify(ctx context.Context, anchors ...audit.Anchor) (audit.Verification, error)
	HeadSeq(ctx context.Context) (int64, error)
	LastCheckpoint(ctx context.Context) (audit.Checkpoint, bool, error)
	CheckCheckpoint(c audit.Checkpoint) error
}

// chainStatus verifies the chain at most once per ttl, whatever the number
// of page views, and sooner when the trail's head has moved since (an
// append, or a cut): a result is only shown for the head it verified. It
// keeps the last result in memory and is safe for concurrent use. A
// verification runs in its own goroutine, detached from the request that
// started it, so a page view of a long chain waits at most auditVerifyWait
// and then shows the previous result, or that one is under way.
type chainStatus struct {
	trail    auditVerifier
	external ExternalCheckpoints // nil: none are written
	ttl      time.Duration
	wait     time.Duration
	timeout  time.Duration
	now      func() time.Time
	log      *slog.Logger

	mu      sync.Mutex
	last    *chainResult  // nil until the first verification ends
	running chan struct{} // closed when the verification under way ends; nil when none is
	started time.Time     // when the verification under way started
}

// ExternalCheckpoints is the console's schedule of checkpoints written
// outside the database.
type ExternalCheckpoints interface {
	// Newest is when the newest one was made; ok is false when none was.
	Newest() (at time.Time, ok bool)
	// MaxAge is the age past which the newest one is overdue.
	MaxAge() time.Duration
}

// withExternal adds to vm the age of the newest checkpoint outside the
// database.
func (c *chainStatus) withExternal(vm views.ChainStatusVM) views.ChainStatusVM {
	if c.external == nil {
		return vm
	}
	at, ok := c.external.Newest()
	vm.External = &views.ExternalCheckpointVM{At: at, Written: ok, MaxAge: c.external.MaxAge(),
		Stale: !ok || c.now().Sub(at) > c.external.MaxAge()}
	return vm
}

// chainResult is one verification and when it ended.
type chainResult struct {
	v   audit.Verification
	err error
	at  time.Time
	// head is the trail's head seq when the verification ended: the result
	// is stale once the head differs.
	head int64
	// checkpoint is the last stored checkpoint, nil when there is none;
	// checkpointErr why its MAC did not verify (it was then not used as
	// an anchor).
	checkpoint    *audit.Checkpoint
	checkpointErr error
}

func newChainStatus(trail auditVerifier, ttl time.Duration, log *slog.Logger) *chainStatus {
	if ttl <= 0 {
		ttl = DefaultAuditVerifyEvery
	}
	return &chainStatus{trail: trail, ttl: ttl, wait: auditVerifyWait, timeout: auditVerifyTimeout, now: time.Now, log: log}
}

// fresh reports whether the last result may still be shown as current
// for a trail whose head is head (-1 when it could not be read).
func (c *chainStatus) fresh(now time.Time, head int64) bool {
	if c.last == nil || (head >= 0 && c.last.err == nil && head != c.last.head) {
		return false
	}
	ttl := c.ttl
	if c.last.err != nil {
		ttl = min(ttl, auditVerifyErrorEvery)
	}
	return now.Sub(c.last.at) < ttl
}

// chainView is what a page view shows of the chain: the last result (nil
// if none has ended yet), whether a verification is under way and since
// when, and the trail's head seq when the view asked (-1 if unknown).
type chainView struct {
	last    *chainResult
	running bool
	started time.Time
	head    int64
}

// get returns the chain's status for a page view, starting a verification
// if the last result is stale.
func (c *chainStatus) get(ctx context.Context) chainView {
	head, err := c.trail.HeadSeq(ctx)
	if err != nil {
		head = -1 // the verification will fail too, and say so
	}
	c.mu.Lock()
	if c.fresh(c.now(), head) {
		last := c.last
		c.mu.Unlock()
		return chainView{last: last, head: head}
	}
	done := c.running
	if done == nil {
		done = make(chan struct{})
		c.running, c.started = done, c.now()
		go c.run(done)
	}
	c.mu.Unlock()

	timer := time.NewTimer(c.wait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return chainView{last: c.last, running: c.running != nil, started: c.started, head: head}
}

// run verifies the chain, against the last stored checkpoint when its MAC
// verifies, and stores the result.
func (c *chainStatus) run(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	res := &chainResult{}
	var anchors []audit.Anchor
	cp, ok, err := c.trail.LastCheckpoint(ctx)
	if err == nil && ok {
		res.checkpoint = &cp
		if res.checkpointErr = c.trail.CheckCheckpoint(cp); res.checkpointErr == nil {
			anchors = append(anchors, cp.Anchor())
		} else {
			c.log.Error("audit checkpoint does not verify", "seq", cp.Seq, "error", res.checkpointErr.Error())
		}
	}
	if err == nil {
		res.v, err = c.trail.Verify(ctx, anchors...)
	}
	if err == nil {
		// The head the result holds for: the verified one when the whole
		// chain verified, else the head now (an append or a repair moves
		// it, and a new verification is due).
		res.head = res.v.HeadSeq
		if !res.v.OK {
			res.head, err = c.trail.HeadSeq(ctx)
		}
	}
	res.err = err
	if err != nil {
		c.log.Error("audit chain verification failed", "error", err.Error())
	} else if !res.v.OK {
		c.log.Error("audit chain broken", "first_bad_seq", res.v.FirstBad, "problem", res.v.Problem, "checked", res.v.Checked)
	}
	c.mu.Lock()
	res.at = c.now().UTC()
	c.last = res
	c.running = nil
	c.mu.Unlock()
	close(done)
}

// chainVM is the verification status as the page shows it.
// A verified result shown while the head has moved past it (a newer
// verification is under way) counts the newer entries as not verified yet,
// and a result that verified none while entries exist shows as pending:
// never "intact, 0 entries verified" over a trail that has entries.
func chainVM(cv chainView) views.ChainStatusVM {
	last := cv.last
	vm := views.ChainStatusVM{Refreshing: cv.running, Started: cv.started.UTC()}
	switch {
	case last == nil, last.err == nil && last.v.OK && last.v.Checked == 0 && cv.head > 0:
		vm.State = views.ChainPending
		if !cv.running {
			vm.Started = time.Time{}
		}
	case last.err != nil:
		vm.State, vm.At = views.ChainUnknown, last.at
	case !last.v.OK:
		vm.State, vm.At = views.ChainBroken, last.at
		vm.Checked, vm.FirstBad, vm.Problem = last.v.Checked, last.v.FirstBad, last.v.Problem
	default:
		vm.State, vm.At, vm.Checked = views.ChainVerified, last.at, last.v.Checked
		if last.v.HeadSeq > 0 {
			vm.Head = strconv.FormatInt(last.v.HeadSeq, 10) + ":" + hex.EncodeToString(last.v.Head)
		}
		vm.Newer = max(0, cv.head-last.v.HeadSeq)
	}
	if last != nil && last.err == nil {
		vm.KeyedFrom = last.v.KeyedFrom
	}
	if last != nil && last.checkpoint != nil {
		cp := last.checkpoint
		vm.Checkpoint = &views.CheckpointVM{Seq: cp.Seq, At: cp.At, Line: cp.String(), OK: last.checkpointErr == nil && last.err == nil && last.v.OK}
		switch {
		case last.checkpointErr != nil:
			vm.Checkpoint.Problem = "its MAC does not verify under the audit key: the stored checkpoint was altered or not made by this console"
		case last.err == nil && !last.v.OK:
			vm.Checkpoint.Problem = "the chain does not verify up to it"
		}
	}
	return vm
}

// auditUnavailable answers the audit routes of a console built without a
// trail.
func auditUnavailable(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, log, appError(ENotFound, "This console has no audit trail."))
	})
}

// actorLister lists the console's users, for the audit's actor picker.
type actorLister interface {
	ListUsers(ctx context.Context) ([]store.User, error)
}

func handleAuditList(trail AuditTrail, chain *chainStatus, users actorLister, log *slog.Logger) http.Handler {
	if trail == nil {
		return auditUnavailable(log)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		vm := views.AuditVM{Filter: auditFilterVM(q), Outcomes: auditOutcomes}
		if r.Header.Get("HX-Request") != "true" && !apiRequest(r) { // an HTMX swap (and the API) shows only the results
			vm.Chain = chain.withExternal(chainVM(chain.get(r.Context())))
			if users != nil {
				if list, err := users.ListUsers(r.Context()); err == nil {
					for _, u := range list {
						vm.Actors = append(vm.Actors, u.Username)
					}
				} else {
					log.Warn("audit: users not listed for the actor picker", "error", err.Error())
				}
			}
			now := time.Now().UTC()
			vm.LastHour = "/audit?from=" + now.Add(-time.Hour).Format("2006-01-02T15:04")
			vm.Today = "/audit?from=" + now.Format("2006-01-02") + "T00:00"
		}
		page := pageFor(r, "Audit trail", "audit") // after the verification: its time is not in the future
		page.Results = true
		status := http.StatusOK
		f, ferr := auditFilter(q)
		if ferr == nil {
			entries, next, err := trail.List(r.Context(), f)
			var fe *fielderr.Error
			switch {
			case errors.As(err, &fe):
				ferr = &AppError{Code: EInvalid, Field: fe.Field, Message: "Field " + strconv.Quote(fe.Field) + ": " + fe.Reason + "."}
			case err != nil:
				writeError(w, r, log, err)
				return
			default:
				vm.Entries = entries
				if next > 0 {
					nq := auditQuery(q)
					nq.Set("after", strconv.FormatInt(next, 10))
					vm.NextURL = "/audit?" + nq.Encode()
				}
				if f.After > 0 {
					vm.FirstURL = auditURL("/audit", auditQuery(q))
				}
				eq := auditQuery(q)
				eq.Set("format", audit.FormatCSV)
				vm.ExportCSV = "/audit/export?" + eq.Encode()
				eq.Set("format", audit.FormatJSONL)
				vm.ExportJSONL = "/audit/export?" + eq.Encode()
			}
		}
		if ferr != nil {
			vm.Error, vm.FieldErr, status = ferr.Message, ferr.Field, http.StatusBadRequest
		}
		if apiRequest(r) {
			writeList(w, r, status, vm.Error, vm.FieldErr, vm.Entries, views.CountVM{},
				views.PagerVM{NextURL: vm.NextURL, FirstURL: vm.FirstURL}, auditEntryOf)
			return
		}
		render(w, r, status, page, views.Audit(page, vm), "results")
	})
}

// auditFilterKeys are the query parameters of the filter, in the order the
// export's reason lists them.
var auditFilterKeys = []string{"actor", "action", "target_kind", "target_id", "request_id", "outcome", "from", "to"}

func auditFilterVM(q url.Values) views.AuditFilterVM {
	return views.AuditFilterVM{Actor: q.Get("actor"), Action: q.Get("action"), TargetKind: q.Get("target_kind"),
		TargetID: q.Get("target_id"), Outcome: q.Get("outcome"), From: q.Get("from"), To: q.Get("to"), RequestID: q.Get("request_id")}
}

// auditQuery is q's non-empty filters, without the cursor and the format:
// the base of the next page's and the exports' links.
func auditQuery(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range auditFilterKeys {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out
}

func auditURL(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// auditFilter reads the trail's filters from the URL; an invalid one is an
// error naming its field.
func auditFilter(q url.Values) (audit.Filter, *AppError) {
	f := audit.Filter{Actor: q.Get("actor"), Action: q.Get("action"), TargetKind: q.Get("target_kind"),
		TargetID: q.Get("target_id"), Outcome: q.Get("outcome"), RequestID: q.Get("request_id")}
	if err := textFilters(q, "actor", "action", "target_kind", "target_id", "request_id"); err != nil {
		return f, err
	}
	if f.TargetID != "" && f.TargetKind == "" {
		return f, &AppError{Code: EInvalid, Field: "target_id", Message: "A target ID needs its target kind (key, operation, …)."}
	}
	if f.Outcome != "" && !slices.Contains(auditOutcomes, f.Outcome) {
		return f, &AppError{Code: EInvalid, Field: "outcome", Message: "Unknown outcome " + strconv.Quote(f.Outcome) + "."}
	}
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		v := q.Get(tf.name)
		if v == "" {
			continue
		}
		t, err := parseFormTime(v)
		if err != nil {
			return f, &AppError{Code: EInvalid, Field: tf.name, Message: "Field " + strconv.Quote(tf.name) + " must be a date and time like 2026-11-30T14:05 (UTC)."}
		}
		*tf.dst = t
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.To.After(f.From) {
		return f, &AppError{Code: EInvalid, Field: "to", Message: `Field "to" must be after "from".`}
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return f, &AppError{Code: EInvalid, Field: "after", Message: "The page link is not valid; start from the first page."}
		}
		f.After = n
	}
	return f, nil
}

// auditFilterSummary is the filters of q as the export's reason states
// them: "actor=ada outcome=denied", or "all entries".
func auditFilterSummary(q url.Values) string {
	var parts []string
	for _, k := range slices.Concat(auditFilterKeys, []string{"after"}) {
		if v := q.Get(k); v != "" {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	if len(parts) == 0 {
		return "all entries"
	}
	return strings.Join(parts, " ")
}

// exportTypes are the Content-Types of the export formats.
var exportTypes = map[string]string{
	audit.FormatCSV:   "text/csv; charset=utf-8",
	audit.FormatJSONL: "application/x-ndjson",
}

// handleAuditExport streams the filtered trail as CSV or JSON lines, after
// recording the export in the trail as a read: if that record cannot be
// made, nothing is exported.
func handleAuditExport(trail AuditTrail, log *slog.Logger) http.Handler {
	if trail == nil {
		return auditUnavailable(log)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		format := q.Get("format")
		contentType, ok := exportTypes[format]
		if !ok {
			writeError(w, r, log, &AppError{Code: EInvalid, Field: "format", Message: `Field "format" must be csv or jsonl.`})
			return
		}
		f, ferr := auditFilter(q)
		if ferr != nil {
			writeError(w, r, log, ferr)
			return
		}
		name := "audit-" + time.Now().UTC().Format("20060102T150405Z") + "." + format
		if isHead(r) {
			// The headers of a download, without reading or recording the
			// trail: nothing is exported.
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			w.WriteHeader(http.StatusOK)
			return
		}
		v := viewerFrom(r.Context())
		reason := "export " + format + " " + auditFilterSummary(q)
		if len(reason) > audit.MaxReasonBytes {
			reason = strings.ToValidUTF8(reason[:audit.MaxReasonBytes-len("…")], "") + "…"
		}
		if _, err := trail.Append(r.Context(), audit.Entry{Actor: v.Username, Role: v.Role, Action: "audit.export",
			TargetKind: "audit", Reason: reason, Outcome: audit.OutcomeRead,
			RequestID: middleware.GetReqID(r.Context()), ClientAddr: clientAddr(r), UserAgent: r.UserAgent()}); err != nil {
			writeError(w, r, log, err)
			return
		}
		// The export may take longer than the server's write timeout.
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(auditExportDeadline))
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush() // the download starts now, not after the first page
		if err := trail.Export(r.Context(), f, w, format); err != nil {
			// The status is sent: abort the response, so that the client
			// sees a cut stream rather than a whole-looking short file.
			lvl := slog.LevelError
			if r.Context().Err() != nil {
				lvl = slog.LevelInfo // the client went away
			}
			log.Log(r.Context(), lvl, "audit export cut short", "format", format, "request_id", middleware.GetReqID(r.Context()), "error", err.Error())
			panic(http.ErrAbortHandler)
		}
	})
}
