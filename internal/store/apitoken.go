package store

// API tokens of the operator API (SPEC K25): the table of migration 010,
// unstuck_console_api_token. The secret is shown once, when the token is
// made; the table keeps its SHA-256 only.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// TokenPrefix starts every API token's text, so that a leaked token is
// recognisable (secret scanners) and never mistaken for a session.
const TokenPrefix = "unstuck_"

// APIToken is an API token, without its secret. Owner is the username a
// user token acts as (with the user's role, read at each request); empty
// for a service token, which acts as "token:<Name>" with Role.
type APIToken struct {
	ID        int64
	Name      string
	Owner     string
	Role      string
	CreatedBy string
	// CreatedAt is set by CreateAPIToken; ExpiresAt, RevokedAt and
	// LastUsedAt are zero until set (ExpiresAt zero: never).
	CreatedAt, ExpiresAt, RevokedAt, LastUsedAt time.Time
}

// Usable reports whether t authenticates at now: not revoked, not expired.
func (t APIToken) Usable(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// NewTokenSecret returns a new token's text, TokenPrefix and 32 random
// bytes in base64url, and the hash the store keeps of it.
func NewTokenSecret() (secret string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	secret = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, HashTokenSecret(secret)
}

// HashTokenSecret is the SHA-256 of a token's text: what the store keeps
// and looks a token up by.
func HashTokenSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// LooksLikeToken reports whether s has the form of a token's text (the
// prefix and 43 base64url characters), so that anything else is refused
// before the database is asked.
func LooksLikeToken(s string) bool {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(rest) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// ValidateTokenName checks a token's name as a username is checked: 1 to
// 64 characters of a-z, 0-9, '.', '_' and '-'. The error names the field
// "name".
func ValidateTokenName(name string) error { return validateName("name", name) }

const apiTokenColumns = `id, name, owner, role, created_by, created_at, expires_at, revoked_at, last_used_at`

func scanAPIToken(scan func(...any) error) (APIToken, error) {
	var (
		t                 APIToken
		owner             *string
		cr, exp, rev, use anyTime
	)
	err := scan(&t.ID, &t.Name, &owner, &t.Role, &t.CreatedBy, &cr, &exp, &rev, &use)
	if owner != nil {
		t.Owner = *owner
	}
	t.CreatedAt, t.ExpiresAt, t.RevokedAt, t.LastUsedAt = cr.t, exp.t, rev.t, use.t
	return t, err
}

// CreateAPIToken records t (its ID, CreatedAt, RevokedAt and LastUsedAt
// are ignored) with the hash of its secret, and returns it with its ID. A
// user token's owner must be an existing user, and it has no role of its
// own; a service token needs a valid role. Errors: a *[fielderr.Error]
// (matching [ErrInvalid]) naming name, owner or role, or one matching
// [ErrConflict] when the name is taken.
func (d *DB) CreateAPIToken(ctx context.Context, t APIToken, hash []byte) (APIToken, error) {
	if err := ValidateTokenName(t.Name); err != nil {
		return APIToken{}, err
	}
	if len(hash) != sha256.Size {
		return APIToken{}, invalid("secret_hash", "must be a SHA-256")
	}
	var owner any
	switch {
	case t.Owner != "" && t.Role != "":
		return APIToken{}, invalid("role", "a user's token acts with its user's role; give a user or a role, not both")
	case t.Owner != "":
		if _, ok, err := d.UserByUsername(ctx, t.Owner); err != nil {
			return APIToken{}, err
		} else if !ok {
			return APIToken{}, invalid("user", fmt.Sprintf("there is no user %q", t.Owner))
		}
		owner = t.Owner
	default:
		if err := validateRole(t.Role); err != nil {
			return APIToken{}, err
		}
	}
	t.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
	t.RevokedAt, t.LastUsedAt = time.Time{}, time.Time{}
	c := bulkConn{d}
	args := []any{t.Name, owner, t.Role, hash, t.CreatedBy, c.ts(t.CreatedAt), c.ts(t.ExpiresAt)}
	const ins = `INSERT INTO unstuck_console_api_token (name, owner, role, secret_hash, created_by, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)`
	if _, err := c.exec(ctx, ins, args...); err != nil {
		return APIToken{}, fmt.Errorf("store: create API token %q: %w", t.Name, d.mapError(err))
	}
	got, ok, err := d.apiTokenBy(ctx, "name", t.Name)
	if err == nil && !ok {
		err = ErrNotFound
	}
	if err != nil {
		return APIToken{}, fmt.Errorf("store: create API token %q: %w", t.Name, err)
	}
	return got, nil
}

// mapError maps a unique violation of d's dialect to ErrConflict.
func (d *DB) mapError(err error) error {
	switch d.dialect {
	case DialectPostgres:
		return err // bulkConn.exec did (pgMapError)
	case DialectMySQL:
		return mysqlMapError(err)
	}
	return sqliteMapError(err)
}

// APITokenByHash finds the token whose secret hashes to hash, revoked or
// expired ones included (the caller says why it refuses them); ok is false
// when there is none.
func (d *DB) APITokenByHash(ctx context.Context, hash []byte) (APIToken, bool, error) {
	t, ok, err := d.apiTokenBy(ctx, "secret_hash", hash)
	if err != nil {
		return APIToken{}, false, fmt.Errorf("store: API token by hash: %w", err)
	}
	return t, ok, nil
}

// apiTokenBy reads the token whose column (name or secret_hash, never
// caller input) is value.
func (d *DB) apiTokenBy(ctx context.Context, column string, value any) (APIToken, bool, error) {
	var (
		t     APIToken
		found bool
	)
	err := bulkConn{d}.each(ctx, `SELECT `+apiTokenColumns+` FROM unstuck_console_api_token WHERE `+column+` = $1`, []any{value},
		func(scan func(...any) error) error {
			var err error
			t, err = scanAPIToken(scan)
			found = true
			return err
		})
	return t, found, err
}

// ListAPITokens returns every token, revoked ones included, by name.
func (d *DB) ListAPITokens(ctx context.Context) ([]APIToken, error) {
	var out []APIToken
	err := bulkConn{d}.each(ctx, `SELECT `+apiTokenColumns+` FROM unstuck_console_api_token ORDER BY name`, nil,
		func(scan func(...any) error) error {
			t, err := scanAPIToken(scan)
			out = append(out, t)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: list API tokens: %w", err)
	}
	return out, nil
}

// RevokeAPIToken revokes the token named name at now and returns it;
// revoked is false when it was revoked already (its RevokedAt is then the
// first revocation's). It returns an error matching [ErrNotFound] when
// there is no such token.
func (d *DB) RevokeAPIToken(ctx context.Context, name string, now time.Time) (t APIToken, revoked bool, err error) {
	if ValidateTokenName(name) != nil {
		return APIToken{}, false, fmt.Errorf("store: revoke API token: %w", ErrNotFound)
	}
	c := bulkConn{d}
	n, err := c.exec(ctx, `UPDATE unstuck_console_api_token SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL`,
		name, c.ts(now.UTC().Truncate(time.Microsecond)))
	if err != nil {
		return APIToken{}, false, fmt.Errorf("store: revoke API token %q: %w", name, err)
	}
	t, ok, err := d.apiTokenBy(ctx, "name", name)
	switch {
	case err != nil:
		return APIToken{}, false, fmt.Errorf("store: revoke API token %q: %w", name, err)
	case !ok:
		return APIToken{}, false, fmt.Errorf("store: revoke API token %q: %w", name, ErrNotFound)
	}
	return t, n == 1, nil
}

// TouchAPIToken sets the last use of token id to now, unless it was set
// less than a minute before: a busy token costs one write a minute.
func (d *DB) TouchAPIToken(ctx context.Context, id int64, now time.Time) error {
	c := bulkConn{d}
	now = now.UTC().Truncate(time.Microsecond)
	_, err := c.exec(ctx, `UPDATE unstuck_console_api_token SET last_used_at = $2
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)`, id, c.ts(now), c.ts(now.Add(-time.Minute)))
	if err != nil {
		return fmt.Errorf("store: touch API token %d: %w", id, err)
	}
	return nil
}
