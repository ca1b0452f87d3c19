package views

import (
	"time"

	"github.com/unstuckhq/unstuck/idem"
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
	Keys            []StatusCount
	StuckProcessing int64
	AsOf            time.Time
	Attention       []idem.Record
}

// KeyFilterVM is the key list's filter form, as the URL carries it.
type KeyFilterVM struct {
	State         string
	Scope         string
	Operation     string
	CorrelationID string
	ExternalRef   string
	From          string
	To            string
	Key           string // raw key lookup, with Scope and Operation
	Live          bool
}

// KeysVM is the key list page's model.
type KeysVM struct {
	Filter   KeyFilterVM
	States   []string
	Records  []idem.Record
	NextURL  string
	SelfURL  string // this page's URL, polled when Live
	Error    string
	FieldErr string // the filter field the error is about
}

// StoredResponse is a decrypted stored response, for roles allowed to see it.
type StoredResponse struct {
	Status int
	Header map[string][]string
	Body   string
}

// KeyVM is the key detail page's model.
type KeyVM struct {
	Record       idem.Record
	Response     *StoredResponse
	ResponseNote string // why no response is shown
}
