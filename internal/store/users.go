package store

import (
	"context"
	"fmt"
	"time"
)

// Console roles (SPEC CON-K6), from least to most powerful. What each may do
// is the casbin policy's business; the store only keeps the name.
const (
	RoleAuditor = "auditor" // reads, and the audit trail
	RoleSupport = "support"
	RoleOncall  = "oncall"
	RoleAdmin   = "admin" // also manages users
)

// Roles lists every role, least powerful first.
var Roles = []string{RoleAuditor, RoleSupport, RoleOncall, RoleAdmin}

// ValidRole reports whether role is one of [Roles].
func ValidRole(role string) bool {
	switch role {
	case RoleAuditor, RoleSupport, RoleOncall, RoleAdmin:
		return true
	}
	return false
}

// maxUsernameLen bounds a username, in bytes (all its characters are ASCII).
const maxUsernameLen = 64

// ValidateUsername returns a *[fielderr.Error] for "username" unless name is 1
// to 64 characters of a-z, 0-9, '.', '_' and '-'. Usernames are therefore
// compared exactly; callers fold case before looking one up if they wish.
func ValidateUsername(name string) error { return validateName("username", name) }

// validateName checks a username or an API token's name, naming field.
func validateName(field, name string) error {
	if name == "" || len(name) > maxUsernameLen {
		return invalid(field, fmt.Sprintf("must be 1 to %d characters", maxUsernameLen))
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return invalid(field, "may contain only a-z, 0-9, '.', '_' and '-'")
		}
	}
	return nil
}

func validateRole(role string) error {
	if !ValidRole(role) {
		return invalid("role", fmt.Sprintf("%q is not one of auditor, support, oncall, admin", role))
	}
	return nil
}

func validatePasswordHash(hash string) error {
	if hash == "" {
		return invalid("password_hash", "must not be empty")
	}
	return nil
}

// User is a local console account (SPEC CON-K5). PasswordHash is whatever
// encoded hash the caller stored (argon2id or bcrypt); the store never sees
// a password. Times are UTC.
type User struct {
	ID           int64
	Username     string
	Role         string
	PasswordHash string
	// Disabled users keep their row (the audit trail names them) but must
	// not sign in; the web layer also refuses their existing sessions.
	Disabled  bool
	CreatedAt time.Time
	UpdatedAt time.Time
	// Source is SourceLocal for an account with a console password,
	// SourceOIDC for one created at sign-in through the OpenID provider
	// (its PasswordHash is NoPassword). Subject is the provider's subject
	// of an oidc user, empty for a local one; Email and DisplayName are
	// the provider's claims at the last sign-in.
	Source      string
	Subject     string
	Email       string
	DisplayName string
	// EmailVerified says that Email is vouched for: for an oidc user, the
	// provider's email_verified claim was true at the last sign-in. A
	// local account has no email (nothing sets one) and so never a
	// verified one. Accounts with the same verified email are one person
	// (see [DB.SamePerson]).
	EmailVerified bool
}

// CreateUser adds an enabled user. It returns a *[fielderr.Error] (matching
// [ErrInvalid]) for a bad username, role or empty hash, and an error
// matching [ErrConflict] when the username is taken.
func (d *DB) CreateUser(ctx context.Context, username, role, passwordHash string) (User, error) {
	if err := ValidateUsername(username); err != nil {
		return User{}, err
	}
	if err := validateRole(role); err != nil {
		return User{}, err
	}
	if err := validatePasswordHash(passwordHash); err != nil {
		return User{}, err
	}
	var (
		u   User
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		u, err = pgCreateUser(ctx, d.pool, username, role, passwordHash)
	case DialectMySQL:
		u, err = mysqlCreateUser(ctx, d.sqlite, username, role, passwordHash)
	default:
		u, err = sqliteCreateUser(ctx, d.sqlite, username, role, passwordHash)
	}
	if err != nil {
		return User{}, fmt.Errorf("store: create user %q: %w", username, err)
	}
	return u, nil
}

// UserByUsername reads a user; ok is false when there is none.
func (d *DB) UserByUsername(ctx context.Context, username string) (User, bool, error) {
	u, ok, err := d.userBy(ctx, "username", username)
	if err != nil {
		return User{}, false, fmt.Errorf("store: user %q: %w", username, err)
	}
	return u, ok, nil
}

// UserByID reads a user; ok is false when there is none.
func (d *DB) UserByID(ctx context.Context, id int64) (User, bool, error) {
	u, ok, err := d.userBy(ctx, "id", id)
	if err != nil {
		return User{}, false, fmt.Errorf("store: user %d: %w", id, err)
	}
	return u, ok, nil
}

// userBy reads the user whose column (id or username) is value, in the
// database's dialect.
func (d *DB) userBy(ctx context.Context, column string, value any) (User, bool, error) {
	switch d.dialect {
	case DialectPostgres:
		return pgUserBy(ctx, d.pool, column, value)
	case DialectMySQL:
		return mysqlUserBy(ctx, d.sqlite, column, value)
	}
	return sqliteUserBy(ctx, d.sqlite, column, value)
}

// SetUserDisabled disables or enables a user. It returns an error matching
// [ErrNotFound] when there is no such user. Setting the value it already
// has succeeds and still moves UpdatedAt.
func (d *DB) SetUserDisabled(ctx context.Context, username string, disabled bool) error {
	return d.updateUser(ctx, "disable", username, "disabled", disabled)
}

// SetUserPassword replaces a user's password hash. It returns a
// *[fielderr.Error] for an empty hash and an error matching [ErrNotFound] when
// there is no such user.
func (d *DB) SetUserPassword(ctx context.Context, username, passwordHash string) error {
	if err := validatePasswordHash(passwordHash); err != nil {
		return err
	}
	return d.updateUser(ctx, "set password of", username, "password_hash", passwordHash)
}

// SetUserRole changes a user's role. It returns a *[fielderr.Error] for an
// unknown role and an error matching [ErrNotFound] when there is no such
// user. The web layer renews the user's session token on a role change.
func (d *DB) SetUserRole(ctx context.Context, username, role string) error {
	if err := validateRole(role); err != nil {
		return err
	}
	return d.updateUser(ctx, "set role of", username, "role", role)
}

// UnlockUser clears the sign-in throttle of a user: it moves UpdatedAt to
// now, and the console forgets the failed sign-ins it counted for the user
// before that (in every console process, at its next attempt). It returns
// an error matching [ErrNotFound] when there is no such user.
func (d *DB) UnlockUser(ctx context.Context, username string) error {
	return d.updateUser(ctx, "unlock", username, "updated_at", nil)
}

// updateUser sets one column of the user named username; column is one of
// a fixed set, never caller input.
func (d *DB) updateUser(ctx context.Context, op, username, column string, value any) error {
	var (
		ok  bool
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		ok, err = pgUpdateUser(ctx, d.pool, username, column, value)
	case DialectMySQL:
		ok, err = mysqlUpdateUser(ctx, d.sqlite, username, column, value)
	default:
		ok, err = sqliteUpdateUser(ctx, d.sqlite, username, column, value)
	}
	if err != nil {
		return fmt.Errorf("store: %s user %q: %w", op, username, err)
	}
	if !ok {
		return fmt.Errorf("store: %s user %q: %w", op, username, ErrNotFound)
	}
	return nil
}

// ListUsers returns every user, by username.
func (d *DB) ListUsers(ctx context.Context) ([]User, error) {
	var (
		us  []User
		err error
	)
	switch d.dialect {
	case DialectPostgres:
		us, err = pgListUsers(ctx, d.pool)
	case DialectMySQL:
		us, err = mysqlListUsers(ctx, d.sqlite)
	default:
		us, err = sqliteListUsers(ctx, d.sqlite)
	}
	if err != nil {
		return nil, fmt.Errorf("store: list users: %w", err)
	}
	return us, nil
}
