package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/store"
)

// Verification with the provider (SPEC K19). The console cannot call the
// applications' code, so a verification is durable work they run: the
// console records the request (audited) and, in the same transaction,
// inserts an idemriver.VerifyArgs job on the applications' River tables;
// an application's idemriver.VerifyWorker runs the verifier of the key's
// operation and records its answer as the job's output; the console's own
// River job (VerifyAwaitArgs) waits for that answer and applies the
// matching decision in its own transaction, with its audit entry:
// happened → confirmed happened with the verifier's reference; did not
// happen → released; unknown (or no verifier) → a finding, the key stays.
// The decision's actor is the operator who asked, "via verifier <name>";
// its entry carries the answer.

// Audit outcomes of a verification: the request, and an answer that was
// not applied as a decision.
const (
	OutcomeRequested = "requested"
	OutcomeFinding   = "finding"
)

// verifyAction is the audit action of a verification's request and finding.
const verifyAction = "key.verify"

// VerifyAwaitKind is the console's own job that waits for a verification's
// answer and applies it.
const VerifyAwaitKind = "unstuck_console_verify"

// verifyDeadline is how long after its request an answer is waited for;
// after it the verification is a finding "no answer".
const verifyDeadline = 15 * time.Minute

// VerifyAwaitArgs is the console's job that applies one verification's
// answer.
type VerifyAwaitArgs struct {
	JobID       int64     `json:"job_id" river:"unique"`
	RecordID    int64     `json:"record_id"`
	Version     int64     `json:"version"`
	RequestSeq  int64     `json:"request_seq" river:"unique"`
	Actor       string    `json:"actor"`
	Role        string    `json:"role"`
	Reason      string    `json:"reason"`
	RequestedAt time.Time `json:"requested_at"`
}

// Kind is VerifyAwaitKind.
func (VerifyAwaitArgs) Kind() string { return VerifyAwaitKind }

// VerifyAwaitQueue is the console's own River queue of VerifyAwaitArgs.
const VerifyAwaitQueue = "unstuck_console_verify"

// InsertOpts puts the job on VerifyAwaitQueue, once per request.
func (VerifyAwaitArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: VerifyAwaitQueue, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Verifications requests verifications of keys and applies their answers.
type Verifications[TTx any] struct {
	keys *Keys[TTx]
	// jobs inserts the applications' verification jobs and reads their
	// answers.
	jobs verifyJobs[TTx]
	// awaits inserts the console's own waits for the answers.
	awaits Enqueuer
	now    func() time.Time
}

// verifyJobs inserts the applications' verification jobs in a decision's
// transaction and reads their answers: a *river.Client[TTx] on their
// River tables.
type verifyJobs[TTx any] interface {
	InsertTx(ctx context.Context, tx TTx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	JobGet(ctx context.Context, id int64) (*rivertype.JobRow, error)
}

// Enqueuer inserts a job on the console's own River tables: a
// *river.Client on them. An insert-only client (no Workers, no Queues)
// will do, built before the client whose workers run the jobs, so that
// those workers and what enqueues their jobs are built in one pass.
type Enqueuer interface {
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// NewVerifications returns the verifications of keys' records. jobs (an
// insert-only client on the applications' River tables, on the database
// of keys' decisions) inserts their jobs in the decisions' transactions;
// awaits inserts the console's own jobs (VerifyAwaitArgs) that wait for
// each answer and apply it ([Verifications.Await]).
func NewVerifications[TTx any](keys *Keys[TTx], jobs verifyJobs[TTx], awaits Enqueuer) (*Verifications[TTx], error) {
	if keys == nil || jobs == nil || awaits == nil {
		return nil, errors.New("ops: verifications need the key decisions, a River client of the applications' jobs and one of the console's")
	}
	return &Verifications[TTx]{keys: keys, jobs: jobs, awaits: awaits, now: time.Now}, nil
}

// insertRequest inserts args, the applications' verification job, and
// appends e, the request's audit entry, in one transaction, which sets
// item's outcome first when it is not nil (a bulk item).
func (v *Verifications[TTx]) insertRequest(ctx context.Context, args idemriver.VerifyArgs, e audit.Entry, item *bulkItem) (entry audit.Entry, jobID int64, duplicate bool, err error) {
	db := v.keys.db
	err = db.within(ctx, func(ctx context.Context, tx TTx) error {
		if err := db.markItem(ctx, tx, item); err != nil {
			return err
		}
		res, err := v.jobs.InsertTx(ctx, tx, args, nil)
		if err != nil {
			return fmt.Errorf("insert the verification job: %w", err)
		}
		jobID, duplicate = res.Job.ID, res.UniqueSkippedAsDuplicate
		e.After = mustJSON(map[string]any{"job_id": jobID, "queue": idemriver.VerifyQueue, "already_requested": duplicate})
		entry, err = db.appendTx(ctx, tx, e)
		return err
	})
	return entry, jobID, duplicate, err
}

// enqueue inserts the console's wait for a verification's answer.
func (v *Verifications[TTx]) enqueue(ctx context.Context, a VerifyAwaitArgs) error {
	_, err := v.awaits.Insert(ctx, a, nil)
	return err
}

// Verifiable says why r cannot be verified, "" when it can: only a record
// whose outcome is unknown (pending, unavailable or stuck) can.
func Verifiable(r idemdriver.Record) string {
	if err := idem.CheckOperator(r, idem.OperatorConfirmHappened); err != nil {
		var te *idem.TransitionError
		if errors.As(err, &te) {
			return te.Reason
		}
		return err.Error()
	}
	return ""
}

// Request asks the applications to verify key record id at version, as
// actor with reason: the request's audit entry and the applications' job
// commit together; the answer is applied when it comes. The same request
// twice (or by two operators) while the first waits is one job.
func (v *Verifications[TTx]) Request(ctx context.Context, actor Actor, id, version int64, reason string) (audit.Entry, error) {
	return v.request(ctx, actor, id, version, reason, nil)
}

// request is Request, setting item's outcome first in its transaction
// when it is not nil (a bulk item).
func (v *Verifications[TTx]) request(ctx context.Context, actor Actor, id, version int64, reason string, item *bulkItem) (audit.Entry, error) {
	reason, err := validReason("reason", reason)
	if err != nil {
		return audit.Entry{}, err
	}
	if version <= 0 {
		return audit.Entry{}, invalid("version", "the form has no record version; reload the page")
	}
	r, ok, err := v.keys.records.KeyByID(ctx, id)
	switch {
	case err != nil:
		return audit.Entry{}, err
	case !ok:
		return audit.Entry{}, ErrNotFound
	case r.Version != version:
		return audit.Entry{}, ErrStale
	}
	if why := Verifiable(r); why != "" {
		return audit.Entry{}, fmt.Errorf("%w: %s", ErrIllegal, why)
	}
	now := v.now().UTC()
	args := idemriver.VerifyArgs{RecordID: r.ID, Version: r.Version, Scope: r.Scope, Operation: r.Operation, KeyDigest: r.KeyDigest,
		CorrelationID: r.CorrelationID, ExternalRef: r.ExternalRef, ResourceIDs: r.ResourceIDs, Fence: r.Fence, Attempt: r.Attempts,
		FirstSeenAt: r.CreatedAt, RequestedBy: actor.Username}
	target := strconv.FormatInt(id, 10)
	e, jobID, duplicate, err := v.insertRequest(ctx, args, audit.Entry{Actor: actor.Username, Role: actor.Role, Action: verifyAction, TargetKind: "key",
		TargetID: target, Reason: reason, Before: mustJSON(snapshot(r)), Outcome: OutcomeRequested,
		RequestID: actor.RequestID, ClientAddr: actor.ClientAddr, UserAgent: actor.UserAgent}, item)
	if err != nil {
		return audit.Entry{}, fmt.Errorf("ops: verify key %d: %w", id, err)
	}
	if duplicate {
		// The same record version is being verified already: its answer
		// is applied once, in the name of the operator who asked first.
		return e, nil
	}
	await := VerifyAwaitArgs{JobID: jobID, RecordID: id, Version: version, RequestSeq: e.Seq, Actor: actor.Username, Role: actor.Role,
		Reason: reason, RequestedAt: now}
	if err := v.enqueue(ctx, await); err != nil {
		// The request stands; Resume finds it at the next start.
		v.keys.db.log.ErrorContext(ctx, "ops: the wait for a verification's answer was not enqueued", "record_id", id, "request_seq", e.Seq, "error", err.Error())
	}
	return e, nil
}

// requestID links a verification's answer to its request in the trail.
func requestID(seq int64) string { return "verify-" + strconv.FormatInt(seq, 10) }

// answered reports whether the request of a has its answer in the trail.
func (v *Verifications[TTx]) answered(ctx context.Context, a VerifyAwaitArgs) (bool, error) {
	hist, err := v.keys.db.trail.History(ctx, "key", strconv.FormatInt(a.RecordID, 10), audit.MaxLimit)
	if err != nil {
		return false, err
	}
	for _, e := range hist {
		if e.Seq > a.RequestSeq && e.RequestID == requestID(a.RequestSeq) {
			return true, nil
		}
	}
	return false, nil
}

// Await applies the answer of a's verification once its job has one:
// river.JobSnooze while it has none, for up to 15 minutes after the
// request; after that, or when the job failed or is gone, the answer is
// "unknown" with why. An answer is applied once: a second run finds it in
// the trail.
func (v *Verifications[TTx]) Await(ctx context.Context, a VerifyAwaitArgs) error {
	done, err := v.answered(ctx, a)
	if err != nil || done {
		return err
	}
	ans, ok, err := v.answer(ctx, a)
	if err != nil {
		return err
	}
	if !ok {
		return river.JobSnooze(time.Second)
	}
	return v.apply(ctx, a, ans)
}

// answer reads the answer of a's job; ok is false while it has none yet.
func (v *Verifications[TTx]) answer(ctx context.Context, a VerifyAwaitArgs) (idemriver.VerifyAnswer, bool, error) {
	late := v.now().Sub(a.RequestedAt) > verifyDeadline
	row, err := v.jobs.JobGet(ctx, a.JobID)
	switch {
	case errors.Is(err, river.ErrNotFound):
		return idemriver.VerifyAnswer{Verdict: idemriver.AnswerUnknown, Error: "the verification job is gone", At: v.now().UTC()}, true, nil
	case err != nil:
		return idemriver.VerifyAnswer{}, false, err
	}
	switch row.State {
	case rivertype.JobStateCompleted:
		var ans idemriver.VerifyAnswer
		if err := json.Unmarshal(row.Output(), &ans); err != nil || ans.Verdict == "" {
			return idemriver.VerifyAnswer{Verdict: idemriver.AnswerUnknown, Error: "the verification job recorded no answer", At: v.now().UTC()}, true, nil
		}
		return ans, true, nil
	case rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
		return idemriver.VerifyAnswer{Verdict: idemriver.AnswerUnknown, Error: "the verification job " + string(row.State), At: v.now().UTC()}, true, nil
	}
	if late {
		return idemriver.VerifyAnswer{Verdict: idemriver.AnswerUnknown, Error: "no answer within " + verifyDeadline.String() +
			": is an application running idemriver.VerifyWorker on queue " + idemriver.VerifyQueue + "?", At: v.now().UTC()}, true, nil
	}
	return idemriver.VerifyAnswer{}, false, nil
}

// apply decides on a's record from ans: happened and did not happen are
// the operator's decisions via the verifier; anything else, or a record
// that changed since the request, is a finding.
func (v *Verifications[TTx]) apply(ctx context.Context, a VerifyAwaitArgs, ans idemriver.VerifyAnswer) error {
	actor := Actor{Username: a.Actor, Role: a.Role, RequestID: requestID(a.RequestSeq)}
	via := " — via verifier " + ans.Verifier
	d := KeyDecision{RecordID: a.RecordID, Version: a.Version, Reason: a.Reason + via, Verification: &ans}
	switch ans.Verdict {
	case idemriver.AnswerHappened:
		d.Action, d.ExternalRef = idem.OperatorConfirmHappened, ans.ExternalRef
	case idemriver.AnswerNotHappened:
		d.Action = idem.OperatorConfirmNotHappened
	default:
		return v.finding(ctx, actor, a, ans, "")
	}
	_, err := v.keys.Decide(ctx, actor, d)
	var fe *fielderr.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrStale), errors.Is(err, ErrNotFound), errors.Is(err, ErrIllegal), errors.As(err, &fe):
		// Decide audited the refusal; the answer stays visible.
		return v.finding(ctx, actor, a, ans, "not applied: "+err.Error())
	default:
		return err
	}
}

// finding appends ans as a finding on a's record.
func (v *Verifications[TTx]) finding(ctx context.Context, actor Actor, a VerifyAwaitArgs, ans idemriver.VerifyAnswer, note string) error {
	reason := a.Reason + " — verifier answered " + ans.Verdict
	if ans.Verifier == "" {
		reason = a.Reason + " — verification: " + ans.Verdict
	}
	if ans.Error != "" {
		reason += " (" + ans.Error + ")"
	}
	if ans.Verdict == idemriver.AnswerNoVerifier {
		reason = a.Reason + " — no verifier is registered for this key's operation: decide it by hand"
	}
	if note != "" {
		reason += " (" + note + ")"
	}
	_, err := v.keys.db.trail.Append(ctx, audit.Entry{Actor: actor.Username, Role: actor.Role, Action: verifyAction, TargetKind: "key",
		TargetID: strconv.FormatInt(a.RecordID, 10), Reason: cut(reason, maxEntryReason), After: mustJSON(map[string]any{"verification": ans}),
		Outcome: OutcomeFinding, RequestID: actor.RequestID})
	return err
}

// maxEntryReason bounds the reason of an entry the console composes (an
// operator's reason with what happened to it), in bytes.
const maxEntryReason = 4000

// cut is s as valid UTF-8, at most n bytes, cut on a rune boundary.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}

// Resume enqueues again the wait of every verification requested in the
// last verifyDeadline whose answer is not in the trail (a console stopped
// between a request and its wait), so that every answer is applied.
func (v *Verifications[TTx]) Resume(ctx context.Context) error {
	var after int64
	for {
		page, next, err := v.keys.db.trail.List(ctx, audit.Filter{Action: verifyAction, Outcome: OutcomeRequested, From: v.now().Add(-verifyDeadline - time.Hour),
			After: after, Limit: audit.MaxLimit})
		if err != nil {
			return fmt.Errorf("ops: resume verifications: %w", err)
		}
		for _, e := range page {
			var req struct {
				JobID     int64 `json:"job_id"`
				Duplicate bool  `json:"already_requested"`
			}
			var before struct {
				Version int64 `json:"version"`
			}
			id, perr := strconv.ParseInt(e.TargetID, 10, 64)
			if perr != nil || json.Unmarshal(e.After, &req) != nil || json.Unmarshal(e.Before, &before) != nil || req.Duplicate {
				continue
			}
			a := VerifyAwaitArgs{JobID: req.JobID, RecordID: id, Version: before.Version, RequestSeq: e.Seq, Actor: e.Actor, Role: e.Role,
				Reason: e.Reason, RequestedAt: e.At}
			done, err := v.answered(ctx, a)
			if err != nil {
				return err
			}
			if !done {
				if err := v.enqueue(ctx, a); err != nil {
					return err
				}
			}
		}
		if next == 0 {
			return nil
		}
		after = next
	}
}

// ReconcileActor is the actor of the console's scheduled verifications.
var ReconcileActor = Actor{Username: "reconciliation", Role: "system", RequestID: "reconcile"}

// ReconcileConfig is the console's scheduled verification of keys (SPEC
// K19, seed 000's periodic reconciliation): every Every, up to Batch keys
// whose outcome is unknown (pending, unavailable, stuck) and unchanged
// for at least After are verified with the applications' verifiers,
// least recently updated first; a key is asked again at most once per
// After. Zero After turns it off.
type ReconcileConfig struct {
	After time.Duration
	Every time.Duration
	Batch int
}

// keyLister lists key records (idemdriver.Admin).
type keyLister interface {
	ListKeys(ctx context.Context, f idemdriver.KeyFilter) (idemdriver.KeyPage, error)
}

// Reconcile requests the verification of up to cfg.Batch keys as cfg says,
// as ReconcileActor, and returns how many it requested. Their answers are
// applied as an operator's request's are.
func (v *Verifications[TTx]) Reconcile(ctx context.Context, keys keyLister, cfg ReconcileConfig) (int, error) {
	if cfg.After <= 0 || cfg.Batch <= 0 {
		return 0, nil
	}
	now := v.now()
	requested := 0
	for _, f := range []idemdriver.KeyFilter{{Status: idemdriver.StatusPending}, {Status: idemdriver.StatusUnavailable}, {Stuck: true}} {
		f.To, f.Order, f.Limit, f.SkipOperationPrefix = now.Add(-cfg.After), idemdriver.OrderOldest, cfg.Batch, "console "
		for requested < cfg.Batch {
			page, err := keys.ListKeys(ctx, f)
			if err != nil {
				return requested, fmt.Errorf("ops: reconcile keys: %w", err)
			}
			for _, r := range page.Records {
				if requested >= cfg.Batch {
					break
				}
				recent, err := v.verifiedSince(ctx, r.ID, now.Add(-cfg.After))
				if err != nil {
					return requested, err
				}
				if recent || Verifiable(r) != "" {
					continue
				}
				_, err = v.Request(ctx, ReconcileActor, r.ID, r.Version,
					"scheduled verification: the outcome has been unknown for more than "+cfg.After.String())
				switch {
				case errors.Is(err, ErrStale), errors.Is(err, ErrNotFound), errors.Is(err, ErrIllegal):
					continue // changed meanwhile: the next run sees it as it is
				case err != nil:
					return requested, err
				}
				requested++
			}
			if page.Next == "" {
				break
			}
			f.After = page.Next
		}
	}
	return requested, nil
}

// verifiedSince reports whether record id has a verification (a request
// or a finding) in the trail since t.
func (v *Verifications[TTx]) verifiedSince(ctx context.Context, id int64, t time.Time) (bool, error) {
	hist, err := v.keys.db.trail.History(ctx, "key", strconv.FormatInt(id, 10), 20)
	if err != nil {
		return false, err
	}
	for _, e := range hist {
		if e.Action == verifyAction && !e.At.Before(t) {
			return true, nil
		}
	}
	return false, nil
}

// ReconcileKeysArgs is the console's periodic job that runs Reconcile.
type ReconcileKeysArgs struct{}

// Kind is the job's kind.
func (ReconcileKeysArgs) Kind() string { return "unstuck_console_reconcile_keys" }

// InsertOpts puts the job on VerifyAwaitQueue.
func (ReconcileKeysArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: VerifyAwaitQueue, MaxAttempts: 1}
}

// VerifyReportItem is one key of a bulk verification and where its answer
// stands, for the request's report.
type VerifyReportItem struct {
	TargetID string
	// Outcome is happened, not_happened, unknown, no_verifier (the
	// answer's verdict) or waiting.
	Outcome string
	// Detail says what was done, with the verifier's evidence.
	Detail string
}

// VerifyReport returns, for up to limit keys of bulk verification req
// whose request was made, where each answer stands, from the trail.
func (b *Bulks[TTx]) VerifyReport(ctx context.Context, req store.Bulk, limit int) ([]VerifyReportItem, error) {
	if req.Kind != BulkKeys || req.Action != BulkVerify {
		return nil, nil
	}
	items, err := b.Items(ctx, req.ID, store.ItemApplied, 0, limit)
	if err != nil {
		return nil, err
	}
	out := make([]VerifyReportItem, 0, len(items))
	for _, it := range items {
		hist, err := b.db.trail.History(ctx, "key", it.TargetID, 50)
		if err != nil {
			return nil, err
		}
		out = append(out, verifyReportItem(it.TargetID, hist, BulkRequestID(req.ID)))
	}
	return out, nil
}

// verifyReportItem finds, in a key's history (newest first), the answer
// to the verification its bulk request bulkID made.
func verifyReportItem(target string, hist []audit.Entry, bulkID string) VerifyReportItem {
	item := VerifyReportItem{TargetID: target, Outcome: "waiting", Detail: "waiting for the application's answer"}
	var answerID string
	for _, e := range hist {
		if e.Action == verifyAction && e.Outcome == OutcomeRequested && e.RequestID == bulkID {
			answerID = requestID(e.Seq)
			break
		}
	}
	if answerID == "" {
		item.Detail = "no request in the trail"
		return item
	}
	for _, e := range hist {
		if e.RequestID != answerID || (e.Outcome != audit.OutcomeApplied && e.Outcome != OutcomeFinding) {
			continue
		}
		var after struct {
			ExternalRef  string                 `json:"external_ref"`
			Verification idemriver.VerifyAnswer `json:"verification"`
		}
		_ = json.Unmarshal(e.After, &after)
		v := after.Verification
		item.Outcome = v.Verdict
		switch {
		case e.Outcome == audit.OutcomeApplied && v.Verdict == idemriver.AnswerHappened:
			item.Detail = "completed with " + after.ExternalRef
		case e.Outcome == audit.OutcomeApplied:
			item.Detail = "released: the client's retry runs it once"
		default:
			item.Detail = "nothing decided"
			if v.Error != "" {
				item.Detail += " (" + v.Error + ")"
			}
		}
		if v.Verifier != "" {
			item.Detail += ", by verifier " + v.Verifier
		}
		if v.Evidence != "" {
			item.Detail += " — " + v.Evidence
		}
		return item
	}
	return item
}
