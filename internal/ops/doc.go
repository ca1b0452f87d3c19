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
package ops
