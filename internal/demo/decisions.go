package demo

import (
	"context"

	"github.com/unstuckhq/unstuck/decision"
)

// DecisionWorker returns the shop's worker of the console's decision
// events (package decision), as an application registers its own: each
// event is handled once, through the shop's engine. When an operator
// confirms that a payment happened, the shop tells the customer (here, a
// log line naming the payment's reference and nothing of its payload).
func (s *Shop) DecisionWorker() *decision.Worker {
	return decision.NewWorker(decision.WorkerConfig{Engine: s.engine, Handle: s.handleDecision})
}

func (s *Shop) handleDecision(ctx context.Context, ev decision.Event) error {
	confirmed := ev.Type == decision.KeyConfirmed || ev.Type == decision.KeyVerified
	if ev.Subject.Kind != decision.SubjectKey || ev.Subject.Operation != PaymentOperation || !confirmed || ev.Outcome != decision.Happened {
		return nil
	}
	s.log.InfoContext(ctx, "e-mail to customer: your payment "+ev.Subject.ExternalRef+" was confirmed",
		"event", ev.ID, "key_record", ev.Subject.ID, "confirmed_by", ev.Actor)
	return nil
}
