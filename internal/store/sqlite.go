package store

// The SQLite half of the store: its SQL and the functions that run it.
// Every function takes a sqliteExecutor, the *sql.DB or a connection or
// transaction, and none begins or ends a transaction. As in idem/idemsqlite,
// timestamps are INTEGER Unix microseconds, UTC, and the clock is the
// process's: SQLite is embedded, so every reader and writer runs on one host.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteExecutor is what the statements run on: *sql.DB, *sql.Conn and
// *sql.Tx satisfy it.
type sqliteExecutor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// sqliteClock is the process clock truncated to the microseconds SQLite
// keeps, so that a record's ReadAt compares with its stored times exactly
// as the queries do.
func sqliteClock() time.Time {
	return time.UnixMicro(time.Now().UnixMicro()).UTC()
}

// micros converts stored Unix microseconds to a UTC time.
func micros(us int64) time.Time {
	return time.UnixMicro(us).UTC()
}

// ---- sessions

// sqliteDeleteExpiredSessionsSQL is sqlite3store's own cleanup statement.
const sqliteDeleteExpiredSessionsSQL = `DELETE FROM sessions WHERE expiry < julianday('now')`

func sqliteDeleteExpiredSessions(ctx context.Context, db sqliteExecutor) (int64, error) {
	res, err := db.ExecContext(ctx, sqliteDeleteExpiredSessionsSQL)
	if err != nil {
		return 0, sqliteMapError(err)
	}
	return res.RowsAffected()
}

// ---- users

const sqliteUserColumns = `id, username, role, password_hash, disabled, created_at, updated_at,
    source, coalesce(subject, ''), email, display_name, email_verified`

// ?1 username, ?2 role, ?3 password_hash, ?4 now (µs).
const sqliteCreateUserSQL = `INSERT INTO unstuck_console_user (username, role, password_hash, disabled, created_at, updated_at)
VALUES (?1, ?2, ?3, 0, ?4, ?4)
RETURNING ` + sqliteUserColumns

const (
	sqliteUserByUsernameSQL = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user WHERE username = ?1`
	sqliteUserByIDSQL       = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user WHERE id = ?1`
	sqliteListUsersSQL      = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user ORDER BY username`
)

// The updates of one column of a user: ?1 username, ?2 the new value, ?3
// now (µs).
const (
	sqliteSetUserDisabledSQL = `UPDATE unstuck_console_user SET disabled = ?2, updated_at = ?3 WHERE username = ?1`
	sqliteSetUserPasswordSQL = `UPDATE unstuck_console_user SET password_hash = ?2, updated_at = ?3 WHERE username = ?1`
	sqliteSetUserRoleSQL     = `UPDATE unstuck_console_user SET role = ?2, updated_at = ?3 WHERE username = ?1`
	sqliteTouchUserSQL       = `UPDATE unstuck_console_user SET updated_at = ?3 WHERE username = ?1` // ?2 unused
)

func sqliteCreateUser(ctx context.Context, db sqliteExecutor, username, role, hash string) (User, error) {
	u, err := sqliteScanUser(db.QueryRowContext(ctx, sqliteCreateUserSQL,
		username, role, hash, sqliteClock().UnixMicro()))
	if err != nil {
		return User{}, sqliteMapError(err)
	}
	return u, nil
}

// sqliteUserBy reads the user whose column ("username" or "id") is value.
func sqliteUserBy(ctx context.Context, db sqliteExecutor, column string, value any) (User, bool, error) {
	q := sqliteUserByIDSQL
	if column == "username" {
		q = sqliteUserByUsernameSQL
	}
	u, err := sqliteScanUser(db.QueryRowContext(ctx, q, value))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, sqliteMapError(err)
	}
	return u, true, nil
}

// sqliteUpdateUser sets column of the user named username and reports
// whether there was one.
func sqliteUpdateUser(ctx context.Context, db sqliteExecutor, username, column string, value any) (bool, error) {
	var q string
	switch column {
	case "disabled":
		q = sqliteSetUserDisabledSQL
		if b, ok := value.(bool); ok {
			value = boolInt(b)
		}
	case "password_hash":
		q = sqliteSetUserPasswordSQL
	case "role":
		q = sqliteSetUserRoleSQL
	case "updated_at":
		q = sqliteTouchUserSQL
	default:
		return false, fmt.Errorf("no update of column %q", column)
	}
	res, err := db.ExecContext(ctx, q, username, value, sqliteClock().UnixMicro())
	if err != nil {
		return false, sqliteMapError(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func sqliteListUsers(ctx context.Context, db sqliteExecutor) ([]User, error) {
	rows, err := db.QueryContext(ctx, sqliteListUsersSQL)
	if err != nil {
		return nil, sqliteMapError(err)
	}
	defer rows.Close()
	var us []User
	for rows.Next() {
		u, err := sqliteScanUser(rows)
		if err != nil {
			return nil, err
		}
		us = append(us, u)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteMapError(err)
	}
	return us, nil
}

func sqliteScanUser(row scanner) (User, error) {
	var (
		u                    User
		disabled, verified   int64
		createdAt, updatedAt int64
	)
	if err := row.Scan(&u.ID, &u.Username, &u.Role, &u.PasswordHash, &disabled, &createdAt, &updatedAt,
		&u.Source, &u.Subject, &u.Email, &u.DisplayName, &verified); err != nil {
		return User{}, err
	}
	u.Disabled = disabled != 0
	u.EmailVerified = verified != 0
	u.CreatedAt = micros(createdAt)
	u.UpdatedAt = micros(updatedAt)
	return u, nil
}

// sqliteMapError maps the extended result codes that mean something to
// callers: a unique violation (SQLITE_CONSTRAINT_UNIQUE, 2067; the only
// unique value the console writes is a username) to ErrConflict.
func sqliteMapError(err error) error {
	var serr *modernc.Error
	if errors.As(err, &serr) && serr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}
