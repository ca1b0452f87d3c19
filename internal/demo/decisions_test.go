package demo

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemmem"
)

// TestDecisionEventMailsTheCustomer: a payment confirmed by an operator
// as happened is told to the customer; other events are not.
func TestDecisionEventMailsTheCustomer(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	engine, err := idem.New(idemmem.New(), idem.Config{Secret: []byte("demo-test-secret-0123456789abcdefgh")})
	require.NoError(t, err)
	shop, err := NewShop(engine, NewProvider(), slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	payment := decision.Subject{Kind: decision.SubjectKey, ID: "7", Operation: PaymentOperation, ExternalRef: "ch_42"}
	for _, ev := range []decision.Event{
		{ID: "dec_1", Type: decision.KeyConfirmed, Outcome: decision.NotHappened, Subject: payment},
		{ID: "dec_2", Type: decision.KeyForgotten, Subject: payment},
		{ID: "dec_3", Type: decision.KeyConfirmed, Outcome: decision.Happened, Subject: decision.Subject{Kind: decision.SubjectKey, Operation: "POST /shop/orders", ExternalRef: "o_1"}},
	} {
		require.NoError(t, shop.handleDecision(t.Context(), ev))
	}
	require.Empty(t, logs.String())
	require.NoError(t, shop.handleDecision(t.Context(), decision.Event{ID: "dec_4", Type: decision.KeyConfirmed, Outcome: decision.Happened, Subject: payment, Actor: "ada"}))
	require.Contains(t, logs.String(), "e-mail to customer: your payment ch_42 was confirmed")
	require.NotNil(t, shop.DecisionWorker())
}
