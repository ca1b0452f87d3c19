package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5"
)

// maxSessionSlack is the most by which a session's stored expiry may lag
// behind the idle deadline scs asks for before the row is rewritten.
const maxSessionSlack = time.Minute

// sessionSlackDivisor: the lag allowed is also at most 1/16 of the idle
// time scs asks for, so short idle timeouts keep their proportion.
const sessionSlackDivisor = 16

// sessionStore is the console's scs store: scs's pgxstore or sqlite3store
// for writes, and a Find of its own that also reads the row's expiry, so
// that a Commit which changes nothing but pushes the idle deadline a little
// further is skipped (with an idle timeout, scs would commit the
// session on every request). See [WithSessionMemo].
type sessionStore struct {
	base   scs.Store // Delete
	find   func(ctx context.Context, token string) (sessionRow, bool, error)
	commit func(ctx context.Context, token string, b []byte, expiry time.Time, userID *int64) error
}

// sessionRow is a session as FindCtx reads it: with the user its user_id
// names, read in the same statement (user is nil when user_id is NULL or
// names no user).
type sessionRow struct {
	data   []byte
	expiry time.Time
	userID *int64
	user   *User
}

// SessionUserKey is the session value that holds the signed-in user's id
// (an int64): the store writes it beside the session, as user_id, so that
// FindCtx reads the user with the session (see [SessionUser]).
const SessionUserKey = "user_id"

var _ scs.CtxStore = (*sessionStore)(nil)

type sessionMemoKey struct{}

// sessionMemo is what FindCtx read in this request.
type sessionMemo struct {
	token  string
	data   []byte
	expiry time.Time
	userID *int64
	user   *User
}

// SessionUser returns the user whose id the session found in this request
// (under [WithSessionMemo]) holds, read in the same statement as the
// session: known is false when that read did not cover user id (no memo,
// no session, a session written before user_id existed, another id), and
// the caller reads the user itself; found is false when no such user
// exists.
func SessionUser(ctx context.Context, id int64) (u User, found, known bool) {
	m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo)
	if !ok || m.userID == nil || *m.userID != id {
		return User{}, false, false
	}
	if m.user == nil {
		return User{}, false, true
	}
	return *m.user, true, true
}

// WithSessionMemo returns a context in which the session store remembers
// the row it finds, so that the request's commit can be skipped when the
// session's data are unchanged and the stored expiry is at most
// min(1 minute, idle timeout / 16) short of the new idle deadline: an idle
// session then ends between idle timeout − that slack and idle timeout
// after its last request. Without it every commit is written. Put it in
// the request context before scs's LoadAndSave.
func WithSessionMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, sessionMemoKey{}, &sessionMemo{})
}

func (s *sessionStore) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}

func (s *sessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	row, found, err := s.find(ctx, token)
	if err != nil || !found {
		return nil, false, err
	}
	if m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo); ok {
		*m = sessionMemo{token: token, data: row.data, expiry: row.expiry, userID: row.userID, user: row.user}
	}
	return row.data, true, nil
}

func (s *sessionStore) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}

func (s *sessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo); ok && m.token == token && !m.expiry.IsZero() {
		slack := min(maxSessionSlack, time.Until(expiry)/sessionSlackDivisor)
		if lag := expiry.Sub(m.expiry); lag <= slack && sameSession(m.data, b) {
			return nil
		}
	}
	if err := s.commit(ctx, token, b, expiry, sessionUserID(b)); err != nil {
		return err
	}
	if m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo); ok {
		*m = sessionMemo{token: token, data: b, expiry: expiry} // the user is read again next request
	}
	return nil
}

// sessionUserID is the SessionUserKey value of an encoded session, nil
// when it has none (or it cannot be decoded).
func sessionUserID(b []byte) *int64 {
	_, values, err := ConsoleSessionCodec.Decode(b)
	if err != nil {
		return nil
	}
	if id, ok := values[SessionUserKey].(int64); ok {
		return &id
	}
	return nil
}

func (s *sessionStore) Delete(token string) error { return s.base.Delete(token) }

func (s *sessionStore) DeleteCtx(ctx context.Context, token string) error {
	if m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo); ok && m.token == token {
		*m = sessionMemo{}
	}
	return s.base.Delete(token)
}

// sameSession reports whether two encodings hold the same session: equal
// bytes (ConsoleSessionCodec encodes a session it has seen to the same
// bytes), or equal when decoded (gob writes a map in random order).
func sameSession(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	c := ConsoleSessionCodec
	da, va, err := c.Decode(a)
	if err != nil {
		return false
	}
	db, vb, err := c.Decode(b)
	if err != nil {
		return false
	}
	return da.Equal(db) && reflect.DeepEqual(va, vb)
}

// $1 token.
const pgFindSessionSQL = `SELECT s.data, s.expiry, s.user_id,
    u.id, u.username, u.role, u.password_hash, u.disabled, u.created_at, u.updated_at,
    u.source, coalesce(u.subject, ''), u.email, u.display_name, u.email_verified
FROM sessions s LEFT JOIN unstuck_console_user u ON u.id = s.user_id
WHERE s.token = $1 AND current_timestamp < s.expiry`

// pgCommitSessionSQL is pgxstore's commit with the user's id; $1 token,
// $2 data, $3 expiry, $4 user_id.
const pgCommitSessionSQL = `INSERT INTO sessions (token, data, expiry, user_id) VALUES ($1, $2, $3, $4)
ON CONFLICT (token) DO UPDATE SET data = EXCLUDED.data, expiry = EXCLUDED.expiry, user_id = EXCLUDED.user_id`

func pgFindSession(db pgExecutor) func(context.Context, string) (sessionRow, bool, error) {
	return func(ctx context.Context, token string) (sessionRow, bool, error) {
		var (
			r          sessionRow
			uid        *int64
			name, role *string
			hash       *string
			disabled   *bool
			c, u       *time.Time
			ext        userExtra
		)
		err := db.QueryRow(ctx, pgFindSessionSQL, token).Scan(&r.data, &r.expiry, &r.userID, &uid, &name, &role, &hash, &disabled, &c, &u,
			&ext.source, &ext.subject, &ext.email, &ext.displayName, &ext.verified)
		if errors.Is(err, pgx.ErrNoRows) {
			return sessionRow{}, false, nil
		}
		if err != nil {
			return sessionRow{}, false, err
		}
		if uid != nil && name != nil && role != nil && hash != nil && disabled != nil && c != nil && u != nil {
			r.user = &User{ID: *uid, Username: *name, Role: *role, PasswordHash: *hash, Disabled: *disabled,
				CreatedAt: c.UTC(), UpdatedAt: u.UTC()}
			ext.fill(r.user)
		}
		return r, true, nil
	}
}

func pgCommitSession(db pgExecutor) func(context.Context, string, []byte, time.Time, *int64) error {
	return func(ctx context.Context, token string, b []byte, expiry time.Time, userID *int64) error {
		_, err := db.Exec(ctx, pgCommitSessionSQL, token, b, expiry, userID)
		return err
	}
}

// ?1 token; the expiry (a Julian day, as sqlite3store writes it) in Unix
// milliseconds.
const sqliteFindSessionSQL = `SELECT s.data, CAST(round((s.expiry - 2440587.5) * 86400000.0) AS INTEGER), s.user_id,
    u.id, u.username, u.role, u.password_hash, u.disabled, u.created_at, u.updated_at,
    u.source, coalesce(u.subject, ''), u.email, u.display_name, u.email_verified
FROM sessions s LEFT JOIN unstuck_console_user u ON u.id = s.user_id
WHERE s.token = ?1 AND julianday('now') < s.expiry`

// sqliteCommitSessionSQL is sqlite3store's commit with the user's id; ?1
// token, ?2 data, ?3 expiry (text, as sqlite3store formats it), ?4 user_id.
const sqliteCommitSessionSQL = `REPLACE INTO sessions (token, data, expiry, user_id) VALUES (?1, ?2, julianday(?3), ?4)`

func sqliteFindSession(db sqliteExecutor) func(context.Context, string) (sessionRow, bool, error) {
	return func(ctx context.Context, token string) (sessionRow, bool, error) {
		var (
			r                  sessionRow
			ms                 int64
			uid                *int64
			name, role, hash   *string
			disabled, cAt, uAt *int64
			ext                userExtra
		)
		err := db.QueryRowContext(ctx, sqliteFindSessionSQL, token).Scan(&r.data, &ms, &r.userID, &uid, &name, &role, &hash, &disabled, &cAt, &uAt,
			&ext.source, &ext.subject, &ext.email, &ext.displayName, &ext.verified)
		if errors.Is(err, sql.ErrNoRows) {
			return sessionRow{}, false, nil
		}
		if err != nil {
			return sessionRow{}, false, err
		}
		r.expiry = time.UnixMilli(ms).UTC()
		if uid != nil && name != nil && role != nil && hash != nil && disabled != nil && cAt != nil && uAt != nil {
			r.user = &User{ID: *uid, Username: *name, Role: *role, PasswordHash: *hash, Disabled: *disabled != 0,
				CreatedAt: micros(*cAt), UpdatedAt: micros(*uAt)}
			ext.fill(r.user)
		}
		return r, true, nil
	}
}

func sqliteCommitSession(db sqliteExecutor) func(context.Context, string, []byte, time.Time, *int64) error {
	return func(ctx context.Context, token string, b []byte, expiry time.Time, userID *int64) error {
		_, err := db.ExecContext(ctx, sqliteCommitSessionSQL, token, b, expiry.UTC().Format("2006-01-02T15:04:05.999"), userID)
		return err
	}
}

// userExtra holds the single sign-on columns of a user read beside a
// session (NULL when the session has no user).
type userExtra struct {
	source, subject, email, displayName *string
	verified                            nullFlag
}

func (x userExtra) fill(u *User) {
	for dst, src := range map[*string]*string{&u.Source: x.source, &u.Subject: x.subject, &u.Email: x.email, &u.DisplayName: x.displayName} {
		if src != nil {
			*dst = *src
		}
	}
	u.EmailVerified = x.verified.b
}

// nullFlag scans a boolean column of any dialect (PostgreSQL's boolean,
// SQLite's and MySQL's 0 or 1), NULL as false.
type nullFlag struct{ b bool }

func (f *nullFlag) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		f.b = false
	case bool:
		f.b = x
	case int64:
		f.b = x != 0
	case []byte: // MySQL's text protocol
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return fmt.Errorf("store: cannot scan %q as a boolean", x)
		}
		f.b = n != 0
	default:
		return fmt.Errorf("store: cannot scan %T as a boolean", v)
	}
	return nil
}
