package store

// The PostgreSQL half of the store: its SQL and the functions that run it.
// Every function takes a pgExecutor, the pool or a transaction, and none
// begins or ends a transaction. Names are unqualified: they resolve in the
// pool's search_path, where the pgxv5 driver's tables live. The clock is
// statement_timestamp(), the database's, as in the driver; it is returned
// with every record as read_at.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgExecutor is what the statements run on: *pgxpool.Pool, *pgx.Conn and
// pgx.Tx satisfy it.
type pgExecutor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ---- sessions

// pgDeleteExpiredSessionsSQL is pgxstore's own cleanup statement.
const pgDeleteExpiredSessionsSQL = `DELETE FROM sessions WHERE expiry < current_timestamp`

func pgDeleteExpiredSessions(ctx context.Context, db pgExecutor) (int64, error) {
	tag, err := db.Exec(ctx, pgDeleteExpiredSessionsSQL)
	if err != nil {
		return 0, pgMapError(err)
	}
	return tag.RowsAffected(), nil
}

// ---- users

const pgUserColumns = `id, username, role, password_hash, disabled, created_at, updated_at,
    source, coalesce(subject, ''), email, display_name, email_verified`

// $1 username, $2 role, $3 password_hash.
const pgCreateUserSQL = `INSERT INTO unstuck_console_user (username, role, password_hash, created_at, updated_at)
VALUES ($1, $2, $3, statement_timestamp(), statement_timestamp())
RETURNING ` + pgUserColumns

const (
	pgUserByUsernameSQL = `SELECT ` + pgUserColumns + ` FROM unstuck_console_user WHERE username = $1`
	pgUserByIDSQL       = `SELECT ` + pgUserColumns + ` FROM unstuck_console_user WHERE id = $1`
	pgListUsersSQL      = `SELECT ` + pgUserColumns + ` FROM unstuck_console_user ORDER BY username`
)

// The updates of one column of a user: $1 username, $2 the new value.
const (
	pgSetUserDisabledSQL = `UPDATE unstuck_console_user SET disabled = $2, updated_at = statement_timestamp()
WHERE username = $1`
	pgSetUserPasswordSQL = `UPDATE unstuck_console_user SET password_hash = $2, updated_at = statement_timestamp()
WHERE username = $1`
	pgSetUserRoleSQL = `UPDATE unstuck_console_user SET role = $2, updated_at = statement_timestamp()
WHERE username = $1`
	pgTouchUserSQL = `UPDATE unstuck_console_user SET updated_at = statement_timestamp() WHERE username = $1`
)

func pgCreateUser(ctx context.Context, db pgExecutor, username, role, hash string) (User, error) {
	u, err := pgScanUser(db.QueryRow(ctx, pgCreateUserSQL, username, role, hash))
	if err != nil {
		return User{}, pgMapError(err)
	}
	return u, nil
}

// pgUserBy reads the user whose column ("username" or "id") is value.
func pgUserBy(ctx context.Context, db pgExecutor, column string, value any) (User, bool, error) {
	q := pgUserByIDSQL
	if column == "username" {
		q = pgUserByUsernameSQL
	}
	u, err := pgScanUser(db.QueryRow(ctx, q, value))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, pgMapError(err)
	}
	return u, true, nil
}

// pgUpdateUser sets column of the user named username and reports whether
// there was one.
func pgUpdateUser(ctx context.Context, db pgExecutor, username, column string, value any) (bool, error) {
	var q string
	switch column {
	case "disabled":
		q = pgSetUserDisabledSQL
	case "password_hash":
		q = pgSetUserPasswordSQL
	case "role":
		q = pgSetUserRoleSQL
	case "updated_at":
		tag, err := db.Exec(ctx, pgTouchUserSQL, username)
		if err != nil {
			return false, pgMapError(err)
		}
		return tag.RowsAffected() > 0, nil
	default:
		return false, fmt.Errorf("no update of column %q", column)
	}
	tag, err := db.Exec(ctx, q, username, value)
	if err != nil {
		return false, pgMapError(err)
	}
	return tag.RowsAffected() > 0, nil
}

func pgListUsers(ctx context.Context, db pgExecutor) ([]User, error) {
	rows, err := db.Query(ctx, pgListUsersSQL)
	if err != nil {
		return nil, pgMapError(err)
	}
	us, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (User, error) { return pgScanUser(row) })
	if err != nil {
		return nil, pgMapError(err)
	}
	return us, nil
}

func pgScanUser(row pgx.Row) (User, error) {
	var u User
	if err := row.Scan(&u.ID, &u.Username, &u.Role, &u.PasswordHash, &u.Disabled, &u.CreatedAt, &u.UpdatedAt,
		&u.Source, &u.Subject, &u.Email, &u.DisplayName, &u.EmailVerified); err != nil {
		return User{}, err
	}
	u.CreatedAt = u.CreatedAt.UTC()
	u.UpdatedAt = u.UpdatedAt.UTC()
	return u, nil
}

// pgMapError maps the SQLSTATEs that mean something to callers: a unique
// violation on the username to ErrConflict, a username the database refuses
// to a *fielderr.Error, a missing table to a hint about Migrate.
func pgMapError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "23505": // unique_violation
		if pgErr.ConstraintName == "unstuck_console_user_username_key" || pgErr.ConstraintName == "unstuck_console_user_subject_key" ||
			pgErr.ConstraintName == "unstuck_console_api_token_name_key" {
			return fmt.Errorf("%w: %w", ErrConflict, err)
		}
	case "23514": // check_violation
		if pgErr.ConstraintName == "unstuck_console_user_username_check" {
			return invalid("username", "refused by the database: "+pgErr.Message)
		}
	case "42P01", "3F000": // undefined_table, invalid_schema_name
		return fmt.Errorf("%w (have the driver's Migrate and the console's Migrate run in the pool's search_path?)", err)
	}
	return err
}
