package views

import (
	"testing"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// The items of one bulk decision fold under their first entry; a request
// filter shows them all.
func TestAuditRunsFoldABulkRequest(t *testing.T) {
	var es []audit.Entry
	es = append(es, audit.Entry{Seq: 20, Action: "key.forget", Outcome: "applied", RequestID: "req-a"})
	for seq := int64(19); seq >= 10; seq-- {
		es = append(es, audit.Entry{Seq: seq, Action: "key.forget", Outcome: "applied", RequestID: "bulk-7"})
	}
	es = append(es, audit.Entry{Seq: 9, Action: "key.forget", Outcome: "denied", RequestID: "bulk-7"},
		audit.Entry{Seq: 8, Action: "operation.retry", Outcome: "applied", RequestID: "req-b"},
		audit.Entry{Seq: 7, Action: "operation.retry", Outcome: "applied", RequestID: "req-b"})
	runs := auditRuns(es, true)
	if len(runs) != 5 {
		t.Fatalf("%d runs, want 5 (req-a, bulk-7 folded, the denied one, req-b twice): %+v", len(runs), runs)
	}
	if r := runs[1]; r.Seq != 19 || r.More != 9 || r.LastSeq != 10 {
		t.Errorf("the bulk run: seq %d, %d more down to %d; want 19, 9, 10", r.Seq, r.More, r.LastSeq)
	}
	if r := runs[3]; r.More != 0 {
		t.Errorf("two entries of one request are not folded: %+v", r)
	}
	if got := len(auditRuns(es, false)); got != len(es) {
		t.Errorf("unfolded: %d runs, want %d", got, len(es))
	}
}
