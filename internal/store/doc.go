// Package store is the operations console's persistence: its users and
// sessions, and a read model of the idempotency engine's records (lists,
// counts, detail) on PostgreSQL or SQLite.
//
// # Opening and migrating
//
// A [DB] wraps the pool or handle the engine's driver uses, so that the
// console reads the same tables: [NewPostgres] on the pgx pool of
// idem/idempgx (tables in the pool's search_path), [NewSQLite] on the
// *sql.DB of idem/idemsqlite's Open. [DB.Migrate] applies the console's
// migration line ("console" in the unstuck_migration table the drivers
// keep) and must run after the driver's own Migrate:
//
//	if err := idempgx.New(pool).Migrate(ctx); err != nil { … }
//	db := store.NewPostgres(pool)
//	if err := db.Migrate(ctx); err != nil { … }
//
// The console's migration creates unstuck_console_user, the "sessions"
// table that scs's pgxstore or sqlite3store expects ([DB.SessionStore]),
// and read-model indexes on unstuck_idem_record.
//
// # Reading the engine's records
//
// The store never writes an engine table: every change of a record goes
// through the engine. [DB.ListKeys] pages records by keyset on
// (updated_at, id), newest change first, with filters that each have an
// index in that order, so a page costs the same at any depth and table
// size. [DB.KeyOverview] counts per status without counting the table: up
// to a cap exactly, beyond it from PostgreSQL's statistics, flagged as
// estimates with the time they were gathered. Records come back as
// idem.Record exactly as the drivers read them, ReadAt being the query's
// clock (the database's on PostgreSQL, the process's on SQLite).
//
// # Errors
//
// Absence is reported by (v, ok, err) on reads and by an error matching
// [ErrNotFound] on writes. Refused arguments are *[FieldError] values
// matching [ErrInvalid] (and [ErrInvalidCursor] for a bad cursor); a taken
// username matches [ErrConflict], recognised by SQLSTATE 23505 or SQLite's
// extended code 2067.
package store
