package saga_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/saga"
)

// failWelcome sends the signup of id to review: its welcome mail (the
// retriable third step) fails permanently until the mailbox is fixed.
func failWelcome(t *testing.T, b *bundle, id string) sagadriver.Operation {
	t.Helper()
	b.mu.Lock()
	b.welcomeFail[id] = saga.Permanent(errors.New("mailbox does not exist"))
	b.mu.Unlock()
	_, err := b.eng.Start(t.Context(), "signup", signupInput{Email: id + "@example.com"}, &saga.StartOpts{ID: id})
	require.NoError(t, err)
	op := waitStatus(t, b, id, sagadriver.StatusReviewRequired)
	require.Equal(t, sagadriver.StepFailed, step(t, op, "welcome").Status)
	return op
}

func fixWelcome(b *bundle, id string) {
	b.mu.Lock()
	delete(b.welcomeFail, id)
	b.mu.Unlock()
}

func actions(plan saga.RedrivePlan) map[string]saga.StepAction {
	out := map[string]saga.StepAction{}
	for _, sp := range plan.Steps {
		out[sp.Step] = sp.Action
	}
	return out
}

func events(t *testing.T, b *bundle, id, action string) []sagadriver.Event {
	t.Helper()
	evs, err := b.eng.Events(t.Context(), id)
	require.NoError(t, err)
	var out []sagadriver.Event
	for _, e := range evs {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// SPEC G12: a resume runs the failed step again and nothing before it.
func TestG12RedriveResumesAtTheFailedStep(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("g12-resume-%d", time.Now().UnixNano())
		op := failWelcome(t, b, id)
		p := saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Version: op.Version, Actor: "ann", Note: "mailbox fixed"}}

		plan, err := b.eng.PlanRedrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, "welcome", plan.From)
		require.Equal(t, map[string]saga.StepAction{"account": saga.StepKept, "workspace": saga.StepKept, "welcome": saga.StepRunsAgain}, actions(plan))
		require.Empty(t, plan.Unprotected)

		stale := p
		stale.Version--
		_, err = b.eng.Redrive(t.Context(), stale)
		require.ErrorIs(t, err, saga.ErrStale)
		wrong := p
		wrong.Step = "account"
		_, err = b.eng.Redrive(t.Context(), wrong)
		var te *saga.TransitionError
		require.ErrorAs(t, err, &te, "a resume starts at the failed step")

		fixWelcome(b, id)
		release := make(chan struct{})
		b.mu.Lock()
		b.block["welcome"] = release
		b.mu.Unlock()
		ch, err := b.eng.Redrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusRunning, ch.After.Status)
		running := waitFor(t, b, id, "welcome running", func(op sagadriver.Operation) bool { return step(t, op, "welcome").Status == sagadriver.StepRunning })
		_, err = b.eng.Redrive(t.Context(), saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Version: running.Version, Actor: "bob"}})
		require.ErrorAs(t, err, &te, "a moving operation is not redriven")
		b.mu.Lock()
		delete(b.block, "welcome")
		b.mu.Unlock()
		close(release)

		op = waitStatus(t, b, id, sagadriver.StatusCompleted)
		require.Equal(t, op.ID, id, "the same operation")
		require.Equal(t, 1, b.welcomeCount(id))
		creates, effects, _ := b.provider.Counts(id + "/workspace")
		require.Equal(t, 1, creates, "the workspace step did not run again")
		require.Equal(t, 1, effects)
		requireInvariants(t, b, id)
		redrives := events(t, b, id, "operator_redrive")
		require.Len(t, redrives, 1)
		require.Equal(t, "operator:ann", redrives[0].Actor)
		require.Contains(t, redrives[0].Message, "resume from welcome: mailbox fixed")
	})
}

// SPEC G12: a re-run from step 1 runs every step again with its own key;
// the effects that happened are replayed, not repeated, also when the
// workers are killed right after the redrive.
func TestG12RerunFromStepOneReplaysEffects(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("g12-rerun-%d", time.Now().UnixNano())
		op := failWelcome(t, b, id)
		fixWelcome(b, id)
		p := saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Step: "account", Version: op.Version, Actor: "ann", Note: "run it all"},
			Mode: saga.RedriveRerun}
		plan, err := b.eng.PlanRedrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, map[string]saga.StepAction{"account": saga.StepReplays, "workspace": saga.StepReplays, "welcome": saga.StepRunsAgain}, actions(plan))

		_, err = b.eng.Redrive(t.Context(), p)
		require.NoError(t, err)
		b.restart(true)
		op = waitStatus(t, b, id, sagadriver.StatusCompleted)
		creates, effects, _ := b.provider.Counts(id + "/workspace")
		require.Equal(t, 2, creates, "the provider was called again with the step's key")
		require.Equal(t, 1, effects, "and answered with the first effect")
		require.Equal(t, step(t, op, "workspace").Key, id+"/workspace", "the same key")
		require.Len(t, b.provider.Workspaces(), 1)
		require.Equal(t, 1, b.welcomeCount(id))
		requireInvariants(t, b, id)
	})
}

// SPEC G12: a compensation from step 2 undoes step 2 and keeps step 1; a
// re-run from step 2 afterwards makes a new effect under a new key.
func TestG12CompensateFromStepTwoThenRerun(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("g12-comp-%d", time.Now().UnixNano())
		op := failWelcome(t, b, id)
		p := saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Step: "workspace", Version: op.Version, Actor: "ann", Note: "wrong region"},
			Mode: saga.RedriveCompensate}
		plan, err := b.eng.PlanRedrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, map[string]saga.StepAction{"account": saga.StepKept, "workspace": saga.StepCompensates, "welcome": saga.StepNotRun}, actions(plan))
		_, err = b.eng.Redrive(t.Context(), p)
		require.NoError(t, err)
		op = waitStatus(t, b, id, sagadriver.StatusCompensated)
		require.Equal(t, sagadriver.StepCompleted, step(t, op, "account").Status, "step 1 keeps its effect")
		require.Equal(t, sagadriver.StepCompensated, step(t, op, "workspace").Status)
		require.True(t, accountActive(t, b, id))
		require.Empty(t, b.provider.Workspaces())
		_, _, deletes := b.provider.Counts(id + "/workspace")
		require.Equal(t, 1, deletes)

		// Resume is not legal on a compensated operation; a re-run is.
		_, err = b.eng.PlanRedrive(t.Context(), saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Version: op.Version}})
		var te *saga.TransitionError
		require.ErrorAs(t, err, &te)
		fixWelcome(b, id)
		p = saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Step: "workspace", Version: op.Version, Actor: "ann", Note: "right region"},
			Mode: saga.RedriveRerun}
		plan, err = b.eng.PlanRedrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, map[string]saga.StepAction{"account": saga.StepKept, "workspace": saga.StepRunsNewKey, "welcome": saga.StepRunsAgain}, actions(plan))
		_, err = b.eng.Redrive(t.Context(), p)
		require.NoError(t, err)
		op = waitStatus(t, b, id, sagadriver.StatusCompleted)
		key := step(t, op, "workspace").Key
		require.NotEqual(t, id+"/workspace", key, "a new key for a new effect")
		_, effects, _ := b.provider.Counts(key)
		require.Equal(t, 1, effects)
		require.Len(t, b.provider.Workspaces(), 1)
		require.Equal(t, 1, b.welcomeCount(id))
	})
}

// SPEC G12: a step that passes no key to its system is named in the plan,
// and a redrive that would run it again is refused unless acknowledged.
func TestG12UnprotectedStepNeedsAcknowledgement(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		b.redefine(func(c *saga.Config) {
			def := b.definition()
			def.Steps[0].Unkeyed = true
			c.Definitions = []saga.Definition{def}
		})
		id := fmt.Sprintf("g12-unkeyed-%d", time.Now().UnixNano())
		op := failWelcome(t, b, id)
		fixWelcome(b, id)
		p := saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Step: "account", Version: op.Version, Actor: "ann"},
			Mode: saga.RedriveRerun}
		plan, err := b.eng.PlanRedrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, []string{"account"}, plan.Unprotected)
		require.Equal(t, saga.StepRunsUnprotected, actions(plan)["account"])
		_, err = b.eng.Redrive(t.Context(), p)
		require.ErrorIs(t, err, saga.ErrUnprotected)
		after, err := b.eng.Get(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, op.Version, after.Version, "nothing applied")
		p.AcceptUnprotected = true
		_, err = b.eng.Redrive(t.Context(), p)
		require.NoError(t, err)
		waitStatus(t, b, id, sagadriver.StatusCompleted)
	})
}

// SPEC G13: an operation records its definition's version; a redrive onto
// a version with an appended step runs the new step; a version that
// renames a step is refused with the reason.
func TestG13RedriveOntoANewerDefinition(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("g13-%d", time.Now().UnixNano())
		op := failWelcome(t, b, id)
		require.Equal(t, 1, op.DefinitionVersion)

		renamed := b.definition()
		renamed.Version = 3
		renamed.Steps[1].Name = "workspace_v3"
		b.redefine(func(c *saga.Config) { c.Definitions = []saga.Definition{renamed} })
		p := saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Version: op.Version, Actor: "ann"}, Upgrade: true}
		_, err := b.eng.Redrive(t.Context(), p)
		var te *saga.TransitionError
		require.ErrorAs(t, err, &te)
		require.Contains(t, te.Reason, `"workspace_v3" where the operation has "workspace"`)

		var audited int
		appended := b.definition()
		appended.Version = 2
		appended.Steps = append(appended.Steps, saga.Step{Name: "audit", System: "ledger", Kind: sagadriver.Retriable,
			Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
				b.mu.Lock()
				defer b.mu.Unlock()
				audited++
				return saga.Result{ExternalID: "ledger-" + in.Key}, nil
			}})
		b.redefine(func(c *saga.Config) { c.Definitions = []saga.Definition{appended} })
		fixWelcome(b, id)
		plan, err := b.eng.PlanRedrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, 1, plan.FromDefinition)
		require.Equal(t, 2, plan.ToDefinition)
		require.Equal(t, saga.StepAppended, actions(plan)["audit"])
		_, err = b.eng.Redrive(t.Context(), p)
		require.NoError(t, err)
		op = waitStatus(t, b, id, sagadriver.StatusCompleted)
		require.Equal(t, 2, op.DefinitionVersion)
		require.Len(t, op.Steps, 4)
		require.Equal(t, sagadriver.StepCompleted, step(t, op, "audit").Status)
		b.mu.Lock()
		require.Equal(t, 1, audited)
		b.mu.Unlock()
		require.Len(t, events(t, b, id, "step_appended"), 1)
		requireInvariants(t, b, id)
	})
}

// SPEC G12, G13: a console in its own process (a runner without
// definitions) plans and applies a redrive from the records alone; the
// application's workers run it. Moving to a newer definition needs the
// definition, so the console is refused with the reason.
func TestG12RedriveWithoutDefinitions(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *bundle) {
		id := fmt.Sprintf("g12-console-%d", time.Now().UnixNano())
		op := failWelcome(t, b, id)
		p := saga.RedriveParams{ActionParams: saga.ActionParams{OperationID: id, Step: "workspace", Version: op.Version, Actor: "ann", Note: "from the console"},
			Mode: saga.RedriveRerun}
		plan, err := b.console.PlanRedrive(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, map[string]saga.StepAction{"account": saga.StepKept, "workspace": saga.StepReplays, "welcome": saga.StepRunsAgain}, actions(plan))
		up := p
		up.Upgrade = true
		_, err = b.console.Redrive(t.Context(), up)
		var te *saga.TransitionError
		require.ErrorAs(t, err, &te)
		require.Contains(t, te.Reason, "no definition of type signup")
		fixWelcome(b, id)
		_, err = b.console.Redrive(t.Context(), p)
		require.NoError(t, err)
		waitStatus(t, b, id, sagadriver.StatusCompleted)
		_, effects, _ := b.provider.Counts(id + "/workspace")
		require.Equal(t, 1, effects)
		require.Equal(t, 1, b.welcomeCount(id))
	})
}

// RedriveChoices offers what the records allow, and nothing while the
// operation moves.
func TestG12RedriveChoicesFromTheRecord(t *testing.T) {
	op := sagadriver.Operation{ID: "op-1", Type: "signup", Status: sagadriver.StatusReviewRequired, Version: 7, Steps: []sagadriver.StepRecord{
		{Name: "account", Status: sagadriver.StepCompleted, Compensable: true, Key: "op-1/account"},
		{Name: "workspace", Status: sagadriver.StepCompleted, Compensable: true, Key: "op-1/workspace"},
		{Name: "welcome", Status: sagadriver.StepFailed, Key: "op-1/welcome"},
	}}
	require.Equal(t, []saga.RedriveChoice{
		{Mode: saga.RedriveResume, Steps: []string{"welcome"}},
		{Mode: saga.RedriveRerun, Steps: []string{"account", "workspace", "welcome"}},
		{Mode: saga.RedriveCompensate, Steps: []string{"account", "workspace"}},
	}, saga.RedriveChoices(op))
	_, err := saga.PlanRedriveOf(op, saga.RedriveParams{ActionParams: saga.ActionParams{Step: "account"}, Mode: saga.RedriveRerun, Upgrade: true})
	var te *saga.TransitionError
	require.ErrorAs(t, err, &te, "an upgrade needs the definition")
	op.Status = sagadriver.StatusRunning
	require.Empty(t, saga.RedriveChoices(op))
	op.Status = sagadriver.StatusReviewRequired
	_, err = saga.PlanRedriveOf(op, saga.RedriveParams{Mode: "sideways"})
	require.ErrorAs(t, err, &te, "an unknown mode")
}
