// Package idemsqlite is the SQLite driver of unstuck: an [idemdriver.Store] on
// modernc.org/sqlite, a pure-Go SQLite that needs no cgo.
//
// SQLite is the embedded, single-host default. Every process that uses the
// store opens the same database file on one host; for several hosts, use the
// PostgreSQL driver instead.
//
// # Opening, migrating, constructing
//
// [Open] opens a database file with the settings the store needs (WAL
// journal, a busy timeout so that concurrent writers wait for each other).
// [Store.Migrate] creates or upgrades the tables and is safe to call on
// every start, even from several processes at once. [New] makes the store:
//
//	db, err := idemsqlite.Open("unstuck.db")
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	store := idemsqlite.New(db)
//	if err := store.Migrate(ctx); err != nil {
//		return err
//	}
//	engine, err := idem.New(store, idem.Config{Secret: secret})
//
// The New example is a complete program: it opens a file, migrates it and
// runs a key twice, the second call replayed.
//
// A caller that opens the *sql.DB itself, with driver name "sqlite", must
// set busy_timeout on every connection, for instance with the DSN parameter
// _pragma=busy_timeout(10000): without it a writer that finds the database
// locked fails at once with SQLITE_BUSY. WAL mode is strongly advised.
//
// # Clock
//
// The store judges leases and retention by the clock of the process that
// calls it, since SQLite is embedded and all its writers run on one host;
// a params struct with a non-zero Now replaces it (tests only). Times are
// stored as Unix microseconds, UTC, so records come back truncated to the
// microsecond.
//
// # Deadlines
//
// Every call honours its context's deadline: waiting for the store's
// writer slot, for SQLite's write lock (the busy timeout) and for the
// statement itself. The Store is an idemdriver.LocalStore: the idem engine does
// not set a context deadline on its calls (which would make database/sql
// and modernc.org/sqlite start a goroutine per statement) but passes its
// store timeout (idem.Config.StoreTimeout, 5 s by default) as an
// idemdriver.CallDeadline, which bounds the wait for the writer slot; the wait
// for another handle's write lock is bounded by the busy timeout (10 s
// with [Open]). A context deadline on the write statements as well was
// measured at +70 % CPU per first request, so it is not set.
//
// # Transactions and fences
//
// Reserve reads first and, on a miss, runs one INSERT … ON CONFLICT DO
// NOTHING that takes its fence from the counter row in the same statement
// (a trigger stores it back). The engine's lean Reserve runs that INSERT
// first while most of the Store's keys are new, so that a first request
// is two statements (the INSERT and the completing UPDATE), and reads
// first while more than half of its Reserves find a record. Takeover and
// Sweep run in BEGIN IMMEDIATE transactions, which take the write lock at
// once: a deferred transaction that upgrades to a write can fail with
// SQLITE_BUSY whatever the busy timeout. The other writes are single
// statements, atomic on their own. SQLite has one writer at a time, so a
// [Store] queues its own writers in the process and leaves the busy
// timeout to arbitrate with other handles and processes; reads never wait
// for writers. Fences come from one counter row incremented in the
// statement or transaction that stores them, so they strictly increase
// across all records, even after a record is deleted and reserved again.
//
// # Transactional mode
//
// The Store is also an [idemdriver.TxStore]. [Store.WithinTx] begins a
// *sql.Tx that holds the write lock from its start (as BEGIN IMMEDIATE) and
// hands fn an idemdriver.Store that writes the record in it; the
// application reaches the same *sql.Tx with [TxFrom] and writes its own
// rows through it, or starts a saga in it (sagasqlite's transactions are
// *sql.Tx), so that the record and the business write commit together
// (SPEC IDEM-H17). WithinTx commits when fn returns nil and rolls back
// otherwise:
//
//	err := store.WithinTx(ctx, func(ctx context.Context, tx idemdriver.Store) error {
//		sqlTx, _ := idemsqlite.TxFrom(ctx)
//		if _, err := sqlTx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", id); err != nil {
//			return err
//		}
//		return tx.Complete(ctx, ident, owner, completion)
//	})
//
// This serialises writes: the transaction holds the database's write lock
// until fn returns, so every other writer, of this Store or of any other
// handle or process, waits for it. Keep fn short and make no network call
// inside it.
//
// When the caller owns the transaction instead (River style), [Store.Tx]
// binds the store's primitives to it: store.Tx(tx).Settle(…) runs inside
// tx, never commits, and commits or rolls back with the caller's own
// writes. tx must hold the write lock from BEGIN (a handle opened with the
// DSN parameter _txlock=immediate begins its *sql.Tx so), or a read
// followed by a write can fail with SQLITE_BUSY whatever the busy timeout.
//
// # Migrations
//
// The schema is kept in embedded migration files, migration/idem/NNN_name.up.sql
// with a matching .down.sql. The table unstuck_migration records which
// version of which line ("idem" here) has been applied. The line creates
// every index of the table, including those of the admin reads.
//
// # Admin reads and seeding
//
// The Store is also an [idemdriver.Admin], the contract the operations
// console reads records through (lists with filters and keyset pages,
// look-ups, counts per status, the needs-attention list, iteration in
// batches), and an [idemdriver.Seeder] for benchmarks and imports. Reads
// run on the handle outside any transaction and judge leases by the
// process clock; every count is exact.
package idemsqlite
