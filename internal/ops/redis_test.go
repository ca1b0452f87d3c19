package ops

import (
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
)

// redisBundle is a Redis key store, its engine, and the console's SQL
// side (a SQLite file with the audit trail) with the key decisions on
// both.
type redisBundle struct {
	store   *idemredis.Store
	engine  *idem.Engine
	trail   *audit.Trail
	keys    *Keys[*sql.Tx]
	console *store.DB
	// imm is the decisions' handle on the SQLite file.
	imm *sql.DB
}

func newRedisBundle(t *testing.T) redisBundle {
	t.Helper()
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: redistest.Server(t)})
	t.Cleanup(func() { _ = c.Close() })
	s, err := idemredis.New(ctx, c, idemredis.Config{Prefix: "ops" + rand.Text()[:10] + ":"})
	require.NoError(t, err)
	engine, err := idem.New(s, idem.Config{Secret: []byte("ops-redis-test-secret-0123456789")})
	require.NoError(t, err)

	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "console.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ring, err := audit.NewKeyring([]byte("ops-redis-audit-key-0123456789abcdef"))
	require.NoError(t, err)
	trail := audit.NewSQLite(db, audit.WithKeys(ring))
	require.NoError(t, trail.Migrate(ctx))
	imm, err := OpenImmediate(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = imm.Close() })
	cdb := store.NewSQLite(db)
	require.NoError(t, cdb.Migrate(ctx))
	d, err := SQLite(imm, trail, cdb, nil)
	require.NoError(t, err)
	keys, err := NewKeysOnStore(d, engine, s, s)
	require.NoError(t, err)
	return redisBundle{store: s, engine: engine, trail: trail, keys: keys, console: cdb, imm: imm}
}

// pending makes a pending record in the store and returns it.
func (b redisBundle) pending(t *testing.T, key string) idemdriver.Record {
	t.Helper()
	id := idemdriver.Ident{Scope: "acme", Operation: "charge", KeyDigest: idem.Digest("acme", "charge", key)}
	rec, _, err := b.store.Reserve(t.Context(), idemdriver.ReserveParams{Ident: id, Owner: "o", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, b.store.Complete(t.Context(), id, rec.Owner, idemdriver.Completion{Status: idemdriver.StatusPending, LastError: "timeout"}))
	rec, ok, err := b.store.Get(t.Context(), id)
	require.NoError(t, err)
	require.True(t, ok)
	return rec
}

// entries returns the trail's entries on key record id, oldest first.
func (b redisBundle) entries(t *testing.T, id int64) []audit.Entry {
	t.Helper()
	hist, err := b.trail.History(t.Context(), "key", strconv.FormatInt(id, 10), 0)
	require.NoError(t, err)
	for i, j := 0, len(hist)-1; i < j; i, j = i+1, j-1 {
		hist[i], hist[j] = hist[j], hist[i]
	}
	return hist
}

func intentSeq(t *testing.T, e audit.Entry) int64 {
	t.Helper()
	var a struct {
		IntentSeq int64 `json:"intent_seq"`
	}
	require.NoError(t, json.Unmarshal(e.After, &a))
	return a.IntentSeq
}

var operator = Actor{Username: "ada", Role: "operator", RequestID: "req-1"}

// TestRedisDecisionIntentThenOutcome (SPEC CON K4): a decision
// on a Redis key is audited as an intent, applied by compare-and-swap on
// the record's version, then audited as applied, naming the intent.
func TestRedisDecisionIntentThenOutcome(t *testing.T) {
	b := newRedisBundle(t)
	rec := b.pending(t, "k1")
	res, err := b.keys.Decide(t.Context(), operator, KeyDecision{RecordID: rec.ID, Version: rec.Version,
		Action: idem.OperatorConfirmHappened, ExternalRef: "ch_1", Reason: "the provider shows the charge"})
	require.NoError(t, err)
	require.NotNil(t, res.After)
	require.Equal(t, idemdriver.StatusCompleted, res.After.Status)

	got := b.entries(t, rec.ID)
	require.Len(t, got, 2)
	require.Equal(t, OutcomeIntent, got[0].Outcome)
	require.Equal(t, "key.confirm_happened", got[0].Action)
	require.Equal(t, audit.OutcomeApplied, got[1].Outcome)
	require.Equal(t, got[0].Seq, intentSeq(t, got[1]))

	// A stale version is refused before any intent.
	_, err = b.keys.Decide(t.Context(), operator, KeyDecision{RecordID: rec.ID, Version: rec.Version,
		Action: idem.OperatorForget, Reason: "forget it, it is old", AcknowledgeRerun: true})
	require.ErrorIs(t, err, ErrStale)
	got = b.entries(t, rec.ID)
	require.Len(t, got, 3)
	require.Equal(t, audit.OutcomeConflict, got[2].Outcome)

	n, err := ResolveKeyIntents(t.Context(), b.trail, b.store)
	require.NoError(t, err)
	require.Zero(t, n, "nothing to resolve")
}

// TestRedisDecisionCrashResolvedAtStart: a crash after the intent leaves
// it without an outcome; the start-up pass appends the outcome from the
// record's state: not applied when the record is still at the intent's
// version, applied when the compare-and-swap ran.
func TestRedisDecisionCrashResolvedAtStart(t *testing.T) {
	b := newRedisBundle(t)
	crash := errors.New("crash")
	notApplied := b.pending(t, "k-not-applied")
	applied := b.pending(t, "k-applied")
	forgotten := b.pending(t, "k-forgotten")
	t.Cleanup(func() { testHookAfterIntent = nil })

	testHookAfterIntent = func() error { return crash }
	_, err := b.keys.Decide(t.Context(), operator, KeyDecision{RecordID: notApplied.ID, Version: notApplied.Version,
		Action: idem.OperatorConfirmHappened, ExternalRef: "ch_2", Reason: "the provider shows the charge"})
	require.ErrorIs(t, err, crash)

	// The process dies just after the store applied the decision.
	testHookAfterIntent = func() error {
		_, _, err := b.engine.Settle(t.Context(), b.store, applied, idem.OperatorConfirmHappened, "ch_3", "applied")
		require.NoError(t, err)
		return crash
	}
	_, err = b.keys.Decide(t.Context(), operator, KeyDecision{RecordID: applied.ID, Version: applied.Version,
		Action: idem.OperatorConfirmHappened, ExternalRef: "ch_3", Reason: "the provider shows the charge"})
	require.ErrorIs(t, err, crash)

	testHookAfterIntent = func() error {
		_, _, err := b.engine.Settle(t.Context(), b.store, forgotten, idem.OperatorForget, "", "forgotten")
		require.NoError(t, err)
		return crash
	}
	_, err = b.keys.Decide(t.Context(), operator, KeyDecision{RecordID: forgotten.ID, Version: forgotten.Version,
		Action: idem.OperatorForget, Reason: "the customer asked again", AcknowledgeRerun: true})
	require.ErrorIs(t, err, crash)
	testHookAfterIntent = nil

	for _, r := range []idemdriver.Record{notApplied, applied, forgotten} {
		got := b.entries(t, r.ID)
		require.Len(t, got, 1, "only the intent")
		require.Equal(t, OutcomeIntent, got[0].Outcome)
	}

	// Next start.
	n, err := ResolveKeyIntents(t.Context(), b.trail, b.store)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, c := range []struct {
		rec     idemdriver.Record
		outcome string
	}{{notApplied, audit.OutcomeConflict}, {applied, audit.OutcomeApplied}, {forgotten, audit.OutcomeApplied}} {
		got := b.entries(t, c.rec.ID)
		require.Len(t, got, 2)
		require.Equal(t, c.outcome, got[1].Outcome, "record %d: %s", c.rec.ID, got[1].Reason)
		require.Equal(t, ResolverActor, got[1].Actor)
		require.Equal(t, got[0].Seq, intentSeq(t, got[1]))
	}
	cur, ok, err := b.store.KeyByID(t.Context(), notApplied.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, idemdriver.StatusPending, cur.Status, "not applied: still pending, for the operator")

	n, err = ResolveKeyIntents(t.Context(), b.trail, b.store)
	require.NoError(t, err)
	require.Zero(t, n, "resolved once")
}

// TestRedisBulkForget (SPEC K12 on Redis keys): a bulk forget over Redis
// records, run by three overlapping workers, applies each item once with
// its intent and outcome, and skips the item that changed after the
// request without forcing it.
func TestRedisBulkForget(t *testing.T) {
	b := newRedisBundle(t)
	ctx := t.Context()
	a, err := ParseApproval("none")
	require.NoError(t, err)
	bulks, err := NewBulks(BulkParts[*sql.Tx]{Store: b.console, Keys: b.keys, KeyList: b.store}, BulkConfig{Approval: a, Batch: 7})
	require.NoError(t, err)
	const n = 12
	recs := make([]idemdriver.Record, n)
	for i := range recs {
		recs[i] = b.pending(t, "bulk-"+strconv.Itoa(i))
	}
	spec := BulkSpec{Kind: BulkKeys, Action: "forget", KeyFilter: idemdriver.KeyFilter{Scope: "acme"}, FilterQuery: "scope=acme", IncludeMayHaveHappened: true}
	req, _, err := bulks.Request(ctx, operator, spec, "provider outage, keys safe to rerun", n)
	require.NoError(t, err)
	_, err = b.keys.Decide(ctx, operator, KeyDecision{RecordID: recs[3].ID, Version: recs[3].Version,
		Action: idem.OperatorConfirmHappened, ExternalRef: "ch_3", Reason: "checked at the provider"})
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			for {
				done, err := bulks.Run(ctx, req.ID, 0)
				if err != nil || done {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, ok, err := bulks.Get(ctx, req.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, map[string]int64{store.ItemApplied: n - 1, store.ItemSkipped: 1}, got.Counts)
	for i, r := range recs {
		_, ok, err := b.store.KeyByID(ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, i == 3, ok, "record %d", i)
		if i == 3 {
			continue
		}
		hist := b.entries(t, r.ID)
		require.Len(t, hist, 2, "record %d: one intent, one outcome", i)
		require.Equal(t, OutcomeIntent, hist[0].Outcome)
		require.Equal(t, audit.OutcomeApplied, hist[1].Outcome)
		require.Equal(t, hist[0].Seq, intentSeq(t, hist[1]))
	}
	n2, err := ResolveKeyIntents(ctx, b.trail, b.store)
	require.NoError(t, err)
	require.Zero(t, n2)
}
