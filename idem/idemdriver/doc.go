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
//
// A store judges time by its own clock unless a params struct carries a
// non-zero Now, and must pass the exported conformance suite in package
// idemtest (one test file). The drivers shipped with unstuck are
// idem/idempgx (PostgreSQL on pgx v5) and idem/idemsqlite (SQLite); each
// owns its tables, their indexes and migrations, and every read and write
// of them.
package idemdriver
