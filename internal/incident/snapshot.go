package incident

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// DefaultScanCap is how many records of one state a snapshot reads at most
// to group them; a group of a state past it is counted "at least N".
const DefaultScanCap = 10000

// DefaultEvery is how often the console takes a snapshot.
const DefaultEvery = time.Minute

// SnapshotWriter is where snapshots go (a *store.DB).
type SnapshotWriter interface {
	WriteSnapshot(ctx context.Context, compute func(ctx context.Context) (store.Snapshot, error)) (store.SnapshotResult, error)
}

// Snapshotter takes the periodic snapshots of counts and incident groups.
// Its fields are read by Once and Run; set them before either.
type Snapshotter struct {
	Keys idemdriver.Admin
	// Ops reads the operations; nil when the database has no saga tables.
	Ops   sagadriver.Admin
	Store SnapshotWriter
	// NowFunc is the clock of the snapshot's time; time.Now when nil.
	NowFunc func() time.Time
	// ScanCap bounds the records read per state; DefaultScanCap when <= 0.
	ScanCap int
	// Log receives failures; slog.Default() when nil.
	Log *slog.Logger
	// OnNewGroups, when set, is called after a snapshot this process
	// wrote with the groups that were not current before it (see
	// store.SnapshotResult.New): of several consoles, only the one that
	// wrote a group first calls it for that group.
	OnNewGroups func(ctx context.Context, groups []store.IncidentGroup)
}

// errCapped stops an iteration at the scan cap.
var errCapped = errors.New("incident: scan cap reached")

func (s *Snapshotter) now() time.Time {
	if s.NowFunc != nil {
		return s.NowFunc()
	}
	return time.Now()
}

func (s *Snapshotter) scanCap() int {
	if s.ScanCap <= 0 {
		return DefaultScanCap
	}
	return s.ScanCap
}

// Run takes a snapshot now and then every interval (DefaultEvery when
// <= 0) until ctx ends; a failed snapshot is logged and the next one is
// taken on time. It returns when ctx is done.
func (s *Snapshotter) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultEvery
	}
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.Once(ctx); err != nil && ctx.Err() == nil {
			log.Error("snapshot failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once takes one snapshot if this process is the leader (see
// store.DB.WriteSnapshot) and reports whether it was; then it calls
// OnNewGroups with the groups the snapshot made current.
func (s *Snapshotter) Once(ctx context.Context) (leader bool, err error) {
	res, err := s.Store.WriteSnapshot(ctx, s.Compute)
	if err != nil || !res.Leader {
		return res.Leader, err
	}
	if len(res.New) > 0 && s.OnNewGroups != nil {
		s.OnNewGroups(ctx, res.New)
	}
	return true, nil
}

// Compute reads the counts and the incident groups as of now without
// writing them.
func (s *Snapshotter) Compute(ctx context.Context) (store.Snapshot, error) {
	snap := store.Snapshot{At: s.now().UTC()}
	ov, err := s.Keys.KeyOverview(ctx)
	if err != nil {
		return snap, fmt.Errorf("incident: key counts: %w", err)
	}
	for _, c := range ov.Counts {
		snap.Trends = append(snap.Trends, store.TrendPoint{Kind: KindKey, State: string(c.Status), Count: c.Count, Exact: c.Exact})
	}
	snap.Trends = append(snap.Trends, store.TrendPoint{Kind: KindKey, State: "stuck", Count: ov.StuckProcessing, Exact: ov.StuckExact})
	if s.Ops != nil {
		oc, err := s.Ops.CountOperations(ctx, 0)
		if err != nil {
			return snap, fmt.Errorf("incident: operation counts: %w", err)
		}
		for _, c := range oc.Counts {
			snap.Trends = append(snap.Trends, store.TrendPoint{Kind: KindOperation, State: string(c.Status), Count: c.Count, Exact: c.Exact})
		}
	}
	acc := newAccumulator()
	if err := s.keyGroups(ctx, acc); err != nil {
		return snap, err
	}
	if s.Ops != nil {
		if err := s.operationGroups(ctx, acc); err != nil {
			return snap, err
		}
	}
	snap.Groups = acc.groups()
	return snap, nil
}

// accumulator collects groups in the order first met.
type accumulator struct {
	byKey map[string]*store.IncidentGroup
	order []string
}

func newAccumulator() *accumulator { return &accumulator{byKey: map[string]*store.IncidentGroup{}} }

func (a *accumulator) add(f Fields, sample string, seen time.Time) {
	k := f.Key()
	g := a.byKey[k]
	if g == nil {
		g = &store.IncidentGroup{Key: k, Kind: f.Kind, State: f.State, Operation: f.Operation, Step: f.Step, Class: f.Class,
			Message: f.Message, System: f.System, Sample: cut(sample, 4*MaxMessage), Exact: true, FirstSeen: seen, LastSeen: seen}
		a.byKey[k] = g
		a.order = append(a.order, k)
	}
	g.Count++
	if seen.Before(g.FirstSeen) {
		g.FirstSeen = seen
	}
	if seen.After(g.LastSeen) {
		g.LastSeen = seen
	}
}

// inexact marks every group of kind and state as a lower bound.
func (a *accumulator) inexact(kind, state string) {
	for _, g := range a.byKey {
		if g.Kind == kind && g.State == state {
			g.Exact = false
		}
	}
}

func (a *accumulator) groups() []store.IncidentGroup {
	out := make([]store.IncidentGroup, 0, len(a.order))
	for _, k := range a.order {
		out = append(out, *a.byKey[k])
	}
	return out
}

// KeyStateFilter is the key filter that selects the records of an
// incident state (stuck, pending, unavailable, failed).
func KeyStateFilter(state string) idemdriver.KeyFilter {
	if state == "stuck" {
		return idemdriver.KeyFilter{Stuck: true}
	}
	return idemdriver.KeyFilter{Status: idemdriver.Status(state)}
}

func (s *Snapshotter) keyGroups(ctx context.Context, acc *accumulator) error {
	limit := s.scanCap()
	for _, state := range KeyStates {
		n := 0
		// Newest first: when the scan is capped, what just went wrong is
		// still seen.
		err := s.Keys.EachKey(ctx, KeyStateFilter(state), idemdriver.MaxLimit, func(recs []idemdriver.Record) error {
			for _, rec := range recs {
				if n >= limit {
					return errCapped
				}
				n++
				f, ok := KeyFields(rec)
				if !ok || f.State != state {
					continue
				}
				acc.add(f, KeyMessage(rec, state), rec.UpdatedAt)
			}
			return nil
		})
		switch {
		case errors.Is(err, errCapped):
			acc.inexact(KindKey, state)
		case err != nil:
			return fmt.Errorf("incident: %s keys: %w", state, err)
		}
	}
	return nil
}

func (s *Snapshotter) operationGroups(ctx context.Context, acc *accumulator) error {
	limit := s.scanCap()
	systems := SystemCache{Ops: s.Ops}
	for _, status := range OperationStates {
		n := 0
		err := s.Ops.EachOperation(ctx, sagadriver.OperationFilter{Status: status}, sagadriver.MaxLimit, func(ops []sagadriver.Operation) error {
			for _, op := range ops {
				if n >= limit {
					return errCapped
				}
				n++
				system, err := systems.System(ctx, op)
				if err != nil {
					return err
				}
				f, ok := OperationFields(op, system)
				if !ok || f.State != string(status) {
					continue
				}
				msg := op.LastError
				if msg == "" {
					msg = f.Class
				}
				acc.add(f, msg, op.UpdatedAt)
			}
			return nil
		})
		switch {
		case errors.Is(err, errCapped):
			acc.inexact(KindOperation, string(status))
		case err != nil:
			return fmt.Errorf("incident: %s operations: %w", status, err)
		}
	}
	return nil
}

// SystemCache finds the external system of an operation's current step,
// reading one operation per (type, step) with its steps: a type's steps
// and their systems come from its definition.
type SystemCache struct {
	Ops interface {
		ReadOperation(ctx context.Context, id string, maxEvents int) (sagadriver.OperationDetail, error)
	}
	seen map[[2]string]string
}

// System returns the system of op's current step, "" when unknown.
func (c *SystemCache) System(ctx context.Context, op sagadriver.Operation) (string, error) {
	k := [2]string{op.Type, op.CurrentStep}
	if sys, ok := c.seen[k]; ok {
		return sys, nil
	}
	if c.seen == nil {
		c.seen = map[[2]string]string{}
	}
	d, err := c.Ops.ReadOperation(ctx, op.ID, 1)
	switch {
	case errors.Is(err, sagadriver.ErrNotFound):
		return "", nil // gone meanwhile: the next one answers
	case err != nil:
		return "", fmt.Errorf("incident: read operation: %w", err)
	}
	sys := ""
	if st, ok := d.Operation.Step(op.CurrentStep); ok {
		sys = st.System
	}
	c.seen[k] = sys
	return sys, nil
}
