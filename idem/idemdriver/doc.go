// Package idemdriver is the contract between the idempotency engine
// (package idem) and a database, as River's riverdriver is for River: what
// a store author implements and nothing an application calls.
//
// # The required contract
//
// A store is a [Store]: ten atomic primitives on a [Record] named by an
// [Ident] — Reserve, Takeover, Complete, Annotate, Release, Extend, Get,
// Delete, Settle, Sweep. An owner's writes are compare-and-swaps on its
// [Owner] token and fence and answer [ErrFenced] when they no longer
// match; Settle compares the record's Version and answers [ErrStale].
// Fences strictly increase across the whole store, never repeating. A
// store judges leases and retention by its own clock unless a params
// struct carries a non-zero Now, is safe for concurrent use, and refuses an
// argument its database cannot hold with a *[FieldError] (matching
// [ErrInvalidArgument]), which the engine reports as an
// idem.ValidationError. That is all the engine needs: Run, Forget,
// Settle, Sweep and the HTTP middleware (but its transactional mode) work
// on any Store.
//
// Package idemtest proves it; a store's test file calls
//
//	idemtest.Run(t, func(t *testing.T) idemdriver.Store { return newStoreOnFreshTables(t) })
//
// Package idem/idemmem implements exactly this contract, in memory: the
// shortest complete store to read. "Writing a store" in docs/stores.md of
// the repository walks a third-party author through it.
//
// # Optional capabilities
//
// A store may also offer these; the engine finds each by a type assertion
// or passes a value the store may ignore, and works without it.
//
//   - [TxStore]: the middleware's transactional mode (the application's
//     writes commit with the record); suite idemtest.RunTransactional.
//   - [LocalStore] (with [CallDeadline]): an embedded database gets the
//     store timeout as a value instead of a context deadline.
//   - [DeadlineOnly]: a hint that only its deadline ends a call's context,
//     so the store may enforce it by cheaper means (idempgx: the socket).
//   - [ReserveParams.Lean] ([LeanFields]) and [Completion.RecordID]:
//     params fields a store may ignore, for a narrower read of a repeat
//     and a completion by primary key.
//   - [Admin]: the reads of operators and their tools (the console,
//     search, bulk decisions): [KeyFilter] lists with keyset pages
//     ([KeyPage], [EncodeCursor]), look-ups by ID and digest, counts per
//     status ([KeyOverview]), the needs-attention list and batches.
//     [KeyFilter.Check] validates a filter the same way for every driver;
//     suite idemtest.RunAdmin.
//   - [Seeder]: loading records as they are, for benchmarks and imports.
//
// The drivers shipped with unstuck — idem/idempgx, idem/idemsqlite,
// idem/idemmysql, idem/idemredis — each own their tables or keys, indexes
// and migrations, and every read and write of them.
package idemdriver
