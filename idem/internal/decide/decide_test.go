package decide

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

func TestDecide(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	policy := Policy{PendingRetryAfter: 30 * time.Second}
	record := func(status idemdriver.Status, mutate ...func(*idemdriver.Record)) *idemdriver.Record {
		r := &idemdriver.Record{
			Ident:       idemdriver.Ident{Scope: "user:1", Operation: "run", KeyDigest: "d1"},
			Fingerprint: "fp", Status: status, Owner: idemdriver.Owner{Token: "a", Fence: 7},
			CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour), ReadAt: now,
		}
		if status == idemdriver.StatusProcessing {
			r.LeaseExpiresAt = now.Add(20 * time.Second)
		}
		for _, m := range mutate {
			m(r)
		}
		return r
	}
	same := Request{Fingerprint: "fp"}
	other := Request{Fingerprint: "other"}
	rerun := Request{Fingerprint: "fp", Recovery: RecoverRerun}
	verify := Request{Fingerprint: "fp", Recovery: RecoverVerify}
	ended := func(r *idemdriver.Record) { r.LeaseExpiresAt = now }

	tests := []struct {
		name string
		rec  *idemdriver.Record
		req  Request
		want Outcome
	}{
		{"R1 no record reserves", nil, same, Outcome{Action: ActionReserve}},
		{"H9 live lease waits for the rest of the lease", record(idemdriver.StatusProcessing), same,
			Outcome{Action: ActionWait, RetryAfter: 20 * time.Second}},
		{"H9 retry-after rounds a partial second up", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.LeaseExpiresAt = now.Add(2500 * time.Millisecond) }), same,
			Outcome{Action: ActionWait, RetryAfter: 3 * time.Second}},
		{"H9 retry-after is never below one second", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.LeaseExpiresAt = now.Add(time.Millisecond) }), same,
			Outcome{Action: ActionWait, RetryAfter: time.Second}},
		{"S1 rerun: ended lease is taken over", record(idemdriver.StatusProcessing, ended), rerun,
			Outcome{Action: ActionTakeOver}},
		{"S1 rerun: lease is judged by the store's read time", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.ReadAt = now.Add(21 * time.Second) }), rerun,
			Outcome{Action: ActionTakeOver}},
		{"R8 escalate (default): an abandoned record is escalated", record(idemdriver.StatusProcessing, ended), same,
			Outcome{Action: ActionEscalate}},
		{"R8 escalate: lease is judged by the store's read time", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.ReadAt = now.Add(21 * time.Second) }), same,
			Outcome{Action: ActionEscalate}},
		{"R8 verify: an abandoned record is verified", record(idemdriver.StatusProcessing, ended), verify,
			Outcome{Action: ActionVerify}},
		{"R8 every recovery waits for a live lease", record(idemdriver.StatusProcessing), verify,
			Outcome{Action: ActionWait, RetryAfter: 20 * time.Second}},
		{"R8 every recovery rejects another fingerprint on an abandoned record", record(idemdriver.StatusProcessing, ended), Request{Fingerprint: "other", Recovery: RecoverRerun},
			Outcome{Action: ActionRejectReused}},
		{"R8 recovery does not touch a pending record", record(idemdriver.StatusPending), rerun,
			Outcome{Action: ActionAwaitReview, RetryAfter: 30 * time.Second}},
		{"R3 H8 other fingerprint is rejected while processing", record(idemdriver.StatusProcessing), other, Outcome{Action: ActionRejectReused}},
		{"R3 H8 other fingerprint is rejected after completion", record(idemdriver.StatusCompleted), other, Outcome{Action: ActionRejectReused}},
		{"R3 H8 other fingerprint is rejected while pending", record(idemdriver.StatusPending), other, Outcome{Action: ActionRejectReused}},
		{"R3 empty fingerprint against a stored one is a reuse", record(idemdriver.StatusCompleted), Request{}, Outcome{Action: ActionRejectReused}},
		{"R1 H7 completed replays", record(idemdriver.StatusCompleted), same, Outcome{Action: ActionReplay}},
		{"H11 failed replays", record(idemdriver.StatusFailed), same, Outcome{Action: ActionReplay}},
		{"M4 K21 pending awaits review, not in progress, with the pending hint", record(idemdriver.StatusPending), same,
			Outcome{Action: ActionAwaitReview, RetryAfter: 30 * time.Second}},
		{"M4 M6 pending never expires by time", record(idemdriver.StatusPending, func(r *idemdriver.Record) { r.ExpiresAt = now.Add(-time.Hour) }), same,
			Outcome{Action: ActionAwaitReview, RetryAfter: 30 * time.Second}},
		{"R5 H13 unavailable is never re-run", record(idemdriver.StatusUnavailable), same, Outcome{Action: ActionUnavailable}},
		{"M6 expired completed record restarts, whatever the fingerprint", record(idemdriver.StatusCompleted, func(r *idemdriver.Record) { r.ExpiresAt = now }), other,
			Outcome{Action: ActionRestart}},
		{"M6 expired unavailable record restarts", record(idemdriver.StatusUnavailable, func(r *idemdriver.Record) { r.ExpiresAt = now.Add(-time.Second) }), same,
			Outcome{Action: ActionRestart}},
		{"M6 H15 a live lease outlives the TTL", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.ExpiresAt = now.Add(-time.Second) }), same,
			Outcome{Action: ActionWait, RetryAfter: 20 * time.Second}},
		{"M6 rerun: expired record with an ended lease restarts", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.ExpiresAt = now; r.LeaseExpiresAt = now }),
			Request{Fingerprint: "other", Recovery: RecoverRerun}, Outcome{Action: ActionRestart}},
		{"R8 M6 escalate: an expired abandoned record is escalated, never restarted", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.ExpiresAt = now; r.LeaseExpiresAt = now }), same,
			Outcome{Action: ActionEscalate}},
		{"R8 M6 verify: an expired abandoned record is verified, never restarted", record(idemdriver.StatusProcessing, func(r *idemdriver.Record) { r.ExpiresAt = now; r.LeaseExpiresAt = now }), verify,
			Outcome{Action: ActionVerify}},
		{"M6 expired completed record restarts under any recovery", record(idemdriver.StatusCompleted, func(r *idemdriver.Record) { r.ExpiresAt = now }), verify,
			Outcome{Action: ActionRestart}},
		{"unknown status fails closed", record(idemdriver.Status("bogus")), same, Outcome{Action: ActionUnavailable}},
		{"unknown status fails closed even when expired", record(idemdriver.Status("bogus"), func(r *idemdriver.Record) { r.ExpiresAt = now.Add(-time.Hour) }), same,
			Outcome{Action: ActionUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Decide(tt.rec, tt.req, policy))
		})
	}
}

func BenchmarkDecide(b *testing.B) {
	now := time.Now()
	rec := &idemdriver.Record{Fingerprint: "fp", Status: idemdriver.StatusProcessing, LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), ReadAt: now}
	req := Request{Fingerprint: "fp"}
	p := Policy{PendingRetryAfter: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		if Decide(rec, req, p).Action != ActionWait {
			b.Fatal("unexpected action")
		}
	}
}
