// Package idemdriver is the contract between the idempotency engine
// (package idem) and a database, as River's riverdriver is for River: what
// a store author implements and nothing an application calls.
//
//   - [Store]: the atomic primitives the engine's decision table runs on
//     (reserve, take over, complete, annotate, release, extend, settle,
//     sweep), each a compare-and-swap on the owner token and fence.
//   - [TxStore]: a Store that can share a transaction with the
//     application's own writes (the middleware's transactional mode).
//   - [LocalStore]: a Store on an embedded database, bounded by
//     [CallDeadline] instead of a context deadline.
//   - [DeadlineOnly]: whether nothing but its deadline ends a call's
//     context, so that a store may enforce the deadline by cheaper means
//     than watching the context (idempgx: on the socket).
//   - [Admin]: the reads of operators and their tools (the console,
//     search, bulk decisions): [KeyFilter] lists with keyset pages
//     ([KeyPage], [EncodeCursor]), look-ups by ID and digest, counts per
//     status with their exactness ([KeyOverview]), the needs-attention
//     list and iteration in batches. [KeyFilter.Check] validates a filter
//     the same way for every driver, refusing a field with a
//     [*FieldError].
//   - [Seeder]: loading records as they are, for benchmarks and imports,
//     around the engine.
//
// A store judges time by its own clock unless a params struct carries a
// non-zero Now, and must pass the exported conformance suite in package
// idemtest (one test file). The drivers shipped with unstuck are
// idem/idempgx (PostgreSQL on pgx v5) and idem/idemsqlite (SQLite); each
// owns its tables, their indexes (including those its Admin reads need)
// and migrations, and every read and write of them. idemtest.RunAdmin is
// the conformance suite of Admin.
package idemdriver
