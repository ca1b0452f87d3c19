package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"io/fs"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/migrate"
	"github.com/unstuckhq/unstuck/migrate/migratemysql"
	"github.com/unstuckhq/unstuck/migrate/migratepgx"
	"github.com/unstuckhq/unstuck/migrate/migratesqlite"
)

// Dialects, as [Trail.Dialect] reports them.
const (
	DialectPostgres = "postgres"
	DialectSQLite   = "sqlite"
	DialectMySQL    = "mysql"
)

// Outcomes of the entries the console records. Outcome is free text to the
// trail (any short token is stored); these are the ones the console uses.
const (
	// OutcomeApplied: the decision was applied, in the same transaction as
	// its entry.
	OutcomeApplied = "applied"
	// OutcomeDenied: the actor's role may not take the action (403).
	OutcomeDenied = "denied"
	// OutcomeConflict: the target changed since the actor saw it (409);
	// nothing was applied.
	OutcomeConflict = "conflict"
	// OutcomeRead: the actor viewed something audited, such as a stored
	// response or an export of the trail.
	OutcomeRead = "read"
)

// Limits of an entry's fields, in bytes. Fields the server decides (actor,
// action, target, outcome, reason, states) are refused beyond them; fields
// that come from the client's request (request ID, client address, user
// agent) are cut to maxRequestField instead, so that a long header never
// prevents recording an attempt.
const (
	MaxReasonBytes  = 4096
	MaxStateBytes   = 256 << 10
	maxNameBytes    = 256
	maxRequestField = 512
)

// Errors of the trail's calls, matched with errors.Is.
var (
	// ErrInvalid: an entry or a filter was refused before the database was
	// asked. The error is a *[fielderr.Error] naming the field.
	ErrInvalid = errors.New("invalid argument")
	// ErrNotMigrated: the audit table does not exist: Migrate has not run
	// on this database (or search_path).
	ErrNotMigrated = errors.New("audit table not found: run the audit migration")
)

// invalid is the error of an argument refused by the trail: field names it
// as the database column does ("actor", "target_kind", "reason", …) and
// reason says why. It matches [ErrInvalid].
func invalid(field, reason string) *fielderr.Error {
	return &fielderr.Error{Field: field, Reason: reason, In: "audit", Is: ErrInvalid}
}

// Entry is one record of the trail.
//
// On append, the caller fills Actor, Role, Action, TargetKind, TargetID,
// Reason, Before, After, Outcome and the request's RequestID, ClientAddr and
// UserAgent; Actor, Action, TargetKind and Outcome are required. Seq, At,
// KeyID, PrevHash and Hash are ignored and assigned by the trail. Before and After
// are JSON documents (or empty): they are stored compacted, keys in the
// caller's order, with HTML characters escaped as json.Marshal writes them. The appended Entry is returned exactly as stored and
// hashed.
type Entry struct {
	// Seq numbers entries 1, 2, 3, … with no gap in commit order.
	Seq int64
	// At is the database's clock when the entry was appended, UTC, to the
	// microsecond (see the package documentation for SQLite).
	At time.Time
	// Actor is who acted: a console username, or "system:…" for the
	// program itself. Role is the actor's role when they acted.
	Actor string
	Role  string
	// Action is what was done or attempted ("key.forget", "operation.retry",
	// "audit.export", …).
	Action string
	// TargetKind and TargetID name what it was done to ("key", "42").
	TargetKind string
	TargetID   string
	// Reason is the actor's stated reason, at most MaxReasonBytes.
	Reason string
	// Before and After are the target's state around the action, as JSON;
	// nil when there is none (a denied attempt has no After).
	Before json.RawMessage
	After  json.RawMessage
	// Outcome is applied, denied, conflict, read, … (the Outcome…
	// constants).
	Outcome string
	// RequestID, ClientAddr and UserAgent identify the HTTP request.
	RequestID  string
	ClientAddr string
	UserAgent  string
	// KeyID names the audit key (see [KeyID]) the entry was MACed with;
	// empty for a legacy entry, appended before the chain was keyed.
	KeyID string
	// PrevHash is the previous entry's Hash (32 zero bytes for seq 1), and
	// Hash the HMAC-SHA-256 under the KeyID's key of this entry's
	// canonical encoding, PrevHash included (for a legacy entry, its
	// SHA-256).
	PrevHash []byte
	Hash     []byte
}

// Trail is the audit trail on one database: PostgreSQL through a pgx pool,
// or SQLite through a *sql.DB. It is safe for concurrent use. It never
// closes the pool or handle it was given. The table name is unqualified:
// on PostgreSQL it resolves in the pool's search_path.
type Trail struct {
	dialect string
	pool    *pgxpool.Pool // postgres
	sqldb   *sql.DB       // sqlite, mysql
	// writer is a semaphore of one that Append holds on SQLite, so that
	// this process's own appends queue here and hand the write lock over
	// at once, rather than poll in SQLite's busy handler.
	writer chan struct{}
	// exportPage is how many entries Export reads per query; tests lower
	// it to cross pages with few entries.
	exportPage int
	// keys MACs appends and checkpoints and verifies; nil refuses them.
	keys *Keyring
}

// Option configures a trail.
type Option func(*Trail)

// WithKeys gives the trail the audit keys that appends, verifications and
// checkpoints need. Without it, those calls fail with [ErrNoKey]; listing
// and exporting do not need it.
func WithKeys(k *Keyring) Option {
	return func(t *Trail) { t.keys = k }
}

// NewPostgres returns a trail on pool, which must not be nil.
func NewPostgres(pool *pgxpool.Pool, opts ...Option) *Trail {
	t := &Trail{dialect: DialectPostgres, pool: pool, exportPage: defaultExportPage}
	for _, o := range opts {
		o(t)
	}
	return t
}

// NewSQLite returns a trail on db, which must not be nil and should come
// from idem/idemsqlite's Open (WAL, busy timeout on every connection). The
// trail's own appends queue behind each other in the process; against
// other writers (the idem driver's, a decision's transaction) they wait in
// SQLite's busy handler.
func NewSQLite(db *sql.DB, opts ...Option) *Trail {
	t := &Trail{dialect: DialectSQLite, sqldb: db, writer: make(chan struct{}, 1), exportPage: defaultExportPage}
	for _, o := range opts {
		o(t)
	}
	return t
}

// NewMySQL returns a trail on db, a MySQL 8 or MariaDB 10.6+ database
// opened with idem/idemmysql's Open (strict mode), which must not be nil.
// Appends are serialised by a lock row (see [Trail.AppendMySQLTx]).
func NewMySQL(db *sql.DB, opts ...Option) *Trail {
	t := &Trail{dialect: DialectMySQL, sqldb: db, exportPage: defaultExportPage}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Dialect reports [DialectPostgres], [DialectSQLite] or [DialectMySQL].
func (t *Trail) Dialect() string { return t.dialect }

// Migrate creates or upgrades the trail's table: it applies every migration
// of the "audit" line that the unstuck_migration table (shared with the
// drivers and the console) does not list yet. It is idempotent, safe to
// call concurrently from several processes, and independent of the other
// lines' order. On PostgreSQL it needs a role that may create tables,
// functions and triggers: the table's owner, which the application should
// not be (see the package documentation).
func (t *Trail) Migrate(ctx context.Context) error {
	fsys, err := fs.Sub(migrations, "migration/"+t.dialect)
	if err != nil {
		return fmt.Errorf("audit: migrate: %w", err)
	}
	switch t.dialect {
	case DialectPostgres:
		err = migratepgx.Migrate(ctx, t.pool, migrationLine, fsys)
	case DialectMySQL:
		err = migratemysql.Migrate(ctx, t.sqldb, migrationLine, fsys)
	default:
		err = migratesqlite.Migrate(ctx, t.sqldb, migrationLine, fsys)
	}
	if err != nil {
		return fmt.Errorf("audit: migrate: %w", err)
	}
	if t.keys != nil && !migrate.Checking(ctx) {
		// The keying marker the migration wrote, sealed at once when the
		// key is at hand (else by the first keyed process: SealKeying).
		if _, err := t.SealKeying(ctx); err != nil {
			return fmt.Errorf("audit: migrate: %w", err)
		}
	}
	return nil
}

// Executor is a SQLite transaction that [Trail.AppendSQLiteTx] appends
// on: *sql.Tx satisfies it, and so does a *sql.Conn inside BEGIN … COMMIT.
type Executor interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// AppendPgxTx appends e on tx, a PostgreSQL transaction the caller began
// and owns, so that the entry commits or rolls back with the decision it
// records; it returns the entry as stored, or an error matching
// [ErrInvalid] for a refused entry. It neither commits nor rolls back tx.
// It fails on a SQLite trail.
//
// Appends are serialised so that the chain never forks: AppendPgxTx takes
// a transaction-scoped advisory lock that is held until tx ends, so call it
// last, just before the commit: every other append waits for that commit,
// and a transaction that takes row locks after appending can deadlock with
// another that waits to append. tx must be READ COMMITTED, so that the head
// read after the lock is the committed one; AppendPgxTx refuses any other
// level.
//
// If tx rolls back, the entry is gone and its seq is taken by the next
// append: seq has no gaps.
func (t *Trail) AppendPgxTx(ctx context.Context, tx pgx.Tx, e Entry) (Entry, error) {
	if t.dialect != DialectPostgres {
		return Entry{}, errors.New("audit: append: a pgx transaction given to a " + t.dialect + " trail")
	}
	e, err := t.normalize(e)
	if err != nil {
		return Entry{}, err
	}
	out, err := pgAppend(ctx, tx, e, t.keys)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	return out, nil
}

// AppendSQLiteTx is [Trail.AppendPgxTx] on ex, a SQLite transaction the
// caller began and owns, with the same contract but for the lock: the
// transaction must hold the database's write lock already (BEGIN
// IMMEDIATE, as a handle opened with _txlock=immediate begins, or a write
// made before), which serialises appends. A deferred transaction whose
// snapshot another writer overtook fails with SQLITE_BUSY here rather than
// fork the chain. It fails on a PostgreSQL trail.
func (t *Trail) AppendSQLiteTx(ctx context.Context, ex Executor, e Entry) (Entry, error) {
	if t.dialect != DialectSQLite {
		return Entry{}, errors.New("audit: append: a SQLite transaction given to a " + t.dialect + " trail")
	}
	e, err := t.normalize(e)
	if err != nil {
		return Entry{}, err
	}
	out, err := sqliteAppend(ctx, ex, e, t.keys)
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	return out, nil
}

// Append appends e in a transaction of its own and returns it as stored:
// for what commits nothing else, such as a denied or conflicting attempt or
// an audited read. Appends are serialised as for AppendPgxTx. On SQLite it
// must not be called while the same goroutine holds a write transaction: it
// would wait for that transaction, which waits for it, until the busy
// timeout; use AppendSQLiteTx there.
func (t *Trail) Append(ctx context.Context, e Entry) (Entry, error) {
	e, err := t.normalize(e)
	if err != nil {
		return Entry{}, err
	}
	var out Entry
	switch t.dialect {
	case DialectPostgres:
		err = pgx.BeginTxFunc(ctx, t.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			var err error
			out, err = pgAppend(ctx, tx, e, t.keys)
			return err
		})
	case DialectMySQL:
		out, err = t.mysqlAppendOwn(ctx, e)
	default:
		err = t.sqliteWrite(ctx, func(conn *sql.Conn) error {
			var err error
			out, err = sqliteAppend(ctx, conn, e, t.keys)
			return err
		})
	}
	if err != nil {
		return Entry{}, fmt.Errorf("audit: append: %w", err)
	}
	return out, nil
}

// sqliteWrite runs fn in a BEGIN IMMEDIATE transaction while holding the
// trail's writer semaphore.
func (t *Trail) sqliteWrite(ctx context.Context, fn func(conn *sql.Conn) error) error {
	select {
	case t.writer <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-t.writer }()
	return migratesqlite.Immediate(ctx, t.sqldb, fn)
}

// normalize checks that the trail has its keys and e's fields, and returns
// the entry to store: assigned fields cleared, states compacted, request
// fields made valid UTF-8 and cut to their limit. It returns an error
// matching ErrNoKey without keys, a *fielderr.Error for a refused field.
func (t *Trail) normalize(e Entry) (Entry, error) {
	if t.keys == nil {
		return Entry{}, fmt.Errorf("audit: append: %w", ErrNoKey)
	}
	e.Seq, e.At, e.KeyID, e.PrevHash, e.Hash = 0, time.Time{}, "", nil, nil
	for _, f := range []struct {
		name     string
		value    string
		required bool
		max      int
	}{
		{"actor", e.Actor, true, maxNameBytes},
		{"role", e.Role, false, maxNameBytes},
		{"action", e.Action, true, maxNameBytes},
		{"target_kind", e.TargetKind, true, maxNameBytes},
		{"target_id", e.TargetID, false, maxNameBytes},
		{"outcome", e.Outcome, true, maxNameBytes},
		{"reason", e.Reason, false, MaxReasonBytes},
	} {
		if err := checkText(f.name, f.value, f.required, f.max); err != nil {
			return Entry{}, err
		}
	}
	var err error
	if e.Before, err = compactState("before", e.Before); err != nil {
		return Entry{}, err
	}
	if e.After, err = compactState("after", e.After); err != nil {
		return Entry{}, err
	}
	e.RequestID = requestField(e.RequestID)
	e.ClientAddr = requestField(e.ClientAddr)
	e.UserAgent = requestField(e.UserAgent)
	return e, nil
}

// checkText refuses an empty required value, one over max bytes, and text
// that is not valid UTF-8 or holds a NUL (which PostgreSQL cannot store,
// so that both dialects accept the same entries).
func checkText(field, v string, required bool, max int) error {
	switch {
	case required && strings.TrimSpace(v) == "":
		return invalid(field, "required")
	case len(v) > max:
		return invalid(field, fmt.Sprintf("longer than %d bytes", max))
	case !utf8.ValidString(v):
		return invalid(field, "not valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		return invalid(field, "contains a NUL byte")
	}
	return nil
}

// compactState returns state in the form encoding/json writes it:
// compacted, with <, >, &, U+2028 and U+2029 escaped in strings, as
// json.Marshal does by default. Stored that way, a state survives any
// round trip through encoding/json byte for byte, so an exported entry
// still hashes to its Hash. It returns nil for an empty state or JSON null,
// and a *fielderr.Error for invalid or oversized JSON.
func compactState(field string, state json.RawMessage) (json.RawMessage, error) {
	if len(state) > MaxStateBytes {
		return nil, invalid(field, fmt.Sprintf("longer than %d bytes", MaxStateBytes))
	}
	if len(bytes.TrimSpace(state)) == 0 {
		return nil, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, state); err != nil {
		return nil, invalid(field, "not valid JSON: "+err.Error())
	}
	if compact.String() == "null" {
		return nil, nil
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, compact.Bytes())
	return out.Bytes(), nil
}

// requestField makes a client-supplied value storable: invalid UTF-8
// replaced, NUL bytes dropped, cut to maxRequestField bytes on a rune
// boundary.
func requestField(v string) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	v = strings.ReplaceAll(v, "\x00", "")
	if len(v) <= maxRequestField {
		return v
	}
	cut := maxRequestField
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut]
}
