package saga

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
)

// TestWorkerJobPolicies pins what each worker tells River of its job: the
// timeout leaves room for twice the step's call and the margin, a failed
// step job is retried after the step's Retry backoff, a failed
// compensation job after its CompensationRetry backoff, and a job naming
// a step the runner does not know gets River's defaults (zero).
func TestWorkerJobPolicies(t *testing.T) {
	t.Parallel()
	step := Step{Name: "charge", Timeout: 3 * time.Second,
		Retry:             RetryPolicy{MaxAttempts: 3, Initial: time.Hour, Max: time.Hour},
		CompensationRetry: RetryPolicy{MaxAttempts: 3, Initial: 10 * time.Hour, Max: 10 * time.Hour}}
	r := &Runner[struct{}]{defs: map[string]Definition{"order": {Type: "order", Steps: []Step{step}}}, cfg: Config{JobMargin: 7 * time.Second}}
	known := JobRef{OperationID: "op1", Step: "charge", Type: "order"}
	unknown := JobRef{OperationID: "op1", Step: "refund", Type: "order"}
	row := &rivertype.JobRow{Attempt: 1}

	// The jitter is ±20%.
	requireAround := func(want time.Duration, at time.Time, msg string) {
		t.Helper()
		got := time.Until(at)
		require.InDelta(t, float64(want), float64(got), float64(want)/4, "%s: retry in %v", msg, got)
	}
	for _, ref := range []JobRef{known, unknown} {
		want := time.Duration(0)
		if ref == known {
			want = 13 * time.Second
		}
		require.Equal(t, want, (&stepWorker[struct{}]{r: r}).Timeout(&river.Job[StepArgs]{JobRow: row, Args: StepArgs{ref}}), "step %s", ref.Step)
		require.Equal(t, want, (&verifyWorker[struct{}]{r: r}).Timeout(&river.Job[VerifyArgs]{JobRow: row, Args: VerifyArgs{ref}}), "verify %s", ref.Step)
		require.Equal(t, want, (&compensateWorker[struct{}]{r: r}).Timeout(&river.Job[CompensateArgs]{JobRow: row, Args: CompensateArgs{ref}}), "compensate %s", ref.Step)
	}
	requireAround(time.Hour, (&stepWorker[struct{}]{r: r}).NextRetry(&river.Job[StepArgs]{JobRow: row, Args: StepArgs{known}}), "step: Retry")
	requireAround(10*time.Hour, (&compensateWorker[struct{}]{r: r}).NextRetry(&river.Job[CompensateArgs]{JobRow: row, Args: CompensateArgs{known}}), "compensate: CompensationRetry")
	require.Zero(t, (&stepWorker[struct{}]{r: r}).NextRetry(&river.Job[StepArgs]{JobRow: row, Args: StepArgs{unknown}}), "unknown step: River's default")
	require.Zero(t, (&compensateWorker[struct{}]{r: r}).NextRetry(&river.Job[CompensateArgs]{JobRow: row, Args: CompensateArgs{unknown}}), "unknown step: River's default")
}
