package ops

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
)

// TestRedisDecisionEmitsEventWithOutcome: a decision on a Redis key emits
// its event with its outcome entry (not with the intent), and the next
// decision's event names it as Previous.
func TestRedisDecisionEmitsEventWithOutcome(t *testing.T) {
	b := newRedisBundle(t)
	ctx := t.Context()
	rd := riversqlite.New(b.imm)
	m, err := rivermigrate.New(rd, nil)
	require.NoError(t, err)
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)
	client, err := river.NewClient(rd, &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, b.keys.DB().EmitEvents(client, ""))
	events := func() []decision.Event {
		rows, err := b.imm.QueryContext(ctx, `SELECT queue, json(args) FROM river_job WHERE kind = ? ORDER BY id`, decision.Kind)
		require.NoError(t, err)
		defer rows.Close()
		var out []decision.Event
		for rows.Next() {
			var q string
			var args []byte
			require.NoError(t, rows.Scan(&q, &args))
			require.Equal(t, decision.DefaultQueue, q)
			var ev decision.Event
			require.NoError(t, json.Unmarshal(args, &ev))
			out = append(out, ev)
		}
		require.NoError(t, rows.Err())
		return out
	}

	rec := b.pending(t, "k-events")
	res, err := b.keys.Decide(ctx, operator, KeyDecision{RecordID: rec.ID, Version: rec.Version,
		Action: idem.OperatorConfirmHappened, ExternalRef: "ch_1", Reason: "the provider shows the charge"})
	require.NoError(t, err)
	entries := b.entries(t, rec.ID)
	require.Len(t, entries, 2, "intent, outcome")
	require.NotContains(t, string(entries[0].After), eventMarker, "the intent emits nothing")
	evs := events()
	require.Len(t, evs, 1)
	require.Equal(t, EventID(entries[1].Seq), evs[0].ID, "the event is the outcome's")
	require.Equal(t, decision.KeyConfirmed, evs[0].Type)
	require.Equal(t, decision.Subject{Kind: "key", ID: strconv.FormatInt(rec.ID, 10), Scope: "acme", Operation: "charge", ExternalRef: "ch_1"}, evs[0].Subject)

	_, err = b.keys.Decide(ctx, operator, KeyDecision{RecordID: rec.ID, Version: res.After.Version, Action: idem.OperatorForget,
		AcknowledgeRerun: true, Reason: "the customer wants to pay again"})
	require.NoError(t, err)
	evs = events()
	require.Len(t, evs, 2)
	require.Equal(t, decision.KeyForgotten, evs[1].Type)
	require.Equal(t, evs[0].ID, evs[1].Previous)
}
