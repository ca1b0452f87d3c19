package ops

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
)

// verifyBundle is the verifications of keys on an SQLite file, with the
// applications' verification jobs answered by hand (jobs).
type verifyBundle struct {
	v       *Verifications[*sql.Tx]
	keys    *Keys[*sql.Tx]
	store   *idemsqlite.Store
	trail   *audit.Trail
	engine  *idem.Engine
	jobs    map[int64]*rivertype.JobRow
	enqueue []VerifyAwaitArgs
}

func newVerifyBundle(t *testing.T) *verifyBundle {
	t.Helper()
	ctx := t.Context()
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "verify.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	imm, err := OpenImmediate(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = imm.Close() })
	s := idemsqlite.New(db)
	require.NoError(t, s.Migrate(ctx))
	keyring, err := audit.NewKeyring([]byte("verify-test-audit-key-0123456789abcdef"))
	require.NoError(t, err)
	trail := audit.NewSQLite(db, audit.WithKeys(keyring))
	require.NoError(t, trail.Migrate(ctx))
	m, err := rivermigrate.New(riversqlite.New(imm), nil)
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	engine, err := idem.New(s, idem.Config{Secret: []byte("verify-test-secret-0123456789abcdefgh")})
	require.NoError(t, err)
	cdb := store.NewSQLite(db)
	require.NoError(t, cdb.Migrate(ctx))
	dec, err := SQLite(imm, trail, cdb, nil)
	require.NoError(t, err)
	keys, err := NewKeys(dec, engine, s, s)
	require.NoError(t, err)
	client, err := river.NewClient(riversqlite.New(imm), &river.Config{})
	require.NoError(t, err)
	b := &verifyBundle{keys: keys, store: s, trail: trail, engine: engine, jobs: map[int64]*rivertype.JobRow{}}
	b.v, err = NewVerifications(keys, answeredJobs{client, b}, awaitRecorder{b})
	require.NoError(t, err)
	return b
}

// answeredJobs is client with the jobs answered by hand in b.jobs.
type answeredJobs struct {
	*river.Client[*sql.Tx]
	b *verifyBundle
}

func (j answeredJobs) JobGet(ctx context.Context, id int64) (*rivertype.JobRow, error) {
	if row, ok := j.b.jobs[id]; ok {
		return row, nil
	}
	return j.Client.JobGet(ctx, id)
}

// awaitRecorder records the waits for answers in b.enqueue.
type awaitRecorder struct{ b *verifyBundle }

func (r awaitRecorder) Insert(_ context.Context, args river.JobArgs, _ *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	r.b.enqueue = append(r.b.enqueue, args.(VerifyAwaitArgs))
	return &rivertype.JobInsertResult{Job: &rivertype.JobRow{}}, nil
}

// pendingPayment leaves a record of key pending, carrying ref.
func (b *verifyBundle) pendingPayment(t *testing.T, key, ref string) idemdriver.Record {
	t.Helper()
	_, err := idem.Run(t.Context(), b.engine, key, "tenant:v", func(ctx context.Context) (int, error) {
		require.NoError(t, idem.Annotate(ctx, idem.Annotation{ExternalRef: ref}))
		return 0, idem.Uncertain(context.DeadlineExceeded)
	}, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	page, err := b.store.ListKeys(t.Context(), idemdriver.KeyFilter{KeyHash: idem.KeyHash(key)})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	return page.Records[0]
}

// answer completes the verification job of a with ans as its output.
func (b *verifyBundle) answer(a VerifyAwaitArgs, state rivertype.JobState, ans *idemriver.VerifyAnswer) {
	row := &rivertype.JobRow{ID: a.JobID, State: state, Metadata: []byte(`{}`)}
	if ans != nil {
		out, _ := json.Marshal(map[string]any{"output": ans})
		row.Metadata = out
	}
	b.jobs[a.JobID] = row
}

func (b *verifyBundle) history(t *testing.T, id int64) []audit.Entry {
	t.Helper()
	h, err := b.trail.History(t.Context(), "key", strconv.FormatInt(id, 10), 50)
	require.NoError(t, err)
	return h
}

var verifier = Actor{Username: "sam", Role: "support"}

// SPEC K19: each answer of a verifier leads to its decision or finding,
// once; the request is deduplicated while it waits; a stale answer is a
// finding, never a decision.
func TestVerificationAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RequestIsAuditedAndDeduplicated", func(t *testing.T) {
		t.Parallel()
		b := newVerifyBundle(t)
		rec := b.pendingPayment(t, "verify-dedupe-000001", "ch_ref_1")
		e1, err := b.v.Request(ctx, verifier, rec.ID, rec.Version, "the customer says it is stuck")
		require.NoError(t, err)
		e2, err := b.v.Request(ctx, Actor{Username: "olga", Role: "oncall"}, rec.ID, rec.Version, "checking it once more, too")
		require.NoError(t, err)
		require.Len(t, b.enqueue, 1, "one job, one wait for the same record version")
		require.Equal(t, OutcomeRequested, e1.Outcome)
		require.Contains(t, string(e2.After), `"already_requested":true`)
		require.Contains(t, string(e2.After), `"job_id":`+strconv.FormatInt(b.enqueue[0].JobID, 10))
		b.enqueue = nil
		require.NoError(t, b.v.Resume(ctx))
		require.Len(t, b.enqueue, 1, "resumed once, not for the duplicate")

		_, err = b.v.Request(ctx, verifier, rec.ID, rec.Version+1, "an old page was still open")
		require.ErrorIs(t, err, ErrStale)
		_, err = b.v.Request(ctx, verifier, rec.ID, rec.Version, "short")
		require.ErrorIs(t, err, ErrInvalid)
	})

	t.Run("HappenedIsConfirmedOnceWithItsEvidence", func(t *testing.T) {
		t.Parallel()
		b := newVerifyBundle(t)
		rec := b.pendingPayment(t, "verify-happened-0001", "ref_sent")
		_, err := b.v.Request(ctx, verifier, rec.ID, rec.Version, "the customer says it is stuck")
		require.NoError(t, err)
		a := b.enqueue[0]
		require.ErrorAs(t, b.v.Await(ctx, a), new(*river.JobSnoozeError), "no answer yet: wait")
		b.answer(a, rivertype.JobStateCompleted, &idemriver.VerifyAnswer{Verdict: idemriver.AnswerHappened, ExternalRef: "ch_42",
			Evidence: "charge ch_42 of 1999 cents", Verifier: "payments", At: time.Now()})
		require.NoError(t, b.v.Await(ctx, a))
		require.NoError(t, b.v.Await(ctx, a), "a second run finds the answer applied")
		got, ok, err := b.store.KeyByID(ctx, rec.ID)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, idemdriver.StatusCompleted, got.Status)
		require.Equal(t, "ch_42", got.ExternalRef)
		applied := 0
		for _, e := range b.history(t, rec.ID) {
			if e.Outcome == audit.OutcomeApplied {
				applied++
				require.Equal(t, "sam", e.Actor)
				require.Contains(t, e.Reason, "via verifier payments")
				require.Contains(t, string(e.After), "charge ch_42 of 1999 cents")
				require.Equal(t, requestID(a.RequestSeq), e.RequestID)
			}
		}
		require.Equal(t, 1, applied, "decided once")
	})

	t.Run("UnknownAndFailuresAreFindings", func(t *testing.T) {
		t.Parallel()
		for name, tc := range map[string]struct {
			state rivertype.JobState
			ans   *idemriver.VerifyAnswer
			want  string
		}{
			"Unknown":    {rivertype.JobStateCompleted, &idemriver.VerifyAnswer{Verdict: idemriver.AnswerUnknown, Evidence: "still processing", Verifier: "payments"}, "verifier answered unknown"},
			"NoVerifier": {rivertype.JobStateCompleted, &idemriver.VerifyAnswer{Verdict: idemriver.AnswerNoVerifier}, "no verifier is registered"},
			"Discarded":  {rivertype.JobStateDiscarded, nil, "the verification job discarded"},
			"NoOutput":   {rivertype.JobStateCompleted, nil, "recorded no answer"},
		} {
			t.Run(name, func(t *testing.T) {
				b := newVerifyBundle(t)
				rec := b.pendingPayment(t, "verify-finding-"+name+"-0001", "ref_sent")
				_, err := b.v.Request(ctx, verifier, rec.ID, rec.Version, "the customer says it is stuck")
				require.NoError(t, err)
				a := b.enqueue[0]
				b.answer(a, tc.state, tc.ans)
				require.NoError(t, b.v.Await(ctx, a))
				got, ok, err := b.store.KeyByID(ctx, rec.ID)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, rec.Version, got.Version, "nothing decided")
				h := b.history(t, rec.ID)
				require.Equal(t, OutcomeFinding, h[0].Outcome)
				require.Contains(t, h[0].Reason, tc.want)
			})
		}
	})

	t.Run("LateAnswerIsAFinding", func(t *testing.T) {
		t.Parallel()
		b := newVerifyBundle(t)
		rec := b.pendingPayment(t, "verify-late-00000001", "ref_sent")
		_, err := b.v.Request(ctx, verifier, rec.ID, rec.Version, "the customer says it is stuck")
		require.NoError(t, err)
		a := b.enqueue[0]
		b.v.now = func() time.Time { return time.Now().Add(verifyDeadline + time.Minute) }
		require.NoError(t, b.v.Await(ctx, a))
		h := b.history(t, rec.ID)
		require.Equal(t, OutcomeFinding, h[0].Outcome)
		require.Contains(t, string(h[0].After), "no answer within")
	})

	t.Run("StaleAnswerIsNotADecision", func(t *testing.T) {
		t.Parallel()
		b := newVerifyBundle(t)
		rec := b.pendingPayment(t, "verify-stale-0000001", "ref_sent")
		_, err := b.v.Request(ctx, verifier, rec.ID, rec.Version, "the customer says it is stuck")
		require.NoError(t, err)
		a := b.enqueue[0]
		// Someone confirmed it by hand meanwhile.
		_, err = b.keys.Decide(ctx, Actor{Username: "olga", Role: "oncall"}, KeyDecision{RecordID: rec.ID, Version: rec.Version,
			Action: idem.OperatorConfirmHappened, ExternalRef: "ch_by_hand", Reason: "seen on the provider's dashboard"})
		require.NoError(t, err)
		b.answer(a, rivertype.JobStateCompleted, &idemriver.VerifyAnswer{Verdict: idemriver.AnswerNotHappened, Verifier: "payments"})
		require.NoError(t, b.v.Await(ctx, a))
		got, ok, err := b.store.KeyByID(ctx, rec.ID)
		require.NoError(t, err)
		require.True(t, ok, "not released by a stale answer")
		require.Equal(t, "ch_by_hand", got.ExternalRef)
		h := b.history(t, rec.ID)
		require.Equal(t, OutcomeFinding, h[0].Outcome)
		require.Contains(t, h[0].Reason, "not applied")
	})

	t.Run("ResumeEnqueuesUnansweredRequests", func(t *testing.T) {
		t.Parallel()
		b := newVerifyBundle(t)
		rec := b.pendingPayment(t, "verify-resume-000001", "ref_sent")
		_, err := b.v.Request(ctx, verifier, rec.ID, rec.Version, "the customer says it is stuck")
		require.NoError(t, err)
		answered := b.pendingPayment(t, "verify-resume-000002", "ref_sent")
		_, err = b.v.Request(ctx, verifier, answered.ID, answered.Version, "the customer says it is stuck")
		require.NoError(t, err)
		b.answer(b.enqueue[1], rivertype.JobStateCompleted, &idemriver.VerifyAnswer{Verdict: idemriver.AnswerUnknown})
		require.NoError(t, b.v.Await(ctx, b.enqueue[1]))
		b.enqueue = nil
		require.NoError(t, b.v.Resume(ctx))
		require.Len(t, b.enqueue, 1, "only the request without an answer")
		require.Equal(t, rec.ID, b.enqueue[0].RecordID)
		require.Equal(t, rec.Version, b.enqueue[0].Version)
	})
}

// SPEC K19: the scheduled verification asks about keys whose outcome has
// been unknown for longer than After, least recently updated first, at
// most Batch per run, each at most once per After; on a fixed clock.
func TestScheduledVerification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newVerifyBundle(t)
	recent := b.pendingPayment(t, "verify-scheduled-0003", "ref_3")
	// Two records unknown for 20 and 15 minutes, as the engine leaves them.
	now := time.Now().UTC()
	var seeded []idemdriver.Record
	for i, age := range []time.Duration{20 * time.Minute, 15 * time.Minute} {
		seeded = append(seeded, idemdriver.Record{Ident: idemdriver.Ident{Scope: "tenant:v", Operation: "POST /charges", KeyDigest: strconv.Itoa(i+1) + strings.Repeat("0", 63)},
			Fingerprint: "fp", Status: idemdriver.StatusPending, LastError: "provider timeout", ExternalRef: "ref_old_" + strconv.Itoa(i), Attempts: 1, Version: 1,
			Owner: idemdriver.Owner{Token: "owner-" + strconv.Itoa(i), Fence: int64(i + 1)}, CreatedAt: now.Add(-age), UpdatedAt: now.Add(-age), ExpiresAt: now.Add(time.Hour)})
	}
	require.NoError(t, b.store.SeedRecords(ctx, seeded))
	find := func(digest string) idemdriver.Record {
		page, err := b.store.ListKeys(ctx, idemdriver.KeyFilter{KeyDigest: digest})
		require.NoError(t, err)
		require.Len(t, page.Records, 1)
		return page.Records[0]
	}
	first, second := find(seeded[0].KeyDigest), find(seeded[1].KeyDigest)
	b.v.now = func() time.Time { return now }
	cfg := ReconcileConfig{After: 10 * time.Minute, Every: 5 * time.Minute, Batch: 1}

	n, err := b.v.Reconcile(ctx, b.store, cfg)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one per run")
	require.Equal(t, first.ID, b.enqueue[0].RecordID, "the least recently updated first")
	require.Equal(t, ReconcileActor.Username, b.enqueue[0].Actor)

	n, err = b.v.Reconcile(ctx, b.store, cfg)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, second.ID, b.enqueue[1].RecordID, "then the next; the first was asked already")

	n, err = b.v.Reconcile(ctx, b.store, cfg)
	require.NoError(t, err)
	require.Zero(t, n, "each at most once per After; the recent key is not old enough")

	// The answer of a scheduled verification is applied like an operator's.
	b.answer(b.enqueue[0], rivertype.JobStateCompleted, &idemriver.VerifyAnswer{Verdict: idemriver.AnswerNotHappened, Verifier: "payments"})
	require.NoError(t, b.v.Await(ctx, b.enqueue[0]))
	_, ok, err := b.store.KeyByID(ctx, first.ID)
	require.NoError(t, err)
	require.False(t, ok, "released")
	h := b.history(t, first.ID)
	require.Equal(t, "reconciliation", h[0].Actor)
	require.Contains(t, h[0].Reason, "scheduled verification")

	// After another After, a key still unknown is asked again, and the
	// key that has become old enough too.
	b.v.now = func() time.Time { return now.Add(11 * time.Minute) }
	n, err = b.v.Reconcile(ctx, b.store, ReconcileConfig{After: 10 * time.Minute, Batch: 10})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	// The second's first job still waits (no application ran it here):
	// the new request joins it; the recent key gets a job and a wait.
	require.Len(t, b.enqueue, 3)
	require.Equal(t, recent.ID, b.enqueue[2].RecordID)

	n, err = b.v.Reconcile(ctx, b.store, ReconcileConfig{})
	require.NoError(t, err)
	require.Zero(t, n, "off by default")
}
