package idemsqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/leanpath"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
)

// defaultSweepLimit bounds a Sweep whose params give no limit.
const defaultSweepLimit = 1000

// maxReserveTries bounds how often Reserve retries when the record its
// insert conflicted with is deleted before it can be read.
const maxReserveTries = 5

// Reserve implements [idemdriver.Store.Reserve]. It reads first: a repeat of an
// existing key is answered by one prepared read, which takes no lock. On a
// miss it runs one prepared INSERT … ON CONFLICT DO NOTHING in autocommit,
// which takes its fence from the counter in the same statement (see
// queryInsert). The unique constraint on (scope, operation, key_digest),
// not the read, decides who owns the key: an insert that meets a record
// created since the read returns no row, and that record is read and
// returned. The record expires after the longer of p.TTL and p.Lease.
// With p.Lean the insert may come first, the read only when it meets a
// record (see reserveLean); the outcome and the guarantees are the same.
func (s *Store) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	now := clock(p.Now)
	if p.Lean {
		return s.reserveLean(ctx, p, now)
	}
	for range maxReserveTries {
		rec, ok, err := s.lookup(ctx, p.Ident, now)
		if err != nil {
			return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
		}
		if ok {
			return rec, false, nil
		}
		st, err := s.prepared(ctx, &s.insertStmt, queryInsert)
		if err != nil {
			return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
		}
		created := false
		err = s.writeAfterWait(ctx, func(waited bool) error {
			if waited {
				// Concurrent reservations of one key queue here, and the
				// first usually commits while the others wait: looking
				// again spares them a write.
				if rec, ok, err = s.lookup(ctx, p.Ident, now); err != nil || ok {
					return err
				}
			}
			rec, ok, err = found(scanRecord(st.QueryRowContext(ctx, insertArgs(p, now)...), now))
			created = ok
			return err
		})
		if err != nil {
			return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
		}
		if ok {
			return rec, created, nil
		}
	}
	return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: the record was deleted between insert and read %d times", maxReserveTries)
}

// leanCosts weigh the way of a lean Reserve on a Store (see reserveLean
// and leanpath.Path). Measured at 1 goroutine (BenchmarkRunFirst
// and BenchmarkRunReplay, each way forced, 3 runs, load 6-7 on 2 cores):
// a new key read first pays a read that misses, 19-50 µs of CPU on a
// connection whose page cache another connection's writes made stale; a
// repeat written first pays an insert that meets the record, about 50 µs,
// the writer and the write lock included. The two mistakes cost about the
// same, so a Store reads first while more than half of its lean Reserves
// find a record, from a score of 32 on.
var leanCosts = leanpath.Costs{Hit: 1, Miss: 1, Max: 64, At: 32}

// reserveLean is Reserve for p.Lean: the same steps on statements narrowed
// to leanColumns (queryGetLean, queryInsertLean), in one of two ways that
// the Store's traffic chooses (s.path). Reading first, a repeat is one
// read and a new key a read that misses, then the insert. Writing first, a
// new key is the insert alone, as few statements as a single writer can
// create a record with, and a repeat is an insert that meets the record
// (it writes nothing and takes no fence), then the read.
func (s *Store) reserveLean(ctx context.Context, p idemdriver.ReserveParams, now time.Time) (idemdriver.Record, bool, error) {
	rec, created, err := s.reserveLeanWay(ctx, p, now, s.path.ReadFirst())
	if err == nil {
		s.path.Record(created)
	}
	return rec, created, err
}

// reserveLeanWay is reserveLean reading first or not.
func (s *Store) reserveLeanWay(ctx context.Context, p idemdriver.ReserveParams, now time.Time, readFirst bool) (idemdriver.Record, bool, error) {
	get, err := s.prepared(ctx, &s.getLeanStmt, queryGetLean)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
	}
	ins, err := s.prepared(ctx, &s.insertLeanStmt, queryInsertLean)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
	}
	lookup := func() (idemdriver.Record, bool, error) {
		return s.readLean(ctx, get, p, now)
	}
	for range maxReserveTries {
		if readFirst {
			rec, ok, err := lookup()
			if err != nil {
				return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
			}
			if ok {
				return rec, false, nil
			}
		}
		var rec idemdriver.Record
		ok, created := false, false
		err = s.writeAfterWait(ctx, func(waited bool) error {
			if waited && readFirst {
				// As in Reserve: the first of a queue usually committed.
				// Writing first, the insert finds that out itself, and
				// the writer is not held for a read.
				if rec, ok, err = lookup(); err != nil || ok {
					return err
				}
			}
			rec, ok, err = insertLean(ctx, ins, p, now)
			created = ok
			return err
		})
		if err != nil {
			return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: %w", err)
		}
		if ok {
			return rec, created, nil
		}
		// The insert met a record: read it.
		readFirst = true
	}
	return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: reserve: the record was deleted between insert and read %d times", maxReserveTries)
}

// readLean is the lean read of Reserve for p, stamped with now: on a
// connection of its own prepared statement when db comes from [Open] (see
// leanConn), else with get, queryGetLean prepared on the pool.
func (s *Store) readLean(ctx context.Context, get *sql.Stmt, p idemdriver.ReserveParams, now time.Time) (idemdriver.Record, bool, error) {
	if s.notLean.Load() {
		rows, err := get.QueryContext(ctx, p.Scope, p.Operation, p.KeyDigest)
		return scanLean(rows, err, p, now)
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	var v struct { // one variable for what the closure sets
		rec          idemdriver.Record
		found, other bool
	}
	err = c.Raw(func(dc any) error {
		lc, ok := dc.(*leanConn)
		if !ok {
			v.other = true
			return nil
		}
		var err error
		v.rec, v.found, err = lc.readLean(ctx, p, now)
		return err
	})
	if err = errors.Join(err, c.Close()); err != nil {
		return idemdriver.Record{}, false, err
	}
	if v.other {
		// db does not come from Open: every connection is the driver's.
		s.notLean.Store(true)
		return s.readLean(ctx, get, p, now)
	}
	return v.rec, v.found, nil
}

// insertLean runs queryInsertLean for p at now and returns the record it
// created, whole: the database chose its id and fence, the rest is what
// was bound (see insertArgs) and what the insert fixes. ok is false when a
// record existed.
func insertLean(ctx context.Context, ins *sql.Stmt, p idemdriver.ReserveParams, now time.Time) (rec idemdriver.Record, ok bool, err error) {
	var v struct{ id, fence int64 } // one variable: see scanLean
	err = ins.QueryRowContext(ctx, insertArgs(p, now)...).Scan(&v.id, &v.fence)
	if errors.Is(err, sql.ErrNoRows) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	at := now.UnixMicro()
	rec = idemdriver.Record{ID: v.id, Ident: p.Ident, KeyHash: p.KeyHash, TraceID: p.TraceID, Fingerprint: p.Fingerprint,
		Status: idemdriver.StatusProcessing, Owner: idemdriver.Owner{Token: p.Owner, Fence: v.fence},
		LeaseExpiresAt: sqlstore.Micros(at + p.Lease.Microseconds()), Attempts: 1, Version: 1,
		CreatedAt: sqlstore.Micros(at), UpdatedAt: sqlstore.Micros(at), ExpiresAt: sqlstore.Micros(at + max(p.TTL, p.Lease).Microseconds()), ReadAt: now}
	return rec, true, nil
}

// scanLean reads the one row of leanColumns of rows (or returns qerr, the
// error of the query), if any, for the Reserve of p, stamped with readAt,
// and closes rows: an existing record with idemdriver.LeanFields only.
// The status is matched in place, without a string of its own.
func scanLean(rows *sql.Rows, qerr error, p idemdriver.ReserveParams, readAt time.Time) (idemdriver.Record, bool, error) {
	if qerr != nil {
		return idemdriver.Record{}, false, qerr
	}
	defer rows.Close()
	if !rows.Next() {
		return idemdriver.Record{}, false, rows.Err()
	}
	// One variable holds every destination: each one of its own would
	// escape to the heap through Scan's []any.
	var v struct {
		rec                  idemdriver.Record
		status               sql.RawBytes
		result               sql.Null[[]byte]
		lease                sql.NullInt64
		createdAt, expiresAt int64
	}
	if err := rows.Scan(&v.rec.ID, &v.rec.Fingerprint, &v.status, &v.result, &v.rec.Token, &v.rec.Fence, &v.lease, &v.createdAt, &v.expiresAt); err != nil {
		return idemdriver.Record{}, false, err
	}
	rec, status, result, lease, createdAt, expiresAt := v.rec, v.status, v.result, v.lease, v.createdAt, v.expiresAt
	rec.Status = statusOf(status)
	if rec.Status == "" {
		return idemdriver.Record{}, false, fmt.Errorf("record %d: unknown status %q", rec.ID, status)
	}
	if err := rows.Close(); err != nil {
		return idemdriver.Record{}, false, err
	}
	rec.Ident = p.Ident
	if result.Valid {
		rec.Result = result.V
		if rec.Result == nil {
			rec.Result = []byte{}
		}
	}
	if lease.Valid {
		rec.LeaseExpiresAt = sqlstore.Micros(lease.Int64)
	}
	rec.CreatedAt = sqlstore.Micros(createdAt)
	rec.ExpiresAt = sqlstore.Micros(expiresAt)
	rec.ReadAt = readAt
	return rec, true, nil
}

// statusOf returns the defined status spelled b, or "" if none is.
func statusOf[S ~string | ~[]byte](b S) idemdriver.Status {
	for _, st := range idemdriver.Statuses {
		if string(b) == string(st) {
			return st
		}
	}
	return ""
}

// insertArgs are the arguments of queryInsert for p at now.
func insertArgs(p idemdriver.ReserveParams, now time.Time) []any {
	at := now.UnixMicro()
	return []any{p.Scope, p.Operation, p.KeyDigest, p.Fingerprint, p.Owner,
		at + p.Lease.Microseconds(), at, at + max(p.TTL, p.Lease).Microseconds(), p.KeyHash, p.TraceID}
}

// insert is Reserve inside a write transaction on ex: it returns the
// record for p.Ident, inserting it with a new fence if there is none.
func insert(ctx context.Context, ex Executor, p idemdriver.ReserveParams, now time.Time) (idemdriver.Record, bool, error) {
	rec, ok, err := get(ctx, ex, p.Ident, now)
	if err != nil || ok {
		return rec, false, err
	}
	rec, ok, err = found(scanRecord(ex.QueryRowContext(ctx, queryInsert, insertArgs(p, now)...), now))
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("insert: %w", err)
	}
	if !ok {
		// Unreachable while the transaction holds the write lock, but the
		// constraint, not the read above, decides.
		return idemdriver.Record{}, false, errors.New("insert collided with a record that cannot be read")
	}
	return rec, true, nil
}

// Takeover implements [idemdriver.Store.Takeover]. The check and the update run in
// one BEGIN IMMEDIATE transaction, so a takeover that is refused with
// [idemdriver.ErrFenced] consumes no fence. A pending record is never taken over.
func (s *Store) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	var rec idemdriver.Record
	if err := s.immediate(ctx, func(conn *sql.Conn) (err error) { rec, err = ops{}.Takeover(ctx, conn, p); return err }); err != nil {
		return idemdriver.Record{}, sqlstore.Wrap(driverName, "takeover", err)
	}
	return rec, nil
}

// Takeover is the transaction of Takeover. ex must be inside a write
// transaction.
func (ops) Takeover(ctx context.Context, ex Executor, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	now := clock(p.Now)
	at := now.UnixMicro()
	var id int64
	err := ex.QueryRowContext(ctx, queryTakeoverCheck,
		p.Scope, p.Operation, p.KeyDigest, p.Seen.Token, p.Seen.Fence, at).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return idemdriver.Record{}, idemdriver.ErrFenced
	}
	if err != nil {
		return idemdriver.Record{}, fmt.Errorf("check owner: %w", err)
	}
	fence, err := nextFence(ctx, ex)
	if err != nil {
		return idemdriver.Record{}, err
	}
	leaseEnd := at + p.Lease.Microseconds()
	var row *sql.Row
	if p.Fresh {
		row = ex.QueryRowContext(ctx, queryTakeoverFresh,
			p.NewOwner, fence, leaseEnd, at,
			p.Fingerprint, at+max(p.TTL, p.Lease).Microseconds(), p.TraceID, id)
	} else {
		row = ex.QueryRowContext(ctx, queryTakeover, p.NewOwner, fence, leaseEnd, at, p.TraceID, id)
	}
	rec, err := scanRecord(row, now)
	if err != nil {
		return idemdriver.Record{}, fmt.Errorf("update: %w", err)
	}
	return rec, nil
}

// Complete implements [idemdriver.Store.Complete]. It refuses a c.Status that is
// processing or not a defined status before touching the database. A nil
// c.Result is stored as no result.
func (s *Store) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	st, err := s.prepared(ctx, &s.completeStmt, queryComplete)
	if err == nil {
		err = s.write(ctx, func() error { return ops{}.Complete(ctx, sqlstore.StmtExec{St: st}, id, o, c) })
	}
	return sqlstore.Wrap(driverName, "complete", err)
}

// Annotate implements [idemdriver.Store.Annotate]. Empty CorrelationID and
// ExternalRef leave the stored values; ResourceIDs are appended in order,
// without removing duplicates.
func (s *Store) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	return sqlstore.Wrap(driverName, "annotate", s.write(ctx, func() error { return ops{}.Annotate(ctx, s.db, id, o, a) }))
}

// Release implements [idemdriver.Store.Release].
func (s *Store) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	return sqlstore.Wrap(driverName, "release", s.write(ctx, func() error { return sqlstore.Release(ctx, s.db, id, o) }))
}

// Extend implements [idemdriver.Store.Extend].
func (s *Store) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	var until time.Time
	err := s.write(ctx, func() (err error) { until, err = ops{}.Extend(ctx, s.db, id, o, lease, now); return err })
	return until, sqlstore.Wrap(driverName, "extend", err)
}

// Get implements [idemdriver.Store.Get]. The record's ReadAt is the process clock
// at the time of the read.
func (s *Store) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	rec, ok, err := s.lookup(ctx, id, clock(time.Time{}))
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemsqlite: get: %w", err)
	}
	return rec, ok, nil
}

// Delete implements [idemdriver.Store.Delete].
func (s *Store) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	var existed bool
	err := s.write(ctx, func() (err error) { existed, err = sqlstore.DeleteRecord(ctx, s.db, id); return err })
	return existed, sqlstore.Wrap(driverName, "delete", err)
}

// Settle implements [idemdriver.Store.Settle].
func (s *Store) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	var (
		rec idemdriver.Record
		ok  bool
	)
	if err := s.write(ctx, func() (err error) { rec, ok, err = ops{}.Settle(ctx, s.db, id, st); return err }); err != nil {
		return idemdriver.Record{}, false, sqlstore.Wrap(driverName, "settle", err)
	}
	return rec, ok, nil
}

// Sweep implements [idemdriver.Store.Sweep]. It handles the records whose
// retention ended first, at most p.Limit of them (1000 when p.Limit <= 0),
// in one BEGIN IMMEDIATE transaction: abandoned records are escalated to
// pending, then finished ones deleted.
func (s *Store) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	var res idemdriver.SweepResult
	err := s.immediate(ctx, func(conn *sql.Conn) error {
		var err error
		res, err = ops{}.Sweep(ctx, conn, p)
		return err
	})
	if err != nil {
		return idemdriver.SweepResult{}, fmt.Errorf("idemsqlite: sweep: %w", err)
	}
	return res, nil
}

// The single-statement writes below run on any executor: the Store runs
// them on its pool under its writer semaphore, the Store of WithinTx on the
// transaction's connection. None begins a transaction. Their errors are
// not prefixed; the callers add "idemsqlite: <call>".

// Complete writes c for the owner o; see [Store.Complete].
func (ops) Complete(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if !c.Status.Valid() || c.Status == idemdriver.StatusProcessing {
		return fmt.Errorf("status %q is not a final status", c.Status)
	}
	res, err := ex.ExecContext(ctx, queryComplete,
		string(c.Status), c.Result, int64(c.ResponseCode), c.LastError, clock(c.Now).UnixMicro(),
		id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence)
	return sqlstore.CASResult(res, err)
}

// Annotate attaches a for the owner o; see [Store.Annotate].
func (ops) Annotate(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	ids, err := json.Marshal(sqlstore.NonNil(a.ResourceIDs))
	if err != nil {
		return fmt.Errorf("encode resource ids: %w", err)
	}
	res, err := ex.ExecContext(ctx, queryAnnotate,
		a.CorrelationID, a.ExternalRef, string(ids), clock(a.Now).UnixMicro(),
		id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence)
	return sqlstore.CASResult(res, err)
}

// Extend moves the lease of the owner o; see [Store.Extend].
func (ops) Extend(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	at := clock(now)
	var until int64
	err := ex.QueryRowContext(ctx, queryExtend, at.Add(lease).UnixMicro(), at.UnixMicro(),
		id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence).Scan(&until)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, idemdriver.ErrFenced
	}
	if err != nil {
		return time.Time{}, err
	}
	return sqlstore.Micros(until), nil
}

// Settle applies an operator's decision; see [Store.Settle].
func (ops) Settle(ctx context.Context, ex Executor, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	if st.Delete {
		return idemdriver.Record{}, false, sqlstore.DeleteAtVersion(ctx, ex, id, st.Version)
	}
	if !st.Status.Terminal() {
		return idemdriver.Record{}, false, fmt.Errorf("status %q is not a terminal status", st.Status)
	}
	now := clock(st.Now)
	rec, err := scanRecord(ex.QueryRowContext(ctx, querySettle, string(st.Status), st.ExternalRef, st.LastError, now.UnixMicro(),
		id.Scope, id.Operation, id.KeyDigest, st.Version), now)
	if errors.Is(err, sql.ErrNoRows) {
		return idemdriver.Record{}, false, idemdriver.ErrStale
	}
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	return rec, true, nil
}

// Sweep escalates abandoned and deletes finished expired records; see
// [Store.Sweep]. ex must be inside a write transaction, so that the two
// statements see one state.
func (ops) Sweep(ctx context.Context, ex Executor, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	now := clock(p.Now).UnixMicro()
	step := func(query string) func(limit int64) (sql.Result, error) {
		return func(limit int64) (sql.Result, error) { return ex.ExecContext(ctx, query, now, limit) }
	}
	return sqlstore.Sweep(p, defaultSweepLimit, step(querySweepEscalate), step(querySweep))
}

// clock returns now, or the process clock when now is zero, truncated to
// the microseconds the store keeps so that a record's ReadAt compares with
// its stored times exactly as the store's own queries do.
func clock(now time.Time) time.Time {
	if now.IsZero() {
		now = time.Now()
	}
	return time.UnixMicro(now.UnixMicro()).UTC()
}

// get reads the record for id on ex, stamped with readAt; ok is false when
// there is none. Inside a transaction it sees the transaction's own writes.
func get(ctx context.Context, ex Executor, id idemdriver.Ident, readAt time.Time) (idemdriver.Record, bool, error) {
	return found(scanRecord(ex.QueryRowContext(ctx, queryGet, id.Scope, id.Operation, id.KeyDigest), readAt))
}

// lookup reads the record for id outside any transaction, with queryGet
// prepared on the pool: parsing the query is most of the cost of a read.
func (s *Store) lookup(ctx context.Context, id idemdriver.Ident, readAt time.Time) (idemdriver.Record, bool, error) {
	st, err := s.prepared(ctx, &s.getStmt, queryGet)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("prepare: %w", err)
	}
	return found(scanRecord(st.QueryRowContext(ctx, id.Scope, id.Operation, id.KeyDigest), readAt))
}

// found turns the outcome of scanning one record into (rec, ok, err):
// sql.ErrNoRows becomes ok = false.
func found(rec idemdriver.Record, err error) (idemdriver.Record, bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	return rec, true, nil
}

// nextFence takes the next fence from the counter. It must run inside the
// write transaction that stores the fence.
func nextFence(ctx context.Context, ex Executor) (int64, error) {
	var fence int64
	if err := ex.QueryRowContext(ctx, queryNextFence).Scan(&fence); err != nil {
		return 0, fmt.Errorf("next fence: %w", err)
	}
	return fence, nil
}

// scanRecord reads one row of recordColumns, stamped with readAt. It returns
// sql.ErrNoRows unwrapped, and an error, never a panic, for a row that does
// not decode (an unknown status, resource_ids that are not a JSON array of
// strings).
func scanRecord(row interface{ Scan(dest ...any) error }, readAt time.Time) (idemdriver.Record, error) {
	var (
		rec                            idemdriver.Record
		status, resourceIDs            string
		result                         sql.Null[[]byte]
		responseCode, attempts         int64
		leaseExpiresAt                 sql.NullInt64
		createdAt, updatedAt, expireAt int64
		keyHash                        sql.NullString
	)
	err := row.Scan(&rec.ID, &rec.Scope, &rec.Operation, &rec.KeyDigest, &rec.Fingerprint,
		&status, &result, &responseCode, &rec.CorrelationID, &rec.ExternalRef, &resourceIDs,
		&rec.LastError, &rec.Token, &rec.Fence, &leaseExpiresAt, &attempts, &rec.Version,
		&createdAt, &updatedAt, &expireAt, &keyHash, &rec.TraceID)
	if err != nil {
		return idemdriver.Record{}, err
	}
	rec.KeyHash = keyHash.String
	if err := sqlstore.DecodeRecord(&rec, status, result, resourceIDs); err != nil {
		return idemdriver.Record{}, err
	}
	rec.ResponseCode = int(responseCode)
	rec.Attempts = int(attempts)
	if leaseExpiresAt.Valid {
		rec.LeaseExpiresAt = sqlstore.Micros(leaseExpiresAt.Int64)
	}
	rec.CreatedAt = sqlstore.Micros(createdAt)
	rec.UpdatedAt = sqlstore.Micros(updatedAt)
	rec.ExpiresAt = sqlstore.Micros(expireAt)
	rec.ReadAt = readAt
	return rec, nil
}
