// Package migrate applies embedded SQL migration lines — idem (the
// drivers), saga, console, audit — with one bookkeeping table,
// unstuck_migration (a row per applied version of a line), and on
// PostgreSQL one advisory lock, so that no two lines ever migrate at the
// same time. Rows of a line no binary applies any more (the console's
// former console_operations, whose indexes are saga's 003 now) stay and
// are never read: a check looks only at the lines it is given.
package migrate

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgMigrationLockID is the drivers' advisory lock key ("unstuck" in ASCII,
// in the high bytes); it must stay equal to idem/idempgx's.
const pgMigrationLockID int64 = 0x756e737475636b00

// pgCreateMigrationTable is idem/idempgx's bookkeeping table, word for word.
const pgCreateMigrationTable = `CREATE TABLE IF NOT EXISTS unstuck_migration (
    line       text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (line, version)
)`

// sqliteCreateMigrationTable is idem/idemsqlite's bookkeeping table, word for
// word; applied_at is Unix microseconds, UTC.
const sqliteCreateMigrationTable = `CREATE TABLE IF NOT EXISTS unstuck_migration (
    line       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (line, version)
)`

// migration is one up file of a migration line.
type migration struct {
	version int
	name    string
	sql     string
}

// Postgres applies, in version order, every NNN_name.up.sql file at the
// root of fsys that unstuck_migration does not list for line, each with its
// bookkeeping row, all in one transaction that first takes the drivers'
// advisory lock. Concurrent callers wait for each other and the later ones
// find everything applied; a failing file rolls back the whole call.
//
// Under a context from [CheckOnly] it applies nothing and takes no lock:
// it returns a [*BehindError] when a migration is not applied, else nil.
func Postgres(ctx context.Context, pool *pgxpool.Pool, line string, fsys fs.FS) error {
	ms, err := readMigrations(fsys)
	if err != nil {
		return fmt.Errorf("read %s migrations: %w", line, err)
	}
	if Checking(ctx) {
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
		return behind(line, ms, applied)
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

// SQLite applies, in version order, every NNN_name.up.sql file at
// the root of fsys that unstuck_migration does not list for line. Each file
// runs in its own BEGIN IMMEDIATE transaction together with its bookkeeping
// row, and is skipped if the row is found once the write lock is held, so
// concurrent callers apply each migration exactly once.
//
// Under a context from [CheckOnly] it applies nothing: it returns a
// [*BehindError] when a migration is not applied, else nil.
func SQLite(ctx context.Context, db *sql.DB, line string, fsys fs.FS) error {
	ms, err := readMigrations(fsys)
	if err != nil {
		return fmt.Errorf("read %s migrations: %w", line, err)
	}
	if Checking(ctx) {
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
		return behind(line, ms, applied)
	}
	if _, err := db.ExecContext(ctx, sqliteCreateMigrationTable); err != nil {
		return fmt.Errorf("create migration table: %w", err)
	}
	for _, m := range ms {
		err := Immediate(ctx, db, func(conn *sql.Conn) error {
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

type checkOnlyKey struct{}

// CheckOnly returns a context under which [Postgres] and [SQLite] only
// check: they change nothing and report a line with a migration not
// applied as a [*BehindError]. A line's Migrate method that only calls them
// (every one in this module does) thereby becomes its schema check, so that
// "is the schema current?" is answered from the same migration files that
// "console migrate" applies.
func CheckOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, checkOnlyKey{}, true)
}

// Checking reports whether ctx comes from [CheckOnly]; a Migrate method
// that checks preconditions of its own skips them then.
func Checking(ctx context.Context) bool {
	v, _ := ctx.Value(checkOnlyKey{}).(bool)
	return v
}

// BehindError reports a migration line with migrations not applied.
type BehindError struct {
	Line string
	// Pending are the migrations not applied, as NNN_name, in order.
	Pending []string
}

func (e *BehindError) Error() string {
	return fmt.Sprintf("migration line %s is behind: %s not applied", e.Line, strings.Join(e.Pending, ", "))
}

// behind returns a *BehindError naming the migrations of ms not in applied,
// or nil.
func behind(line string, ms []migration, applied []int32) error {
	var pending []string
	for _, m := range ms {
		if !slices.Contains(applied, int32(m.version)) {
			pending = append(pending, fmt.Sprintf("%03d_%s", m.version, m.name))
		}
	}
	if len(pending) == 0 {
		return nil
	}
	return &BehindError{Line: line, Pending: pending}
}

// Immediate runs fn in a BEGIN IMMEDIATE transaction on one
// connection of db and commits if fn returns nil. BEGIN IMMEDIATE takes the
// write lock at once, waiting for it under busy_timeout, where a deferred
// transaction that upgrades to a write can fail with SQLITE_BUSY whatever
// the timeout. COMMIT and ROLLBACK run without cancellation; a connection
// whose ROLLBACK failed is discarded rather than returned to the pool.
func Immediate(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) (err error) {
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
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr), discard(conn))
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

// discard closes conn's driver connection instead of returning it to the
// pool: database/sql drops a connection whose Raw callback reports
// driver.ErrBadConn.
func discard(conn *sql.Conn) error {
	err := conn.Raw(func(any) error { return driver.ErrBadConn })
	if err != nil && !errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("discard connection: %w", err)
	}
	return nil
}

// readMigrations returns the up migrations at the root of fsys sorted by
// version, and an error for a duplicate version or an unexpected file, so
// that a misnamed migration is never silently skipped. Files ending in
// .down.sql are ignored.
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
