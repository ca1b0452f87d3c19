package views

import "testing"

// The title carries one prefix: the approvals waiting for a viewer who
// may approve, the page's own count for everyone else.
func TestFullTitleOnePrefix(t *testing.T) {
	approver := &Viewer{Username: "a", Role: "admin", Can: func(obj, act string) bool { return true }}
	oncall := &Viewer{Username: "o", Role: "oncall", Can: func(obj, act string) bool { return act == "GET" }}
	for _, c := range []struct {
		p    Page
		want string
	}{
		{Page{Title: "(3) Overview", Viewer: approver, Approvals: 1, BulkEnabled: true}, "(1 waiting approval) Overview · unstuck"},
		{Page{Title: "(3) Overview", Viewer: oncall, Approvals: 1, BulkEnabled: true}, "(3) Overview · unstuck"},
		{Page{Title: "Keys", Viewer: oncall, Approvals: 2, BulkEnabled: true}, "Keys · unstuck"},
		{Page{Title: "Keys", Viewer: approver, Approvals: 2, BulkEnabled: true}, "(2 waiting approval) Keys · unstuck"},
		{Page{Title: "(3) Overview", Viewer: approver, BulkEnabled: true}, "(3) Overview · unstuck"},
		{Page{Title: "(x) Odd", Viewer: approver, Approvals: 1, BulkEnabled: true}, "(1 waiting approval) (x) Odd · unstuck"},
	} {
		if got := c.p.FullTitle(); got != c.want {
			t.Errorf("FullTitle(%q, %s, %d waiting) = %q, want %q", c.p.Title, c.p.Viewer.Role, c.p.Approvals, got, c.want)
		}
	}
}
