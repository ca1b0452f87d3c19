// Package ops applies the console's operator decisions on idempotency keys
// ([Keys]) and saga operations ([Operations]).
//
// Every decision is one transaction, the same for keys and operations:
// begin a transaction of the database's native type (a [DB] built by
// [Postgres], [SQLite] or [MySQL]), read the item and check its version,
// apply the engine's transition on that transaction (the idempotency store
// bound to it, or the saga runner's …Tx method), write the console's rows
// of the decision on it (a tombstone, a bulk item's outcome), append the
// audit entry on it, and commit. The decision and its entry commit
// together or not at all. Refused attempts (stale, illegal, forbidden) are
// audited too, in a transaction of their own.
//
// The types are generic in that transaction type, TTx: pgx.Tx on
// PostgreSQL, *sql.Tx on SQLite and MySQL. A decision reads straight
// through: [Keys.Decide] → Keys.decideTx → DB.within, whose function gets
// the typed tx → the idempotency store bound to it, the console store's
// …Tx methods (store.PgxTx, store.SQLTx) → DB.appendTx, last. Operations
// go through [Operations.Decide] → Operations.decide the same way. Keys
// kept outside the database (Redis, [NewKeysOnStore]) take the one branch
// in Keys.decide to Keys.decideOutside.
//
// # Decision events
//
// With [DB.EmitEvents], an applied decision's audit entry is appended by
// DB.appendDecision, which also inserts the decision's event (package
// decision, SPEC K26) in the same transaction, on the applications' River
// tables: its ID from the entry's seq ([EventID]), its Previous the newest
// earlier entry on the same target that emitted one (the entry's After
// carries a marker for it). A decision on a Redis key emits with its
// outcome entry (Keys.appendOutcome).
//
// # Bulk decisions and approvals
//
// [Bulks] decides on everything a list's filter matches (SPEC K12): a
// request fixes its items and their versions, waits for a second person's
// approval if [Approval] says so (K13), and is then run by [Bulks.Run], a
// River job of kind [BulkArgs] in the console process. Each item goes
// through the same transaction as a single decision, which first sets the
// item's outcome in the console's bulk tables (MarkBulkItemTx of
// store.PgxTx or store.SQLTx): a stale item is skipped, never forced, and
// a run resumed after a crash, or two runs at once, decide no item twice.
// [NewBulks] takes everything at construction ([BulkParts]); the jobs of
// its runs are inserted through an [Enqueuer], which an insert-only River
// client on the console's tables can be, built before the client whose
// workers run them.
package ops
