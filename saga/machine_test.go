package saga

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// fixture builds an operation of three steps (account: compensatable,
// workspace: pivot, welcome: retriable), in status opStatus, with the
// steps in the given statuses.
func fixture(opStatus sagadriver.Status, statuses ...sagadriver.StepStatus) sagadriver.Operation {
	now := time.Unix(1_700_000_000, 0).UTC()
	op := sagadriver.Operation{ID: "op1", Type: "signup", Status: opStatus, Version: 3, CreatedAt: now, UpdatedAt: now}
	kinds := []sagadriver.Kind{sagadriver.Compensatable, sagadriver.Pivot, sagadriver.Retriable}
	names := []string{"account", "workspace", "welcome"}
	for i, name := range names {
		st := sagadriver.StepRecord{Name: name, Seq: i, Kind: kinds[i], Status: sagadriver.StepPending, Key: "op1/" + name,
			MaxAttempts: 3, CompMaxAttempts: 2, Compensable: kinds[i] != sagadriver.Retriable, CompSeq: len(names) - i, CompKey: "op1/" + name + "/compensate"}
		if i < len(statuses) {
			st.Status = statuses[i]
		}
		op.Steps = append(op.Steps, st)
	}
	return op
}

type want struct {
	op       sagadriver.Status
	steps    []sagadriver.StepStatus
	comp     []sagadriver.CompStatus
	enqueue  []enqueue
	proceed  bool
	verify   bool
	retry    bool
	snooze   bool
	noop     bool
	errIs    error
	errAs    bool // a *TransitionError
	review   string
	attempts []int
}

func stepStatuses(op sagadriver.Operation) []sagadriver.StepStatus {
	out := make([]sagadriver.StepStatus, len(op.Steps))
	for i, s := range op.Steps {
		out[i] = s.Status
	}
	return out
}

func compStatuses(op sagadriver.Operation) []sagadriver.CompStatus {
	out := make([]sagadriver.CompStatus, len(op.Steps))
	for i, s := range op.Steps {
		out[i] = s.CompStatus
	}
	return out
}

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_100, 0).UTC()
	P, R, C, F, U := sagadriver.StepPending, sagadriver.StepRunning, sagadriver.StepCompleted, sagadriver.StepFailed, sagadriver.StepUncertain
	withAttempts := func(op sagadriver.Operation, step string, n int) sagadriver.Operation {
		st, _ := op.Step(step)
		st.Attempts = n
		return op
	}
	withComp := func(op sagadriver.Operation, step string, cs sagadriver.CompStatus, attempts int) sagadriver.Operation {
		st, _ := op.Step(step)
		st.CompStatus, st.CompAttempts = cs, attempts
		return op
	}
	tests := []struct {
		name string
		op   sagadriver.Operation
		sig  signal
		want want
	}{
		{"G4 begin: pending step runs, operation starts", fixture(sagadriver.StatusPending), signal{kind: sigBegin, step: "account"},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{R, P, P}, proceed: true, attempts: []int{1, 0, 0}}},
		{"G4 done: next step enqueued in the same transaction", fixture(sagadriver.StatusRunning, R), signal{kind: sigDone, step: "account", result: Result{ExternalID: "acc_1"}},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, P, P}, enqueue: []enqueue{{kind: jobStep, step: "workspace", generation: 1}}}},
		{"G4 done at the last step: operation completed", fixture(sagadriver.StatusRunning, C, C, R), signal{kind: sigDone, step: "welcome"},
			want{op: sagadriver.StatusCompleted, steps: []sagadriver.StepStatus{C, C, C}}},
		{"F5 duplicate delivery of a completed step is a no-op", fixture(sagadriver.StatusRunning, C, R), signal{kind: sigBegin, step: "account"},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, R, P}, noop: true}},
		{"F5 begin on a terminal operation is a no-op", fixture(sagadriver.StatusCompensated, sagadriver.StepCompensated, sagadriver.StepSkipped, sagadriver.StepSkipped), signal{kind: sigBegin, step: "workspace"},
			want{op: sagadriver.StatusCompensated, noop: true}},
		{"F3 step found running is verified first", withAttempts(fixture(sagadriver.StatusRunning, C, R), "workspace", 1), signal{kind: sigBegin, step: "workspace", hasVerify: true},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, R, P}, proceed: true, verify: true, attempts: []int{0, 2, 0}}},
		{"F3 step found running without Verify runs again with the same key", withAttempts(fixture(sagadriver.StatusRunning, C, R), "workspace", 1), signal{kind: sigBegin, step: "workspace"},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, R, P}, proceed: true, attempts: []int{0, 2, 0}}},
		{"F3 interrupted last attempt without Verify: retries exhausted, compensate", withAttempts(fixture(sagadriver.StatusRunning, C, R), "workspace", 3), signal{kind: sigBegin, step: "workspace"},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, F, sagadriver.StepSkipped}, comp: []sagadriver.CompStatus{sagadriver.CompPending, "", ""},
				enqueue: []enqueue{{kind: jobCompensate, step: "account", generation: 1}}}},
		{"G5 F1 transient with attempts left: retrying, River retries", withAttempts(fixture(sagadriver.StatusRunning, C, R), "workspace", 1), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassTransient, err: "503"},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, sagadriver.StepRetrying, P}, retry: true}},
		{"G5 G7 transient exhausted at a pivot: compensate", withAttempts(fixture(sagadriver.StatusRunning, C, R), "workspace", 3), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassTransient, err: "503"},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, F, sagadriver.StepSkipped}, enqueue: []enqueue{{kind: jobCompensate, step: "account", generation: 1}}}},
		{"G5 F6 permanent at a pivot: compensate completed steps in reverse", fixture(sagadriver.StatusRunning, C, R), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassPermanent, err: "quota"},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, F, sagadriver.StepSkipped}, comp: []sagadriver.CompStatus{sagadriver.CompPending, "", ""},
				enqueue: []enqueue{{kind: jobCompensate, step: "account", generation: 1}}}},
		{"G6 permanent at a step that compensates on failure: compensated first", fixture(sagadriver.StatusRunning, C, R), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassPermanent, err: "activation refused", compensateFailed: true},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, sagadriver.StepCompensating, sagadriver.StepSkipped}, enqueue: []enqueue{{kind: jobCompensate, step: "workspace", generation: 1}}}},
		{"G5 permanent at the first step: nothing to compensate, failed", fixture(sagadriver.StatusRunning, R), signal{kind: sigFailed, step: "account", class: sagadriver.ClassPermanent, err: "invalid email"},
			want{op: sagadriver.StatusFailed, steps: []sagadriver.StepStatus{F, sagadriver.StepSkipped, sagadriver.StepSkipped}}},
		{"G5 F7 permanent at a retriable step: review, no compensation", fixture(sagadriver.StatusRunning, C, C, R), signal{kind: sigFailed, step: "welcome", class: sagadriver.ClassPermanent, err: "bounced"},
			want{op: sagadriver.StatusReviewRequired, steps: []sagadriver.StepStatus{C, C, F}, comp: []sagadriver.CompStatus{"", "", ""}, review: "permanent_failure"}},
		{"G7 transient exhausted at a retriable step: review", withAttempts(fixture(sagadriver.StatusRunning, C, C, R), "welcome", 3), signal{kind: sigFailed, step: "welcome", class: sagadriver.ClassTransient, err: "503"},
			want{op: sagadriver.StatusReviewRequired, steps: []sagadriver.StepStatus{C, C, F}, review: "retries_exhausted"}},
		{"G5 F2 uncertain with Verify: verify job scheduled", fixture(sagadriver.StatusRunning, C, R), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassUncertain, err: "timeout", hasVerify: true, verifyAfter: time.Second},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, U, P}, enqueue: []enqueue{{kind: jobVerify, step: "workspace", generation: 1, delay: time.Second}}}},
		{"G5 G7 uncertain without Verify: review", fixture(sagadriver.StatusRunning, C, R), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassUncertain, err: "timeout"},
			want{op: sagadriver.StatusReviewRequired, steps: []sagadriver.StepStatus{C, U, P}, review: "uncertain_unresolved"}},
		{"F2 verify applied: completed, no second Do", fixture(sagadriver.StatusRunning, C, U), signal{kind: sigVerified, step: "workspace", outcome: Applied, result: Result{ExternalID: "ws_1"}},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, C, P}, enqueue: []enqueue{{kind: jobStep, step: "welcome", generation: 1}}}},
		{"G5 verify not applied: executed again with the same key", withAttempts(fixture(sagadriver.StatusRunning, C, U), "workspace", 1), signal{kind: sigVerified, step: "workspace", outcome: NotApplied},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, P, P}, enqueue: []enqueue{{kind: jobStep, step: "workspace", generation: 1}}}},
		{"F11 verify inconclusive under the cap: snooze", fixture(sagadriver.StatusRunning, C, U), signal{kind: sigVerified, step: "workspace", outcome: Unknown, maxVerifications: 3, verifyAfter: time.Second},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, U, P}, snooze: true}},
		{"F11 G7 verify inconclusive at the cap: review", func() sagadriver.Operation {
			op := fixture(sagadriver.StatusRunning, C, U)
			op.Steps[1].Verifications = 2
			return op
		}(), signal{kind: sigVerified, step: "workspace", outcome: Unknown, maxVerifications: 3},
			want{op: sagadriver.StatusReviewRequired, steps: []sagadriver.StepStatus{C, U, P}, review: "uncertain_unresolved"}},
		{"F10 late forward result after compensation started is ignored", fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, sagadriver.StepCompensating), signal{kind: sigDone, step: "workspace", result: Result{ExternalID: "ws_9"}},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, sagadriver.StepCompensating, P}, noop: true}},
		{"G6 compensation begins", withComp(fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, F, sagadriver.StepSkipped), "account", sagadriver.CompPending, 0), signal{kind: sigCompBegin, step: "account"},
			want{op: sagadriver.StatusCompensating, comp: []sagadriver.CompStatus{sagadriver.CompRunning, "", ""}, proceed: true}},
		{"G6 compensation of a step not planned is a no-op", fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, F, sagadriver.StepSkipped), signal{kind: sigCompBegin, step: "welcome"},
			want{op: sagadriver.StatusCompensating, noop: true}},
		{"G6 last compensation done: compensated", withComp(fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, F, sagadriver.StepSkipped), "account", sagadriver.CompRunning, 1), signal{kind: sigCompDone, step: "account"},
			want{op: sagadriver.StatusCompensated, steps: []sagadriver.StepStatus{sagadriver.StepCompensated, F, sagadriver.StepSkipped}, comp: []sagadriver.CompStatus{sagadriver.CompCompleted, "", ""}}},
		{"G6 compensation done: next in order", withComp(withComp(fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, sagadriver.StepCompensating, F), "workspace", sagadriver.CompRunning, 1), "account", sagadriver.CompPending, 0), signal{kind: sigCompDone, step: "workspace"},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, sagadriver.StepCompensated, F}, enqueue: []enqueue{{kind: jobCompensate, step: "account", generation: 1}}}},
		{"G6 F8 compensation fails transiently with attempts left: retry", withComp(fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, F), "account", sagadriver.CompRunning, 1), signal{kind: sigCompFailed, step: "account", class: sagadriver.ClassTransient, err: "503"},
			want{op: sagadriver.StatusCompensating, comp: []sagadriver.CompStatus{sagadriver.CompRetrying, "", ""}, retry: true}},
		{"G6 G7 F8 compensation exhausted: halt, review", withComp(withComp(fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, sagadriver.StepCompensating, F), "workspace", sagadriver.CompRunning, 2), "account", sagadriver.CompPending, 0), signal{kind: sigCompFailed, step: "workspace", class: sagadriver.ClassTransient, err: "503"},
			want{op: sagadriver.StatusReviewRequired, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, sagadriver.StepCompensationFailed, F}, comp: []sagadriver.CompStatus{sagadriver.CompPending, sagadriver.CompFailed, ""}, review: "compensation_failed"}},
		{"G6 permanent compensation failure: review at once", withComp(fixture(sagadriver.StatusCompensating, sagadriver.StepCompensating, F), "account", sagadriver.CompRunning, 1), signal{kind: sigCompFailed, step: "account", class: sagadriver.ClassPermanent, err: "account locked"},
			want{op: sagadriver.StatusReviewRequired, steps: []sagadriver.StepStatus{sagadriver.StepCompensationFailed, F, P}, review: "compensation_failed"}},
		{"G9 retry a failed retriable step", fixture(sagadriver.StatusReviewRequired, C, C, F), signal{kind: opRetry, step: "welcome", note: "smtp fixed"},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, C, P}, enqueue: []enqueue{{kind: jobStep, step: "welcome", generation: 1}}, attempts: []int{0, 0, 0}}},
		{"G9 retry a failed compensation resumes the plan", withComp(withComp(fixture(sagadriver.StatusReviewRequired, sagadriver.StepCompensating, sagadriver.StepCompensationFailed, F), "workspace", sagadriver.CompFailed, 2), "account", sagadriver.CompPending, 0), signal{kind: opRetry, step: "workspace"},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, sagadriver.StepCompensating, F}, enqueue: []enqueue{{kind: jobCompensate, step: "workspace", generation: 1}}}},
		{"G9 retry refused unless under review", fixture(sagadriver.StatusRunning, C, R), signal{kind: opRetry, step: "workspace"}, want{errAs: true}},
		{"G9 retry refused for a completed step", fixture(sagadriver.StatusReviewRequired, C, C, F), signal{kind: opRetry, step: "account"}, want{errAs: true}},
		{"G9 retry of an unknown step: not found", fixture(sagadriver.StatusReviewRequired, C, C, F), signal{kind: opRetry, step: "nope"}, want{errIs: ErrNotFound}},
		{"G9 confirm happened: completed with the external id, operation goes on", fixture(sagadriver.StatusReviewRequired, C, U), signal{kind: opConfirm, step: "workspace", happened: true, result: Result{ExternalID: "ws_7"}, note: "seen in provider console"},
			want{op: sagadriver.StatusRunning, steps: []sagadriver.StepStatus{C, C, P}, enqueue: []enqueue{{kind: jobStep, step: "welcome", generation: 1}}}},
		{"G9 confirm not happened at a pivot: compensate", fixture(sagadriver.StatusReviewRequired, C, U), signal{kind: opConfirm, step: "workspace", note: "not in provider"},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, F, sagadriver.StepSkipped}, enqueue: []enqueue{{kind: jobCompensate, step: "account", generation: 1}}}},
		{"G9 confirm needs a note", fixture(sagadriver.StatusReviewRequired, C, U), signal{kind: opConfirm, step: "workspace", happened: true}, want{errAs: true}},
		{"G9 confirm a failed compensation as done continues the plan", withComp(fixture(sagadriver.StatusReviewRequired, sagadriver.StepCompensationFailed, F), "account", sagadriver.CompFailed, 2), signal{kind: opConfirm, step: "account", happened: true, note: "deleted by hand"},
			want{op: sagadriver.StatusCompensated, steps: []sagadriver.StepStatus{sagadriver.StepCompensated, F, P}}},
		{"G9 start compensation from review", fixture(sagadriver.StatusReviewRequired, C, C, F), signal{kind: opCompensate, note: "customer cancelled"},
			want{op: sagadriver.StatusCompensating, steps: []sagadriver.StepStatus{sagadriver.StepCompensating, sagadriver.StepCompensating, F}, enqueue: []enqueue{{kind: jobCompensate, step: "workspace", generation: 1}}}},
		{"G9 start compensation refused once compensating", withComp(fixture(sagadriver.StatusReviewRequired, sagadriver.StepCompensationFailed, F), "account", sagadriver.CompFailed, 2), signal{kind: opCompensate}, want{errAs: true}},
		{"G9 start compensation refused on a terminal operation", fixture(sagadriver.StatusCompleted, C, C, C), signal{kind: opCompensate}, want{errAs: true}},
		{"G9 resolve a review with a note", fixture(sagadriver.StatusReviewRequired, C, C, F), signal{kind: opResolve, note: "welcome sent by hand", resolveTo: sagadriver.StatusCompleted},
			want{op: sagadriver.StatusCompleted, steps: []sagadriver.StepStatus{C, C, F}}},
		{"G9 resolve needs a note", fixture(sagadriver.StatusReviewRequired, C, C, F), signal{kind: opResolve, resolveTo: sagadriver.StatusCompleted}, want{errAs: true}},
		{"G9 resolve refused unless under review", fixture(sagadriver.StatusRunning, C, R), signal{kind: opResolve, note: "x", resolveTo: sagadriver.StatusFailed}, want{errAs: true}},
		{"G9 resolve only to a terminal status", fixture(sagadriver.StatusReviewRequired, C, C, F), signal{kind: opResolve, note: "x", resolveTo: sagadriver.StatusRunning}, want{errAs: true}},
		{"G8 F13 finding raises to review", fixture(sagadriver.StatusCompensated, sagadriver.StepCompensated, F, sagadriver.StepSkipped), signal{kind: recFinding, err: "provider has workspace ws_1"},
			want{op: sagadriver.StatusReviewRequired, review: "reconciliation_finding"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sig := tt.sig
			sig.now, sig.actor = now, "worker"
			before := fmt.Sprint(tt.op)
			d, err := decide(tt.op, sig)
			require.Equal(t, before, fmt.Sprint(tt.op), "decide must not change its input")
			switch {
			case tt.want.errIs != nil:
				require.ErrorIs(t, err, tt.want.errIs)
				return
			case tt.want.errAs:
				var te *TransitionError
				require.True(t, errors.As(err, &te), "got %v, want a *TransitionError", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want.op, d.op.Status, "operation status")
			if tt.want.steps != nil {
				require.Equal(t, tt.want.steps, stepStatuses(d.op), "step statuses")
			}
			if tt.want.comp != nil {
				require.Equal(t, tt.want.comp, compStatuses(d.op), "compensation statuses")
			}
			require.Equal(t, tt.want.enqueue, d.enqueue, "jobs enqueued")
			require.Equal(t, tt.want.proceed, d.proceed, "proceed")
			require.Equal(t, tt.want.verify, d.verifyFirst, "verify first")
			require.Equal(t, tt.want.retry, d.retry, "retry")
			require.Equal(t, tt.want.snooze, d.snooze > 0, "snooze")
			require.Equal(t, tt.want.noop, d.noop != "", "noop: %q", d.noop)
			if tt.want.review != "" {
				require.Equal(t, tt.want.review, d.op.ReviewReason)
			}
			if tt.want.attempts != nil {
				got := make([]int, len(d.op.Steps))
				for i, s := range d.op.Steps {
					got[i] = s.Attempts
				}
				require.Equal(t, tt.want.attempts, got, "attempts")
			}
			if d.op.Status.Terminal() && d.changed {
				require.NotNil(t, d.op.FinishedAt)
			}
			if d.changed {
				require.NotEmpty(t, d.events, "every change is in the history")
				require.Equal(t, now, d.op.UpdatedAt)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	require.Equal(t, sagadriver.ClassTransient, Classify(base))
	require.Equal(t, sagadriver.ClassPermanent, Classify(fmt.Errorf("wrap: %w", Permanent(base))))
	require.Equal(t, sagadriver.ClassUncertain, Classify(Uncertain(base)))
	require.Equal(t, sagadriver.ClassUncertain, Classify(fmt.Errorf("call: %w", contextDeadline())))
	require.Equal(t, sagadriver.ClassTransient, Classify(Transient(fmt.Errorf("call: %w", contextDeadline()))), "an explicit mark wins")
	require.NoError(t, Permanent(nil))
	require.ErrorIs(t, Permanent(base), base)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 5, Initial: time.Second, Max: 4 * time.Second}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 4 * time.Second} {
		got := p.Backoff(attempt)
		require.InDelta(t, float64(want), float64(got), float64(want)*0.21, "attempt %d", attempt)
	}
}

func contextDeadline() error { return context.DeadlineExceeded }

func TestJobTagsOnlyWhatRiverAccepts(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"saga", "tenant_signup"}, jobTags("tenant_signup"))
	require.Equal(t, []string{"saga", "demo-signup"}, jobTags("demo-signup"))
	for _, typ := range []string{"x", "ab", "tenant.signup", "a b", "-ab", strings.Repeat("a", 256)} {
		require.Equal(t, []string{"saga"}, jobTags(typ), typ)
	}
}

func TestFailedStepKeepsThePartialEffectsID(t *testing.T) {
	t.Parallel()
	d, err := decide(fixture(sagadriver.StatusRunning, sagadriver.StepCompleted, sagadriver.StepRunning), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassPermanent,
		err: "activation refused", compensateFailed: true, result: Result{ExternalID: "ws_9"}, now: time.Unix(1_700_000_200, 0)})
	require.NoError(t, err)
	ws, _ := d.op.Step("workspace")
	require.Equal(t, "ws_9", ws.ExternalID)
	require.Equal(t, sagadriver.StepCompensating, ws.Status)
	d, err = decide(fixture(sagadriver.StatusRunning, sagadriver.StepCompleted, sagadriver.StepRunning), signal{kind: sigFailed, step: "workspace", class: sagadriver.ClassTransient, err: "503"})
	require.NoError(t, err)
	ws, _ = d.op.Step("workspace")
	require.Empty(t, ws.ExternalID)
}
