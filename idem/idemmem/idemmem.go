// Package idemmem is an idempotency store in memory, for an application's
// unit tests: the engine, the HTTP middleware and the River job middleware
// run on it as on a database, without one, so a handler test needs no
// server, no file and no migration.
//
//	engine, err := idem.New(idemmem.New(), idem.Config{Secret: secret})
//
// It implements the required contract of package idemdriver and nothing
// else — no transactional mode ([idemdriver.TxStore]), no operator reads
// ([idemdriver.Admin]), none of the optional performance capabilities —
// and passes the conformance suite idemtest.Run. It is therefore also the
// shortest complete store to read before writing one (see "Writing a
// store" in docs/stores.md of the repository).
//
// It is a package of its own, beside the database drivers, rather than a
// helper of package idemtest: it is a store like them, it links nothing
// but the contract (idemtest links the engine and a test library), and
// idemtest can run its suite on it as on any driver.
//
// Records live as long as the *Store: nothing survives the process, and
// two stores share nothing, so it is no store for production. All methods
// are safe for concurrent use; one mutex orders every call, which makes
// each primitive atomic. Leases, fences, retention and the store's clock
// (time.Now unless a call carries a Now) behave as in the database drivers.
package idemmem

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// defaultSweepLimit is the batch of a Sweep whose limit is not positive.
const defaultSweepLimit = 1000

// Store is an in-memory [idemdriver.Store]. The zero value is not ready;
// use [New].
type Store struct {
	mu      sync.Mutex
	records map[idemdriver.Ident]*idemdriver.Record
	lastID  int64
	fence   int64 // the last fence handed out, for any record
}

// New returns an empty store.
func New() *Store {
	return &Store{records: make(map[idemdriver.Ident]*idemdriver.Record)}
}

var _ idemdriver.Store = (*Store)(nil)

// Reserve implements [idemdriver.Store.Reserve]. It always returns whole
// records (it ignores ReserveParams.Lean). An empty scope, operation or key
// digest is refused with an *[idemdriver.FieldError], as a database's
// constraints refuse it.
func (s *Store) Reserve(ctx context.Context, p idemdriver.ReserveParams) (idemdriver.Record, bool, error) {
	if err := checkIdent(p.Ident); err != nil {
		return idemdriver.Record{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return idemdriver.Record{}, false, err
	}
	now := clock(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[p.Ident]; ok {
		return read(r, now), false, nil
	}
	s.lastID++
	s.fence++
	r := &idemdriver.Record{
		ID:             s.lastID,
		Ident:          p.Ident,
		KeyHash:        p.KeyHash,
		Fingerprint:    p.Fingerprint,
		Status:         idemdriver.StatusProcessing,
		Owner:          idemdriver.Owner{Token: p.Owner, Fence: s.fence},
		LeaseExpiresAt: now.Add(p.Lease),
		Attempts:       1,
		Version:        1,
		CreatedAt:      now,
		UpdatedAt:      now,
		ExpiresAt:      now.Add(max(p.TTL, p.Lease)),
		TraceID:        p.TraceID,
	}
	s.records[p.Ident] = r
	return read(r, now), true, nil
}

// Takeover implements [idemdriver.Store.Takeover].
func (s *Store) Takeover(ctx context.Context, p idemdriver.TakeoverParams) (idemdriver.Record, error) {
	if err := ctx.Err(); err != nil {
		return idemdriver.Record{}, err
	}
	now := clock(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[p.Ident]
	if !ok || r.Owner != p.Seen || r.Status == idemdriver.StatusPending || r.LeaseExpiresAt.After(now) {
		return idemdriver.Record{}, idemdriver.ErrFenced
	}
	s.fence++
	r.Owner = idemdriver.Owner{Token: p.NewOwner, Fence: s.fence}
	r.Status = idemdriver.StatusProcessing
	r.LeaseExpiresAt = now.Add(p.Lease)
	r.Attempts++
	r.Version++
	r.UpdatedAt = now
	r.TraceID = p.TraceID
	if p.Fresh {
		r.Attempts = 1
		r.CreatedAt = now
		r.Fingerprint = p.Fingerprint
		r.ExpiresAt = now.Add(max(p.TTL, p.Lease))
		r.Result, r.ResponseCode, r.LastError = nil, 0, ""
		r.CorrelationID, r.ExternalRef, r.ResourceIDs = "", "", nil
	}
	return read(r, now), nil
}

// Complete implements [idemdriver.Store.Complete]. It refuses a status
// that is processing or not a defined status. It finds the record by its
// ident; Completion.RecordID is not needed.
func (s *Store) Complete(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, c idemdriver.Completion) error {
	if !c.Status.Valid() || c.Status == idemdriver.StatusProcessing {
		return fmt.Errorf("idemmem: complete: status %q is not a final status", c.Status)
	}
	return s.owned(ctx, id, o, func(r *idemdriver.Record) {
		r.Status, r.ResponseCode, r.LastError = c.Status, c.ResponseCode, c.LastError
		r.Result = nil
		if c.Result != nil {
			r.Result = slices.Clone(c.Result)
		}
		r.LeaseExpiresAt = time.Time{}
		r.Version++
		r.UpdatedAt = clock(c.Now)
	})
}

// Annotate implements [idemdriver.Store.Annotate].
func (s *Store) Annotate(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, a idemdriver.Annotation) error {
	return s.owned(ctx, id, o, func(r *idemdriver.Record) {
		if a.CorrelationID != "" {
			r.CorrelationID = a.CorrelationID
		}
		if a.ExternalRef != "" {
			r.ExternalRef = a.ExternalRef
		}
		if len(a.ResourceIDs) > 0 {
			r.ResourceIDs = append(slices.Clone(r.ResourceIDs), a.ResourceIDs...)
		}
		r.Version++
		r.UpdatedAt = clock(a.Now)
	})
}

// Release implements [idemdriver.Store.Release].
func (s *Store) Release(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner) error {
	return s.owned(ctx, id, o, func(*idemdriver.Record) { delete(s.records, id) })
}

// Extend implements [idemdriver.Store.Extend]. It never shortens the
// lease or the retention.
func (s *Store) Extend(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, lease time.Duration, now time.Time) (time.Time, error) {
	at := clock(now)
	var until time.Time
	err := s.owned(ctx, id, o, func(r *idemdriver.Record) {
		end := at.Add(lease)
		r.LeaseExpiresAt = latest(r.LeaseExpiresAt, end)
		r.ExpiresAt = latest(r.ExpiresAt, end)
		r.Version++
		r.UpdatedAt = at
		until = r.LeaseExpiresAt
	})
	return until, err
}

// Get implements [idemdriver.Store.Get]; ReadAt is the process clock.
func (s *Store) Get(ctx context.Context, id idemdriver.Ident) (idemdriver.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return idemdriver.Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return idemdriver.Record{}, false, nil
	}
	return read(r, clock(time.Time{})), true, nil
}

// Delete implements [idemdriver.Store.Delete].
func (s *Store) Delete(ctx context.Context, id idemdriver.Ident) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.records[id]
	delete(s.records, id)
	return ok, nil
}

// Settle implements [idemdriver.Store.Settle]. It refuses a status that
// is not terminal.
func (s *Store) Settle(ctx context.Context, id idemdriver.Ident, st idemdriver.Settlement) (idemdriver.Record, bool, error) {
	if !st.Delete && !st.Status.Terminal() {
		return idemdriver.Record{}, false, fmt.Errorf("idemmem: settle: status %q is not a terminal status", st.Status)
	}
	if err := ctx.Err(); err != nil {
		return idemdriver.Record{}, false, err
	}
	now := clock(st.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok || r.Version != st.Version {
		return idemdriver.Record{}, false, idemdriver.ErrStale
	}
	if st.Delete {
		delete(s.records, id)
		return idemdriver.Record{}, false, nil
	}
	r.Status, r.Result, r.LastError = st.Status, nil, st.LastError
	if st.ExternalRef != "" {
		r.ExternalRef = st.ExternalRef
	}
	r.Owner.Token, r.LeaseExpiresAt = "", time.Time{}
	r.Version++
	r.UpdatedAt = now
	return read(r, now), true, nil
}

// Sweep implements [idemdriver.Store.Sweep]: abandoned records first,
// then finished ones, each oldest retention first.
func (s *Store) Sweep(ctx context.Context, p idemdriver.SweepParams) (idemdriver.SweepResult, error) {
	if err := ctx.Err(); err != nil {
		return idemdriver.SweepResult{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = defaultSweepLimit
	}
	now := clock(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	var abandoned, finished []*idemdriver.Record
	for _, r := range s.records {
		switch {
		case r.ExpiresAt.After(now):
		case r.Status == idemdriver.StatusProcessing && !r.LeaseExpiresAt.After(now):
			abandoned = append(abandoned, r)
		case r.Status.Terminal():
			finished = append(finished, r)
		}
	}
	var out idemdriver.SweepResult
	for _, r := range oldestFirst(abandoned, limit) {
		r.Status = idemdriver.StatusPending
		r.LastError = idemdriver.AbandonedReason(r.LeaseExpiresAt, "sweep")
		r.Owner.Token, r.LeaseExpiresAt = "", time.Time{}
		r.Version++
		r.UpdatedAt = now
		out.Escalated++
	}
	for _, r := range oldestFirst(finished, limit-out.Escalated) {
		delete(s.records, r.Ident)
		out.Deleted++
	}
	return out, nil
}

// owned applies change to the record of id if it is processing under
// owner o, and returns ErrFenced otherwise.
func (s *Store) owned(ctx context.Context, id idemdriver.Ident, o idemdriver.Owner, change func(*idemdriver.Record)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok || r.Status != idemdriver.StatusProcessing || r.Owner != o {
		return idemdriver.ErrFenced
	}
	change(r)
	return nil
}

// checkIdent refuses an ident no database driver can hold.
func checkIdent(id idemdriver.Ident) error {
	for _, f := range []struct{ field, value string }{
		{"scope", id.Scope}, {"operation", id.Operation}, {"key", id.KeyDigest},
	} {
		if f.value == "" {
			return fmt.Errorf("idemmem: reserve: %w", &idemdriver.FieldError{Field: f.field, Reason: "empty"})
		}
	}
	return nil
}

// read returns a copy of r, read at now, that shares no memory with the
// store.
func read(r *idemdriver.Record, now time.Time) idemdriver.Record {
	c := *r
	c.Result = slices.Clone(r.Result)
	c.ResourceIDs = slices.Clone(r.ResourceIDs)
	c.ReadAt = now
	return c
}

// oldestFirst returns up to limit of rs, by retention end then ID.
func oldestFirst(rs []*idemdriver.Record, limit int) []*idemdriver.Record {
	slices.SortFunc(rs, func(a, b *idemdriver.Record) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return rs[:max(0, min(limit, len(rs)))]
}

// clock returns now, or the process clock when now is zero, in UTC to the
// microsecond (as the database drivers keep times), without a monotonic
// reading, so that copies compare equal.
func clock(now time.Time) time.Time {
	if now.IsZero() {
		now = time.Now()
	}
	return time.UnixMicro(now.UnixMicro()).UTC()
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
