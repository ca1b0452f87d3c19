// Package ops applies the console's operator decisions on idempotency keys
// ([Keys]) and saga operations ([Operations]).
//
// Every decision is one transaction, the same for keys and operations:
// begin a transaction of the database's native type (a [DB] built by
// [Postgres] or [SQLite]), read the item and check its version, apply the
// engine's transition on that transaction (the idempotency store bound to
// it, or the saga runner's …Tx method), append the audit entry on it, and
// commit. The decision and its entry commit together or not at all.
// Refused attempts (stale, illegal, forbidden) are audited too, in a
// transaction of their own.
//
// # Bulk decisions and approvals
//
// [Bulks] decides on everything a list's filter matches (SPEC K12): a
// request fixes its items and their versions, waits for a second person's
// approval if [Approval] says so (K13), and is then run by [Bulks.Run], a
// River job of kind [BulkArgs] in the console process. Each item goes
// through the same transaction as a single decision, which first sets the
// item's outcome in the console's bulk tables (store.DB.MarkBulkItemTx):
// a stale item is skipped, never forced, and a run resumed after a crash,
// or two runs at once, decide no item twice.
package ops
