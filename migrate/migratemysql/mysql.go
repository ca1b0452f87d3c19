// Package migratemysql applies a migration line ([migrate]) on MySQL and
// MariaDB through database/sql. It imports go-sql-driver/mysql, the driver
// the MySQL store is used with, only to read a server error's number
// ([IsMySQLError]); it links no other database's driver.
package migratemysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/unstuckhq/unstuck/migrate"
)

// mysqlCreateMigrationTable is the bookkeeping table on MySQL and MariaDB;
// applied_at is Unix microseconds, UTC, as on SQLite.
const mysqlCreateMigrationTable = `CREATE TABLE IF NOT EXISTS unstuck_migration (
    line       VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version    INT          NOT NULL,
    name       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    applied_at BIGINT       NOT NULL,
    PRIMARY KEY (line, version)
) ENGINE = InnoDB`

// mysqlLockName is the name of the GET_LOCK lock every MySQL migration
// takes, so that no two lines migrate at the same time on one server.
// GET_LOCK names are server-wide: databases migrating at the same time on
// one server wait for each other, which costs only time.
const mysqlLockName = "unstuck_migration"

// mysqlLockTimeout bounds the wait for another migrator, in seconds.
const mysqlLockTimeout = 120

// mysqlRerunErrors are the MySQL error numbers of a DDL statement that
// finds its work done: 1050 table exists, 1060 duplicate column, 1061
// duplicate key name, 1359 trigger exists, 1826 duplicate foreign key,
// 3822 duplicate check constraint. A statement of a migration that a crash
// interrupted is run again and may meet them.
var mysqlRerunErrors = []uint16{1050, 1060, 1061, 1359, 1826, 3822}

// Migrate applies, in version order, every NNN_name.up.sql file at the root
// of fsys that unstuck_migration does not list for line, on one connection
// of db that holds the server-wide lock GET_LOCK('unstuck_migration')
// throughout, so concurrent callers wait for each other and the later ones
// find everything applied.
//
// MySQL commits every DDL statement on its own (implicit commit), so a
// migration is not atomic: its statements run one by one and its
// bookkeeping row is written after the last. A crash in the middle leaves
// the row missing, and the next call runs the whole file again. So every
// statement of a MySQL migration must be safe to run again: CREATE TABLE
// IF NOT EXISTS, DROP … IF EXISTS, and for the statements that have no IF
// NOT EXISTS on MySQL 8 (CREATE INDEX, CREATE TRIGGER, ADD COLUMN) the
// "already exists" errors listed in mysqlRerunErrors are taken as done.
// Statements are split at a ';' that ends a line; a statement must not
// contain one (a trigger is one statement, without BEGIN … END).
//
// Under a context from [migrate.CheckOnly] it applies nothing and takes no lock:
// it returns a [*migrate.BehindError] when a migration is not applied, else nil.
func Migrate(ctx context.Context, db *sql.DB, line string, fsys fs.FS) (err error) {
	ms, err := migrate.Read(fsys)
	if err != nil {
		return fmt.Errorf("read %s migrations: %w", line, err)
	}
	if migrate.Checking(ctx) {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name = 'unstuck_migration'`).Scan(&n); err != nil {
			return fmt.Errorf("look for the migration table: %w", err)
		}
		var applied []int32
		if n > 0 {
			if applied, err = mysqlApplied(ctx, db, line); err != nil {
				return err
			}
		}
		return migrate.Behind(line, ms, applied)
	}
	return migrate.WithConn(ctx, db, func(conn *sql.Conn) (err error) {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, ?)`, mysqlLockName, mysqlLockTimeout).Scan(&got); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if got.Int64 != 1 {
			return fmt.Errorf("lock: another migration held %q for %d s", mysqlLockName, mysqlLockTimeout)
		}
		defer func() {
			// The lock also ends with the session; releasing it here lets the
			// pooled connection go back without it.
			if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, mysqlLockName); rerr != nil {
				err = errors.Join(err, fmt.Errorf("unlock: %w", rerr), migrate.Discard(conn))
			}
		}()
		if _, err := conn.ExecContext(ctx, mysqlCreateMigrationTable); err != nil {
			return fmt.Errorf("create migration table: %w", err)
		}
		applied, err := mysqlApplied(ctx, conn, line)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if slices.Contains(applied, int32(m.Version)) {
				continue
			}
			for i, stmt := range SplitStatements(m.SQL) {
				if _, err := conn.ExecContext(ctx, stmt); err != nil && !IsMySQLError(err, mysqlRerunErrors...) {
					return fmt.Errorf("apply %s migration %03d_%s, statement %d: %w", line, m.Version, m.Name, i+1, err)
				}
			}
			if _, err := conn.ExecContext(ctx,
				`INSERT INTO unstuck_migration (line, version, name, applied_at) VALUES (?, ?, ?, ?)`,
				line, m.Version, m.Name, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("record %s migration %03d_%s: %w", line, m.Version, m.Name, err)
			}
		}
		return nil
	})
}

// IsMySQLError reports whether err is a MySQL server error with one of
// the given numbers (1062 duplicate key, 1146 no such table, 1213
// deadlock, …).
func IsMySQLError(err error, numbers ...uint16) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	for _, n := range numbers {
		if me.Number == n {
			return true
		}
	}
	return false
}

// mysqlApplied reads the versions of line that unstuck_migration lists.
func mysqlApplied(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, line string) ([]int32, error) {
	rows, err := q.QueryContext(ctx, `SELECT version FROM unstuck_migration WHERE line = ?`, line)
	if err != nil {
		return nil, fmt.Errorf("read applied versions: %w", err)
	}
	defer rows.Close()
	var applied []int32
	for rows.Next() {
		var v int32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("read applied versions: %w", err)
		}
		applied = append(applied, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied versions: %w", err)
	}
	return applied, nil
}

// SplitStatements splits a migration file into its statements: a statement
// ends with a ';' at the end of a line; lines that are only a "--" comment
// are dropped. MySQL's drivers run one statement per call unless the
// connection allows several, which [Migrate] does not require.
func SplitStatements(file string) []string {
	var (
		out []string
		cur strings.Builder
	)
	for l := range strings.SplitSeq(file, "\n") {
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(l)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		out = append(out, rest)
	}
	return out
}
