// Package idemmysql is the MySQL and MariaDB store of package idem: an
// [idemdriver.TxStore] with the admin reads ([idemdriver.Admin]) and
// seeding ([idemdriver.Seeder]), on MySQL 8.0.16 or later or MariaDB 10.6
// or later (tested on MariaDB 10.11), InnoDB, with
// github.com/go-sql-driver/mysql.
//
//	db, err := idemmysql.Open("mysql://app:secret@db:3306/app") // or "app:secret@tcp(db:3306)/app"
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	store := idemmysql.New(db)
//	if err := store.Migrate(ctx); err != nil {
//		return err
//	}
//	engine, err := idem.New(store, idem.Config{Secret: secret})
//	if err != nil {
//		return err
//	}
//	res, err := idem.Run(ctx, engine, key, scope, sendReceipt, nil) // or idem.NewMiddleware(engine, …)
//
// The DSN must name a database that exists ("/app" above): [Open] refuses
// one without, and [Store.Migrate] creates the store's tables in it. The
// Open example is a complete program.
//
// # Open and the start-up check
//
// [Open] takes a go-sql-driver DSN or a mysql:// URL and sets on every
// connection what the store relies on: sql_mode [SQLMode] (strict: a value
// too long for its column is an error, never truncated), time_zone
// '+00:00' and parseTime in UTC. It then runs [Check], which refuses, with
// an error naming the setting, a server too old, a session that is not
// strict or has autocommit off, and innodb_flush_log_at_trx_commit other
// than 1. [Store.Migrate] runs Check too, for a handle opened otherwise.
//
// # Guarantees
//
// Atomicity: the unique key on (scope, operation, key_digest) decides who
// owns a key; a repeat reads the record and writes nothing; a first
// request is one INSERT in autocommit, whose trigger takes the fence.
// Fences come from an AUTO_INCREMENT counter (table unstuck_idem_fence) and strictly
// increase across all records, even after a key is forgotten; MySQL 8 and
// MariaDB 10.2.4+ keep the counter across restarts, and the table always
// keeps its highest row besides. Every owner's write is a compare-and-swap
// on owner token and fence.
//
// Durability: a call returns after InnoDB committed. That survives a
// crash of the server or the machine only with
// innodb_flush_log_at_trx_commit=1 (the default, which Check demands) and,
// on a replicated setup, with the replication your durability needs
// (semi-synchronous or Galera): an asynchronous replica promoted after a
// failover may lack the last records.
//
// Time: leases and retention are judged by the database's clock
// (UTC_TIMESTAMP(6), in Unix microseconds, independent of time_zone), as
// on PostgreSQL, so application hosts need no synchronised clocks. A
// record's ReadAt is the database's clock at the read.
//
// Identifiers are byte-exact: scope, operation and the references are
// VARBINARY, so "Acme" and "acme", or "a" and "a ", are different scopes
// whatever the database's default collation.
//
// # Transactional mode
//
// [Store.WithinTx] runs the application's writes and the record's in one
// READ COMMITTED transaction, which the application reaches with [TxFrom];
// [Store.Tx] puts the store's primitives on a transaction the caller
// began (any isolation level). Two things differ from PostgreSQL: InnoDB
// checks foreign keys at once, never at COMMIT, and DDL (CREATE, ALTER,
// DROP, TRUNCATE) commits the transaction implicitly, so the handler must
// not run any.
//
// # Migrations
//
// Migrate applies the embedded "idem" migration line and records it in
// unstuck_migration, under the server-wide lock GET_LOCK('unstuck_migration').
// MySQL commits each DDL statement on its own, so a migration is not
// atomic: every statement of ours is safe to run again, and a Migrate
// interrupted by a crash is finished by the next call. The migration
// creates a trigger (Reserve takes its fence in its INSERT): with binary
// logging on (MySQL 8's default), the migrating user needs the SUPER (or,
// on MySQL 8, SET_USER_ID) privilege, or the server
// log_bin_trust_function_creators=ON, else it fails with error 1419. Use
// row-based binary logging (MySQL 8's default).
//
// # MySQL 8 and MariaDB
//
// The store uses only what both have: no RETURNING, no sequences, no
// partial indexes, no CREATE INDEX IF NOT EXISTS. Each write that must
// hand a record back reads it in the same transaction; Extend returns the
// new lease end through LAST_INSERT_ID(expr). Nothing the store returns
// differs between the two.
//
// # Admin reads
//
// The admin reads count every status exactly (KeyOverview), from the
// (status, updated_at, id) index, so the overview's cost grows with the
// table (PostgreSQL's store estimates past a cap; this one does not yet).
package idemmysql
