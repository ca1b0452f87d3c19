// Package migrate is the dialect-neutral core of the migration runner that
// every migration line of this module shares — idem's stores, saga's
// stores, the console and its audit trail — with one bookkeeping table,
// unstuck_migration (a row per applied version of a line). It reads a
// line's NNN_name.up.sql files from an [io/fs.FS], answers "is the schema
// current?" ([CheckOnly], [BehindError]) and leaves applying to one
// subpackage per dialect: [migratepgx] (imports pgx), [migratesqlite] and
// [migratemysql] (database/sql; migratemysql imports go-sql-driver/mysql
// only to recognise a server error number).
//
// It is a public package of its own, and split per dialect, because the
// library's drivers (idem/idempgx, idem/idemsqlite, idem/idemmysql,
// saga/sagapgx, saga/sagasqlite) and the console all run it: a driver
// imports the core and its own dialect's runner, so an application that
// embeds one store links only that store's database driver. Rows of a line
// no binary applies any more stay and are never read: a check looks only at
// the lines it is given.
//
// [migratepgx]: https://pkg.go.dev/github.com/unstuckhq/unstuck/migrate/migratepgx
// [migratesqlite]: https://pkg.go.dev/github.com/unstuckhq/unstuck/migrate/migratesqlite
// [migratemysql]: https://pkg.go.dev/github.com/unstuckhq/unstuck/migrate/migratemysql
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
)

// Migration is one up file of a migration line.
type Migration struct {
	// Version is the NNN of NNN_name.up.sql, at least 1.
	Version int
	// Name is the name of NNN_name.up.sql.
	Name string
	// SQL is the file's text.
	SQL string
}

// ID is the migration as NNN_name, for messages.
func (m Migration) ID() string { return fmt.Sprintf("%03d_%s", m.Version, m.Name) }

type checkOnlyKey struct{}

// CheckOnly returns a context under which a dialect runner's apply function (migratepgx.Migrate,
// migratesqlite.Migrate, migratemysql.Migrate) only
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

// Behind returns a *BehindError naming the migrations of ms whose version
// applied does not hold, or nil; a dialect runner calls it under
// [CheckOnly].
func Behind(line string, ms []Migration, applied []int32) error {
	var pending []string
	for _, m := range ms {
		if !slices.Contains(applied, int32(m.Version)) {
			pending = append(pending, m.ID())
		}
	}
	if len(pending) == 0 {
		return nil
	}
	return &BehindError{Line: line, Pending: pending}
}

// Read returns the up migrations at the root of fsys sorted by
// version, and an error for a duplicate version or an unexpected file, so
// that a misnamed migration is never silently skipped. Files ending in
// .down.sql are ignored.
func Read(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
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
		m.SQL = string(body)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("duplicate version %d: %s and %s", out[i].Version, out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// parseMigrationName parses NNN_name.up.sql into a version and a name.
func parseMigrationName(file string) (Migration, error) {
	bad := fmt.Errorf("unexpected file %q: want NNN_name.up.sql or NNN_name.down.sql", file)
	base, ok := strings.CutSuffix(file, ".up.sql")
	if !ok {
		return Migration{}, bad
	}
	digits, name, ok := strings.Cut(base, "_")
	if !ok || name == "" || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return Migration{}, bad
	}
	version, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || version <= 0 {
		return Migration{}, bad
	}
	return Migration{Version: int(version), Name: name}, nil
}

// Discard closes conn's driver connection instead of returning it to the
// pool: database/sql drops a connection whose Raw callback reports
// driver.ErrBadConn. A runner discards a connection whose ROLLBACK or
// unlock failed, so that no pooled connection keeps a transaction or a
// lock open.
func Discard(conn *sql.Conn) error {
	err := conn.Raw(func(any) error { return driver.ErrBadConn })
	if err != nil && !errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("discard connection: %w", err)
	}
	return nil
}

// WithConn runs fn on a connection of db of its own and returns the
// connection to the pool after it, joining an error of the release to
// fn's.
func WithConn(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("get connection: %w", err)
	}
	defer func() {
		if cerr := conn.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) {
			err = errors.Join(err, fmt.Errorf("release connection: %w", cerr))
		}
	}()
	return fn(conn)
}
