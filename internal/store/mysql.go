package store

// The MySQL half of the store (MySQL 8, MariaDB 10.6+). As on SQLite,
// timestamps are BIGINT Unix microseconds, UTC, from the process clock,
// and the statements run through database/sql; MySQL has no RETURNING, so
// a write that hands a user back reads it after writing. None begins or
// ends a transaction.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/unstuckhq/unstuck/migrate/migratemysql"
)

// NewMySQL returns a DB on db, a MySQL 8 or MariaDB 10.6+ database opened
// with idem/idemmysql's Open (strict mode), which must not be nil.
func NewMySQL(db *sql.DB) *DB {
	return &DB{dialect: DialectMySQL, sqlite: db, countCap: defaultCountCap}
}

// mysqlErrDuplicate is ER_DUP_ENTRY: a unique key refused a value.
const mysqlErrDuplicate = 1062

// mysqlErrDeadlock is ER_LOCK_DEADLOCK: the statement's transaction was
// rolled back.
const mysqlErrDeadlock = 1213

// mysqlMapError maps a unique violation (the only unique values the
// console writes are a username and an oidc subject) to ErrConflict.
func mysqlMapError(err error) error {
	if migratemysql.IsMySQLError(err, mysqlErrDuplicate) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

const (
	mysqlUserByUsernameSQL = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user WHERE username = ?`
	mysqlUserByIDSQL       = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user WHERE id = ?`
	mysqlUserBySubjectSQL  = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user WHERE source = 'oidc' AND subject = ?`
	mysqlListUsersSQL      = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user ORDER BY username`

	// username, role, password_hash, now, now.
	mysqlCreateUserSQL = `INSERT INTO unstuck_console_user (username, role, password_hash, disabled, created_at, updated_at)
VALUES (?, ?, ?, 0, ?, ?)`

	// username, role, subject, email, display_name, email_verified, now,
	// now.
	mysqlInsertSSOUserSQL = `INSERT INTO unstuck_console_user
    (username, role, password_hash, disabled, source, subject, email, display_name, email_verified, created_at, updated_at)
VALUES (?, ?, '` + NoPassword + `', 0, 'oidc', ?, ?, ?, ?, ?, ?)`

	// role, email, display_name, email_verified, now, then role, email,
	// display_name, email_verified, subject. MySQL assigns left to right,
	// each assignment seeing the ones before: updated_at comes first, so
	// that it compares the old values.
	mysqlUpdateSSOUserSQL = `UPDATE unstuck_console_user
SET updated_at = CASE WHEN role = ? AND email = ? AND display_name = ? AND email_verified = ? THEN updated_at ELSE ? END,
    role = ?, email = ?, display_name = ?, email_verified = ?
WHERE source = 'oidc' AND subject = ?`
)

func mysqlCreateUser(ctx context.Context, db sqliteExecutor, username, role, hash string) (User, error) {
	now := sqliteClock().UnixMicro()
	res, err := db.ExecContext(ctx, mysqlCreateUserSQL, username, role, hash, now, now)
	if err != nil {
		return User{}, mysqlMapError(err)
	}
	return mysqlUserByInsert(ctx, db, res)
}

// mysqlUserByInsert reads the user an INSERT created.
func mysqlUserByInsert(ctx context.Context, db sqliteExecutor, res sql.Result) (User, error) {
	id, err := res.LastInsertId()
	if err != nil {
		return User{}, err
	}
	u, ok, err := mysqlUserBy(ctx, db, "id", id)
	if err == nil && !ok {
		err = fmt.Errorf("user %d deleted as soon as created: %w", id, ErrNotFound)
	}
	return u, err
}

func mysqlUserBy(ctx context.Context, db sqliteExecutor, column string, value any) (User, bool, error) {
	q := mysqlUserByIDSQL
	switch column {
	case "username":
		q = mysqlUserByUsernameSQL
	case "subject":
		q = mysqlUserBySubjectSQL
	}
	u, err := sqliteScanUser(db.QueryRowContext(ctx, q, value))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, err
	}
	return u, true, nil
}

// mysqlUpdateUser sets column of the user named username and reports
// whether there was one. Every update moves updated_at, so a matched row
// is a changed (affected) row.
func mysqlUpdateUser(ctx context.Context, db sqliteExecutor, username, column string, value any) (bool, error) {
	set := ""
	args := []any{}
	switch column {
	case "disabled":
		if b, ok := value.(bool); ok {
			value = boolInt(b)
		}
		set, args = "disabled = ?, ", append(args, value)
	case "password_hash", "role":
		set, args = column+" = ?, ", append(args, value)
	case "updated_at":
	default:
		return false, fmt.Errorf("no update of column %q", column)
	}
	// GREATEST keeps a second update within one microsecond a change.
	args = append(args, sqliteClock().UnixMicro(), username)
	res, err := db.ExecContext(ctx, `UPDATE unstuck_console_user SET `+set+`updated_at = GREATEST(updated_at + 1, ?) WHERE username = ?`, args...)
	if err != nil {
		return false, mysqlMapError(err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func mysqlListUsers(ctx context.Context, db sqliteExecutor) ([]User, error) {
	rows, err := db.QueryContext(ctx, mysqlListUsersSQL)
	if err != nil {
		return nil, err
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
	return us, rows.Err()
}

func mysqlInsertSSOUser(ctx context.Context, db sqliteExecutor, name string, s SSOUser) (User, error) {
	now := sqliteClock().UnixMicro()
	res, err := db.ExecContext(ctx, mysqlInsertSSOUserSQL, name, s.Role, s.Subject, s.Email, s.DisplayName, boolInt(s.EmailVerified), now, now)
	if err != nil {
		return User{}, mysqlMapError(err)
	}
	return mysqlUserByInsert(ctx, db, res)
}

func mysqlUpdateSSOUser(ctx context.Context, db sqliteExecutor, s SSOUser) (User, error) {
	verified := boolInt(s.EmailVerified)
	if _, err := db.ExecContext(ctx, mysqlUpdateSSOUserSQL, s.Role, s.Email, s.DisplayName, verified, sqliteClock().UnixMicro(),
		s.Role, s.Email, s.DisplayName, verified, s.Subject); err != nil {
		return User{}, mysqlMapError(err)
	}
	u, ok, err := mysqlUserBy(ctx, db, "subject", s.Subject)
	if err == nil && !ok {
		err = fmt.Errorf("user of subject: %w", ErrNotFound)
	}
	return u, err
}

// ---- sessions

// token, then now (µs).
const mysqlFindSessionSQL = `SELECT s.data, s.expiry, s.user_id,
    u.id, u.username, u.role, u.password_hash, u.disabled, u.created_at, u.updated_at,
    u.source, coalesce(u.subject, ''), u.email, u.display_name, u.email_verified
FROM sessions s LEFT JOIN unstuck_console_user u ON u.id = s.user_id
WHERE s.token = ? AND s.expiry > ?`

// token, data, expiry (µs), user_id.
const mysqlCommitSessionSQL = `INSERT INTO sessions (token, data, expiry, user_id) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE data = VALUES(data), expiry = VALUES(expiry), user_id = VALUES(user_id)`

func mysqlFindSession(db sqliteExecutor) func(context.Context, string) (sessionRow, bool, error) {
	return func(ctx context.Context, token string) (sessionRow, bool, error) {
		var (
			r                  sessionRow
			expiry             int64
			uid                *int64
			name, role, hash   *string
			disabled, cAt, uAt *int64
			ext                userExtra
		)
		err := db.QueryRowContext(ctx, mysqlFindSessionSQL, token, time.Now().UnixMicro()).Scan(&r.data, &expiry, &r.userID,
			&uid, &name, &role, &hash, &disabled, &cAt, &uAt, &ext.source, &ext.subject, &ext.email, &ext.displayName, &ext.verified)
		if errors.Is(err, sql.ErrNoRows) {
			return sessionRow{}, false, nil
		}
		if err != nil {
			return sessionRow{}, false, err
		}
		r.expiry = micros(expiry)
		if uid != nil && name != nil && role != nil && hash != nil && disabled != nil && cAt != nil && uAt != nil {
			r.user = &User{ID: *uid, Username: *name, Role: *role, PasswordHash: *hash, Disabled: *disabled != 0,
				CreatedAt: micros(*cAt), UpdatedAt: micros(*uAt)}
			ext.fill(r.user)
		}
		return r, true, nil
	}
}

func mysqlCommitSession(db sqliteExecutor) func(context.Context, string, []byte, time.Time, *int64) error {
	return func(ctx context.Context, token string, b []byte, expiry time.Time, userID *int64) error {
		_, err := db.ExecContext(ctx, mysqlCommitSessionSQL, token, b, expiry.UnixMicro(), userID)
		return err
	}
}

// mysqlSessionBase is the scs store underneath the console's session
// store on MySQL (scs's own mysqlstore is not a dependency): the same
// table, find and commit as above, and the delete.
type mysqlSessionBase struct{ db *sql.DB }

func (m mysqlSessionBase) Find(token string) ([]byte, bool, error) {
	row, ok, err := mysqlFindSession(m.db)(context.Background(), token)
	return row.data, ok, err
}

func (m mysqlSessionBase) Commit(token string, b []byte, expiry time.Time) error {
	return mysqlCommitSession(m.db)(context.Background(), token, b, expiry, sessionUserID(b))
}

func (m mysqlSessionBase) Delete(token string) error {
	_, err := m.db.Exec(`DELETE FROM sessions WHERE token = ?`, token)
	return err
}

func mysqlDeleteExpiredSessions(ctx context.Context, db sqliteExecutor) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM sessions WHERE expiry < ?`, time.Now().UnixMicro())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// ---- bulk

// mysqlRebind turns the $n markers of a bulk statement into MySQL's
// positional ? markers, with the arguments in the order they appear ($n
// used twice binds args[n-1] twice).
func mysqlRebind(query string, args []any) (string, []any) {
	out := make([]any, 0, len(args))
	q := bulkParam.ReplaceAllStringFunc(query, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		if n >= 1 && n <= len(args) {
			out = append(out, args[n-1])
		}
		return "?"
	})
	return q, out
}

// mysqlConcat replaces the "a || $n" concatenations of the bulk
// statements with CONCAT(a, $n): in MySQL's default sql_mode || is OR.
var mysqlConcat = regexp.MustCompile(`(\w+) \|\| (\$\d+)`)

func mysqlConcatSQL(query string) string {
	return mysqlConcat.ReplaceAllString(query, "CONCAT($1, $2)")
}
