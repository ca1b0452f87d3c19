// Package views holds the console's templ components: the layout, one file
// per resource, and shared widgets. Components take view models defined
// here; they depend on nothing of ours above them.
package views

import (
	"strconv"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Viewer is the signed-in user as the views see them.
type Viewer struct {
	Username string
	Role     string
	// Can reports whether the viewer may do act on obj (casbin); the views
	// render only the controls it allows.
	Can func(obj, act string) bool
}

// Page is what every page passes to the layout.
type Page struct {
	Title  string
	Nav    string // "overview", "keys", "operations", "audit", "webhooks", "users"
	Viewer *Viewer
	Now    time.Time
	// Approvals counts the requests waiting for a second person's
	// approval (SPEC K13): the title and the navigation show it.
	Approvals int64
	// BulkEnabled says the console serves bulk decisions (the list
	// pages link to them).
	BulkEnabled bool
	// VerifyEnabled says the console can ask the applications' verifiers
	// about keys (SPEC K19).
	VerifyEnabled bool
	// WebhooksEnabled says the console relays decision webhooks (the
	// navigation links to their delivery log).
	WebhooksEnabled bool
	// URL, when set, is the page's own address: a page rendered as the
	// answer to a POST (a refused decision) puts it in the address bar, so
	// that a reload shows the page instead of posting again.
	URL string
	// Results says the page is a list with a results heading
	// (#results-title): the layout offers a link that skips to it.
	Results bool
}

// FullTitle is the document title, with one prefix at most: for a viewer
// who may approve bulk requests, the count waiting for approval when there
// are any; for everyone else the page's own count ("(3) Overview"), which
// the page's Title carries.
func (p Page) FullTitle() string {
	if p.Approvals > 0 && p.MayApprove() {
		return "(" + strconv.FormatInt(p.Approvals, 10) + " waiting approval) " + withoutCount(p.Title) + " · unstuck"
	}
	return p.Title + " · unstuck"
}

// MayApprove reports whether the viewer may approve bulk requests.
func (p Page) MayApprove() bool {
	return p.BulkEnabled && p.can("/approvals/1/approve", "POST")
}

// withoutCount drops a leading "(N) " count from a title.
func withoutCount(title string) string {
	if len(title) > 2 && title[0] == '(' {
		for i := 1; i < len(title); i++ {
			c := title[i]
			if c == ')' && i > 1 && i+1 < len(title) && title[i+1] == ' ' {
				return title[i+2:]
			}
			if c < '0' || c > '9' {
				break
			}
		}
	}
	return title
}

func (p Page) can(obj, act string) bool {
	return p.Viewer != nil && p.Viewer.Can != nil && p.Viewer.Can(obj, act)
}

// Ago renders the age of t relative to now: "42s", "3m", "5h", "2d".
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t) // saturates about 292 years away
	neg := d < 0
	if neg {
		d = max(-d, -(d + 1)) // -minDuration overflows: the longest duration instead
	}
	var s string
	switch {
	case d < time.Minute:
		s = strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		s = strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d/time.Hour)) + "h"
	default:
		s = strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	if neg {
		return "in " + s
	}
	return s + " ago"
}

// UTC renders t as an absolute UTC time.
func UTC(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ISO renders t for a datetime attribute.
func ISO(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func statusClass(s string) string { return "chip chip-" + s }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// StuckProcessing reports whether a processing record's lease had ended
// when it was read.
func StuckProcessing(r idemdriver.Record) bool {
	return r.Status == idemdriver.StatusProcessing && !r.LeaseLive()
}

// DisplayStatus is the status shown for a record: processing past its
// lease shows as "stuck".
func DisplayStatus(r idemdriver.Record) string {
	if StuckProcessing(r) {
		return "stuck"
	}
	return string(r.Status)
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
