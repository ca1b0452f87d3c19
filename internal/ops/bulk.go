package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Kinds of bulk request: what its items are.
const (
	BulkKeys       = "keys"
	BulkOperations = "operations"
)

// Defaults of [BulkConfig].
const (
	DefaultBulkCap    = 10000
	DefaultBulkBatch  = 500
	DefaultBulkExpiry = 24 * time.Hour
	// SampleSize is how many items a preview shows.
	SampleSize = 20
	// DefaultPreviewTimeout bounds the work of one preview.
	DefaultPreviewTimeout = 10 * time.Second
	// DefaultDraftExpiry is how long a frozen preview waits to be
	// submitted before it is dropped.
	DefaultDraftExpiry = time.Hour
	// DefaultCanaryPercent and DefaultCanaryMin size a run's first batch:
	// 1 % of the set, at least 5 items.
	DefaultCanaryPercent = 1.0
	DefaultCanaryMin     = 5
	// DefaultPauseRate and DefaultPauseStreak are when a run pauses
	// itself: more than 10 % of a batch failed, or 20 items in a row.
	DefaultPauseRate   = 0.10
	DefaultPauseStreak = 20
	// MaxPreviewsPerUser is how many previews one person runs at once.
	MaxPreviewsPerUser = 2
)

// Errors of bulk requests and approvals, matched with errors.Is.
var (
	// ErrCountChanged: the typed count is not the count of items the
	// action is legal for now (a *CountError says the count).
	ErrCountChanged = errors.New("ops: the number of matching items changed since the preview")
	// ErrSelfApproval: the requester tried to approve or reject their own
	// request (SPEC K13).
	ErrSelfApproval = errors.New("ops: the requester cannot approve or reject their own request")
	// ErrForbidden: the actor may not cancel this request.
	ErrForbidden = errors.New("ops: not allowed")
	// ErrNotWaiting: the request is not (or no longer) in a state that
	// allows the step: approved, rejected, expired, cancelled or done.
	ErrNotWaiting = errors.New("ops: the request is not in a state that allows this")
	// ErrTooManyPreviews: the person already runs MaxPreviewsPerUser
	// previews.
	ErrTooManyPreviews = errors.New("ops: too many previews at once")
	// ErrPreviewTooSlow: the preview did not reach the end of the
	// matching items within its time bound (a *PreviewTooSlowError).
	ErrPreviewTooSlow = errors.New("ops: the preview did not finish in time")
	// ErrNothingToRun: every item of the request changed or became
	// illegal since it was frozen; it cannot be approved.
	ErrNothingToRun = errors.New("ops: no item of the request can be decided any more")
)

// PreviewTooSlowError is an [ErrPreviewTooSlow] with how far it got.
type PreviewTooSlowError struct {
	Scanned int64
	Bound   time.Duration
}

func (e *PreviewTooSlowError) Error() string {
	return fmt.Sprintf("%s: read %d matching items in %s without reaching the end", ErrPreviewTooSlow, e.Scanned, e.Bound)
}
func (e *PreviewTooSlowError) Is(err error) bool { return err == ErrPreviewTooSlow }

// CountError is an [ErrCountChanged] with the count as it is now.
type CountError struct{ Now int64 }

func (e *CountError) Error() string {
	return ErrCountChanged.Error() + " (now " + strconv.FormatInt(e.Now, 10) + ")"
}
func (e *CountError) Is(err error) bool { return err == ErrCountChanged }

// errAlreadyDecided: a bulk item was decided by another run; its
// transaction rolls back and nothing is counted twice.
var errAlreadyDecided = errors.New("ops: bulk item already decided")

// Approval says which decisions need a second person's approval (SPEC
// K13): "bulk" (every bulk request), and single decisions by name:
// keys.forget, keys.confirm, operations.retry, operations.compensate,
// operations.resolve.
type Approval map[string]bool

// ApprovalNames are the names an [Approval] may hold.
var ApprovalNames = []string{"bulk", "keys.forget", "keys.confirm", "operations.retry", "operations.confirm", "operations.compensate", "operations.resolve"}

// ParseApproval reads a comma list of [ApprovalNames]; "" is the default,
// "bulk", and "none" turns approval off.
func ParseApproval(s string) (Approval, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Approval{"bulk": true}, nil
	}
	a := Approval{}
	if s == "none" {
		return a, nil
	}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(ApprovalNames, n) {
			return nil, fmt.Errorf("unknown approval %q: use none or a comma list of %s", n, strings.Join(ApprovalNames, ", "))
		}
		a[n] = true
	}
	return a, nil
}

// Bulk reports whether bulk requests need approval.
func (a Approval) Bulk() bool { return a["bulk"] }

// Single reports whether a single decision of action on kind ("keys",
// "operations") needs approval.
func (a Approval) Single(kind, action string) bool { return a[kind+"."+action] }

// String is the comma list, sorted.
func (a Approval) String() string {
	names := slices.Sorted(maps.Keys(a))
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// BulkConfig bounds bulk work.
type BulkConfig struct {
	// Cap is the most items one request may decide; DefaultBulkCap when
	// <= 0.
	Cap int
	// Batch is how many items a run reads and decides at a time;
	// DefaultBulkBatch when <= 0.
	Batch int
	// Pause is how long a run waits between batches, so that the
	// applications' requests keep their latency (0: none).
	Pause time.Duration
	// Expiry is how long a request waits for approval;
	// DefaultBulkExpiry when <= 0.
	Expiry time.Duration
	// Approval says which decisions need a second person.
	Approval Approval
	// PreviewTimeout bounds one preview's work; DefaultPreviewTimeout when
	// <= 0.
	PreviewTimeout time.Duration
	// CanaryPercent and CanaryMin size a run's first batch (SPEC K23):
	// CanaryPercent of the set, at least CanaryMin items; the defaults
	// when <= 0.
	CanaryPercent float64
	CanaryMin     int
	// PauseRate and PauseStreak are when a run pauses itself: more than
	// PauseRate of a batch failed, or PauseStreak items in a row; the
	// defaults when <= 0.
	PauseRate   float64
	PauseStreak int
}

// bulkStore is the console store's bulk tables (a *store.DB); an item's
// outcome is set in its decision's transaction (DB.markItem).
type bulkStore interface {
	CreateBulk(ctx context.Context, b store.Bulk, items []store.BulkItem) (store.Bulk, error)
	BulkByID(ctx context.Context, id int64) (store.Bulk, bool, error)
	BulkStatus(ctx context.Context, id int64) (string, bool, error)
	ListBulk(ctx context.Context, status string, limit int) ([]store.Bulk, error)
	CountBulk(ctx context.Context, status string) (int64, error)
	SetBulkStatus(ctx context.Context, id int64, from []string, to, by, reason string) (bool, error)
	ExpireBulk(ctx context.Context, now time.Time) ([]int64, error)
	BulkItems(ctx context.Context, id int64, outcome string, after, limit int) ([]store.BulkItem, error)
	SubmitBulk(ctx context.Context, id int64, by, to, reason string, expiresAt time.Time) (bool, error)
	DecidedBy(ctx context.Context, kind, target string, id int64) (int64, bool, error)
}

// keyIterator reads the key records a filter selects (idemdriver.Admin).
type keyIterator interface {
	EachKey(ctx context.Context, f idemdriver.KeyFilter, batch int, fn func([]idemdriver.Record) error) error
}

// OperationIterator reads the operations a filter selects
// (sagadriver.Admin).
type OperationIterator interface {
	EachOperation(ctx context.Context, f sagadriver.OperationFilter, batchSize int, fn func([]sagadriver.Operation) error) error
}

// Bulks runs bulk decisions and approvals on a database of transaction
// type TTx: a request fixes its items and their versions, and each item is
// then decided through the same one transaction as a single decision
// (Keys.Decide, Operations.Decide), with the item's outcome set first in
// that transaction, so that a stale item is skipped, never forced, and a
// resumed run decides no item twice. It is safe for concurrent use.
type Bulks[TTx any] struct {
	db      *DB[TTx] // the decisions' database: keys.db
	store   bulkStore
	keys    *Keys[TTx]
	ops     *Operations[TTx]
	keyList keyIterator
	opList  OperationIterator
	verify  *Verifications[TTx]
	persons Persons
	runs    Enqueuer
	cfg     BulkConfig
	now     func() time.Time

	mu       sync.Mutex
	previews map[string]int // running previews per person
}

// BulkParts are what [Bulks] work with, all built before them.
type BulkParts[TTx any] struct {
	// Store is the console's store on the decisions' database (its bulk
	// tables).
	Store bulkStore
	// Keys decides on keys, listed with KeyList. Required.
	Keys    *Keys[TTx]
	KeyList keyIterator
	// Operations decides on operations, listed with OperationList; nil:
	// this console has no saga records.
	Operations    *Operations[TTx]
	OperationList OperationIterator
	// Verifications requests the verifications of bulk "verify" requests
	// on keys (SPEC K19); nil refuses that action.
	Verifications *Verifications[TTx]
	// Persons says whether two accounts are one person, so that no
	// account of the requester's person approves (SPEC K13); nil: only the
	// same username is.
	Persons Persons
	// Runs starts the durable run of a request: it inserts [BulkArgs] on
	// the console's own River, whose [BulkWorker] calls [Bulks.Run]. An
	// insert-only client on those tables will do, so that Bulks exist
	// before the client that works them. nil leaves requests to a caller
	// of Run.
	Runs Enqueuer
}

// Persons says whether two console accounts belong to one person: a
// local account and its owner's SSO account count as one for four-eyes
// approval (SPEC K13).
type Persons interface {
	SamePerson(ctx context.Context, a, b string) (bool, error)
}

// SamePerson reports whether accounts a and b are one person: the same
// username, or accounts the Persons of [BulkParts] join.
func (b *Bulks[TTx]) SamePerson(ctx context.Context, a, c string) (bool, error) {
	if a == c || b.persons == nil {
		return a == c, nil
	}
	return b.persons.SamePerson(ctx, a, c)
}

// NewBulks returns the bulk decisions of p, bounded by cfg.
func NewBulks[TTx any](p BulkParts[TTx], cfg BulkConfig) (*Bulks[TTx], error) {
	if p.Store == nil || p.Keys == nil || p.KeyList == nil {
		return nil, errors.New("ops: bulk decisions need a store, key decisions and a key iterator")
	}
	orDefault(&cfg.Cap, DefaultBulkCap)
	orDefault(&cfg.Batch, DefaultBulkBatch)
	orDefault(&cfg.Expiry, DefaultBulkExpiry)
	orDefault(&cfg.PreviewTimeout, DefaultPreviewTimeout)
	orDefault(&cfg.CanaryPercent, DefaultCanaryPercent)
	orDefault(&cfg.CanaryMin, DefaultCanaryMin)
	orDefault(&cfg.PauseRate, DefaultPauseRate)
	orDefault(&cfg.PauseStreak, DefaultPauseStreak)
	if cfg.Approval == nil {
		cfg.Approval = Approval{"bulk": true}
	}
	return &Bulks[TTx]{db: p.Keys.db, store: p.Store, keys: p.Keys, keyList: p.KeyList, ops: p.Operations, opList: p.OperationList, verify: p.Verifications,
		persons: p.Persons, runs: p.Runs, cfg: cfg, now: time.Now, previews: map[string]int{}}, nil
}

// orDefault sets *v to d when it is not positive.
func orDefault[T int | float64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Config returns b's configuration, defaults filled in.
func (b *Bulks[TTx]) Config() BulkConfig { return b.cfg }

// BulkSpec is what a bulk request acts on: an action on the items of one
// list's filter.
type BulkSpec struct {
	Kind   string // BulkKeys or BulkOperations
	Action string // keys: forget, confirm; operations: retry, compensate, resolve
	// KeyFilter or OperationFilter is the list's filter (After and Limit
	// ignored); FilterQuery is the same as the list's query string.
	KeyFilter       idemdriver.KeyFilter
	OperationFilter sagadriver.OperationFilter
	FilterQuery     string
	// All must be set when the filter is empty: the action then applies to
	// every item.
	All bool
	// ResolveTo is a resolve's terminal status.
	ResolveTo sagadriver.Status
	// IncludeMayHaveHappened: a forget includes the keys whose effect may
	// have happened ([ForgetRisk]), acknowledging that their clients'
	// retries run them again. Without it they are left out, counted in
	// [BulkPreview].MayHaveHappened (SPEC K20).
	IncludeMayHaveHappened bool
	// Group keeps only the items of this incident group
	// (incident.Fields.Key): an incident's "act on all" decides exactly
	// the group's items, even where another group shares its list.
	Group string
}

// BulkSample is one item of a preview, as the approver reads it.
type BulkSample struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Version     int64  `json:"version"`
	LastError   string `json:"last_error,omitempty"`
	ExternalRef string `json:"external_ref,omitempty"`
}

// BulkCount is a count with its label.
type BulkCount struct {
	Label string `json:"label"`
	Count int64  `json:"count"`
}

// BulkBreakdown is the frozen set counted by one field: state, operation
// and scope of keys; status and type of operations. At most
// breakdownValues labels, the rest counted as "other".
type BulkBreakdown struct {
	By     string      `json:"by"`
	Counts []BulkCount `json:"counts"`
}

const breakdownValues = 10

// BulkSummary is what a preview showed when its items were frozen, kept
// with the request: what its approver reads (SPEC K22).
type BulkSummary struct {
	NotLegal        map[string]int64 `json:"not_legal,omitempty"`
	MayHaveHappened int64            `json:"may_have_happened,omitempty"`
	Included        bool             `json:"included,omitempty"`
	Breakdown       []BulkBreakdown  `json:"breakdown,omitempty"`
	Sample          []BulkSample     `json:"sample,omitempty"`
	// Scanned is how many matching items the preview read, TookMS how
	// long it took.
	Scanned int64 `json:"scanned"`
	TookMS  int64 `json:"took_ms"`
}

// ReadSummary returns the summary kept with req (zero when it has none:
// a single decision's request).
func ReadSummary(req store.Bulk) BulkSummary {
	var s BulkSummary
	if req.Summary != "" {
		_ = json.Unmarshal([]byte(req.Summary), &s)
	}
	return s
}

// BulkPreview is what a request would do now.
type BulkPreview struct {
	// Legal is the number of items the action is legal for (at most
	// Cap+1: OverCap says there are more than Cap).
	Legal   int64
	OverCap bool
	Cap     int
	// NotLegal counts the others by reason.
	NotLegal map[string]int64
	// MayHaveHappened counts, for a forget, the matching keys whose effect
	// may have happened: left out of Legal unless the spec includes them,
	// then part of it.
	MayHaveHappened int64
	// Included says that they are included.
	Included bool
	Sample   []BulkSample
	// Breakdown counts the set by state, operation and scope (keys) or
	// status and type (operations).
	Breakdown []BulkBreakdown
	// Scanned is how many matching items were read; Took how long.
	Scanned int64
	Took    time.Duration
	// Consequence says what the action does.
	Consequence string
	// Approval says whether the request will wait for a second person.
	Approval bool

	items []store.BulkItem
}

// summary is what of p is kept with the frozen request.
func (p BulkPreview) summary() BulkSummary {
	return BulkSummary{NotLegal: p.NotLegal, MayHaveHappened: p.MayHaveHappened, Included: p.Included, Breakdown: p.Breakdown,
		Sample: p.Sample, Scanned: p.Scanned, TookMS: p.Took.Milliseconds()}
}

// tally counts the set by fields, in order, for its breakdown.
type tally struct {
	by     []string
	counts []map[string]int64
}

func newTally(by ...string) *tally {
	t := &tally{by: by, counts: make([]map[string]int64, len(by))}
	for i := range t.counts {
		t.counts[i] = map[string]int64{}
	}
	return t
}

func (t *tally) add(values ...string) {
	for i, v := range values {
		t.counts[i][v]++
	}
}

// breakdown is the counts, largest first, at most breakdownValues labels
// per field and the rest as "other".
func (t *tally) breakdown() []BulkBreakdown {
	out := make([]BulkBreakdown, 0, len(t.by))
	for i, by := range t.by {
		labels := slices.SortedFunc(maps.Keys(t.counts[i]), func(a, b string) int {
			if c := t.counts[i][b] - t.counts[i][a]; c != 0 {
				if c > 0 {
					return 1
				}
				return -1
			}
			return strings.Compare(a, b)
		})
		bd := BulkBreakdown{By: by}
		var other int64
		for j, l := range labels {
			if j < breakdownValues {
				bd.Counts = append(bd.Counts, BulkCount{Label: l, Count: t.counts[i][l]})
			} else {
				other += t.counts[i][l]
			}
		}
		if other > 0 {
			bd.Counts = append(bd.Counts, BulkCount{Label: fmt.Sprintf("other (%d more)", len(labels)-breakdownValues), Count: other})
		}
		out = append(out, bd)
	}
	return out
}

// NotLegalTotal is the sum of NotLegal.
func (p BulkPreview) NotLegalTotal() int64 {
	var n int64
	for _, c := range p.NotLegal {
		n += c
	}
	return n
}

// Validate checks the spec's action and that an empty filter says All.
func (s *BulkSpec) Validate() error {
	switch s.Kind {
	case BulkKeys:
		if s.Action != "forget" && s.Action != "confirm" && s.Action != BulkConfirmHappened && s.Action != BulkVerify {
			return invalid("action", "choose verify, confirm_happened (with each key's own reference), confirm (did not happen) or forget")
		}
	case BulkOperations:
		switch OperationAction(s.Action) {
		case OperationRetry, OperationCompensate, OperationRedrive:
		case OperationResolve:
			switch s.ResolveTo {
			case sagadriver.StatusCompleted, sagadriver.StatusFailed, sagadriver.StatusCompensated:
			default:
				return invalid("status", "resolve as completed, failed or compensated")
			}
		default:
			return invalid("action", "choose retry, compensate, resolve or redrive")
		}
	default:
		return invalid("kind", "keys or operations")
	}
	if s.Group != "" && !incident.ValidKey(s.Group) {
		return invalid("group", "an incident group, as /incidents links it")
	}
	if s.FilterQuery == "" && !s.All {
		return invalid("all", "the filter is empty: tick \"all\" to act on every item")
	}
	return nil
}

var consequences = map[string]string{
	"keys/forget":                 "Deletes each record: the next request with its key runs again, as if it had never been seen.",
	"keys/confirm":                "Records that each effect did not happen: each key is released and the next request with it runs.",
	"keys/" + BulkVerify:          "Asks the application's verifier of each key whether its effect happened. Each answer is applied in your name when it comes: happened → completed with the provider's reference; did not happen → released, so the client's retry runs once; unknown → the key stays and the answer is shown on its page.",
	"keys/" + BulkConfirmHappened: "Records that each effect happened, with the external reference that key carries: each key completes and is never run again (repeats get 409: no response to replay).",
	"operations/retry":            "Retries each operation's failed, uncertain or stuck step (or failed compensation) with fresh attempts and the same key.",
	"operations/compensate":       "Starts compensation of each operation: its completed steps are undone in reverse order.",
	"operations/resolve":          "Closes each review with the chosen terminal status and the reason as its resolution; the engine changes nothing else.",
}

// Consequence says what action on kind does, in words.
func Consequence(kind, action string) string { return consequences[kind+"/"+action] }

// Drift counts the items spec matches now, legal for its action, that are
// not in req's frozen set: they started matching after the freeze. atLeast
// says the count stopped at the cap. It is a preview of actor's, bounded
// as one.
func (b *Bulks[TTx]) Drift(ctx context.Context, actor Actor, req store.Bulk, spec BulkSpec) (n int64, atLeast bool, err error) {
	done, err := b.previewing(actor)
	if err != nil {
		return 0, false, err
	}
	defer done()
	p, err := b.Preview(ctx, spec)
	if err != nil {
		return 0, false, err
	}
	frozen := make(map[string]bool, req.Total)
	for after := 0; ; {
		items, err := b.store.BulkItems(ctx, req.ID, "", after, 5000)
		if err != nil {
			return 0, false, err
		}
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			frozen[it.TargetID] = true
		}
		after = items[len(items)-1].Seq
	}
	for _, it := range p.items {
		if !frozen[it.TargetID] {
			n++
		}
	}
	return n, p.OverCap, nil
}

// Preview returns what the request of spec would do now. Its work is
// bounded: it stops at Cap+1 legal items, and after PreviewTimeout with a
// *PreviewTooSlowError (the items left out could not all be counted, so
// no set is offered); it ends with ctx.
func (b *Bulks[TTx]) Preview(ctx context.Context, spec BulkSpec) (BulkPreview, error) {
	if err := spec.Validate(); err != nil {
		return BulkPreview{}, err
	}
	started := b.now()
	p := BulkPreview{Cap: b.cfg.Cap, NotLegal: map[string]int64{}, Consequence: consequences[spec.Kind+"/"+spec.Action], Approval: b.cfg.Approval.Bulk(),
		Included: spec.IncludeMayHaveHappened}
	bounded, cancel := context.WithTimeout(ctx, b.cfg.PreviewTimeout)
	defer cancel()
	full := errors.New("full")
	add := func(it store.BulkItem, sample BulkSample) error {
		p.Legal++
		if p.Legal > int64(b.cfg.Cap) {
			p.OverCap, p.Legal = true, int64(b.cfg.Cap)+1
			return full
		}
		p.items = append(p.items, it)
		if len(p.Sample) < SampleSize {
			p.Sample = append(p.Sample, sample)
		}
		return nil
	}
	var (
		err error
		t   *tally
	)
	switch spec.Kind {
	case BulkKeys:
		if spec.Action == BulkVerify && b.verify == nil {
			return BulkPreview{}, invalid("action", "this console cannot ask the applications' verifiers (no River on this database)")
		}
		t = newTally("state", "operation", "scope")
		act := keyAction(spec.Action)
		f := spec.KeyFilter
		f.After, f.Limit = "", 0
		err = b.keyList.EachKey(bounded, f, idemdriver.MaxLimit, func(recs []idemdriver.Record) error {
			if err := bounded.Err(); err != nil {
				return err
			}
			for _, r := range recs {
				if spec.Group != "" {
					if f, ok := incident.KeyFields(r); !ok || f.Key() != spec.Group {
						continue // another group's: not selected
					}
				}
				p.Scanned++
				if cerr := idem.CheckOperator(r, act); cerr != nil {
					p.NotLegal[notLegalReason(r, cerr)]++
					continue
				}
				if spec.Action == BulkConfirmHappened && r.ExternalRef == "" {
					p.NotLegal[noReference]++
					continue
				}
				if act == idem.OperatorForget && ForgetRisk(r) != "" {
					p.MayHaveHappened++
					if !spec.IncludeMayHaveHappened {
						continue
					}
				}
				id := strconv.FormatInt(r.ID, 10)
				if err := add(store.BulkItem{TargetID: id, Version: r.Version}, BulkSample{ID: id, Version: r.Version,
					Label: r.Scope + " · " + r.Operation + " · " + string(r.Status), LastError: r.LastError, ExternalRef: r.ExternalRef}); err != nil {
					return err
				}
				t.add(string(r.Status), r.Operation, r.Scope)
			}
			return nil
		})
	case BulkOperations:
		if b.ops == nil || b.opList == nil {
			return BulkPreview{}, invalid("kind", "this console has no saga records")
		}
		t = newTally("status", "type")
		var systems *incident.SystemCache
		if spec.Group != "" {
			reader, ok := b.opList.(interface {
				ReadOperation(ctx context.Context, id string, maxEvents int) (sagadriver.OperationDetail, error)
			})
			if !ok {
				return BulkPreview{}, invalid("group", "this console cannot group operations")
			}
			systems = &incident.SystemCache{Ops: reader}
		}
		f := spec.OperationFilter
		f.After, f.Limit = "", 0
		err = b.opList.EachOperation(bounded, f, sagadriver.MaxLimit, func(list []sagadriver.Operation) error {
			if err := bounded.Err(); err != nil {
				return err
			}
			for _, o := range list {
				if systems != nil {
					sys, err := systems.System(bounded, o)
					if err != nil {
						return err
					}
					if fl, ok := incident.OperationFields(o, sys); !ok || fl.Key() != spec.Group {
						continue // another group's: not selected
					}
				}
				p.Scanned++
				op, err := b.ops.runner.Get(bounded, o.ID)
				if errors.Is(err, saga.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				step, why := operationLegal(op, OperationAction(spec.Action))
				if why != "" {
					p.NotLegal[why]++
					continue
				}
				if err := add(store.BulkItem{TargetID: op.ID, Version: op.Version, Step: step}, BulkSample{ID: op.ID, Version: op.Version,
					Label: op.Type + " · " + string(op.Status) + stepLabel(step), LastError: op.LastError}); err != nil {
					return err
				}
				t.add(string(op.Status), op.Type)
			}
			return nil
		})
	}
	p.Took = b.now().Sub(started)
	switch {
	case err == nil, errors.Is(err, full):
	case ctx.Err() != nil:
		return BulkPreview{}, ctx.Err()
	case bounded.Err() != nil:
		return BulkPreview{}, &PreviewTooSlowError{Scanned: p.Scanned, Bound: b.cfg.PreviewTimeout}
	default:
		return BulkPreview{}, err
	}
	p.Breakdown = t.breakdown()
	return p, nil
}

// previewing counts a preview of actor's person until done is called:
// at most MaxPreviewsPerUser at once (else ErrTooManyPreviews).
func (b *Bulks[TTx]) previewing(actor Actor) (done func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.previews[actor.Username] >= MaxPreviewsPerUser {
		return nil, ErrTooManyPreviews
	}
	b.previews[actor.Username]++
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.previews[actor.Username]--; b.previews[actor.Username] <= 0 {
			delete(b.previews, actor.Username)
		}
	}, nil
}

func stepLabel(step string) string {
	if step == "" {
		return ""
	}
	return " · step " + step
}

func keyAction(a string) idem.OperatorAction {
	switch a {
	case "confirm":
		return idem.OperatorConfirmNotHappened
	case BulkConfirmHappened, BulkVerify:
		// Verify is legal where an outcome can be confirmed: unknown.
		return idem.OperatorConfirmHappened
	}
	return idem.OperatorForget
}

// BulkConfirmHappened is the bulk action on keys that confirms each
// effect happened with the external reference its own record carries
// (SPEC K19 item 2): the safe decision for keys whose provider answer was
// lost after the effect. Keys without a reference are not legal for it.
const BulkConfirmHappened = "confirm_happened"

// BulkVerify is the bulk action on keys that asks the applications'
// verifier of each key whether its effect happened (SPEC K19): legal for
// the keys a single verification is. Each item is a request; its answer is
// applied when it comes, as for one key.
const BulkVerify = "verify"

// noReference is why a key without an external reference is left out of
// a bulk "confirm happened".
const noReference = "no external reference: confirm it on its own page with the provider's reference"

// notLegalReason groups a refused key by its state and the rule.
func notLegalReason(r idemdriver.Record, err error) string {
	var te *idem.TransitionError
	if errors.As(err, &te) {
		return te.Status + ": " + te.Reason
	}
	return string(r.Status) + ": " + err.Error()
}

// operationLegal says whether act is legal on op now ("" why), and the
// step a retry takes.
func operationLegal(op sagadriver.Operation, act OperationAction) (step, why string) {
	l := Legal(op)
	switch act {
	case OperationRetry:
		switch len(l.Retry) {
		case 0:
			return "", string(op.Status) + ": no step to retry"
		case 1:
			return l.Retry[0].Name, ""
		default:
			return "", string(op.Status) + ": several steps could be retried; decide it on its own page"
		}
	case OperationCompensate:
		if !l.Compensate {
			return "", string(op.Status) + ": compensation cannot start (not running or under review, or already started)"
		}
	case OperationResolve:
		if !l.Resolve {
			return "", string(op.Status) + ": only an operation under review can be resolved"
		}
	case OperationRedrive:
		// In bulk, a redrive resumes each operation at its failed step;
		// re-running or compensating from a chosen step is decided on the
		// operation's own page.
		if step := resumeStep(l); step != "" {
			return step, ""
		}
		return "", string(op.Status) + ": nothing to resume (moving, completed, compensated or a compensation unfinished)"
	}
	return "", ""
}

// resumeStep is the step a resume would start at, "" when none is legal.
func resumeStep(l LegalActions) string {
	for _, c := range l.Redrive {
		if c.Mode == saga.RedriveResume {
			return c.Steps[0]
		}
	}
	return ""
}

// validReason checks an operator's reason and returns it trimmed: valid
// text (UTF-8 without NUL, which the audit trail refuses) of MinReason
// characters to MaxReason bytes.
func validReason(field, reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case utf8.RuneCountInString(reason) < MinReason:
		return "", invalid(field, fmt.Sprintf("give a reason of at least %d characters", MinReason))
	case len(reason) > MaxReason || !utf8.ValidString(reason) || strings.ContainsRune(reason, 0):
		return "", invalid(field, fmt.Sprintf("the reason must be valid text of at most %d bytes", MaxReason))
	}
	return reason, nil
}

// Freeze previews spec for actor and records the items it shows — their
// IDs and versions, up to the cap — as a draft request: the exact set the
// request decides once submitted, whatever starts matching later (SPEC
// K22). A preview with no legal item, or over the cap, is returned
// without a draft (req.ID 0). At most MaxPreviewsPerUser previews of one
// person run at once (else ErrTooManyPreviews).
func (b *Bulks[TTx]) Freeze(ctx context.Context, actor Actor, spec BulkSpec) (store.Bulk, BulkPreview, error) {
	done, err := b.previewing(actor)
	if err != nil {
		return store.Bulk{}, BulkPreview{}, err
	}
	defer done()
	p, err := b.Preview(ctx, spec)
	if err != nil || p.OverCap || p.Legal == 0 {
		return store.Bulk{}, p, err
	}
	params := map[string]any{}
	if spec.ResolveTo != "" {
		params["resolve_to"] = string(spec.ResolveTo)
	}
	if spec.Kind == BulkKeys && spec.Action == "forget" && spec.IncludeMayHaveHappened {
		params[FieldAcknowledgeRerun] = "true"
	}
	req := store.Bulk{Kind: spec.Kind, Action: spec.Action, Filter: spec.FilterQuery, Params: string(mustJSON(params)),
		RequestedBy: actor.Username, RequestedRole: actor.Role, Status: store.BulkDraft, NotLegal: p.NotLegalTotal(),
		ExpiresAt: b.now().Add(DefaultDraftExpiry), Summary: string(mustJSON(p.summary())), Canary: b.canary(len(p.items))}
	req, err = b.store.CreateBulk(ctx, req, p.items)
	return req, p, err
}

// canary is the size of the first batch of a run of n items.
func (b *Bulks[TTx]) canary(n int) int {
	c := int(math.Ceil(float64(n) * b.cfg.CanaryPercent / 100))
	return min(max(c, b.cfg.CanaryMin), n)
}

// Submit turns actor's draft id into a request, with reason, if
// confirmCount is its frozen count (else a *CountError with that count):
// it waits for approval if the configuration says so, else its run
// starts. The request is audited. A draft that is not actor's, or no
// longer a draft (submitted, expired), is ErrNotWaiting.
func (b *Bulks[TTx]) Submit(ctx context.Context, actor Actor, id int64, reason string, confirmCount int64) (store.Bulk, error) {
	reason, err := validReason("reason", reason)
	if err != nil {
		return store.Bulk{}, err
	}
	req, ok, err := b.Get(ctx, id)
	switch {
	case err != nil:
		return store.Bulk{}, err
	case !ok:
		return store.Bulk{}, ErrNotFound
	case req.Status != store.BulkDraft || req.RequestedBy != actor.Username:
		return req, fmt.Errorf("%w: it is %s, by %s", ErrNotWaiting, req.Status, req.RequestedBy)
	case confirmCount != req.Total:
		return req, &CountError{Now: req.Total}
	}
	to, expires := store.BulkRunning, time.Time{}
	if b.cfg.Approval.Bulk() {
		to, expires = store.BulkWaitingApproval, b.now().Add(b.cfg.Expiry)
	}
	moved, err := b.store.SubmitBulk(ctx, id, actor.Username, to, reason, expires)
	if err != nil {
		return req, err
	}
	if !moved {
		return req, fmt.Errorf("%w: it was submitted or expired meanwhile", ErrNotWaiting)
	}
	req.Status, req.Reason, req.ExpiresAt = to, reason, expires
	return req, b.announce(ctx, actor, req, nil)
}

// Request freezes spec for actor and submits it with reason in one step,
// if confirmCount is the number of items frozen (else a *CountError): the
// programmatic form of a preview and its submission.
func (b *Bulks[TTx]) Request(ctx context.Context, actor Actor, spec BulkSpec, reason string, confirmCount int64) (store.Bulk, BulkPreview, error) {
	if _, err := validReason("reason", reason); err != nil {
		return store.Bulk{}, BulkPreview{}, err
	}
	draft, p, err := b.Freeze(ctx, actor, spec)
	switch {
	case err != nil:
		return store.Bulk{}, p, err
	case p.OverCap:
		return store.Bulk{}, p, invalid("filter", fmt.Sprintf("more than %d items match: narrow the filter", b.cfg.Cap))
	case p.Legal == 0:
		return store.Bulk{}, p, invalid("filter", "the action is legal for no matching item")
	}
	req, err := b.Submit(ctx, actor, draft.ID, reason, confirmCount)
	return req, p, err
}

// RequestSingle records a single decision that needs approval as a
// request of one item: the key record or operation id at version, with
// its parameters (a confirm's outcome and reference, a retry's step, a
// resolve's status). It runs, through the same path as a bulk item, once
// approved.
func (b *Bulks[TTx]) RequestSingle(ctx context.Context, actor Actor, kind, action, id string, version int64, step string, params map[string]any, reason string) (store.Bulk, error) {
	reason, err := validReason("reason", reason)
	if err != nil {
		return store.Bulk{}, err
	}
	if version <= 0 {
		return store.Bulk{}, invalid("version", "the form has no version; reload the page")
	}
	// Legal now, as it will be checked when it runs: a decision that is
	// not is refused before anyone is asked to approve it.
	if err := b.singleLegal(ctx, kind, action, id, version, step, params); err != nil {
		return store.Bulk{}, err
	}
	req := store.Bulk{Kind: kind, Action: action, Single: true, Params: string(mustJSON(params)), Reason: reason,
		RequestedBy: actor.Username, RequestedRole: actor.Role, Status: store.BulkWaitingApproval, ExpiresAt: b.now().Add(b.cfg.Expiry), Canary: 1}
	item := store.BulkItem{TargetID: id, Version: version, Step: step}
	req, err = b.store.CreateBulk(ctx, req, []store.BulkItem{item})
	if err != nil {
		return store.Bulk{}, err
	}
	return req, b.announce(ctx, actor, req, &item)
}

// singleLegal checks a single decision held for approval against its item
// now: ErrNotFound, ErrStale (another version), ErrIllegal (not allowed in
// its state), or a *FieldError (a forget of a key whose effect may have
// happened, without the acknowledgement).
func (b *Bulks[TTx]) singleLegal(ctx context.Context, kind, action, id string, version int64, step string, params map[string]any) error {
	switch kind {
	case BulkKeys:
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return ErrNotFound
		}
		r, ok, err := b.keys.records.KeyByID(ctx, n)
		switch {
		case err != nil:
			return err
		case !ok:
			return ErrNotFound
		case r.Version != version:
			return ErrStale
		}
		d := KeyDecision{Action: keyAction(action), AcknowledgeRerun: params[FieldAcknowledgeRerun] == "true"}
		if action == "confirm" && params["happened"] == "true" {
			d.Action = idem.OperatorConfirmHappened
		}
		if err := idem.CheckOperator(r, d.Action); err != nil {
			return fmt.Errorf("%w: %w", ErrIllegal, err)
		}
		return checkForget(d, r)
	case BulkOperations:
		if b.ops == nil {
			return invalid("kind", "this console has no saga records")
		}
		op, err := b.ops.runner.Get(ctx, id)
		switch {
		case errors.Is(err, saga.ErrNotFound):
			return ErrNotFound
		case err != nil:
			return err
		case op.Version != version:
			return ErrStale
		}
		l := Legal(op)
		legal := false
		switch OperationAction(action) {
		case OperationRetry:
			legal = slices.ContainsFunc(l.Retry, func(c StepChoice) bool { return c.Name == step })
		case OperationConfirm:
			legal = slices.ContainsFunc(l.Confirm, func(c StepChoice) bool { return c.Name == step })
		case OperationCompensate:
			legal = l.Compensate
		case OperationResolve:
			legal = l.Resolve
		case OperationRedrive:
			legal = step != "" && resumeStep(l) == step
		}
		if !legal {
			return fmt.Errorf("%w: %s is not allowed on operation %s in status %s", ErrIllegal, action, id, op.Status)
		}
	}
	return nil
}

// announce audits a request made (its one item for a single decision)
// and starts its run unless it waits for approval.
func (b *Bulks[TTx]) announce(ctx context.Context, actor Actor, req store.Bulk, item *store.BulkItem) error {
	after := map[string]any{"kind": req.Kind, "action": req.Action, "filter": req.Filter, "params": req.Params, "count": req.Total,
		"not_legal": req.NotLegal, "status": req.Status, "single": req.Single}
	if item != nil {
		after["target"], after["version"] = item.TargetID, item.Version
	}
	if _, err := b.db.trail.Append(ctx, b.entry(actor, req, "bulk.request", req.Reason, after, audit.OutcomeApplied)); err != nil {
		return err
	}
	if req.Status == store.BulkRunning {
		return b.start(ctx, req.ID)
	}
	return nil
}

// start inserts the job of request id's run, if b has Runs.
func (b *Bulks[TTx]) start(ctx context.Context, id int64) error {
	if b.runs == nil {
		return nil
	}
	if _, err := b.runs.Insert(ctx, BulkArgs{BulkID: id}, nil); err != nil {
		return fmt.Errorf("ops: start bulk request %d: %w", id, err)
	}
	return nil
}

// Get returns request id with its counts.
func (b *Bulks[TTx]) Get(ctx context.Context, id int64) (store.Bulk, bool, error) {
	req, ok, err := b.store.BulkByID(ctx, id)
	if err != nil || !ok {
		return req, ok, err
	}
	if req.Status == store.BulkWaitingApproval && !req.ExpiresAt.IsZero() && !b.now().Before(req.ExpiresAt) {
		if _, err := b.expire(ctx); err != nil {
			return req, ok, err
		}
		return b.store.BulkByID(ctx, id)
	}
	return req, ok, nil
}

// List returns up to limit requests in status ("" every one), newest
// first, after expiring those past their time.
func (b *Bulks[TTx]) List(ctx context.Context, status string, limit int) ([]store.Bulk, error) {
	if _, err := b.expire(ctx); err != nil {
		return nil, err
	}
	return b.store.ListBulk(ctx, status, limit)
}

// Waiting counts the requests waiting for approval.
func (b *Bulks[TTx]) Waiting(ctx context.Context) (int64, error) {
	if _, err := b.expire(ctx); err != nil {
		return 0, err
	}
	return b.store.CountBulk(ctx, store.BulkWaitingApproval)
}

// Items returns up to limit items of request id with outcome ("" every
// one) after seq after.
func (b *Bulks[TTx]) Items(ctx context.Context, id int64, outcome string, after, limit int) ([]store.BulkItem, error) {
	return b.store.BulkItems(ctx, id, outcome, after, limit)
}

// expire moves the requests past their time to expired, audited.
func (b *Bulks[TTx]) expire(ctx context.Context) ([]int64, error) {
	ids, err := b.store.ExpireBulk(ctx, b.now())
	for _, id := range ids {
		e := audit.Entry{Actor: "system", Role: "system", Action: "bulk.expire", TargetKind: "bulk", TargetID: strconv.FormatInt(id, 10),
			Reason: "no approval before the request expired", Outcome: audit.OutcomeApplied, RequestID: BulkRequestID(id)}
		if _, aerr := b.db.trail.Append(ctx, e); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}
	return ids, err
}

// Approve approves request id as actor, a different person than the
// requester (else ErrSelfApproval, audited as denied), and starts its run:
// each item is decided then, its version checked at that moment. The
// caller checks that actor's role may perform the action.
func (b *Bulks[TTx]) Approve(ctx context.Context, actor Actor, id int64, reason string) (store.Bulk, error) {
	return b.decide(ctx, actor, id, reason, true)
}

// Reject rejects request id as actor, with a reason, under the rules of
// Approve.
func (b *Bulks[TTx]) Reject(ctx context.Context, actor Actor, id int64, reason string) (store.Bulk, error) {
	return b.decide(ctx, actor, id, reason, false)
}

func (b *Bulks[TTx]) decide(ctx context.Context, actor Actor, id int64, reason string, approve bool) (store.Bulk, error) {
	action, to := "bulk.approve", store.BulkRunning
	if !approve {
		action, to = "bulk.reject", store.BulkRejected
	}
	if approve {
		reason = strings.TrimSpace(reason)
		if len(reason) > MaxReason || !utf8.ValidString(reason) {
			return store.Bulk{}, invalid("reason", fmt.Sprintf("the reason must be valid text of at most %d bytes", MaxReason))
		}
	} else {
		var err error
		if reason, err = validReason("reason", reason); err != nil {
			return store.Bulk{}, err
		}
	}
	req, ok, err := b.Get(ctx, id)
	switch {
	case err != nil:
		return store.Bulk{}, err
	case !ok:
		return store.Bulk{}, ErrNotFound
	}
	self, err := b.SamePerson(ctx, req.RequestedBy, actor.Username)
	if err != nil {
		return req, err
	}
	switch {
	case self:
		e := b.entry(actor, req, action, "refused: the requester cannot approve or reject their own request", nil, audit.OutcomeDenied)
		if _, aerr := b.db.trail.Append(context.WithoutCancel(ctx), e); aerr != nil {
			return req, errors.Join(ErrSelfApproval, aerr)
		}
		return req, ErrSelfApproval
	case req.Status != store.BulkWaitingApproval:
		return req, fmt.Errorf("%w: it is %s", ErrNotWaiting, req.Status)
	}
	if approve {
		// A request none of whose items can still be decided is not
		// approved: the approver would approve nothing.
		live, err := b.anyItemLegal(ctx, req)
		if err != nil {
			return req, err
		}
		if !live {
			return req, ErrNothingToRun
		}
	}
	moved, err := b.store.SetBulkStatus(ctx, id, []string{store.BulkWaitingApproval}, to, actor.Username, reason)
	if err != nil {
		return req, err
	}
	if !moved {
		return req, fmt.Errorf("%w: it was decided meanwhile", ErrNotWaiting)
	}
	req.Status, req.DecidedBy, req.DecisionReason = to, actor.Username, reason
	after := map[string]any{"status": to, "requested_by": req.RequestedBy, "approver": actor.Username, "count": req.Total}
	if _, err := b.db.trail.Append(ctx, b.entry(actor, req, action, reason, after, audit.OutcomeApplied)); err != nil {
		return req, err
	}
	if approve {
		return req, b.start(ctx, id)
	}
	return req, nil
}

// Cancel stops request id: items already decided stay decided, the others
// are not decided. Only the requester or an admin (isAdmin) may cancel.
func (b *Bulks[TTx]) Cancel(ctx context.Context, actor Actor, id int64, isAdmin bool) (store.Bulk, error) {
	req, ok, err := b.Get(ctx, id)
	switch {
	case err != nil:
		return store.Bulk{}, err
	case !ok:
		return store.Bulk{}, ErrNotFound
	case req.RequestedBy != actor.Username && !isAdmin:
		return req, ErrForbidden
	}
	moved, err := b.store.SetBulkStatus(ctx, id, []string{store.BulkWaitingApproval, store.BulkRunning, store.BulkPaused}, store.BulkCancelled, actor.Username, "")
	if err != nil {
		return req, err
	}
	if !moved {
		return req, fmt.Errorf("%w: it is %s", ErrNotWaiting, req.Status)
	}
	req.Status = store.BulkCancelled
	if _, err := b.db.trail.Append(ctx, b.entry(actor, req, "bulk.cancel", "cancelled by "+actor.Username, map[string]any{"status": req.Status}, audit.OutcomeApplied)); err != nil {
		return req, err
	}
	return req, nil
}

// Pause stops the run of request id until someone resumes it: items
// decided stay decided, the others wait. Only the requester (any account
// or an admin may pause, and resume.
func (b *Bulks[TTx]) Pause(ctx context.Context, actor Actor, id int64, isAdmin bool) (store.Bulk, error) {
	return b.pauseOrResume(ctx, actor, id, isAdmin, true)
}

// Resume continues paused request id under the rules of Pause; the run
// goes on with normal batches and the same failure threshold.
func (b *Bulks[TTx]) Resume(ctx context.Context, actor Actor, id int64, isAdmin bool) (store.Bulk, error) {
	return b.pauseOrResume(ctx, actor, id, isAdmin, false)
}

// anyItemLegal reports whether some item of req is still at its frozen
// version and its action legal for it: reading items until the first one.
func (b *Bulks[TTx]) anyItemLegal(ctx context.Context, req store.Bulk) (bool, error) {
	var params map[string]any
	if req.Params != "" {
		if err := json.Unmarshal([]byte(req.Params), &params); err != nil {
			return false, fmt.Errorf("ops: bulk request %d: params: %w", req.ID, err)
		}
	}
	for after := 0; ; {
		items, err := b.store.BulkItems(ctx, req.ID, store.ItemPending, after, b.cfg.Batch)
		if err != nil || len(items) == 0 {
			return false, err
		}
		for _, it := range items {
			err := b.singleLegal(ctx, req.Kind, req.Action, it.TargetID, it.Version, it.Step, params)
			var fe *FieldError
			switch {
			case err == nil:
				return true, nil
			case errors.Is(err, ErrNotFound), errors.Is(err, ErrStale), errors.Is(err, ErrIllegal), errors.As(err, &fe):
			default:
				return false, err
			}
			after = it.Seq
		}
	}
}

func (b *Bulks[TTx]) pauseOrResume(ctx context.Context, actor Actor, id int64, isAdmin, pause bool) (store.Bulk, error) {
	req, ok, err := b.Get(ctx, id)
	switch {
	case err != nil:
		return store.Bulk{}, err
	case !ok:
		return store.Bulk{}, ErrNotFound
	case req.RequestedBy != actor.Username && !isAdmin:
		return req, ErrForbidden
	}
	from, to, action := store.BulkRunning, store.BulkPaused, "bulk.pause"
	if !pause {
		from, to, action = store.BulkPaused, store.BulkRunning, "bulk.resume"
	}
	moved, err := b.store.SetBulkStatus(ctx, id, []string{from}, to, actor.Username, "paused by "+actor.Username)
	if err != nil {
		return req, err
	}
	if !moved {
		return req, fmt.Errorf("%w: it is %s", ErrNotWaiting, req.Status)
	}
	req.Status = to
	if _, err := b.db.trail.Append(ctx, b.entry(actor, req, action, action[5:]+"d by "+actor.Username, map[string]any{"status": to}, audit.OutcomeApplied)); err != nil {
		return req, err
	}
	if !pause {
		return req, b.start(ctx, id)
	}
	return req, nil
}

// Running lists the IDs of the requests whose run is not finished, for a
// restarted process to resume them.
func (b *Bulks[TTx]) Running(ctx context.Context) ([]int64, error) {
	list, err := b.store.ListBulk(ctx, store.BulkRunning, 1000)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(list))
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// ResumeRuns starts the run of every request still running: after a
// crash, a run resumes at its first pending item.
func (b *Bulks[TTx]) ResumeRuns(ctx context.Context) error {
	ids, err := b.Running(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := b.start(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// BulkRequestID is the audit request ID of a bulk request's entries: each
// item's entry points at its request by it.
func BulkRequestID(id int64) string { return "bulk-" + strconv.FormatInt(id, 10) }

func (b *Bulks[TTx]) entry(actor Actor, req store.Bulk, action, reason string, after map[string]any, outcome string) audit.Entry {
	return audit.Entry{Actor: actor.Username, Role: actor.Role, Action: action, TargetKind: "bulk", TargetID: strconv.FormatInt(req.ID, 10),
		Reason: reason, After: mustJSON(after), Outcome: outcome, RequestID: BulkRequestID(req.ID), ClientAddr: actor.ClientAddr, UserAgent: actor.UserAgent}
}

// Denied audits a bulk or approval step the authorization refused.
func (b *Bulks[TTx]) Denied(ctx context.Context, actor Actor, action, targetKind, targetID string) error {
	return RecordDenied(ctx, b.db.trail, actor, action, targetKind, targetID)
}
