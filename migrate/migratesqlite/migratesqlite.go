// Package migratesqlite applies a migration line ([migrate]) on SQLite
// through database/sql, whichever SQLite driver opened the *sql.DB; it
// imports no driver. [Immediate] is the BEGIN IMMEDIATE transaction it
// applies each migration in, which the SQLite stores share for their
// writes.
package migratesqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/unstuckhq/unstuck/migrate"
)

// sqliteCreateMigrationTable is the bookkeeping table on SQLite; existing
// databases hold it as written here, word for word. applied_at is Unix
// microseconds, UTC.
const sqliteCreateMigrationTable = `CREATE TABLE IF NOT EXISTS unstuck_migration (
    line       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (line, version)
)`

// Migrate applies, in version order, every NNN_name.up.sql file at
// the root of fsys that unstuck_migration does not list for line. Each file
// runs in its own BEGIN IMMEDIATE transaction together with its bookkeeping
// row, and is skipped if the row is found once the write lock is held, so
// concurrent callers apply each migration exactly once.
//
// Under a context from [migrate.CheckOnly] it applies nothing: it returns a
// [*migrate.BehindError] when a migration is not applied, else nil.
func Migrate(ctx context.Context, db *sql.DB, line string, fsys fs.FS) error {
	ms, err := migrate.Read(fsys)
	if err != nil {
		return fmt.Errorf("read %s migrations: %w", line, err)
	}
	if migrate.Checking(ctx) {
		var exists bool
		if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'unstuck_migration')`).Scan(&exists); err != nil {
			return fmt.Errorf("look for the migration table: %w", err)
		}
		var applied []int32
		if exists {
			rows, err := db.QueryContext(ctx, `SELECT version FROM unstuck_migration WHERE line = ?`, line)
			if err != nil {
				return fmt.Errorf("read applied versions: %w", err)
			}
			defer rows.Close()
			for rows.Next() {
				var v int32
				if err := rows.Scan(&v); err != nil {
					return fmt.Errorf("read applied versions: %w", err)
				}
				applied = append(applied, v)
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read applied versions: %w", err)
			}
		}
		return migrate.Behind(line, ms, applied)
	}
	if _, err := db.ExecContext(ctx, sqliteCreateMigrationTable); err != nil {
		return fmt.Errorf("create migration table: %w", err)
	}
	for _, m := range ms {
		err := Immediate(ctx, db, func(conn *sql.Conn) error {
			var one int
			err := conn.QueryRowContext(ctx,
				`SELECT 1 FROM unstuck_migration WHERE line = ? AND version = ?`,
				line, m.Version).Scan(&one)
			if err == nil {
				return nil // applied already, perhaps by a concurrent caller
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("check applied: %w", err)
			}
			if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx,
				`INSERT INTO unstuck_migration (line, version, name, applied_at) VALUES (?, ?, ?, ?)`,
				line, m.Version, m.Name, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("record version: %w", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("apply %s migration %03d_%s: %w", line, m.Version, m.Name, err)
		}
	}
	return nil
}

// Immediate runs fn in a BEGIN IMMEDIATE transaction on one
// connection of db and commits if fn returns nil. BEGIN IMMEDIATE takes the
// write lock at once, waiting for it under busy_timeout, where a deferred
// transaction that upgrades to a write can fail with SQLITE_BUSY whatever
// the timeout. COMMIT and ROLLBACK run without cancellation; a connection
// whose ROLLBACK failed is discarded rather than returned to the pool.
func Immediate(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) error {
	return migrate.WithConn(ctx, db, func(conn *sql.Conn) (err error) {
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			return fmt.Errorf("begin immediate: %w", err)
		}
		committed := false
		defer func() {
			if committed {
				return
			}
			if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr), migrate.Discard(conn))
			}
		}()
		if err := fn(conn); err != nil {
			return err
		}
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		committed = true
		return nil
	})
}
