package idempgx

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/leanpath"
	"github.com/unstuckhq/unstuck/migrate/migratepgx"
)

var (
	_ idemdriver.TxStore = (*Store)(nil)
	_ idemdriver.Admin   = (*Store)(nil)
	_ idemdriver.Seeder  = (*Store)(nil)
)

// defaultSweepLimit is how many records one Sweep deletes at most when the
// caller gives no limit.
const defaultSweepLimit = 1000

// maxReserveTries bounds how often Reserve retries when the record it
// conflicted with is deleted before it can be read.
const maxReserveTries = 5

// Store is an [idemdriver.TxStore] on PostgreSQL through a pgx v5 pool. It is
// safe for concurrent use by many goroutines and processes. Every call is
// one autocommit statement on the pool (Reserve takes a second one when it
// loses a race for a new key, or when it reads first; see Reserve); no
// transaction outlives a statement, except those that [Store.WithinTx]
// begins for the application. Leases and retention are judged by the
// database's clock, statement_timestamp(), unless a params struct carries a
// non-zero Now.
type Store struct {
	pool *pgxpool.Pool
	// caps are the exact-count caps of KeyOverview; nil means the
	// defaults (see SetOverviewCaps).
	caps atomic.Pointer[overviewCaps]
	// path chooses how a lean Reserve asks (see Reserve).
	path leanpath.Path
}

// dbtx is what the store's statements run on: the pool for the Store's own
// autocommit calls, the transaction for the Store that WithinTx hands out.
// *pgxpool.Pool and pgx.Tx satisfy it, so every statement is written once.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// New returns a store on pool, which must not be nil. Its tables are those
// of the pool's search_path and must have been created by [Store.Migrate].
// The store never closes the pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, path: leanpath.Path{Costs: leanCosts}}
}

// Migrate creates or upgrades the store's tables in the pool's search_path
// schema: in one transaction under an advisory lock, it applies every
// migration of the "idem" line that the unstuck_migration table does not
// list yet, in order, each with its bookkeeping row. It is idempotent and
// safe to call concurrently from several processes.
func (s *Store) Migrate(ctx context.Context) error {
	fsys, err := fs.Sub(idemMigrations, "migration/idem")
	if err != nil {
		return fmt.Errorf("idempgx: migrate: %w", err)
	}
	if err := migratepgx.Migrate(ctx, s.pool, "idem", fsys); err != nil {
		return fmt.Errorf("idempgx: migrate: %w", err)
	}
	return nil
}

// Reserve implements [idemdriver.Store.Reserve]. It reads first, in the same
// statement as the insert (see reserveOrGetSQL): a key that has a record
// (a replay, a concurrent duplicate) costs one statement that writes
// nothing, a new key one statement that inserts. The unique constraint on
// the ident, not the read, decides who owns the key, so of racing first
// requests exactly one inserts; the others' inserts do nothing and they
// read the winner's record in a further SELECT. If that record is deleted
// in between, Reserve starts again, a few times. An insert that meets a
// record still uncommitted in another transaction (a [Store.WithinTx] that
// reserved the key) waits for that transaction to end, then returns the
// record it committed or, if it rolled back, creates one.
//
// A lean Reserve (the engine's, [idemdriver.ReserveParams.Lean]) takes one
// of two ways, both with the guarantees above, chosen by the traffic this
// Store has seen. Normally it is one statement that reads and inserts only
// on a miss, so a new key costs one round trip. While at least 4 in 5 of
// its recent lean Reserves find a record (a retry storm), it is a plain
// SELECT first and the insert only on a miss, so a repeat costs the least
// the database can do and a new key one more round trip. Neither way
// writes when the key has a record.
func (s *Store) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return idemdriver.Record{}, false, mapError("reserve", err)
	}
	if !p.Lean {
		rec, created, err := reserve(ctx, db, p)
		return rec, created, call.end(err)
	}
	readFirst := s.path.ReadFirst()
	rec, created, err := reserveLean(ctx, db, p, clock(p.Now), readFirst)
	if err == nil {
		s.path.Record(created)
	}
	return rec, created, call.end(err)
}

// Takeover implements [idemdriver.Store.Takeover] as one conditional UPDATE. It
// returns ErrFenced, having changed nothing, when the record is gone, has
// another owner or fence, holds a live lease, or is pending.
func (s *Store) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return idemdriver.Record{}, mapError("take over", err)
	}
	rec, err := takeover(ctx, db, p)
	return rec, call.end(err)
}

// Complete implements [idemdriver.Store.Complete]. A status that is not one of
// completed, failed, pending or unavailable is refused before the database
// is touched. c.Result is stored as given. With c.RecordID it
// finds the record by primary key.
func (s *Store) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if err := checkFinal(c); err != nil {
		return err // before begin, which may take a connection
	}
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return mapError("complete", err)
	}
	return call.end(complete(ctx, db, id, o, c))
}

// Annotate implements [idemdriver.Store.Annotate].
func (s *Store) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return mapError("annotate", err)
	}
	return call.end(annotate(ctx, db, id, o, a))
}

// Release implements [idemdriver.Store.Release].
func (s *Store) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return mapError("release", err)
	}
	return call.end(release(ctx, db, id, o))
}

// Extend implements [idemdriver.Store.Extend] as one conditional UPDATE.
func (s *Store) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return time.Time{}, mapError("extend", err)
	}
	until, err := extend(ctx, db, id, o, lease, now)
	return until, call.end(err)
}

// Get implements [idemdriver.Store.Get]. ReadAt is the database's clock.
func (s *Store) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return idemdriver.Record{}, false, mapError("get", err)
	}
	rec, ok, err := get(ctx, db, id)
	return rec, ok, call.end(err)
}

// Delete implements [idemdriver.Store.Delete].
func (s *Store) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return false, mapError("delete", err)
	}
	existed, err := deleteRecord(ctx, db, id)
	return existed, call.end(err)
}

// Settle implements [idemdriver.Store.Settle]: an operator's decision.
func (s *Store) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return idemdriver.Record{}, false, mapError("settle", err)
	}
	rec, ok, err := settle(ctx, db, id, st)
	return rec, ok, call.end(err)
}

// Sweep implements [idemdriver.Store.Sweep], oldest retention first, at most
// p.Limit records (1000 when p.Limit <= 0) in one statement: finished
// records are deleted, abandoned ones escalated to pending. Records that
// another statement holds locked are skipped until a later sweep.
func (s *Store) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	db, ctx, call, err := s.begin(ctx)
	if err != nil {
		return idemdriver.SweepResult{}, mapError("sweep", err)
	}
	res, err := sweep(ctx, db, p)
	return res, call.end(err)
}

// begin returns what one call of the Store runs on, and the context its
// statements take. Normally that is the pool under ctx. When nothing but
// its deadline ends ctx (idemdriver.DeadlineOnly: the engine's bound of a
// call whose caller can never cancel it), the call takes a connection of
// its own with that deadline on its socket and statements run under ctx
// without its cancellation, which pgx then does not watch. The cut is the
// one pgx makes when a watched context ends — its default handler sets
// the socket's deadline to that moment, the statement in flight fails and
// the connection is closed — at the same moment, without registering and
// removing a watch per statement (a watch cost about 4 % of a replay at
// one caller). The pool is still waited for under ctx, and call.end clears
// the deadline before the connection goes back.
func (s *Store) begin(ctx context.Context) (dbtx, context.Context, callConn, error) {
	if !idemdriver.DeadlineOnly(ctx) {
		return s.pool, ctx, callConn{}, nil
	}
	deadline, _ := ctx.Deadline()
	if !time.Now().Before(deadline) {
		return nil, ctx, callConn{}, context.DeadlineExceeded
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, ctx, callConn{}, err
	}
	if err := c.Conn().PgConn().Conn().SetDeadline(deadline); err != nil {
		c.Release()
		return nil, ctx, callConn{}, err
	}
	return c, context.WithoutCancel(ctx), callConn{c: c}, nil
}

// callConn is the connection a call of the Store took in begin, if any.
type callConn struct{ c *pgxpool.Conn }

// end gives the call's connection back, its socket's deadline cleared,
// and returns err; an error of the socket's deadline matches
// context.DeadlineExceeded, as when pgx cuts a statement for an ended
// context.
func (call callConn) end(err error) error {
	if call.c == nil {
		return err
	}
	_ = call.c.Conn().PgConn().Conn().SetDeadline(time.Time{}) // closed after a cut: nothing to clear
	call.c.Release()
	if err != nil && pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// The functions below are the store's calls on any executor; the Store
// runs them on its pool, the transaction's Store (see tx.go) on its
// pgx.Tx. None begins or ends a transaction, so they behave alike in
// autocommit and inside one.

// reserve is [Store.Reserve] on db. Inside a transaction each SELECT is a
// new statement and so, in READ COMMITTED, takes a new snapshot: the one
// after a conflicting INSERT sees the row of a concurrent transaction that
// committed while the INSERT waited for it.
func reserve(ctx context.Context, db dbtx, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	now := clock(p.Now)
	if p.Lean {
		return reserveLean(ctx, db, p, now, false)
	}
	for range maxReserveTries {
		var created bool
		rec, err := scanRecord(db.QueryRow(ctx, reserveOrGetSQL,
			p.Scope, p.Operation, p.KeyDigest, p.Fingerprint, p.Owner,
			p.Lease.Microseconds(), p.TTL.Microseconds(), now, p.KeyHash, p.TraceID), &created)
		if err == nil {
			return rec, created, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return idemdriver.Record{}, false, mapError("reserve", err)
		}
		// The insert met a record that the read did not see: a concurrent
		// reservation won.
		rec, err = scanRecord(db.QueryRow(ctx, getSQL, p.Scope, p.Operation, p.KeyDigest, now))
		if err == nil {
			return rec, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return idemdriver.Record{}, false, mapError("reserve", err)
		}
	}
	return idemdriver.Record{}, false, fmt.Errorf("idempgx: reserve: the record was deleted between insert and read %d times", maxReserveTries)
}

// reserveLean is reserve for p.Lean. With readFirst it reads leanColumns
// first (getLeanSQL) and inserts only on a miss (insertLeanSQL); without,
// it asks once, reading and inserting on a miss in the same statement
// (reserveLeanSQL). The unique constraint, not the read, decides who owns
// the key. An insert that meets a record reads again, in a new statement
// and so, inside a transaction in READ COMMITTED, a new snapshot.
func reserveLean(ctx context.Context, db dbtx, p idemdriver.ReserveParams, now any, readFirst bool) (idemdriver.Record, bool, error) {
	for range maxReserveTries {
		if readFirst {
			rows, err := db.Query(ctx, getLeanSQL, p.Scope, p.Operation, p.KeyDigest, now)
			rec, _, err := scanLean(rows, err, p)
			if err == nil {
				return rec, false, nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return idemdriver.Record{}, false, mapError("reserve", err)
			}
		}
		sql := reserveLeanSQL
		if readFirst {
			sql = insertLeanSQL
		}
		rows, err := db.Query(ctx, sql,
			p.Scope, p.Operation, p.KeyDigest, p.Fingerprint, p.Owner,
			p.Lease.Microseconds(), p.TTL.Microseconds(), now, p.KeyHash, p.TraceID)
		rec, created, err := scanLean(rows, err, p)
		if err == nil {
			return rec, created, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return idemdriver.Record{}, false, mapError("reserve", err)
		}
		// The insert met a record that the read did not see: a concurrent
		// reservation won. Read it; the next turn reads first.
		readFirst = true
	}
	return idemdriver.Record{}, false, fmt.Errorf("idempgx: reserve: the record was deleted between insert and read %d times", maxReserveTries)
}

// leanCosts weigh the way of a lean Reserve on a Store (see Store.Reserve
// and leanpath.Path): a miss read first costs a round trip more than the
// one statement, a hit asked in the one statement only a little server
// time more than a plain SELECT, so a Store reads first while more than 4
// in 5 of its lean Reserves find a record, from a score of 32 on.
var leanCosts = leanpath.Costs{Hit: 1, Miss: 4, Max: 64, At: 32}

// scanLean reads the one row of leanColumns, created and read_at that q
// returns (pgx.ErrNoRows when none) for the Reserve of p. A created record
// is completed from p and the values the insert fixes, so that it is
// whole; a found one has idemdriver.LeanFields only. Times are returned in
// UTC. It decodes the row's binary values itself (decodeLean): pgx's Scan
// plans every column on every call, which costs a repeat more than the
// rest of its decoding.
func scanLean(rows pgx.Rows, err error, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return idemdriver.Record{}, false, err
		}
		return idemdriver.Record{}, false, pgx.ErrNoRows
	}
	r, created, err := decodeLean(rows.FieldDescriptions(), rows.RawValues())
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return idemdriver.Record{}, false, err
	}
	r.Ident = p.Ident
	if created {
		r.KeyHash, r.TraceID = p.KeyHash, p.TraceID
		r.Attempts, r.Version = 1, 1
		r.UpdatedAt = r.CreatedAt
	}
	return r, created, nil
}

// leanTypes are the types of leanColumns, created and read_at, in order.
var leanTypes = [...]uint32{pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID, pgtype.ByteaOID, pgtype.TextOID,
	pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.BoolOID, pgtype.TimestamptzOID}

// decodeLean decodes one row of leanColumns, created and read_at in
// PostgreSQL's binary format, which pgx asks for every one of these types
// but text.
// A row in any other shape (another type, the text format, a NULL where
// the table has none, an unknown status) is an error, never a guess.
func decodeLean(fds []pgconn.FieldDescription, vals [][]byte) (r idemdriver.Record, created bool, err error) {
	if len(fds) != len(leanTypes) || len(vals) != len(leanTypes) {
		return r, false, fmt.Errorf("lean row: %d columns, want %d", len(vals), len(leanTypes))
	}
	for i, fd := range fds {
		// A text value is its bytes in either format; pgx asks for text.
		if fd.DataTypeOID != leanTypes[i] || fd.Format != pgtype.BinaryFormatCode && fd.DataTypeOID != pgtype.TextOID {
			return r, false, fmt.Errorf("lean row: column %s has type %d in format %d, want type %d in binary", fd.Name, fd.DataTypeOID, fd.Format, leanTypes[i])
		}
		if vals[i] == nil && i != 3 && i != 6 { // result and lease_expires_at may be NULL
			return r, false, fmt.Errorf("lean row: column %s is NULL", fd.Name)
		}
	}
	int8At := func(i int) (int64, error) {
		if len(vals[i]) != 8 {
			return 0, fmt.Errorf("lean row: column %s has %d bytes, want 8", fds[i].Name, len(vals[i]))
		}
		return int64(binary.BigEndian.Uint64(vals[i])), nil
	}
	timeAt := func(i int) (time.Time, error) {
		us, err := int8At(i)
		if err != nil {
			return time.Time{}, err
		}
		if us == math.MaxInt64 || us == math.MinInt64 {
			return time.Time{}, fmt.Errorf("lean row: column %s is infinite", fds[i].Name)
		}
		return pgEpoch.Add(time.Duration(us) * time.Microsecond), nil
	}
	if r.ID, err = int8At(0); err != nil {
		return r, false, err
	}
	r.Fingerprint = string(vals[1])
	r.Status = statusOf(vals[2])
	if r.Status == "" {
		return r, false, fmt.Errorf("record %d has unknown status %q", r.ID, vals[2])
	}
	if vals[3] != nil {
		r.Result = bytes.Clone(vals[3])
		if r.Result == nil {
			r.Result = []byte{}
		}
	}
	r.Token = string(vals[4])
	if r.Fence, err = int8At(5); err != nil {
		return r, false, err
	}
	if vals[6] != nil {
		if r.LeaseExpiresAt, err = timeAt(6); err != nil {
			return r, false, err
		}
	}
	if r.CreatedAt, err = timeAt(7); err != nil {
		return r, false, err
	}
	if r.ExpiresAt, err = timeAt(8); err != nil {
		return r, false, err
	}
	if len(vals[9]) != 1 {
		return r, false, fmt.Errorf("lean row: column %s has %d bytes, want 1", fds[9].Name, len(vals[9]))
	}
	created = vals[9][0] != 0
	if r.ReadAt, err = timeAt(10); err != nil {
		return r, false, err
	}
	return r, created, nil
}

// pgEpoch is the origin of PostgreSQL's binary timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// statusOf returns the defined status spelled b, or "" if none is; it
// makes no string.
func statusOf(b []byte) idemdriver.Status {
	for _, st := range idemdriver.Statuses {
		if string(b) == string(st) {
			return st
		}
	}
	return ""
}

// takeover is [Store.Takeover] on db.
func takeover(ctx context.Context, db dbtx, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	var row pgx.Row
	if p.Fresh {
		row = db.QueryRow(ctx, takeoverFreshSQL,
			p.Scope, p.Operation, p.KeyDigest, p.Seen.Token, p.Seen.Fence,
			p.NewOwner, p.Lease.Microseconds(), clock(p.Now), p.Fingerprint, p.TTL.Microseconds(), p.TraceID)
	} else {
		row = db.QueryRow(ctx, takeoverSQL,
			p.Scope, p.Operation, p.KeyDigest, p.Seen.Token, p.Seen.Fence,
			p.NewOwner, p.Lease.Microseconds(), clock(p.Now), p.TraceID)
	}
	rec, err := scanRecord(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return idemdriver.Record{}, fmt.Errorf("idempgx: takeover: %w", idemdriver.ErrFenced)
	}
	if err != nil {
		return idemdriver.Record{}, mapError("takeover", err)
	}
	return rec, nil
}

// complete is [Store.Complete] on db.
func complete(ctx context.Context, db dbtx, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if err := checkFinal(c); err != nil {
		return err
	}
	var tag pgconn.CommandTag
	var err error
	if c.RecordID != 0 {
		tag, err = db.Exec(ctx, completeByIDSQL, c.RecordID, id.KeyDigest, o.Token, o.Fence,
			string(c.Status), c.Result, c.ResponseCode, c.LastError, clock(c.Now))
	} else {
		tag, err = db.Exec(ctx, completeSQL, id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence,
			string(c.Status), c.Result, c.ResponseCode, c.LastError, clock(c.Now))
	}
	return casResult("complete", tag, err)
}

// checkFinal refuses a completion whose status is not a final one.
func checkFinal(c idemdriver.Completion) error {
	if !c.Status.Valid() || c.Status == idemdriver.StatusProcessing {
		return fmt.Errorf("idempgx: complete: status %q is not a final status", c.Status)
	}
	return nil
}

// annotate is [Store.Annotate] on db.
func annotate(ctx context.Context, db dbtx, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	tag, err := db.Exec(ctx, annotateSQL,
		id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence,
		a.CorrelationID, a.ExternalRef, a.ResourceIDs, clock(a.Now))
	return casResult("annotate", tag, err)
}

// release is [Store.Release] on db.
func release(ctx context.Context, db dbtx, id idemdriver.Ident, o idemdriver.Owner) error {
	tag, err := db.Exec(ctx, releaseSQL, id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence)
	return casResult("release", tag, err)
}

// extend is [Store.Extend] on db.
func extend(ctx context.Context, db dbtx, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	var until time.Time
	err := db.QueryRow(ctx, extendSQL, id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence,
		lease.Microseconds(), clock(now)).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("idempgx: extend: %w", idemdriver.ErrFenced)
	}
	if err != nil {
		return time.Time{}, mapError("extend", err)
	}
	return until.UTC(), nil
}

// get is [Store.Get] on db.
func get(ctx context.Context, db dbtx, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	rec, err := scanRecord(db.QueryRow(ctx, getSQL, id.Scope, id.Operation, id.KeyDigest, nil))
	if errors.Is(err, pgx.ErrNoRows) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, mapError("get", err)
	}
	return rec, true, nil
}

// settle is [Store.Settle] on db.
func settle(ctx context.Context, db dbtx, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	if st.Delete {
		tag, err := db.Exec(ctx, deleteVersionSQL, id.Scope, id.Operation, id.KeyDigest, st.Version)
		if err != nil {
			return idemdriver.Record{}, false, mapError("settle", err)
		}
		if tag.RowsAffected() == 0 {
			return idemdriver.Record{}, false, idemdriver.ErrStale
		}
		return idemdriver.Record{}, false, nil
	}
	if !st.Status.Terminal() {
		return idemdriver.Record{}, false, fmt.Errorf("idempgx: settle: status %q is not a terminal status", st.Status)
	}
	rec, err := scanRecord(db.QueryRow(ctx, settleSQL, id.Scope, id.Operation, id.KeyDigest, st.Version,
		string(st.Status), st.ExternalRef, st.LastError, clock(st.Now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return idemdriver.Record{}, false, idemdriver.ErrStale
	}
	if err != nil {
		return idemdriver.Record{}, false, mapError("settle", err)
	}
	return rec, true, nil
}

// deleteRecord is [Store.Delete] on db.
func deleteRecord(ctx context.Context, db dbtx, id idemdriver.Ident) (bool, error) {
	tag, err := db.Exec(ctx, deleteSQL, id.Scope, id.Operation, id.KeyDigest)
	if err != nil {
		return false, mapError("delete", err)
	}
	return tag.RowsAffected() > 0, nil
}

// sweep is [Store.Sweep] on db.
func sweep(ctx context.Context, db dbtx, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = defaultSweepLimit
	}
	var deleted, escalated int64
	if err := db.QueryRow(ctx, sweepSQL, limit, clock(p.Now)).Scan(&deleted, &escalated); err != nil {
		return idemdriver.SweepResult{}, mapError("sweep", err)
	}
	return idemdriver.SweepResult{Deleted: int(deleted), Escalated: int(escalated)}, nil
}

// clock is the $now argument of a statement: NULL, meaning the database's
// statement_timestamp(), unless the caller gave a time.
func clock(now time.Time) any {
	if now.IsZero() {
		return nil
	}
	return now
}

// casResult turns the outcome of an owner's compare-and-swap into an error:
// no row matched means another owner, another fence, or no record.
func casResult(op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return mapError(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("idempgx: %s: %w", op, idemdriver.ErrFenced)
	}
	return nil
}

// scanRecord reads one row of recordColumns, then the columns into extra,
// if any, then read_at. A row that cannot be a record (an unknown status,
// a NULL in resource_ids) is an error, never a panic. Times are returned
// in UTC.
func scanRecord(row pgx.Row, extra ...any) (idemdriver.Record, error) {
	var (
		r      idemdriver.Record
		status string
		lease  *time.Time
		hash   *string
	)
	dest := make([]any, 0, 24)
	dest = append(dest, &r.ID, &r.Scope, &r.Operation, &r.KeyDigest, &r.Fingerprint, &status, &r.Result,
		&r.ResponseCode, &r.CorrelationID, &r.ExternalRef, &r.ResourceIDs, &r.LastError,
		&r.Token, &r.Fence, &lease, &r.Attempts, &r.Version,
		&r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt, &hash, &r.TraceID)
	dest = append(dest, extra...)
	err := row.Scan(append(dest, &r.ReadAt)...)
	if err != nil {
		return idemdriver.Record{}, err
	}
	r.Status = idemdriver.Status(status)
	if !r.Status.Valid() {
		return idemdriver.Record{}, fmt.Errorf("record %d has unknown status %q", r.ID, status)
	}
	if lease != nil {
		r.LeaseExpiresAt = lease.UTC()
	}
	if hash != nil {
		r.KeyHash = *hash
	}
	if len(r.ResourceIDs) == 0 {
		r.ResourceIDs = nil
	}
	r.CreatedAt = r.CreatedAt.UTC()
	r.UpdatedAt = r.UpdatedAt.UTC()
	r.ExpiresAt = r.ExpiresAt.UTC()
	r.ReadAt = r.ReadAt.UTC()
	return r, nil
}

// Constraints whose violation means an invalid argument, by the name the
// migration gives them, and the idemdriver.FieldError field each stands
// for.
const (
	scopeCheck     = "unstuck_idem_record_scope_check"
	operationCheck = "unstuck_idem_record_operation_check"
	keyDigestCheck = "unstuck_idem_record_key_digest_check"
)

// mapError wraps err with the store call it came from, mapping SQLSTATEs
// that have a meaning for callers: a check or not-null violation on the
// ident columns is an *[idemdriver.FieldError] (the engine reports it as
// an idem.ValidationError matching idem.ErrInvalidKey); a missing table says
// that Migrate has not run in this search_path.
func mapError(op string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("idempgx: %s: %w", op, err)
	}
	switch pgErr.Code {
	case "23502", "23514": // not_null_violation, check_violation
		field := ""
		switch {
		case pgErr.ConstraintName == scopeCheck || pgErr.ColumnName == "scope":
			field = "scope"
		case pgErr.ConstraintName == operationCheck || pgErr.ColumnName == "operation":
			field = "operation"
		case pgErr.ConstraintName == keyDigestCheck || pgErr.ColumnName == "key_digest":
			field = "key"
		}
		if field != "" {
			verr := &idemdriver.FieldError{Field: field, Reason: "refused by the database: " + pgErr.Message}
			return fmt.Errorf("idempgx: %s: %w: %w", op, verr, err)
		}
	case "42P01", "3F000": // undefined_table, invalid_schema_name
		return fmt.Errorf("idempgx: %s: %w (has Migrate run in the pool's search_path?)", op, err)
	}
	return fmt.Errorf("idempgx: %s: %w", op, err)
}
