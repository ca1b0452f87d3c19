// Package store is the operations console's persistence: its users and
// sessions, and (until the saga drivers own them) a read model of the saga
// engine's operations, on PostgreSQL, SQLite or MySQL. It reads no table
// of the idempotency engine: the console reads key records through the
// driver's idemdriver.Admin (idem/idempgx, idem/idemsqlite or
// idem/idemmysql), which owns them and every index they have.
//
// # Opening and migrating
//
// A [DB] wraps the pool or handle the engine's driver uses: [NewPostgres]
// on the pgx pool of idem/idempgx (tables in the pool's search_path),
// [NewSQLite] on the *sql.DB of idem/idemsqlite's Open, [NewMySQL] on the
// *sql.DB of idem/idemmysql's Open (sessions in a store of its own, as scs
// has no MySQL store among this module's dependencies). [DB.Migrate]
// applies the console's migration line ("console" in the unstuck_migration
// table the drivers keep), which creates unstuck_console_user and the
// "sessions" table that scs's pgxstore or sqlite3store expects
// ([DB.SessionStore]); it touches no engine table and needs no other line
// first. "console migrate" runs the driver's line first all the same:
//
//	if err := idempgx.New(pool).Migrate(ctx); err != nil { … }
//	db := store.NewPostgres(pool)
//	if err := db.Migrate(ctx); err != nil { … }
//
// # Snapshots
//
// [DB.WriteSnapshot] writes a snapshot of counts per state and incident
// groups (computed by package incident) as the leader: on PostgreSQL under
// pg_try_advisory_xact_lock, on MySQL under GET_LOCK (one per database),
// so that of several consoles one writes; every
// write is an idempotent upsert, so no snapshot double-counts. [DB.Trends],
// [DB.IncidentGroups], [DB.IncidentGroup], [DB.IncidentHours] and
// [DB.IncidentTotals] read them back for the pages and the metrics.
//
// # Errors
//
// Absence is reported by (v, ok, err) on reads and by an error matching
// [ErrNotFound] on writes. Refused arguments are *[fielderr.Error] values
// matching [ErrInvalid] (and [ErrInvalidCursor] for a bad cursor); a taken
// username matches [ErrConflict], recognised by SQLSTATE 23505, SQLite's
// extended code 2067 or MySQL's error 1062.
package store
