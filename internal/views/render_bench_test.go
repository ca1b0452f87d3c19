package views

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// BenchmarkKeysPage renders the keys list as the console serves it: the
// layout around a page of 51 records: a list page should cost about its
// queries. go test -run '^$' -bench KeysPage -benchmem ./internal/views/
func BenchmarkKeysPage(b *testing.B) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recs := make([]idemdriver.Record, 51)
	for i := range recs {
		recs[i] = idemdriver.Record{ID: int64(900000 + i), Ident: idemdriver.Ident{Scope: "tenant:" + strconv.Itoa(i%7), Operation: "POST /v1/charges"},
			Status: idemdriver.StatusFailed, ExternalRef: "ch_" + strconv.Itoa(i), Attempts: 2, UpdatedAt: now.Add(-time.Duration(i) * time.Minute)}
	}
	p := Page{Title: "Keys", Nav: "keys", Now: now, Viewer: &Viewer{Username: "bench", Role: "oncall", Can: func(string, string) bool { return true }}}
	vm := KeysVM{Filter: KeyFilterVM{State: "failed"}, States: []string{"processing", "stuck", "completed", "failed", "pending", "unavailable"},
		Records: recs, Total: CountVM{N: 1000, Known: true}, SelfURL: "/keys?state=failed",
		Pager: PagerVM{FirstURL: "/keys?state=failed", NextURL: "/keys?state=failed&after=abc"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := Layout(p, Keys(p, vm)).Render(ctx, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOperationsPage renders the operations list as the console
// serves it: the layout around a page of 51 operations under review.
func BenchmarkOperationsPage(b *testing.B) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ops := make([]sagadriver.Operation, 51)
	for i := range ops {
		ops[i] = sagadriver.Operation{ID: "op_" + strconv.Itoa(700000+i), Type: "checkout", Status: sagadriver.StatusReviewRequired,
			CurrentStep: "charge", CorrelationID: "order-" + strconv.Itoa(i), ReviewReason: "compensation failed",
			LastError: "provider timeout after 30s", UpdatedAt: now.Add(-time.Duration(i) * time.Minute)}
	}
	p := Page{Title: "Operations", Nav: "operations", Now: now, Viewer: &Viewer{Username: "bench", Role: "oncall", Can: func(string, string) bool { return true }}}
	vm := OperationsVM{Filter: OperationFilterVM{Status: "review_required"}, Operations: ops,
		Total: CountVM{N: 1000, Known: true}, SelfURL: "/operations?status=review_required",
		Pager: PagerVM{FirstURL: "/operations?status=review_required", NextURL: "/operations?status=review_required&after=abc"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := Layout(p, Operations(p, vm)).Render(ctx, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
