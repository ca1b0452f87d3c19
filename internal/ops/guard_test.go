package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
)

// seedKeys writes records of scope with the given statuses and external
// references, as the engine would have left them.
func seedKeys(t *testing.T, b bundle, scope string, recs ...idemdriver.Record) []idemdriver.Record {
	t.Helper()
	now := time.Now().UTC().Add(-time.Hour)
	for i := range recs {
		r := &recs[i]
		r.Ident = idemdriver.Ident{Scope: scope, Operation: "POST /charges", KeyDigest: fmt.Sprintf("%064x", i+1)}
		r.Fingerprint, r.Attempts, r.Version = "fp", 1, 1
		r.Owner = idemdriver.Owner{Token: fmt.Sprintf("owner-%d", i), Fence: int64(i + 1)}
		r.CreatedAt, r.UpdatedAt, r.ExpiresAt = now, now, now.Add(24*time.Hour)
	}
	require.NoError(t, b.records.(idemdriver.Seeder).SeedRecords(t.Context(), recs))
	page, err := b.records.ListKeys(t.Context(), idemdriver.KeyFilter{Scope: scope})
	require.NoError(t, err)
	require.Len(t, page.Records, len(recs))
	byDigest := map[string]idemdriver.Record{}
	for _, r := range page.Records {
		byDigest[r.KeyDigest] = r
	}
	out := make([]idemdriver.Record, len(recs))
	for i, r := range recs {
		out[i] = byDigest[r.KeyDigest]
	}
	return out
}

// SPEC K20: a record whose effect may have happened is not forgotten
// without an acknowledgement of the consequence; with it, the audit
// entry records what was acknowledged. A failed record (no effect) is
// forgotten as before. Bulk forget leaves such records out unless the
// request includes them, and counts them apart.
func TestGuardedForget(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			recs := seedKeys(t, b, "tenant:guard",
				idemdriver.Record{Status: idemdriver.StatusPending, LastError: "provider timed out after charging", ExternalRef: "ch_guard_1"},
				idemdriver.Record{Status: idemdriver.StatusPending, LastError: "provider timed out"},
				idemdriver.Record{Status: idemdriver.StatusCompleted, ResponseCode: 201},
				idemdriver.Record{Status: idemdriver.StatusFailed, ResponseCode: 402, LastError: "card declined"},
				idemdriver.Record{Status: idemdriver.StatusFailed, ResponseCode: 402, LastError: "card declined"},
			)
			charged, unknown, completed, declined := recs[0], recs[1], recs[2], recs[3]
			for _, r := range []idemdriver.Record{charged, unknown, completed} {
				require.NotEmpty(t, ops.ForgetRisk(r), "status %s, reference %q", r.Status, r.ExternalRef)
			}
			require.Empty(t, ops.ForgetRisk(declined))

			// Bulk first, on the untouched set: three may have happened.
			bulks := newBulks(t, b, "none")
			spec := ops.BulkSpec{Kind: ops.BulkKeys, Action: "forget", KeyFilter: idemdriver.KeyFilter{Scope: "tenant:guard"}, FilterQuery: "scope=tenant%3Aguard"}
			p, err := bulks.Preview(ctx, spec)
			require.NoError(t, err)
			require.Equal(t, int64(2), p.Legal, "only the declined charges, without the acknowledgement")
			require.Equal(t, int64(3), p.MayHaveHappened, "counted apart")
			require.False(t, p.Included)
			spec.IncludeMayHaveHappened = true
			p, err = bulks.Preview(ctx, spec)
			require.NoError(t, err)
			require.Equal(t, int64(5), p.Legal, "included explicitly")
			require.True(t, p.Included)

			// Single: refused without the acknowledgement, not applied, the
			// refusal audited.
			d := ops.KeyDecision{RecordID: charged.ID, Version: charged.Version, Action: idem.OperatorForget, Reason: "the customer wants to pay again"}
			_, err = b.keys.Decide(ctx, alice, d)
			var fe *fielderr.Error
			require.ErrorAs(t, err, &fe)
			require.Equal(t, ops.FieldAcknowledgeRerun, fe.Field)
			require.Contains(t, fe.Reason, "ch_guard_1", "the refusal names what shows the effect")
			got, ok, err := b.records.KeyByID(ctx, charged.ID)
			require.NoError(t, err)
			require.True(t, ok, "not forgotten")
			require.Equal(t, charged.Version, got.Version)
			hist, err := b.keys.History(ctx, charged.ID, 10)
			require.NoError(t, err)
			require.Len(t, hist, 1)
			require.Equal(t, audit.OutcomeConflict, hist[0].Outcome)

			// With it: applied, and the entry says what was acknowledged.
			d.AcknowledgeRerun = true
			res, err := b.keys.Decide(ctx, alice, d)
			require.NoError(t, err)
			require.Nil(t, res.After)
			hist, err = b.keys.History(ctx, charged.ID, 10)
			require.NoError(t, err)
			require.Equal(t, audit.OutcomeApplied, hist[0].Outcome)
			var after struct {
				Deleted      bool              `json:"deleted"`
				Acknowledged map[string]string `json:"acknowledged"`
			}
			require.NoError(t, json.Unmarshal(hist[0].After, &after))
			require.True(t, after.Deleted)
			require.Contains(t, after.Acknowledged["risk"], "ch_guard_1")
			require.Contains(t, after.Acknowledged["consequence"], "(POST /charges) again")

			// A declined charge had no effect: forgotten without more.
			_, err = b.keys.Decide(ctx, alice, ops.KeyDecision{RecordID: declined.ID, Version: declined.Version, Action: idem.OperatorForget, Reason: "declined: the customer may try again"})
			require.NoError(t, err)
			hist, err = b.keys.History(ctx, declined.ID, 10)
			require.NoError(t, err)
			require.Equal(t, audit.OutcomeApplied, hist[0].Outcome)
			var plain map[string]any
			require.NoError(t, json.Unmarshal(hist[0].After, &plain))
			require.NotContains(t, plain, "acknowledged", "nothing to acknowledge")

			// A bulk request without them decides the one declined charge
			// left and nothing else.
			spec.IncludeMayHaveHappened = false
			req, _, err := bulks.Request(ctx, carol, spec, "declined cards: let customers retry", 1)
			require.NoError(t, err)
			finished, err := bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, finished)
			done, _, err := bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, map[string]int64{"applied": 1}, done.Counts)
			for _, r := range []idemdriver.Record{unknown, completed} {
				_, ok, err := b.records.KeyByID(ctx, r.ID)
				require.NoError(t, err)
				require.True(t, ok, "a key that may have happened stays")
			}
		})
	}
}

// SPEC K19 item 2: a bulk "confirm happened" completes each key with the
// external reference its own record carries; keys without one are not
// legal for it and are counted apart.
func TestBulkConfirmHappenedWithEachReference(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			recs := seedKeys(t, b, "tenant:refs",
				idemdriver.Record{Status: idemdriver.StatusPending, LastError: "timed out after charging", ExternalRef: "ch_a"},
				idemdriver.Record{Status: idemdriver.StatusPending, LastError: "timed out after charging", ExternalRef: "ch_b"},
				idemdriver.Record{Status: idemdriver.StatusPending, LastError: "timed out before charging"},
			)
			bulks := newBulks(t, b, "none")
			spec := ops.BulkSpec{Kind: ops.BulkKeys, Action: ops.BulkConfirmHappened, KeyFilter: idemdriver.KeyFilter{Scope: "tenant:refs"}, FilterQuery: "scope=tenant%3Arefs"}
			p, err := bulks.Preview(ctx, spec)
			require.NoError(t, err)
			require.Equal(t, int64(2), p.Legal)
			require.Equal(t, int64(1), p.NotLegalTotal(), "the key without a reference, apart")
			for why := range p.NotLegal {
				require.Contains(t, why, "no external reference")
			}
			req, _, err := bulks.Request(ctx, alice, spec, "the provider's dashboard shows both charges", 2)
			require.NoError(t, err)
			finished, err := bulks.Run(ctx, req.ID, 0)
			require.NoError(t, err)
			require.True(t, finished)
			done, _, err := bulks.Get(ctx, req.ID)
			require.NoError(t, err)
			require.Equal(t, map[string]int64{"applied": 2}, done.Counts)
			for i, ref := range []string{"ch_a", "ch_b"} {
				got, ok, err := b.records.KeyByID(ctx, recs[i].ID)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, idemdriver.StatusCompleted, got.Status, "completed, never run again")
				require.Equal(t, ref, got.ExternalRef, "with its own reference")
			}
			got, ok, err := b.records.KeyByID(ctx, recs[2].ID)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, idemdriver.StatusPending, got.Status, "the key without a reference is left as it was")
		})
	}
}
