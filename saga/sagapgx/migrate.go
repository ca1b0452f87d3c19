package sagapgx

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations holds the "saga" migration line. go:embed only works on a
// package-level variable; it is read-only and so is not shared state.
//
//go:embed migration/saga/*.sql
var migrations embed.FS

// migrationLockID is the key of the transaction-level advisory lock that
// serialises every migration of every line on one database, the same as
// driver/pgxv5's ("unstuck" in
// ASCII, in the high bytes). It is per database, not per schema: migrations
// of different schemas wait for each other too, which costs little.
const migrationLockID int64 = 0x756e737475636b00

// createMigrationTable is run, under the lock, before every migration: the
// bookkeeping table records which version of which line has been applied.
const createMigrationTable = `CREATE TABLE IF NOT EXISTS unstuck_migration (
    line       text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (line, version)
)`

// migration is one up file of a migration line.
type migration struct {
	version int
	name    string
	sql     string
}

// migrate applies, in version order, every NNN_name.up.sql file at the root
// of fsys that unstuck_migration does not list for line, each with its
// bookkeeping row, all in one transaction that first takes an advisory lock:
// concurrent callers, in one process or several, wait for each other, and
// the later ones find everything applied. A failing file rolls back the
// whole call. Files ending in .down.sql are ignored; any other file is an
// error, so that a misnamed migration is never silently skipped.
func migrate(ctx context.Context, pool *pgxpool.Pool, line string, fsys fs.FS) error {
	migrations, err := readMigrations(fsys)
	if err != nil {
		return fmt.Errorf("read %s migrations: %w", line, err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockID); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, createMigrationTable); err != nil {
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
		for _, m := range migrations {
			if slices.Contains(applied, int32(m.version)) {
				continue
			}
			// No arguments: pgx sends the file in the simple protocol, which
			// allows several statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply %s migration %03d_%s: %w", line, m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO unstuck_migration (line, version, name) VALUES ($1, $2, $3)`,
				line, m.version, m.name); err != nil {
				return fmt.Errorf("record %s migration %03d_%s: %w", line, m.version, m.name, err)
			}
		}
		return nil
	})
}

// readMigrations returns the up migrations at the root of fsys sorted by
// version, and an error for a duplicate version or an unexpected file.
func readMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			return nil, fmt.Errorf("unexpected directory %q", name)
		}
		if strings.HasSuffix(name, ".down.sql") {
			continue
		}
		m, err := parseMigrationName(name)
		if err != nil {
			return nil, err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		m.sql = string(body)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("duplicate version %d: %s and %s", out[i].version, out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// parseMigrationName parses NNN_name.up.sql into a version and a name.
func parseMigrationName(file string) (migration, error) {
	bad := fmt.Errorf("unexpected file %q: want NNN_name.up.sql or NNN_name.down.sql", file)
	base, ok := strings.CutSuffix(file, ".up.sql")
	if !ok {
		return migration{}, bad
	}
	digits, name, ok := strings.Cut(base, "_")
	if !ok || name == "" || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return migration{}, bad
	}
	version, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || version <= 0 {
		return migration{}, bad
	}
	return migration{version: int(version), name: name}, nil
}
