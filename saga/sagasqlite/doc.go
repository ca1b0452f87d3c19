// Package sagasqlite is the SQLite driver of package saga on database/sql
// (modernc.org/sqlite, no cgo): a [sagadriver.Driver] over a *sql.DB, for
// a River client built with riversqlite on the same handle, so that the
// operation records and River's jobs commit in one transaction.
//
// As riversqlite advises, give the handle one connection
// (db.SetMaxOpenConns(1)): every transaction then waits its turn in the
// pool rather than failing with SQLITE_BUSY. With one connection, never hold
// a transaction of your own while waiting for the engine or River to act
// (for instance, do not call a non-Tx method of the runner inside the
// transaction you pass to a Tx method): that waits for itself.
//
// Times are stored as Unix microseconds (UTC), JSON as text. SQLite has no
// clock of its own (its 'now' is the process's), so the records' times are
// the process clock: the database's clock, for every process on the file.
//
// The driver owns its tables: their schema, every index (those the
// console's lists need too), the "saga" migration line and every query.
// The [sagadriver.Admin] methods run on the handle, each in a read-only
// transaction of its own; CountOperations always counts exactly, an
// embedded database holding few enough operations for that.
package sagasqlite
