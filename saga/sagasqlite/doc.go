// Package sagasqlite is the SQLite driver of package saga on database/sql
// (modernc.org/sqlite, no cgo): a [sagadriver.Driver] over a *sql.DB, for
// a River client built with riversqlite on the same handle, so that the
// operation records and River's jobs commit in one transaction.
//
//	db, err := idemsqlite.Open("app.db") // WAL and a busy timeout; any modernc.org/sqlite handle will do
//	if err != nil {
//		return err
//	}
//	db.SetMaxOpenConns(1)
//	driver := sagasqlite.New(db)
//	if err := driver.Migrate(ctx); err != nil { // the engine's tables
//		return err
//	}
//	migrator, err := rivermigrate.New(riversqlite.New(db), nil)
//	if err != nil {
//		return err
//	}
//	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil { // River's
//		return err
//	}
//	runner, err := saga.NewRunner(driver, saga.Config{Definitions: defs})
//
// The New example is a complete program; package saga's Definition
// examples run operations end to end on this driver.
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
