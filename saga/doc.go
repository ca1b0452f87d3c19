// Package saga runs durable multi-step operations with compensation
// (sagas) on River (SPEC §2, G1–G11).
//
// An operation type is a [Definition]: ordered [Step]s, each compensatable,
// pivot or retriable, with a Do, an optional Verify (asks the external
// system, by the step's stable key, whether the effect exists) and an
// optional Compensate, a retry policy, a timeout and an error
// classification ([Transient], [Permanent], [Uncertain]).
//
// # Records
//
// The system of record is the engine's own tables (unstuck_saga_operation,
// unstuck_saga_step, unstuck_saga_event, unstuck_saga_finding), written
// through a [Driver]: saga/sagapgx on PostgreSQL, saga/sagasqlite on
// SQLite. River's jobs only carry an operation forward; River deletes them
// after their retention.
//
// # Running
//
//	driver := sagapgx.New(pool)
//	runner, err := saga.NewRunner(driver, saga.Config{Definitions: defs})
//	workers := river.NewWorkers()
//	err = runner.AddWorkers(workers)
//	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
//		Queues:       map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 10}},
//		Workers:      workers,
//		PeriodicJobs: runner.PeriodicJobs(),
//	})
//	runner.SetClient(client)
//
// [Runner.StartTx] records the operation and inserts its first job in the
// application's transaction (the transactional outbox, SPEC G4). Each job
// does three things: a short transaction that marks the step running; the
// call to the external system, outside any transaction; one transaction
// that records the outcome, inserts the next job and completes its own job
// (river.JobCompleteTx). All transitions are decided by one state machine.
//
// # Failures
//
//   - Transient: River retries the job with the step's backoff and the same
//     key, up to the step's MaxAttempts; the engine, not River, decides when
//     they are exhausted.
//   - Permanent (or exhausted) at a compensatable or pivot step: the steps
//     that completed or may have applied are compensated in reverse (or
//     declared) order, halting at the first compensation that fails.
//   - Permanent at a retriable step: review_required, no compensation.
//   - Uncertain: a saga.verify job snoozes, then calls Verify, up to
//     MaxVerifications; unresolved, the operation is review_required.
//   - A step found running when its job starts (a crash after the call and
//     before the record) is verified before it is executed again. River
//     hands the job of a dead process to another once its leader's
//     rescuer finds it running for longer than both
//     river.Config.RescueStuckJobsAfter and the job's timeout, twice the
//     step's Timeout plus [Config.JobMargin].
//
// A job whose generation is not its step's current one, or that finds its
// step in another status (a duplicate delivery, a forward call after
// compensation started), does nothing but record what it saw.
//
// # Operators and reconciliation
//
// [Runner.RetryStep], [Runner.ConfirmStep], [Runner.StartCompensation] and
// [Runner.Resolve] (each with a …Tx variant) check the operation's version,
// apply the transition and return the record before and after, for the
// audit trail. [Runner.Reconcile], run periodically by the leader, calls
// Verify for stuck and recently finished operations, records findings and
// raises the operation to review_required; it never changes a step.
// [NewCollector] exports Prometheus gauges.
package saga
