package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecide(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	policy := Policy{PendingRetryAfter: 30 * time.Second}
	record := func(status Status, mutate ...func(*Record)) *Record {
		r := &Record{
			Ident:       Ident{Scope: "user:1", Operation: "run", KeyDigest: Digest("user:1", "run", "k")},
			Fingerprint: "fp", Status: status, Owner: Owner{Token: "a", Fence: 7},
			CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour), ReadAt: now,
		}
		if status == StatusProcessing {
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
	ended := func(r *Record) { r.LeaseExpiresAt = now }

	tests := []struct {
		name string
		rec  *Record
		req  Request
		want Outcome
	}{
		{"R1 no record reserves", nil, same, Outcome{Action: ActionReserve}},
		{"H9 live lease waits for the rest of the lease", record(StatusProcessing), same,
			Outcome{Action: ActionWait, RetryAfter: 20 * time.Second}},
		{"H9 retry-after rounds a partial second up", record(StatusProcessing, func(r *Record) { r.LeaseExpiresAt = now.Add(2500 * time.Millisecond) }), same,
			Outcome{Action: ActionWait, RetryAfter: 3 * time.Second}},
		{"H9 retry-after is never below one second", record(StatusProcessing, func(r *Record) { r.LeaseExpiresAt = now.Add(time.Millisecond) }), same,
			Outcome{Action: ActionWait, RetryAfter: time.Second}},
		{"S1 rerun: ended lease is taken over", record(StatusProcessing, ended), rerun,
			Outcome{Action: ActionTakeOver}},
		{"S1 rerun: lease is judged by the store's read time", record(StatusProcessing, func(r *Record) { r.ReadAt = now.Add(21 * time.Second) }), rerun,
			Outcome{Action: ActionTakeOver}},
		{"R8 escalate (default): an abandoned record is escalated", record(StatusProcessing, ended), same,
			Outcome{Action: ActionEscalate}},
		{"R8 escalate: lease is judged by the store's read time", record(StatusProcessing, func(r *Record) { r.ReadAt = now.Add(21 * time.Second) }), same,
			Outcome{Action: ActionEscalate}},
		{"R8 verify: an abandoned record is verified", record(StatusProcessing, ended), verify,
			Outcome{Action: ActionVerify}},
		{"R8 every recovery waits for a live lease", record(StatusProcessing), verify,
			Outcome{Action: ActionWait, RetryAfter: 20 * time.Second}},
		{"R8 every recovery rejects another fingerprint on an abandoned record", record(StatusProcessing, ended), Request{Fingerprint: "other", Recovery: RecoverRerun},
			Outcome{Action: ActionRejectReused}},
		{"R8 recovery does not touch a pending record", record(StatusPending), rerun,
			Outcome{Action: ActionWait, RetryAfter: 30 * time.Second}},
		{"R3 H8 other fingerprint is rejected while processing", record(StatusProcessing), other, Outcome{Action: ActionRejectReused}},
		{"R3 H8 other fingerprint is rejected after completion", record(StatusCompleted), other, Outcome{Action: ActionRejectReused}},
		{"R3 H8 other fingerprint is rejected while pending", record(StatusPending), other, Outcome{Action: ActionRejectReused}},
		{"R3 empty fingerprint against a stored one is a reuse", record(StatusCompleted), Request{}, Outcome{Action: ActionRejectReused}},
		{"R1 H7 completed replays", record(StatusCompleted), same, Outcome{Action: ActionReplay}},
		{"H11 failed replays", record(StatusFailed), same, Outcome{Action: ActionReplay}},
		{"M4 pending waits with the pending hint", record(StatusPending), same, Outcome{Action: ActionWait, RetryAfter: 30 * time.Second}},
		{"M4 M6 pending never expires by time", record(StatusPending, func(r *Record) { r.ExpiresAt = now.Add(-time.Hour) }), same,
			Outcome{Action: ActionWait, RetryAfter: 30 * time.Second}},
		{"R5 H13 unavailable is never re-run", record(StatusUnavailable), same, Outcome{Action: ActionUnavailable}},
		{"M6 expired completed record restarts, whatever the fingerprint", record(StatusCompleted, func(r *Record) { r.ExpiresAt = now }), other,
			Outcome{Action: ActionRestart}},
		{"M6 expired unavailable record restarts", record(StatusUnavailable, func(r *Record) { r.ExpiresAt = now.Add(-time.Second) }), same,
			Outcome{Action: ActionRestart}},
		{"M6 H15 a live lease outlives the TTL", record(StatusProcessing, func(r *Record) { r.ExpiresAt = now.Add(-time.Second) }), same,
			Outcome{Action: ActionWait, RetryAfter: 20 * time.Second}},
		{"M6 rerun: expired record with an ended lease restarts", record(StatusProcessing, func(r *Record) { r.ExpiresAt = now; r.LeaseExpiresAt = now }),
			Request{Fingerprint: "other", Recovery: RecoverRerun}, Outcome{Action: ActionRestart}},
		{"R8 M6 escalate: an expired abandoned record is escalated, never restarted", record(StatusProcessing, func(r *Record) { r.ExpiresAt = now; r.LeaseExpiresAt = now }), same,
			Outcome{Action: ActionEscalate}},
		{"R8 M6 verify: an expired abandoned record is verified, never restarted", record(StatusProcessing, func(r *Record) { r.ExpiresAt = now; r.LeaseExpiresAt = now }), verify,
			Outcome{Action: ActionVerify}},
		{"M6 expired completed record restarts under any recovery", record(StatusCompleted, func(r *Record) { r.ExpiresAt = now }), verify,
			Outcome{Action: ActionRestart}},
		{"unknown status fails closed", record(Status("bogus")), same, Outcome{Action: ActionUnavailable}},
		{"unknown status fails closed even when expired", record(Status("bogus"), func(r *Record) { r.ExpiresAt = now.Add(-time.Hour) }), same,
			Outcome{Action: ActionUnavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Decide(tt.rec, tt.req, policy))
		})
	}
}

func TestDigestIsUnambiguous(t *testing.T) {
	t.Parallel()
	// SPEC H5: length prefixes keep ("ab","c") and ("a","bc") apart.
	require.NotEqual(t, Digest("ab", "c", "k"), Digest("a", "bc", "k"))
	require.NotEqual(t, Digest("s", "op", "k1"), Digest("s", "op", "k2"))
	require.Equal(t, Digest("s", "op", "k"), Digest("s", "op", "k"))
	require.Len(t, Digest("s", "op", "k"), 64)
}

func BenchmarkDecide(b *testing.B) {
	now := time.Now()
	rec := &Record{Fingerprint: "fp", Status: StatusProcessing, LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), ReadAt: now}
	req := Request{Fingerprint: "fp"}
	p := Policy{PendingRetryAfter: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		if Decide(rec, req, p).Action != ActionWait {
			b.Fatal("unexpected action")
		}
	}
}
