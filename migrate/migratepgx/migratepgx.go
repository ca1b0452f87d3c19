// Package migratepgx applies a migration line ([migrate]) on PostgreSQL
// through pgx. It is the only runner that imports pgx, so that the
// database/sql stores do not link it.
package migratepgx

import (
	"context"
	"fmt"
	"io/fs"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/migrate"
)

// pgMigrationLockID is the drivers' advisory lock key ("unstuck" in ASCII,
// in the high bytes); every line on one
// PostgreSQL database takes it, so no two lines migrate at once.
const pgMigrationLockID int64 = 0x756e737475636b00

// pgCreateMigrationTable is the bookkeeping table on PostgreSQL; existing
// databases hold it as written here, word for word.
const pgCreateMigrationTable = `CREATE TABLE IF NOT EXISTS unstuck_migration (
    line       text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (line, version)
)`

// Migrate applies, in version order, every NNN_name.up.sql file at the
// root of fsys that unstuck_migration does not list for line, each with its
// bookkeeping row, all in one transaction that first takes the drivers'
// advisory lock. Concurrent callers wait for each other and the later ones
// find everything applied; a failing file rolls back the whole call.
//
// Under a context from [migrate.CheckOnly] it applies nothing and takes no lock:
// it returns a [*migrate.BehindError] when a migration is not applied, else nil.
func Migrate(ctx context.Context, pool *pgxpool.Pool, line string, fsys fs.FS) error {
	ms, err := migrate.Read(fsys)
	if err != nil {
		return fmt.Errorf("read %s migrations: %w", line, err)
	}
	if migrate.Checking(ctx) {
		var exists bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass('unstuck_migration') IS NOT NULL`).Scan(&exists); err != nil {
			return fmt.Errorf("look for the migration table: %w", err)
		}
		var applied []int32
		if exists {
			rows, err := pool.Query(ctx, `SELECT version FROM unstuck_migration WHERE line = $1`, line)
			if err != nil {
				return fmt.Errorf("read applied versions: %w", err)
			}
			if applied, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
				return fmt.Errorf("read applied versions: %w", err)
			}
		}
		return migrate.Behind(line, ms, applied)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, pgMigrationLockID); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, pgCreateMigrationTable); err != nil {
			return fmt.Errorf("create migration table: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT version FROM unstuck_migration WHERE line = $1`, line)
		if err != nil {
			return fmt.Errorf("read applied versions: %w", err)
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("read applied versions: %w", err)
		}
		for _, m := range ms {
			if slices.Contains(applied, int32(m.Version)) {
				continue
			}
			// No arguments: pgx sends the file in the simple protocol, which
			// allows several statements.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply %s migration %03d_%s: %w", line, m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO unstuck_migration (line, version, name) VALUES ($1, $2, $3)`,
				line, m.Version, m.Name); err != nil {
				return fmt.Errorf("record %s migration %03d_%s: %w", line, m.Version, m.Name, err)
			}
		}
		return nil
	})
}
