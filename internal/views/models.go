package views

import (
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// StatusCount is one row of the overview's counts.
type StatusCount struct {
	Status string
	Count  int64
	Exact  bool
	Oldest time.Time
	Href   string
}

// OverviewVM is the overview page's model.
type OverviewVM struct {
	Keys []StatusCount
	// StuckProcessing counts processing records past their lease; when
	// StuckExact is false it is a lower bound, shown as "≥ N".
	StuckProcessing int64
	StuckExact      bool
	AsOf            time.Time
	Attention       []idemdriver.Record
	// Operations counts operations per status; OperationsAvailable is
	// false when the database has no saga tables. OperationsAsOf is set
	// when some count is an estimate.
	Operations          []StatusCount
	OperationsAvailable bool
	// OperationsUnavailable, when set, says why the database has no
	// operations at all (MySQL: no sagas).
	OperationsUnavailable string
	OperationsAsOf        time.Time
	// Review lists operations in review_required, the longest waiting
	// first: they come first under "Needs a human".
	Review []sagadriver.Operation
	// ReviewCount counts the operations in review_required and
	// AttentionCount the keys pending, unavailable or stuck; a count whose
	// Exact is false is an estimate or a lower bound, shown as "≥ N".
	ReviewCount, AttentionCount int64
	ReviewExact, AttentionExact bool
	// KeyTrends and OperationTrends draw each state's counts over 24 h and
	// 7 d from the console's snapshots (SPEC K15); empty without them.
	KeyTrends, OperationTrends []TrendVM
}

// NeedsHuman is what the page title counts: operations under review and
// keys that need a human.
func (vm OverviewVM) NeedsHuman() int64 { return vm.ReviewCount + vm.AttentionCount }

// KeyFilterVM is the key list's filter form, as the URL carries it.
type KeyFilterVM struct {
	State         string
	Scope         string
	Operation     string
	CorrelationID string
	ExternalRef   string
	From          string
	To            string
	Live          bool
	// Order is the URL's valid order parameter ("" for the default),
	// which the form keeps.
	Order string
}

// PagerVM are a list page's links: the first page, the previous and the
// next; "" when there is none.
type PagerVM struct {
	FirstURL string
	PrevURL  string
	NextURL  string
}

// CountVM is how many items a list's filter selects: N, or at least N when
// Exact is false (the count stops at a cap, so that it costs the same at
// any table size). Known is false when it was not counted. Stopped is true
// when the count ran out of its time before its cap: N is then the rows
// the page shows, a lower bound.
type CountVM struct {
	N       int64
	Exact   bool
	Known   bool
	Stopped bool
}

// SortVM is a list's order and the links to its first page in each
// order.
type SortVM struct {
	// Oldest tells that the list is least recently updated first.
	Oldest    bool
	NewestURL string
	OldestURL string
}

// KeysVM is the key list page's model.
type KeysVM struct {
	Filter  KeyFilterVM
	Sort    SortVM
	States  []string
	Records []idemdriver.Record
	Pager   PagerVM
	// Total is how many records the filter selects, exact or "at least".
	Total   CountVM
	SelfURL string // this page's URL, polled when Live
	// HiddenConsole counts the console's own decision records the filter
	// would select too, left out of the list (exact up to the count's cap);
	// ShowConsoleURL lists them with the rest.
	HiddenConsole  int64
	HiddenExact    bool // false: at least HiddenConsole
	ShowConsoleURL string
	Error          string
	FieldErr       string // the filter field the error is about
	Notice         string // the outcome of a decision that removed a record
}

// StoredResponse is a decrypted stored response, for roles allowed to see it.
type StoredResponse struct {
	Status int
	Header map[string][]string
	Body   string
}

// KeyVM is the key detail page's model.
type KeyVM struct {
	Record       idemdriver.Record
	TraceURL     string // the record's trace in the tracing UI; "" for none
	Response     *StoredResponse
	ResponseNote string // why no response is shown
	Actions      []ActionForm
	History      []AuditRow
	Notice       string // the outcome of the last decision, after its redirect
	Error        string // why the last decision was refused
	FieldErr     string // the form field the error is about
	Reason       string // the reason typed, kept after a refusal
	// Verification says where the key's latest verification with the
	// provider stands (SPEC K19); "" for none pending or unanswered.
	Verification string
}

// ActionForm is one decision the viewer may take on an item, with what it
// will do (SPEC CON K4).
type ActionForm struct {
	Name        string // "forget", "confirm"
	Title       string // the summary and button text
	Consequence string
	URL         string
	Version     int64
	FormKey     string // idempotency key minted for this rendered form
	// Outcome, for a confirmation, is the outcome it records: "happened"
	// (with the external reference) or "did_not_happen".
	Outcome string
	// Acknowledge, when set, is the consequence the operator must tick to
	// acknowledge before the form is accepted (a forget of a key whose
	// effect may have happened, SPEC K20).
	Acknowledge string
}

// AuditRow is one entry of an item's audit history.
type AuditRow struct {
	Seq     int64
	At      time.Time
	Actor   string
	Role    string
	Action  string
	Reason  string
	Outcome string
}

// OperationFilterVM is the operation list's filter form, as the URL
// carries it.
type OperationFilterVM struct {
	Status        string
	Type          string
	CorrelationID string
	ExternalID    string
	From          string
	To            string
	Live          bool
	// Order is the URL's valid order parameter ("" for the default),
	// which the form keeps.
	Order string
}

// OperationsVM is the operation list page's model.
type OperationsVM struct {
	Filter     OperationFilterVM
	Sort       SortVM
	Statuses   []string
	Operations []sagadriver.Operation
	Pager      PagerVM
	// Total is how many operations the filter selects, exact or "at least".
	Total    CountVM
	SelfURL  string // this page's URL, polled when Live
	Error    string
	FieldErr string // the filter field the error is about
}

// OperationVM is the operation detail page's model.
type OperationVM struct {
	Operation sagadriver.Operation
	// Events is the timeline, oldest first; EventsOmitted counts the
	// earlier events left out.
	Events        []sagadriver.Event
	EventsOmitted int64
	Findings      []sagadriver.Finding
	// DataNote, when set, says why the operation's input and its steps'
	// results were left out of Operation (the viewer's role, not asked
	// for, or their viewing could not be audited); DataURL, when set, asks
	// for them.
	DataNote string
	DataURL  string
	// Live: the page refreshes its live part from LiveURL (the page's
	// own address) while the operation moves.
	Live    bool
	LiveURL string
}
