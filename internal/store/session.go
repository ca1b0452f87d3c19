package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"reflect"
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
// further is skipped (issue 12: with an idle timeout, scs commits the
// session on every request). See [WithSessionMemo].
type sessionStore struct {
	base scs.Store
	find func(ctx context.Context, token string) (data []byte, expiry time.Time, found bool, err error)
}

var _ scs.CtxStore = (*sessionStore)(nil)

type sessionMemoKey struct{}

// sessionMemo is what FindCtx read in this request.
type sessionMemo struct {
	token  string
	data   []byte
	expiry time.Time
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
	data, expiry, found, err := s.find(ctx, token)
	if err != nil || !found {
		return nil, false, err
	}
	if m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo); ok {
		*m = sessionMemo{token: token, data: data, expiry: expiry}
	}
	return data, true, nil
}

func (s *sessionStore) Commit(token string, b []byte, expiry time.Time) error {
	return s.base.Commit(token, b, expiry)
}

func (s *sessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo); ok && m.token == token && !m.expiry.IsZero() {
		slack := min(maxSessionSlack, time.Until(expiry)/sessionSlackDivisor)
		if lag := expiry.Sub(m.expiry); lag <= slack && sameSession(m.data, b) {
			return nil
		}
	}
	if err := s.base.Commit(token, b, expiry); err != nil {
		return err
	}
	if m, ok := ctx.Value(sessionMemoKey{}).(*sessionMemo); ok {
		*m = sessionMemo{token: token, data: b, expiry: expiry}
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
// bytes, or (gob writes a map in random order) equal when decoded by scs's
// default codec, the console's.
func sameSession(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var c scs.GobCodec
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
const pgFindSessionSQL = `SELECT data, expiry FROM sessions WHERE token = $1 AND current_timestamp < expiry`

func pgFindSession(db pgExecutor) func(context.Context, string) ([]byte, time.Time, bool, error) {
	return func(ctx context.Context, token string) ([]byte, time.Time, bool, error) {
		var (
			data   []byte
			expiry time.Time
		)
		err := db.QueryRow(ctx, pgFindSessionSQL, token).Scan(&data, &expiry)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, time.Time{}, false, nil
		}
		if err != nil {
			return nil, time.Time{}, false, err
		}
		return data, expiry, true, nil
	}
}

// ?1 token; the expiry (a Julian day, as sqlite3store writes it) in Unix
// milliseconds.
const sqliteFindSessionSQL = `SELECT data, CAST(round((expiry - 2440587.5) * 86400000.0) AS INTEGER)
FROM sessions WHERE token = ?1 AND julianday('now') < expiry`

func sqliteFindSession(db sqliteExecutor) func(context.Context, string) ([]byte, time.Time, bool, error) {
	return func(ctx context.Context, token string) ([]byte, time.Time, bool, error) {
		var (
			data []byte
			ms   int64
		)
		err := db.QueryRowContext(ctx, sqliteFindSessionSQL, token).Scan(&data, &ms)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, time.Time{}, false, nil
		}
		if err != nil {
			return nil, time.Time{}, false, err
		}
		return data, time.UnixMilli(ms).UTC(), true, nil
	}
}
