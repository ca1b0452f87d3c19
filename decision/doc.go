// Package decision delivers the operations console's decisions to the
// application (SPEC K26): when an operator confirms a key's outcome,
// forgets a key, or retries, confirms, compensates, resolves or redrives a
// saga operation, the console inserts an [Event] as a River job of kind
// [Kind] on the application's River tables, in the decision's own
// transaction. The application works the job with a [Worker] and its
// handler: tell the customer, release stock, close a ticket.
//
// Delivery is at least once (River's): a job whose process died after the
// handler ran is run again. Give the worker an idempotency engine and each
// event is handled once — the handler runs through idem.Run keyed by the
// event's ID — and in order per subject: an event whose [Event.Previous]
// has not been handled yet waits (the job is snoozed). Without an engine
// the handler must dedupe by ID and order by Previous itself.
//
// # Example
//
// An application on PostgreSQL with River and the idempotency engine
// (its River client works the saga queue already):
//
//	store := idempgx.New(pool)
//	engine, err := idem.New(store, idem.Config{Secret: secret})
//	if err != nil {
//		return err
//	}
//	workers := river.NewWorkers()
//	events := decision.NewWorker(decision.WorkerConfig{
//		Engine: engine, // each event once, keyed by its ID
//		Handle: func(ctx context.Context, ev decision.Event) error {
//			switch {
//			case ev.Type == decision.KeyConfirmed && ev.Outcome == decision.Happened &&
//				ev.Subject.Operation == "POST /payments":
//				// An operator established that the payment went through.
//				return mailer.PaymentConfirmed(ctx, ev.Subject.ExternalRef)
//			case ev.Type == decision.OperationResolved:
//				return tickets.Close(ctx, ev.Subject.CorrelationID, ev.Reason)
//			}
//			return nil // every other decision: nothing to do
//		},
//	})
//	if err := river.AddWorkerSafely(workers, events); err != nil {
//		return err
//	}
//	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
//		Workers: workers,
//		Queues: map[string]river.QueueConfig{
//			saga.QueueDefault:     {MaxWorkers: 10},
//			decision.DefaultQueue: {MaxWorkers: 5}, // or the console's --decision-events-queue
//		},
//	})
//	if err != nil {
//		return err
//	}
//	return client.Start(ctx)
//
// # Encoding
//
// An event is the job's args, JSON with snake_case names: id, type,
// outcome, subject (kind, id, scope, operation, correlation_id,
// external_ref), actor, reason, request_id, previous, previous_time,
// time. Optional fields are left out when empty; times are RFC 3339 in
// UTC. Fields may be added, never renamed or removed. docs/events.md has
// the whole of it: when events are emitted, which databases have them
// (not MySQL, which River has no driver for), and the River settings the
// application needs.
package decision
