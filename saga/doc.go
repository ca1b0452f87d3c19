// Package saga runs durable multi-step operations with compensation
// (sagas) on River (SPEC §2, G1–G11).
//
// # What an application calls
//
//   - A [Definition] per operation type: ordered steps ([Step]), each
//     compensatable, pivot or retriable, with a Do, an optional Verify
//     (asks the external system, by the step's stable key, whether the
//     effect exists) and an optional Compensate, a retry policy, a timeout
//     and an error classification ([Transient], [Permanent], [Uncertain]).
//   - A driver, migrated at start-up with its Migrate, beside River's own
//     migration: [github.com/unstuckhq/unstuck/saga/sagapgx] on PostgreSQL
//     (with River's riverpgxv5 on the same pool) or
//     [github.com/unstuckhq/unstuck/saga/sagasqlite] on SQLite (with
//     riversqlite on the same handle).
//   - [NewRunner] over the driver; [Runner.AddWorkers] and
//     [Runner.ConfigureRiver] on the River client's workers and config;
//     [Runner.SetClient] once the client exists.
//   - [Runner.StartTx] (or [Runner.Start]) starts an operation, in the
//     application's transaction; [Runner.Get] and [Runner.Events] read it.
//
// The whole wiring, on PostgreSQL (the Definition examples run it on
// SQLite, end to end):
//
//	driver := sagapgx.New(pool)
//	if err := driver.Migrate(ctx); err != nil { // the engine's tables
//		return err
//	}
//	riverDriver := riverpgxv5.New(pool)
//	migrator, err := rivermigrate.New(riverDriver, nil)
//	if err != nil {
//		return err
//	}
//	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil { // River's tables
//		return err
//	}
//	runner, err := saga.NewRunner(driver, saga.Config{Definitions: []saga.Definition{signup}})
//	if err != nil {
//		return err
//	}
//	workers := river.NewWorkers()
//	if err := runner.AddWorkers(workers); err != nil {
//		return err
//	}
//	cfg := &river.Config{
//		Queues:       map[string]river.QueueConfig{saga.QueueDefault: {MaxWorkers: 10}},
//		Workers:      workers,
//		PeriodicJobs: runner.PeriodicJobs(),
//	}
//	if err := runner.ConfigureRiver(cfg); err != nil { // recovery knobs from the steps' leases
//		return err
//	}
//	client, err := river.NewClient(riverDriver, cfg)
//	if err != nil {
//		return err
//	}
//	runner.SetClient(client)
//	if err := client.Start(ctx); err != nil {
//		return err
//	}
//	skew, err := runner.ClockSkew(ctx) // warns above 2 s
//	op, err := runner.Start(ctx, "signup", input, &saga.StartOpts{ID: signupID})
//
// # Records
//
// The system of record is the engine's own tables (operations, steps,
// events, findings), owned by a driver of the contract in
// saga/sagadriver: saga/sagapgx on PostgreSQL, saga/sagasqlite on SQLite.
// Only the step machine writes them; consoles read them through the
// driver's admin contract (sagadriver.Admin). River's jobs only carry an
// operation forward; River deletes them after their retention.
//
// # Running
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
//     before the record) is verified before it is executed again.
//
// # Recovery after a crash
//
// A step's lease ([Runner.StepLease]) is its job's River timeout: twice the
// step's Timeout (a verification and the call) plus [Config.JobMargin]
// (default 30 s), 90 s with the defaults. The job's context ends with the
// lease. River hands the job of a process that died (SIGKILL, power loss)
// to another once its leader's rescuer, which runs every 30 s, finds it
// running for longer than both river.Config.RescueStuckJobsAfter and the
// lease; the rescued job is retried after the step's first backoff, made
// available by River's scheduler (every 5 s), and verifies the step before
// executing it. River's default RescueStuckJobsAfter is one hour: call
// [Runner.ConfigureRiver] on the client's config, which sets it (and
// JobTimeout, which River wants no longer) to the shortest lease where
// they are zero, and refuses ([Runner.CheckRiver]) a RescueStuckJobsAfter
// longer than twice the shortest lease. A step interrupted by a crash then
// resumes within its lease + 30 s + a few seconds (+ 15 s when the dead
// process was River's leader): within 2 × its lease + 30 s for any lease of
// 40 s or more. The knobs, in order of effect: the step's Timeout,
// Config.JobMargin, river.Config.RescueStuckJobsAfter and JobTimeout.
//
// # Clocks
//
// Every time the engine records comes from the database's clock, read once
// per transaction (the driver's Now): statement_timestamp() on PostgreSQL; on
// SQLite, which has none, the process clock, which is then the database's
// for every process on the file. Processes whose clocks disagree still
// agree on the records, on StuckAfter and on VerifyAfter. River, though,
// schedules retries, snoozes and rescues on the process clock: a skew
// delays or hastens them by as much. [Runner.ClockSkew] measures the
// application's clock ([Config.NowFunc]) against the database's, logs a
// warning above [Config.ClockSkewWarning] (2 s), and the [Collector]
// exports it as unstuck_clock_skew_seconds.
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
// audit trail. They and the step machine are the only writers of an
// operation's state: the runner does not hand out its driver. To keep an
// action and the application's own writes (an audit entry) in one
// transaction, run it in [Runner.WithinTx] and read with [Runner.GetTx].
// [Runner.Reconcile], run periodically by the leader, calls
// Verify for stuck and recently finished operations, records findings and
// raises the operation to review_required; it never changes a step.
// Resolving the operation accepts its findings: the same difference (the
// same [sagadriver.Finding] Fingerprint: kind, step and the facts compared) is never
// raised again, and a new one reopens the operation with a finding that
// names the accepted one and says what changed. [NewCollector] exports
// Prometheus gauges.
//
// # Tracing
//
// [Config.TracerProvider] records an OpenTelemetry span around each call of
// a step's Do ([SpanStep]), Compensate ([SpanCompensate]) and Verify
// ([SpanVerify]), with the operation's ID and type, the step and the
// attempt; never the input, a result or an error's text. Nil, the default,
// runs no tracing code.
package saga
