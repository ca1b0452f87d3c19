package web

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/internal/store"
)

// SPEC K13, K22: every action, single or bulk, reads in words with its
// parameters and its target, as the approver approves it.
func TestDescribeEveryAction(t *testing.T) {
	t.Parallel()
	item := &store.BulkItem{TargetID: "45"}
	step := &store.BulkItem{TargetID: "op-7", Step: "charge"}
	for _, c := range []struct {
		req  store.Bulk
		item *store.BulkItem
		want string
	}{
		{store.Bulk{Kind: "keys", Action: "verify", Filter: "state=pending"}, nil, "Verify with the provider — keys where state pending"},
		{store.Bulk{Kind: "keys", Action: "confirm_happened", Filter: "operation=POST+%2Fpay&state=pending"}, nil,
			"Confirm it happened, each with its own reference — keys where operation POST /pay, state pending"},
		{store.Bulk{Kind: "keys", Action: "confirm", Filter: "group=ab12"}, nil, "Confirm it did not happen — keys where group ab12"},
		{store.Bulk{Kind: "keys", Action: "forget", Filter: "scope=tenant%3Aweb"}, nil, "Forget — keys where scope tenant:web"},
		{store.Bulk{Kind: "keys", Action: "forget", Params: `{"acknowledge_rerun":"true"}`}, nil,
			"Forget, acknowledging that the client's retry runs the operation again — all keys"},
		{store.Bulk{Kind: "keys", Action: "confirm", Single: true, Params: `{"happened":"true","external_ref":"ch_1"}`}, item,
			`Confirm it happened, with external reference "ch_1" — key 45`},
		{store.Bulk{Kind: "keys", Action: "confirm", Single: true, Params: `{}`}, item, "Confirm it did not happen — key 45"},
		{store.Bulk{Kind: "keys", Action: "forget", Single: true, Params: `{}`}, item, "Forget — key 45"},
		{store.Bulk{Kind: "operations", Action: "retry", Filter: "status=review_required"}, nil,
			"Retry each operation's failed step — operations where status review_required"},
		{store.Bulk{Kind: "operations", Action: "retry", Single: true}, step, "Retry step charge — operation op-7"},
		{store.Bulk{Kind: "operations", Action: "compensate", Filter: "type=order"}, nil, "Compensate — operations where type order"},
		{store.Bulk{Kind: "operations", Action: "resolve", Params: `{"resolve_to":"compensated"}`, Filter: "status=review_required"}, nil,
			"Resolve as compensated — operations where status review_required"},
		{store.Bulk{Kind: "operations", Action: "confirm", Single: true, Params: `{"happened":"true","external_id":"sh_9"}`}, step,
			`Confirm it happened (step charge), with external reference "sh_9" — operation op-7`},
		{store.Bulk{Kind: "operations", Action: "confirm", Single: true, Params: `{}`}, step, "Confirm it did not happen (step charge) — operation op-7"},
		{store.Bulk{Kind: "operations", Action: "redrive", Filter: "group=ab12"}, nil,
			"Redrive: resume each operation at its failed step — operations where group ab12"},
		{store.Bulk{Kind: "operations", Action: "redrive", Single: true}, step, "Redrive: resume at the failed step (step charge) — operation op-7"},
	} {
		require.Equal(t, c.want, describeAction(c.req, c.item), "%s %s", c.req.Kind, c.req.Action)
	}
}
