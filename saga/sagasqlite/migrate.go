package sagasqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

// migrations holds the "saga" migration line. go:embed only works on a
// package-level variable; it is read-only and so is not shared state.
//
//go:embed migration/saga/*.sql
var migrations embed.FS

// createMigrationTable is run before every migration: the bookkeeping table
// records which version of which line has been applied, and when (Unix
// microseconds, UTC).
const createMigrationTable = `CREATE TABLE IF NOT EXISTS unstuck_migration (
    line       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (line, version)
)`

// migration is one up file of a migration line.
type migration struct {
	version int64
	name    string
	sql     string
}

// migrate applies, in version order, every NNN_name.up.sql file at the root
// of fsys that unstuck_migration does not list for line. Each file runs in
// its own BEGIN IMMEDIATE transaction together with its bookkeeping row, and
// is skipped if the row is found once the write lock is held, so concurrent
// callers on the same file (in one process or several) apply each migration
// exactly once. Files ending in .down.sql are ignored; any other file name is
// an error, so that a misnamed migration is never silently skipped.
func migrate(ctx context.Context, db *sql.DB, line string, fsys fs.FS) error {
	migrations, err := readMigrations(fsys)
	if err != nil {
		return fmt.Errorf("read %s migrations: %w", line, err)
	}
	if _, err := db.ExecContext(ctx, createMigrationTable); err != nil {
		return fmt.Errorf("create migration table: %w", err)
	}
	for _, m := range migrations {
		err := immediate(ctx, db, func(conn *sql.Conn) error {
			var one int
			err := conn.QueryRowContext(ctx,
				`SELECT 1 FROM unstuck_migration WHERE line = ? AND version = ?`,
				line, m.version).Scan(&one)
			if err == nil {
				return nil // applied already, perhaps by a concurrent caller
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("check applied: %w", err)
			}
			if _, err := conn.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx,
				`INSERT INTO unstuck_migration (line, version, name, applied_at) VALUES (?, ?, ?, ?)`,
				line, m.version, m.name, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("record version: %w", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("apply %s migration %03d_%s: %w", line, m.version, m.name, err)
		}
	}
	return nil
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
		if e.IsDir() {
			return nil, fmt.Errorf("unexpected directory %q", e.Name())
		}
		name := e.Name()
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
	if !ok || name == "" || digits == "" {
		return migration{}, bad
	}
	version, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || version <= 0 || strings.TrimLeft(digits, "0123456789") != "" {
		return migration{}, bad
	}
	return migration{version: version, name: name}, nil
}

// immediate runs fn in a BEGIN IMMEDIATE transaction on one connection of
// db, and commits if fn returns nil. BEGIN IMMEDIATE takes the write lock at
// once, waiting for it under busy_timeout. COMMIT runs without ctx's
// cancellation; if ROLLBACK fails the connection is discarded.
func immediate(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer func() {
		if cerr := conn.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = errors.Join(err, fmt.Errorf("release connection: %w", cerr))
		}
	}()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin immediate: %w", err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr), conn.Raw(func(any) error { return driver.ErrBadConn }))
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
}
