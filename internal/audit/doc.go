// Package audit is the operations console's audit trail (SPEC CON-K7): an
// append-only, keyed hash-chained table of who did what to which item,
// why, with what result, on PostgreSQL, SQLite or MySQL 8 / MariaDB 10.6+.
//
// # Opening and migrating
//
// A [Trail] wraps the pool or handle the engine's driver uses:
// [NewPostgres] on the pgx pool of idem/idempgx (the table lives in the
// pool's search_path), [NewSQLite] on the *sql.DB of idem/idemsqlite's Open,
// [NewMySQL] on the *sql.DB of idem/idemmysql's Open.
// [Trail.Migrate] applies the "audit" migration line, kept in the
// unstuck_migration table the drivers and the console share; it does not
// depend on the other lines.
//
// # Recording decisions
//
// An applied decision is recorded in the transaction that applies it, so
// that the entry and the change commit together or not at all. The caller
// begins and owns that transaction, in the database's native type, and
// passes it, River style: [Trail.AppendPgxTx] takes a pgx.Tx,
// [Trail.AppendSQLiteTx] and [Trail.AppendMySQLTx] a database/sql
// transaction ([Executor]):
//
//	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
//	…
//	defer tx.Rollback(ctx)
//	… // check the version, apply the transition on tx (idempgx's Store.Tx(tx), a saga runner's …Tx)
//	_, err = trail.AppendPgxTx(ctx, tx, audit.Entry{
//		Actor: user, Role: role, Action: "key.forget", TargetKind: "key", TargetID: id,
//		Reason: reason, Before: before, After: after, Outcome: audit.OutcomeApplied,
//		RequestID: reqID, ClientAddr: addr, UserAgent: ua,
//	})
//	…
//	err = tx.Commit(ctx) // both, or neither
//
// The console's decisions (package internal/ops) are built so. What commits
// nothing else — a denied (403) or conflicting (409) attempt, a viewed
// stored response, an export — is recorded with [Trail.Append], in a
// transaction of its own. Every append needs the audit key ([WithKeys]).
//
// Appends are serialised, so that the chain never forks: on PostgreSQL by
// pg_advisory_xact_lock(0x756e737461756474) taken in the caller's
// transaction and held to its end (so append last, just before the commit),
// on SQLite by the database's single writer, on MySQL by the one row of
// unstuck_audit_lock, locked FOR UPDATE in the caller's transaction and
// held to its end (append last there too). seq is the head's plus one,
// read under that serialisation rather than drawn from a sequence: a
// rolled-back append leaves no gap, and a gap always means a deleted entry.
// UNIQUE constraints on seq and prev_hash turn any append that escaped the
// serialisation into an error rather than a fork. The price is one commit
// at a time: on PostgreSQL with synchronous_commit on, appends are bounded
// by the WAL flush (a few hundred a second on a VM disk), ample for
// decisions people make, not meant for machine-rate events.
//
// # Time
//
// At is the database's clock on PostgreSQL (clock_timestamp(), read once
// the lock is held, so times follow seq unless the server's clock steps
// back). SQLite has no clock of its own worth the name: At is the
// process's clock, in microseconds, read once the write lock is held, as
// every timestamp of idem/idemsqlite. On MySQL At is the database's clock
// (UTC_TIMESTAMP(6), read after the lock). All are UTC, to the microsecond.
//
// # Append-only
//
// The migration installs triggers that make every UPDATE and DELETE fail,
// and on PostgreSQL every TRUNCATE too ("unstuck_audit_entry is
// append-only: … is not allowed"). The table's owner and superusers can
// still disable triggers, so on PostgreSQL the application should not own
// the table: run the migrations as an owner role, and let the application's
// role only read and insert:
//
//	-- as the owner of unstuck_audit_entry (the role that ran the migrations)
//	REVOKE ALL ON unstuck_audit_entry FROM PUBLIC;
//	REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON unstuck_audit_entry FROM unstuck_app;
//	GRANT SELECT, INSERT ON unstuck_audit_entry TO unstuck_app;
//
// (replace unstuck_app with the application's role). Without ownership or
// the TRIGGER privilege it cannot disable the triggers or drop the table,
// and advisory locks need no grant. On SQLite whoever can write the file
// can drop the triggers: keep the file's permissions to the console's user.
// On MySQL TRUNCATE and DROP skip the triggers: grant the console's user
// only SELECT and INSERT on unstuck_audit_entry (and SELECT, UPDATE on
// unstuck_audit_lock), never DROP or TRIGGER; the chain and the
// checkpoints detect what anyone with them changes.
//
// # Tamper evidence
//
// Each entry carries prev_hash, the previous entry's hash (32 zero bytes for
// seq 1), key_id, and hash = HMAC-SHA-256 of its canonical encoding,
// version 2, under the audit key that key_id names:
//
//	"unstuck/audit/entry/v2" as a length-prefixed string, then
//	seq and at (Unix microseconds, UTC) as big-endian int64, then
//	key_id, actor, role, action, target_kind, target_id, reason, before,
//	after, outcome, request_id, client_addr, user_agent and prev_hash,
//	each as a big-endian uint32 byte length followed by its bytes
//
// (before and after are the stored JSON text, empty when absent). The audit
// key ([Keyring], [WithKeys]; UNSTUCK_AUDIT_KEY for the console, with
// UNSTUCK_AUDIT_PREVIOUS_KEYS during a rotation) is held by the console
// only: not by the database, and not by the applications, which share
// UNSTUCK_SECRET with the console and may insert into this table. Without
// it nobody can append an entry that verifies, or rewrite one, even with
// the table in hand. A key ID ([KeyID]) is a short hash of its key, never
// the key. Appends, verifications and checkpoints fail with [ErrNoKey] on
// a trail without keys.
//
// Entries appended before the chain was keyed (migration 2 of the line)
// keep an empty key_id and verify as legacy links: hash = SHA-256 of
// encoding version 1 (the same without "v2"'s tag and key_id,
// [Entry.ComputeHash]). [Verification.KeyedFrom] says where the keyed part
// starts; the first keyed entry's MAC covers the last legacy hash, so the
// legacy part cannot be rewritten either, and after it an unkeyed entry is
// reported (the table also refuses inserting one, by a trigger).
//
// [Trail.Verify] walks the chain in seq order, a page per query, and
// reports the first seq that is missing or does not verify; `console audit
// verify --db URL` runs it and exits non-zero on a broken chain.
//
// A chain proves that its entries agree with each other, not that nobody
// who holds the key rewrote it, nor that its newest entries were not cut:
// a cut tail is consistent on its own. [Trail.Checkpoint] verifies the
// chain and records its head (seq, hash) with a MAC under the audit key,
// in the database and as a line to keep outside it (`console audit
// checkpoint`, on a schedule, into a log shipper or an object store).
// Verify with a kept checkpoint's [Checkpoint.Anchor] (after
// [Keyring.CheckCheckpoint]) reports a changed or missing checkpointed
// entry, even when the stored checkpoints were rewritten too; so does an
// [Anchor] printed by an earlier verification.
//
// # Reading
//
// [Trail.List] pages the trail newest first by keyset on seq, with filters
// by actor, action, target, outcome and time range, each served by an index
// in seq order; [Trail.History] is one item's entries. [Trail.Export]
// streams a filtered trail as CSV or JSON lines, a page per query. None of
// them records anything: auditing reads (PCI DSS 10.2.1.3) is the caller's
// Append with [OutcomeRead].
//
// # Errors
//
// A refused entry, filter, anchor or checkpoint text is a *[fielderr.Error]
// matching [ErrInvalid]; a database without the table matches [ErrNotMigrated]; a trail without
// keys [ErrNoKey].
package audit
