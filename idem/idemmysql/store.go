package idemmysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
)

// defaultSweepLimit bounds a Sweep whose params give no limit.
const defaultSweepLimit = 1000

// maxReserveTries bounds how often Reserve retries when the record its
// insert conflicted with is deleted before it can be read.
const maxReserveTries = 5

// Executor is what the application writes through: *sql.DB, *sql.Conn
// and *sql.Tx satisfy it; the store's own statements run on one too.
type Executor = sqlstore.Executor

// Reserve implements [idemdriver.Store.Reserve]. It reads first: a repeat
// of an existing key is answered by one prepared read, which takes no lock
// and also reads the database's clock. On a miss it runs one prepared
// INSERT in autocommit, whose trigger takes the fence from the counter in
// the same statement, and reads the fence back by id. The unique key on
// (scope, operation, key_digest), not the read, decides who owns the key:
// an insert refused as a duplicate (1062) reads the record that won and
// returns it. The record expires after the longer of p.TTL and p.Lease.
// With p.Lean, an existing record is read with its idemdriver.LeanFields
// only (queryGetLean); a created record is always whole.
func (s *Store) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	slot, query, scan := &s.getStmt, queryGet, scanRecord
	if p.Lean {
		slot, query, scan = &s.getLeanStmt, queryGetLean, func(row interface{ Scan(...any) error }) (idemdriver.Record, bool, int64, error) {
			return scanLean(row, p.Ident)
		}
	}
	get, err := s.prepared(ctx, slot, query)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemmysql: reserve: %w", err)
	}
	ins, err := s.prepared(ctx, &s.insertStmt, queryInsert)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemmysql: reserve: %w", err)
	}
	fence, err := s.prepared(ctx, &s.fenceStmt, queryFenceOf)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemmysql: reserve: %w", err)
	}
	for range maxReserveTries {
		rec, ok, now, err := scan(get.QueryRowContext(ctx, nowArg(p.Now), p.Scope, p.Operation, p.KeyDigest))
		if err != nil {
			return idemdriver.Record{}, false, fmt.Errorf("idemmysql: reserve: %w", err)
		}
		if ok {
			return rec, false, nil
		}
		rec, ok, err = insert(ctx, sqlstore.StmtExec{St: ins}, sqlstore.StmtExec{St: fence}, p, now)
		if IsError(err, errDeadlock) {
			continue // rolled back: look again
		}
		if err != nil {
			return idemdriver.Record{}, false, fmt.Errorf("idemmysql: reserve: %w", err)
		}
		if ok {
			return rec, true, nil
		}
	}
	return idemdriver.Record{}, false, fmt.Errorf("idemmysql: reserve: the record was deleted between insert and read %d times", maxReserveTries)
}

// reserveTx is Reserve inside a transaction on ex. After a duplicate it
// reads with a locking read, which sees the latest committed record
// whatever the transaction's isolation (a REPEATABLE READ snapshot would
// not).
func reserveTx(ctx context.Context, ex Executor, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	query := queryGet
	for range maxReserveTries {
		rec, ok, now, err := read(ctx, ex, query, p.Ident, p.Now)
		if err != nil {
			return idemdriver.Record{}, false, err
		}
		if ok {
			return rec, false, nil
		}
		rec, ok, err = insert(ctx, ex, ex, p, now)
		if err != nil {
			return idemdriver.Record{}, false, err
		}
		if ok {
			return rec, true, nil
		}
		query = queryGetLocking
	}
	return idemdriver.Record{}, false, fmt.Errorf("the record was deleted between insert and read %d times", maxReserveTries)
}

// insert inserts the record of p at now (µs) on insEx, reads the fence
// the trigger gave it on fenceEx, and returns the record, whole; ok is
// false when a record existed (the insert was refused as a duplicate), or
// when the new record was deleted before its fence could be read.
func insert(ctx context.Context, insEx, fenceEx Executor, p idemdriver.ReserveParams, now int64) (idemdriver.Record, bool, error) {
	lease, expires := now+p.Lease.Microseconds(), now+max(p.TTL, p.Lease).Microseconds()
	res, err := insEx.ExecContext(ctx, queryInsert, p.Scope, p.Operation, p.KeyDigest, p.Fingerprint, p.Owner,
		lease, now, now, expires, p.KeyHash, p.TraceID)
	if IsError(err, errDuplicate) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	var fence int64
	err = fenceEx.QueryRowContext(ctx, queryFenceOf, id).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return idemdriver.Record{}, false, nil
	}
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("read the fence: %w", err)
	}
	rec := idemdriver.Record{ID: id, Ident: p.Ident, KeyHash: p.KeyHash, TraceID: p.TraceID, Fingerprint: p.Fingerprint,
		Status: idemdriver.StatusProcessing, Owner: idemdriver.Owner{Token: p.Owner, Fence: fence},
		LeaseExpiresAt: sqlstore.Micros(lease), Attempts: 1, Version: 1,
		CreatedAt: sqlstore.Micros(now), UpdatedAt: sqlstore.Micros(now), ExpiresAt: sqlstore.Micros(expires), ReadAt: sqlstore.Micros(now)}
	return rec, true, nil
}

// nextFence takes a new fence: strictly greater than every fence handed
// out before.
func nextFence(ctx context.Context, ex Executor) (int64, error) {
	res, err := ex.ExecContext(ctx, queryNextFence)
	if err != nil {
		return 0, fmt.Errorf("next fence: %w", err)
	}
	fence, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("next fence: %w", err)
	}
	return fence, nil
}

// Takeover implements [idemdriver.Store.Takeover] in one READ COMMITTED
// transaction: a new fence, the compare-and-swap update, and the read of
// the record it wrote.
func (s *Store) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	var rec idemdriver.Record
	if err := s.inTx(ctx, func(tx *sql.Tx) (err error) { rec, err = ops{}.Takeover(ctx, tx, p); return err }); err != nil {
		return idemdriver.Record{}, sqlstore.Wrap(driverName, "takeover", err)
	}
	return rec, nil
}

// Takeover runs Takeover's statements on ex, which must be a transaction.
func (ops) Takeover(ctx context.Context, ex Executor, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	fence, err := nextFence(ctx, ex)
	if err != nil {
		return idemdriver.Record{}, err
	}
	now := nowArg(p.Now)
	where := []any{p.Scope, p.Operation, p.KeyDigest, p.Seen.Token, p.Seen.Fence, now}
	var res sql.Result
	if p.Fresh {
		res, err = ex.ExecContext(ctx, queryTakeoverFresh, append([]any{p.NewOwner, fence, p.TraceID, now, p.Lease.Microseconds(),
			now, now, p.Fingerprint, now, max(p.TTL, p.Lease).Microseconds()}, where...)...)
	} else {
		res, err = ex.ExecContext(ctx, queryTakeover, append([]any{p.NewOwner, fence, p.TraceID, now, p.Lease.Microseconds(), now}, where...)...)
	}
	if err := sqlstore.CASResult(res, err); err != nil {
		return idemdriver.Record{}, err
	}
	rec, ok, _, err := read(ctx, ex, queryGet, p.Ident, p.Now)
	if err != nil {
		return idemdriver.Record{}, err
	}
	if !ok || rec.Fence != fence {
		return idemdriver.Record{}, fmt.Errorf("the record taken over with fence %d reads back otherwise", fence)
	}
	return rec, nil
}

// Complete implements [idemdriver.Store.Complete] with one prepared
// UPDATE in autocommit. It refuses a c.Status that is processing or not a
// defined status before touching the database. A nil c.Result is stored
// as no result.
func (s *Store) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	st, err := s.prepared(ctx, &s.completeStmt, queryComplete)
	if err == nil {
		err = retry(func() error { return ops{}.Complete(ctx, sqlstore.StmtExec{St: st}, id, o, c) })
	}
	return sqlstore.Wrap(driverName, "complete", err)
}

// Complete writes c for the owner o; see [Store.Complete].
func (ops) Complete(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if !c.Status.Valid() || c.Status == idemdriver.StatusProcessing {
		return fmt.Errorf("status %q is not a final status", c.Status)
	}
	res, err := ex.ExecContext(ctx, queryComplete,
		string(c.Status), c.Result, int64(c.ResponseCode), c.LastError, nowArg(c.Now),
		id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence)
	return sqlstore.CASResult(res, err)
}

// Annotate implements [idemdriver.Store.Annotate]. Empty CorrelationID and
// ExternalRef leave the stored values; ResourceIDs are appended in order,
// without removing duplicates.
func (s *Store) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	return sqlstore.Wrap(driverName, "annotate", retry(func() error { return ops{}.Annotate(ctx, s.db, id, o, a) }))
}

// Annotate attaches a for the owner o; see [Store.Annotate].
func (ops) Annotate(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	ids, err := json.Marshal(sqlstore.NonNil(a.ResourceIDs))
	if err != nil {
		return fmt.Errorf("encode resource ids: %w", err)
	}
	res, err := ex.ExecContext(ctx, queryAnnotate,
		a.CorrelationID, a.ExternalRef, string(ids), nowArg(a.Now),
		id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence)
	return sqlstore.CASResult(res, err)
}

// Release implements [idemdriver.Store.Release].
func (s *Store) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	return sqlstore.Wrap(driverName, "release", retry(func() error { return sqlstore.Release(ctx, s.db, id, o) }))
}

// Extend implements [idemdriver.Store.Extend] with one UPDATE, which hands
// the new end of the lease back with its result (LAST_INSERT_ID(expr)).
func (s *Store) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	var until time.Time
	err := retry(func() (err error) { until, err = ops{}.Extend(ctx, s.db, id, o, lease, now); return err })
	return until, sqlstore.Wrap(driverName, "extend", err)
}

// Extend moves the lease of the owner o; see [Store.Extend].
func (ops) Extend(ctx context.Context, ex Executor, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	at, us := nowArg(now), lease.Microseconds()
	res, err := ex.ExecContext(ctx, queryExtend, at, us, at, us, at,
		id.Scope, id.Operation, id.KeyDigest, o.Token, o.Fence)
	if err := sqlstore.CASResult(res, err); err != nil {
		return time.Time{}, err
	}
	until, err := res.LastInsertId()
	if err != nil {
		return time.Time{}, err
	}
	return sqlstore.Micros(until), nil
}

// Get implements [idemdriver.Store.Get]. The record's ReadAt is the
// database's clock at the read.
func (s *Store) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	st, err := s.prepared(ctx, &s.getStmt, queryGet)
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemmysql: get: %w", err)
	}
	rec, ok, _, err := read(ctx, sqlstore.StmtExec{St: st}, queryGet, id, time.Time{})
	if err != nil {
		return idemdriver.Record{}, false, fmt.Errorf("idemmysql: get: %w", err)
	}
	return rec, ok, nil
}

// Delete implements [idemdriver.Store.Delete].
func (s *Store) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	var existed bool
	err := retry(func() (err error) { existed, err = sqlstore.DeleteRecord(ctx, s.db, id); return err })
	return existed, sqlstore.Wrap(driverName, "delete", err)
}

// Settle implements [idemdriver.Store.Settle] in one READ COMMITTED
// transaction: a delete, or an update and the read of the record after it.
func (s *Store) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	var (
		rec idemdriver.Record
		ok  bool
	)
	if err := s.inTx(ctx, func(tx *sql.Tx) (err error) { rec, ok, err = ops{}.Settle(ctx, tx, id, st); return err }); err != nil {
		return idemdriver.Record{}, false, sqlstore.Wrap(driverName, "settle", err)
	}
	return rec, ok, nil
}

// Settle applies an operator's decision on ex; see [Store.Settle].
func (ops) Settle(ctx context.Context, ex Executor, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	if st.Delete {
		return idemdriver.Record{}, false, sqlstore.DeleteAtVersion(ctx, ex, id, st.Version)
	}
	if !st.Status.Terminal() {
		return idemdriver.Record{}, false, fmt.Errorf("status %q is not a terminal status", st.Status)
	}
	res, err := ex.ExecContext(ctx, querySettle, string(st.Status), st.ExternalRef, st.LastError, nowArg(st.Now),
		id.Scope, id.Operation, id.KeyDigest, st.Version)
	if err := sqlstore.CASResult(res, err); err != nil {
		if errors.Is(err, idemdriver.ErrFenced) {
			return idemdriver.Record{}, false, idemdriver.ErrStale
		}
		return idemdriver.Record{}, false, err
	}
	rec, ok, _, err := read(ctx, ex, queryGet, id, st.Now)
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	if !ok {
		return idemdriver.Record{}, false, idemdriver.ErrStale
	}
	return rec, true, nil
}

// Sweep implements [idemdriver.Store.Sweep]. It handles the records whose
// retention ended first, at most p.Limit of them (1000 when p.Limit <= 0):
// abandoned records are escalated to pending, then finished ones deleted,
// each statement in autocommit and judged at one instant (the database's
// clock read once, or p.Now). It then deletes the fence rows below the
// highest, which keeps the counter.
func (s *Store) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	var res idemdriver.SweepResult
	err := retry(func() error {
		var err error
		res, err = ops{}.Sweep(ctx, s.db, p)
		return err
	})
	if err == nil {
		err = retry(func() error { return trimFences(ctx, s.db) })
	}
	if err != nil {
		return idemdriver.SweepResult{}, fmt.Errorf("idemmysql: sweep: %w", err)
	}
	return res, nil
}

// Sweep escalates abandoned and deletes finished expired records; see
// [Store.Sweep].
func (ops) Sweep(ctx context.Context, ex Executor, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	var now int64
	if err := ex.QueryRowContext(ctx, queryClock, nowArg(p.Now)).Scan(&now); err != nil {
		return idemdriver.SweepResult{}, fmt.Errorf("read the clock: %w", err)
	}
	return sqlstore.Sweep(p, defaultSweepLimit, func(limit int64) (sql.Result, error) {
		return ex.ExecContext(ctx, querySweepEscalate, now, now, now, limit)
	}, func(limit int64) (sql.Result, error) {
		return ex.ExecContext(ctx, querySweep, now, limit)
	})
}

// trimFences deletes every fence row below the highest: the rows are only
// the means of taking AUTO_INCREMENT values, and the highest one keeps the
// counter even on a server that recomputes it from the table at restart.
func trimFences(ctx context.Context, ex Executor) error {
	var top int64
	if err := ex.QueryRowContext(ctx, queryMaxFence).Scan(&top); err != nil {
		return fmt.Errorf("trim fences: %w", err)
	}
	if _, err := ex.ExecContext(ctx, queryTrimFences, top); err != nil {
		return fmt.Errorf("trim fences: %w", err)
	}
	return nil
}

// nowArg is the clock argument of a statement: now in Unix µs, or NULL
// (the database's clock) when now is zero.
func nowArg(now time.Time) any {
	if now.IsZero() {
		return nil
	}
	return now.UnixMicro()
}

// read runs query (queryGet or queryGetLocking) for id on ex at now (zero:
// the database's clock) and returns the record, whether there is one, and
// the clock of the read in µs.
func read(ctx context.Context, ex Executor, query string, id idemdriver.Ident, now time.Time) (idemdriver.Record, bool, int64, error) {
	return scanRecord(ex.QueryRowContext(ctx, query, nowArg(now), id.Scope, id.Operation, id.KeyDigest))
}

// scanRecord reads one row of the clock (µs) and recordColumns, whose
// record columns may all be NULL (a LEFT JOIN that found none: ok false).
// The record's ReadAt is the clock. It returns an error, never a panic,
// for a row that does not decode (an unknown status, resource_ids that
// are not a JSON array of strings).
func scanRecord(row interface{ Scan(dest ...any) error }) (idemdriver.Record, bool, int64, error) {
	var (
		now                                        int64
		id, responseCode, fence, lease, attempts   sql.NullInt64
		version, createdAt, updatedAt, expiresAt   sql.NullInt64
		scope, operation, keyDigest, fingerprint   sql.NullString
		status, correlation, external, resourceIDs sql.NullString
		lastError, owner, keyHash, traceID         sql.NullString
		result                                     sql.Null[[]byte]
	)
	err := row.Scan(&now, &id, &scope, &operation, &keyDigest, &fingerprint,
		&status, &result, &responseCode, &correlation, &external, &resourceIDs,
		&lastError, &owner, &fence, &lease, &attempts, &version,
		&createdAt, &updatedAt, &expiresAt, &keyHash, &traceID)
	if err != nil {
		return idemdriver.Record{}, false, 0, err
	}
	if !id.Valid {
		return idemdriver.Record{}, false, now, nil
	}
	rec := idemdriver.Record{ID: id.Int64,
		Ident:   idemdriver.Ident{Scope: scope.String, Operation: operation.String, KeyDigest: keyDigest.String},
		KeyHash: keyHash.String, TraceID: traceID.String, Fingerprint: fingerprint.String,
		ResponseCode: int(responseCode.Int64), CorrelationID: correlation.String, ExternalRef: external.String,
		LastError: lastError.String, Owner: idemdriver.Owner{Token: owner.String, Fence: fence.Int64},
		Attempts: int(attempts.Int64), Version: version.Int64,
		CreatedAt: sqlstore.Micros(createdAt.Int64), UpdatedAt: sqlstore.Micros(updatedAt.Int64), ExpiresAt: sqlstore.Micros(expiresAt.Int64),
		ReadAt: sqlstore.Micros(now)}
	if err := sqlstore.DecodeRecord(&rec, status.String, result, resourceIDs.String); err != nil {
		return idemdriver.Record{}, false, now, err
	}
	if lease.Valid {
		rec.LeaseExpiresAt = sqlstore.Micros(lease.Int64)
	}
	return rec, true, now, nil
}

// scanLean reads one row of queryGetLean for id: an existing record with
// idemdriver.LeanFields only, or ok false (NULL columns) when there is
// none.
func scanLean(row interface{ Scan(dest ...any) error }, id idemdriver.Ident) (idemdriver.Record, bool, int64, error) {
	// One variable holds every destination: each one of its own would
	// escape to the heap through Scan's []any.
	var v struct {
		now                            int64
		id, fence, lease, created, exp sql.NullInt64
		fingerprint, owner, status     sql.NullString
		result                         sql.Null[[]byte]
	}
	if err := row.Scan(&v.now, &v.id, &v.fingerprint, &v.status, &v.result, &v.owner, &v.fence, &v.lease, &v.created, &v.exp); err != nil {
		return idemdriver.Record{}, false, 0, err
	}
	if !v.id.Valid {
		return idemdriver.Record{}, false, v.now, nil
	}
	rec := idemdriver.Record{ID: v.id.Int64, Ident: id, Fingerprint: v.fingerprint.String,
		Owner:     idemdriver.Owner{Token: v.owner.String, Fence: v.fence.Int64},
		CreatedAt: sqlstore.Micros(v.created.Int64), ExpiresAt: sqlstore.Micros(v.exp.Int64), ReadAt: sqlstore.Micros(v.now)}
	if rec.Status = idemdriver.Status(v.status.String); !rec.Status.Valid() {
		return idemdriver.Record{}, false, v.now, fmt.Errorf("record %d: unknown status %q", rec.ID, v.status.String)
	}
	if v.result.Valid {
		rec.Result = v.result.V
		if rec.Result == nil {
			rec.Result = []byte{}
		}
	}
	if v.lease.Valid {
		rec.LeaseExpiresAt = sqlstore.Micros(v.lease.Int64)
	}
	return rec, true, v.now, nil
}
