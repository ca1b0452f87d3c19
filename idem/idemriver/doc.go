// Package idemriver runs River jobs at most once per idempotency key
// (SPEC IDEM-J). It covers what River's unique jobs do not: a webhook
// delivered twice becomes two jobs, and a double dispatch inserts the same
// work again after the first job completed or was deleted. Package idem does
// not import River; this package is the bridge.
//
// # Installing
//
// Build one [Middleware] over an [idem.Engine] and install it in
// river.Config.Middleware, so that it runs on both sides: at insert time it
// copies the key of args implementing [Keyed] into the job's metadata, and
// when the job is worked it runs the worker through [idem.Run]:
//
//	store := idempgx.New(pool) // or another store of package idem
//	if err := store.Migrate(ctx); err != nil { // the idempotency records
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
//	engine, err := idem.New(store, idem.Config{Secret: secret})
//	if err != nil {
//		return err
//	}
//	config := &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}}, Workers: workers}
//	mw, err := idemriver.New(engine, idemriver.Config{DefaultTimeout: config.JobTimeout})
//	if err != nil {
//		return err
//	}
//	config.Middleware = append(config.Middleware, mw)
//	client, err := river.NewClient(riverDriver, config)
//
// The package's example is the same program on SQLite (riversqlite), with
// a webhook delivered twice and worked once.
//
// Args that do not implement Keyed can carry a key through [InsertOpts].
// A job without a key runs untouched.
//
// # How the key travels
//
// The key and its scope are stored in the job's metadata under
// [MetadataKey] and [MetadataScope]. This is the raw key, in clear, in
// River's own river_job table (and in anything that shows River jobs), for
// as long as River keeps the job; the idempotency store itself keeps only a
// digest ([idem.Digest]). The engine needs the raw key to compute that
// digest, and the worker middleware sees nothing but the job row, so the
// metadata is where it must travel. If a key is itself sensitive, derive
// it (hash it with a secret of your own) before returning it from
// [Keyed.IdempotencyKey].
//
// Each key belongs to the operation "river:<job kind>" ([Operation]), so
// the same key used by two kinds is two records. The fingerprint is the
// SHA-256 of the job's canonical JSON args: a second job with the same key
// and other args is a key reuse.
//
// # What happens to a job with a key
//
//   - The first delivery runs the worker under a lease. Success completes
//     the key. An error (or a panic) releases it and River retries the job
//     as usual; the next attempt runs the worker again.
//   - A duplicate delivered while the first runs is snoozed with
//     river.JobSnooze for [Config].ReleaseAfter (10 s by default, never longer
//     than the rest of the lease). A snooze does not consume an attempt.
//   - A duplicate delivered after completion completes without running the
//     worker.
//   - A key reused with other args fails with an error matching
//     [idem.ErrKeyReused], and the job is cancelled (river.JobCancel): no
//     retry can change the answer.
//   - A key completed unavailable (see below) fails every delivery with an
//     error matching [idem.ErrResultUnavailable]; River retries and finally
//     discards the job, and the worker never runs again for that key.
//
// # Runbook: a job failing with "result unavailable"
//
// The key is completed unavailable when the worker ran but its completion
// could not be stored as a result (SPEC R6, J4), or when an operator or a
// verifier confirmed the effect without one: the side effect may well have
// happened, so the job must not be run again blindly. (A completion that
// merely failed to be written is retried in the background and completes
// the job; see above.) The error names the
// key's safe id (the first 12 hex digits of its digest), which finds the
// record in the console.
//
//  1. Find the first attempt's error: in the job's errors (river_job.errors)
//     and in the record's last error in the console.
//  2. Check whether the side effect happened (the charge, the email, the
//     provisioned resource).
//  3. If it did, delete the job (or let River discard it): the work is done.
//  4. If it did not, forget the key in the console (or with
//     [idem.Engine.ForgetOperation] and the operation "river:<kind>"), then
//     retry the job (River UI, or Client.JobRetry). The next attempt runs
//     the worker.
//
// # Lease
//
// A delivery holds its key for a lease, which must outlast the worker's
// run: after it ends, a duplicate may take the key over and run the worker
// a second time (SPEC R8). The lease is, in order: [Config].Lease; else the
// worker's Timeout(job), for workers registered with [WorkerTimeoutOf];
// else the client's JobTimeout given to [Config].DefaultTimeout (River's 1
// minute if not given). A derived lease is clamped between [MinLease] and
// [MaxLease]; a timeout of -1 (none) gives [MaxLease].
//
// River applies a worker's timeout inside the middleware chain, after this
// middleware has reserved the key, so the middleware cannot read it from
// the job: register the workers whose Timeout differs from the client's.
// To keep the lease covering the run whatever the source, the middleware
// also cancels the worker's context when the lease ends; a worker that
// ignores cancellation can still outlive its lease.
//
// A process that dies mid-run leaves the key processing until its lease
// ends; River's rescuer retries the job after RescueStuckJobsAfter, and a
// delivery after the lease applies the recovery ([Config].Recovery): by
// default the key is escalated to pending for an operator and the job
// snoozes until it is resolved; with [idem.RecoverByRerunning] the
// delivery takes the key over and runs the worker again. Set
// RescueStuckJobsAfter above the lease, or the rescued job snoozes until
// the lease ends.
//
// A worker that succeeded but whose completion could not be written (the
// database restarted at that moment) completes its job all the same: the
// engine keeps writing the completion in the background and keeps the
// lease meanwhile, so duplicates snooze, then complete without running.
//
// # Snooze loops
//
// Snoozes do not count as attempts (River records them in the job's
// metadata under "snoozes"), so a duplicate waits as long as the key is
// held: at most until the first delivery's lease ends, after which the
// duplicate takes over. A key left pending by a worker that returned
// [idem.Uncertain] holds no lease: its duplicates snooze until the record is
// reconciled, resolved or forgotten.
//
// # Verification with the provider
//
// An operations console (unstuck's "console serve", a separate process)
// cannot call your code, so when an operator asks "did this key's effect
// happen?" it inserts a [VerifyArgs] job on your River tables, queue
// [VerifyQueue], and your workers answer it. Register one verifier per
// operation — the same [idem.Verifier] that [idem.RecoverByVerifying]
// takes — on a [VerifyWorker] and add it to your River client:
//
//	verify := idemriver.NewVerifyWorker(30 * time.Second)
//	err := verify.Register("POST /payments", "payments provider", idem.VerifierFunc(
//		func(ctx context.Context, a idem.Abandoned) (idem.Verification, error) {
//			ch, found, err := provider.FindCharge(ctx, a.ExternalRef) // or a key derived from a.KeyDigest
//			switch {
//			case err != nil:
//				return idem.Verification{}, err // unknown: the key stays, the error is shown
//			case !found:
//				return idem.Verification{Verdict: idem.VerdictNotHappened, Evidence: "no charge under " + a.ExternalRef}, nil
//			}
//			return idem.Verification{Verdict: idem.VerdictHappened, ExternalRef: ch.ID,
//				Evidence: fmt.Sprintf("charge %s of %d cents at %s", ch.ID, ch.Amount, ch.Created)}, nil
//		}))
//	err = idemriver.AddVerifyWorker(workers, riverConfig, verify) // adds the queue too
//
// The worker records the answer ([VerifyAnswer]) as the job's output
// (river.RecordOutput); the console reads it and decides in the name of
// the operator who asked, "via verifier <name>", with the answer in the
// audit entry: happened → the key completes with the reference (repeats
// get 409 idempotent_response_unavailable, never a second run); not
// happened → the key is released and the client's retry runs it once;
// unknown, an error, a panic, a timeout or an answer that makes no sense →
// nothing is decided and the answer is shown on the key's page. A key
// whose operation has no registered verifier says so. Evidence is shown
// as untrusted text, cut at [MaxEvidence] bytes: no secrets, no personal
// data. The job is unique per record version while it waits or runs, and
// River's rescuer runs it again if your process dies in the middle.
//
// # Logging
//
// The middleware logs nothing itself; the engine logs with its own logger
// and a safe key id. Errors returned to River (and stored in the job's
// errors) carry the safe key id, never the raw key.
//
// # Tracing
//
// [Config].TracerProvider records [SpanWork] around each keyed job, with the
// job's ID, kind, attempt and outcome and the key's safe ID; give the
// engine idem.Config.TracerProvider too for the decision beneath it. River's
// rivercontrib/otelriver traces every job, keyed or not.
package idemriver
