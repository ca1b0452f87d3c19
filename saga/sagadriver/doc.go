// Package sagadriver is the contract between package saga and a database,
// as River's riverdriver is River's: the [Driver] interface a store author
// implements, the records it stores ([Operation], [StepRecord], [Event],
// [Finding]) with their statuses, and the [Admin] read contract that
// consoles, search and bulk tools read operations through. An application
// calls package saga and names the records, statuses, step kinds and error
// classes from here (sagadriver.Operation, sagadriver.Pivot,
// sagadriver.ClassPermanent), as a River application names
// rivertype.JobRow: one type for the runner's API and the drivers, no
// aliases (docs/conventions.md in the repository).
//
// Drivers: saga/sagapgx (PostgreSQL on pgx) and saga/sagasqlite (SQLite
// on database/sql). The package that creates the tables is the only one
// that reads or writes them: every index, migration and query of the saga
// records lives in the driver. saga/sagatest is the conformance suite a
// driver runs from one test file.
//
// # Who writes
//
// Only the step machine of package saga writes operation state, through
// the Driver's write methods in its own transactions. Nothing else calls
// them: operator actions go through the runner's operator API (RetryStep,
// ConfirmStep, StartCompensation, Resolve and their …Tx forms). The one
// exception is [Importer], for benchmarks and imports.
//
// # Why the admin reads take no transaction
//
// The [Admin] methods run on the driver's own pool, each in a read-only
// transaction it begins and ends (a REPEATABLE READ snapshot on
// PostgreSQL, so a detail's steps, events and findings agree with its
// operation). A console reads outside any transaction of its own, as River
// UI reads through riverdriver's executor on the pool; a read that had to
// share a caller's transaction would hold it, and on SQLite with one
// connection would wait for itself. Decisions that must commit with the
// caller's work go through the runner's …Tx methods, never through Admin.
package sagadriver
