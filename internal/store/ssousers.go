package store

import (
	"database/sql"

	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sources of a user (User.Source).
const (
	SourceLocal = "local"
	SourceOIDC  = "oidc"
)

// NoPassword is the password hash of an oidc user: no password verifies
// against it, so such a user never signs in with the local form.
const NoPassword = "!"

// maxClaimLen bounds the email and display name kept from the provider,
// in bytes.
const maxClaimLen = 256

// SSOUser is what the OpenID provider says of a user at sign-in.
type SSOUser struct {
	// Subject is the provider's stable identifier of the user (the ID
	// token's sub); required.
	Subject string
	// Username is the wished username (preferred_username or the email's
	// local part): folded to a-z, 0-9, '.', '_' and '-', and made unique
	// with a numeric suffix when another user has it. It is chosen once,
	// when the user is created.
	Username    string
	Email       string
	DisplayName string
	// EmailVerified is the provider's email_verified claim: true only when
	// the provider says it checked Email. Only a verified email makes
	// accounts one person (see [DB.SamePerson]).
	EmailVerified bool
	// Role is the role the provider's groups map to; required.
	Role string
}

// UserBySubject reads the user that the provider's subject signed in as;
// ok is false when there is none.
func (d *DB) UserBySubject(ctx context.Context, subject string) (User, bool, error) {
	var (
		u   User
		ok  bool
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		u, ok, err = pgUserBySubject(ctx, d.pool, subject)
	case DialectMySQL:
		u, ok, err = mysqlUserBy(ctx, d.sqlite, "subject", subject)
	default:
		u, ok, err = sqliteUserBySubject(ctx, d.sqlite, subject)
	}
	if err != nil {
		return User{}, false, fmt.Errorf("store: user of subject: %w", err)
	}
	return u, ok, nil
}

// UpsertSSOUser creates the oidc user of s.Subject, or updates its email
// (and whether it is verified), display name and role; it never changes
// the username, nor Disabled (a
// user an administrator disabled stays disabled). It returns the user as
// stored and the role it had before (empty when it was created). It
// returns a *[fielderr.Error] for an empty subject or an unknown role.
// Concurrent first sign-ins of one subject create one user.
func (d *DB) UpsertSSOUser(ctx context.Context, s SSOUser) (u User, previousRole string, err error) {
	if s.Subject == "" {
		return User{}, "", invalid("subject", "must not be empty")
	}
	if err := validateRole(s.Role); err != nil {
		return User{}, "", err
	}
	s.Email = clip(s.Email)
	s.DisplayName = clip(s.DisplayName)
	s.EmailVerified = s.EmailVerified && s.Email != ""
	base := SSOUsername(s.Username, s.Subject)
	for attempt := range 20 {
		old, ok, err := d.UserBySubject(ctx, s.Subject)
		if err != nil {
			return User{}, "", err
		}
		if ok {
			u, err := d.updateSSOUser(ctx, s)
			if err != nil {
				return User{}, "", fmt.Errorf("store: update user %q: %w", old.Username, err)
			}
			return u, old.Role, nil
		}
		name := base
		if attempt > 0 {
			suffix := "-" + strconv.Itoa(attempt+1)
			name = base[:min(len(base), maxUsernameLen-len(suffix))] + suffix
		}
		u, err := d.insertSSOUser(ctx, name, s)
		if errors.Is(err, ErrConflict) {
			continue // the username is taken, or the subject was created meanwhile
		}
		if err != nil {
			return User{}, "", fmt.Errorf("store: create user %q: %w", name, err)
		}
		return u, "", nil
	}
	return User{}, "", fmt.Errorf("store: create user %q: %w", base, ErrConflict)
}

func (d *DB) insertSSOUser(ctx context.Context, name string, s SSOUser) (User, error) {
	if d.dialect == DialectMySQL {
		return mysqlInsertSSOUser(ctx, d.sqlite, name, s)
	}
	if d.dialect == DialectPostgres {
		u, err := pgScanUser(d.pool.QueryRow(ctx, pgInsertSSOUserSQL, name, s.Role, s.Subject, s.Email, s.DisplayName, s.EmailVerified))
		return u, pgMapError(err)
	}
	u, err := sqliteScanUser(d.sqlite.QueryRowContext(ctx, sqliteInsertSSOUserSQL, name, s.Role, s.Subject, s.Email, s.DisplayName, sqliteClock().UnixMicro(),
		boolInt(s.EmailVerified)))
	return u, sqliteMapError(err)
}

func (d *DB) updateSSOUser(ctx context.Context, s SSOUser) (User, error) {
	if d.dialect == DialectMySQL {
		return mysqlUpdateSSOUser(ctx, d.sqlite, s)
	}
	if d.dialect == DialectPostgres {
		u, err := pgScanUser(d.pool.QueryRow(ctx, pgUpdateSSOUserSQL, s.Subject, s.Role, s.Email, s.DisplayName, s.EmailVerified))
		return u, pgMapError(err)
	}
	u, err := sqliteScanUser(d.sqlite.QueryRowContext(ctx, sqliteUpdateSSOUserSQL, s.Subject, s.Role, s.Email, s.DisplayName, sqliteClock().UnixMicro(),
		boolInt(s.EmailVerified)))
	return u, sqliteMapError(err)
}

// SSOUsername folds a wished username to a valid one: lower case, an
// email's domain dropped, every other character replaced by '-', at most
// 64 bytes; "sso-" and a digest-free cut of the subject when nothing is
// left.
func SSOUsername(wish, subject string) string {
	wish = strings.ToLower(strings.TrimSpace(wish))
	if at := strings.IndexByte(wish, '@'); at > 0 {
		wish = wish[:at]
	}
	fold := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			switch {
			case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '.', r == '_', r == '-':
				b.WriteRune(r)
			default:
				b.WriteByte('-')
			}
			if b.Len() >= maxUsernameLen {
				break
			}
		}
		return strings.Trim(b.String(), "-.")
	}
	if name := fold(wish); name != "" {
		return name[:min(len(name), maxUsernameLen)]
	}
	name := "sso-" + fold(strings.ToLower(subject))
	return strings.TrimSuffix(name[:min(len(name), maxUsernameLen)], "-")
}

// clip cuts s to maxClaimLen bytes on a rune boundary.
func clip(s string) string {
	if len(s) <= maxClaimLen {
		return s
	}
	s = s[:maxClaimLen]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// ---- PostgreSQL

const pgUserBySubjectSQL = `SELECT ` + pgUserColumns + ` FROM unstuck_console_user
WHERE source = 'oidc' AND subject = $1`

// $1 username, $2 role, $3 subject, $4 email, $5 display_name, $6
// email_verified.
const pgInsertSSOUserSQL = `INSERT INTO unstuck_console_user
    (username, role, password_hash, source, subject, email, display_name, email_verified, created_at, updated_at)
VALUES ($1, $2, '` + NoPassword + `', 'oidc', $3, $4, $5, $6, statement_timestamp(), statement_timestamp())
RETURNING ` + pgUserColumns

// $1 subject, $2 role, $3 email, $4 display_name, $5 email_verified;
// updated_at moves only when something changed.
const pgUpdateSSOUserSQL = `UPDATE unstuck_console_user
SET role = $2, email = $3, display_name = $4, email_verified = $5,
    updated_at = CASE WHEN (role, email, display_name, email_verified) = ($2, $3, $4, $5) THEN updated_at ELSE statement_timestamp() END
WHERE source = 'oidc' AND subject = $1
RETURNING ` + pgUserColumns

func pgUserBySubject(ctx context.Context, db pgExecutor, subject string) (User, bool, error) {
	u, err := pgScanUser(db.QueryRow(ctx, pgUserBySubjectSQL, subject))
	if err != nil {
		if isNoRows(err) {
			return User{}, false, nil
		}
		return User{}, false, pgMapError(err)
	}
	return u, true, nil
}

// ---- SQLite

const sqliteUserBySubjectSQL = `SELECT ` + sqliteUserColumns + ` FROM unstuck_console_user
WHERE source = 'oidc' AND subject = ?1`

// ?1 username, ?2 role, ?3 subject, ?4 email, ?5 display_name, ?6 now
// (µs), ?7 email_verified (0 or 1).
const sqliteInsertSSOUserSQL = `INSERT INTO unstuck_console_user
    (username, role, password_hash, disabled, source, subject, email, display_name, email_verified, created_at, updated_at)
VALUES (?1, ?2, '` + NoPassword + `', 0, 'oidc', ?3, ?4, ?5, ?7, ?6, ?6)
RETURNING ` + sqliteUserColumns

// ?1 subject, ?2 role, ?3 email, ?4 display_name, ?5 now (µs), ?6
// email_verified (0 or 1).
const sqliteUpdateSSOUserSQL = `UPDATE unstuck_console_user
SET role = ?2, email = ?3, display_name = ?4, email_verified = ?6,
    updated_at = CASE WHEN role = ?2 AND email = ?3 AND display_name = ?4 AND email_verified = ?6 THEN updated_at ELSE ?5 END
WHERE source = 'oidc' AND subject = ?1
RETURNING ` + sqliteUserColumns

func sqliteUserBySubject(ctx context.Context, db sqliteExecutor, subject string) (User, bool, error) {
	u, err := sqliteScanUser(db.QueryRowContext(ctx, sqliteUserBySubjectSQL, subject))
	if err != nil {
		if isNoRows(err) {
			return User{}, false, nil
		}
		return User{}, false, sqliteMapError(err)
	}
	return u, true, nil
}

func isNoRows(err error) bool {
	return errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows)
}

// EndUserSessions deletes every session of the user id (signed in on any
// device) and returns how many there were. Sessions written before
// migration 003 do not name their user and are not found; the console
// refuses them at their next request anyway when the user is disabled.
func (d *DB) EndUserSessions(ctx context.Context, id int64) (int64, error) {
	if d.dialect == DialectPostgres {
		tag, err := d.pool.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, id)
		if err != nil {
			return 0, fmt.Errorf("store: end sessions of user %d: %w", id, pgMapError(err))
		}
		return tag.RowsAffected(), nil
	}
	q := `DELETE FROM sessions WHERE user_id = ?1`
	if d.dialect == DialectMySQL {
		q = `DELETE FROM sessions WHERE user_id = ?`
	}
	res, err := d.sqlite.ExecContext(ctx, q, id)
	if err != nil {
		return 0, fmt.Errorf("store: end sessions of user %d: %w", id, sqliteMapError(err))
	}
	return res.RowsAffected()
}
