package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Workspace is what the fake workspace provider holds.
type Workspace struct {
	ID             string    `json:"id"`
	IdempotencyKey string    `json:"idempotency_key"`
	Owner          string    `json:"owner"`
	Active         bool      `json:"active"`
	CreatedAt      time.Time `json:"created_at"`
}

// WorkspaceFault is a fault the provider injects into the next call of
// one kind for one key.
type WorkspaceFault string

// Faults of the workspace provider.
const (
	// WSErrorBefore: Create fails with a 503 before any effect.
	WSErrorBefore WorkspaceFault = "error_before"
	// WSTimeoutAfter: Create makes the workspace, then the answer is lost.
	WSTimeoutAfter WorkspaceFault = "timeout_after"
	// WSRefuse: Create refuses for a business reason (422), no effect.
	WSRefuse WorkspaceFault = "refuse"
	// WSActivateRefused: Create makes the workspace, then refuses to
	// activate it (422): the effect is partial.
	WSActivateRefused WorkspaceFault = "activate_refused"
	// WSLookupUnknown: Lookup cannot tell (503).
	WSLookupUnknown WorkspaceFault = "lookup_unknown"
	// WSDeleteError: Delete fails with a 503 before any effect.
	WSDeleteError WorkspaceFault = "delete_error"
)

// WorkspaceError is a provider answer that is not a success.
type WorkspaceError struct {
	Status  int // 0 for a timeout: the outcome is unknown
	Message string
}

func (e *WorkspaceError) Error() string { return e.Message }

// Timeout reports whether the call timed out, leaving the outcome unknown.
func (e *WorkspaceError) Timeout() bool { return e.Status == 0 }

// WorkspaceProvider is an in-process fake of an external workspace
// provider. Like a real one it deduplicates creations by the idempotency
// key it is given: the first answer under a key that made or refused
// something is the answer to every later Create under that key (a
// workspace whose activation was refused is never activated by a retry),
// and deleting a workspace that does not exist is a success. Faults are
// injected per key with Inject; a fault with Always set applies to every
// call. It is the one fake in the project.
//
// Its state lives in memory ([NewWorkspaceProvider]) or in the demo's
// database ([NewWorkspaceProviderDB]), where it survives a restart of the
// demo as a real provider's would. The methods without an error result
// (Inject, InjectAlways, Counts, Workspaces, Put, Remove) are test helpers:
// on a database error they change nothing and report zero values.
type WorkspaceProvider struct {
	mu         sync.Mutex // serialises each read-modify-write of the state
	state      workspaceState
	now        func() time.Time
	AfterApply func(key string) // called after an effect is applied, for crash tests
}

// workspaceEntry is everything the provider holds under one key.
type workspaceEntry struct {
	Key string `json:"key"`
	// Workspace is the last one made under the key (zero ID: none);
	// Live says it still exists.
	Workspace Workspace `json:"workspace"`
	Live      bool      `json:"live"`
	// Refused is the recorded 422 answer of a Create that was refused,
	// replayed to every later Create under the key.
	Refused string `json:"refused,omitempty"`
	// Creates counts Create calls, Effects workspaces made, Deletes
	// workspaces deleted.
	Creates int `json:"creates"`
	Effects int `json:"effects"`
	Deletes int `json:"deletes"`
	// Faults are queued for the next calls; Always applies to every call.
	Faults []WorkspaceFault `json:"faults,omitempty"`
	Always WorkspaceFault   `json:"always,omitempty"`
}

// workspaceState stores the entries. Callers hold the provider's mutex.
type workspaceState interface {
	get(ctx context.Context, key string) (workspaceEntry, error)
	put(ctx context.Context, e workspaceEntry) error
	all(ctx context.Context) ([]workspaceEntry, error)
	// lastID is the highest workspace number ever given out.
	lastID(ctx context.Context) (int, error)
}

// NewWorkspaceProvider returns an empty provider whose state lives in
// memory.
func NewWorkspaceProvider() *WorkspaceProvider {
	return &WorkspaceProvider{state: &memoryWorkspaces{byKey: map[string]workspaceEntry{}}, now: time.Now}
}

// NewWorkspaceProviderDB returns a provider whose state lives in db, in
// the demo's table demo_workspace, which it creates if missing (on
// PostgreSQL or SQLite): a new provider on the same database carries on
// where the last one stopped. One provider at a time may use a database.
func NewWorkspaceProviderDB(ctx context.Context, db SignupDB) (*WorkspaceProvider, error) {
	if err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS demo_workspace (
		key   TEXT PRIMARY KEY,
		seq   INTEGER NOT NULL,
		state TEXT NOT NULL
	)`); err != nil {
		return nil, fmt.Errorf("demo: create the workspace provider's table: %w", err)
	}
	return &WorkspaceProvider{state: sqlWorkspaces{db}, now: time.Now}, nil
}

// Inject queues faults for the next calls concerning key, one per call of
// the kind the fault applies to.
func (p *WorkspaceProvider) Inject(key string, faults ...WorkspaceFault) {
	_ = p.InjectFaults(context.Background(), key, faults...)
}

// InjectFaults is Inject, as WorkspaceAPI has it.
func (p *WorkspaceProvider) InjectFaults(ctx context.Context, key string, faults ...WorkspaceFault) error {
	return p.update(ctx, key, func(e *workspaceEntry) error {
		e.Faults = append(e.Faults, faults...)
		return nil
	})
}

// InjectAlways makes every call of f's kind for key fail so; "" ends it.
func (p *WorkspaceProvider) InjectAlways(key string, f WorkspaceFault) {
	_ = p.update(context.Background(), key, func(e *workspaceEntry) error {
		e.Always = f
		return nil
	})
}

// update runs fn on key's entry under the mutex and stores the entry if
// fn changed it (also when fn fails: a consumed fault stays consumed);
// fn's error is returned.
func (p *WorkspaceProvider) update(ctx context.Context, key string, fn func(e *workspaceEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.state.get(ctx, key)
	if err != nil {
		return unavailable(err)
	}
	before := e
	before.Faults = slices.Clone(e.Faults)
	ferr := fn(&e)
	if reflect.DeepEqual(before, e) {
		return ferr
	}
	if err := p.state.put(ctx, e); err != nil {
		return unavailable(err)
	}
	return ferr
}

// unavailable is the provider's answer when its own storage fails: a 503
// before any effect.
func unavailable(err error) error {
	return &WorkspaceError{Status: 503, Message: "workspace provider unavailable: " + err.Error()}
}

// take pops the first queued fault of e among kinds.
func (e *workspaceEntry) take(kinds ...WorkspaceFault) WorkspaceFault {
	if e.Always != "" && slices.Contains(kinds, e.Always) {
		return e.Always
	}
	for i, f := range e.Faults {
		if slices.Contains(kinds, f) {
			e.Faults = slices.Delete(slices.Clone(e.Faults), i, i+1)
			return f
		}
	}
	return ""
}

// newWorkspace gives out the next workspace number.
func (p *WorkspaceProvider) newWorkspace(ctx context.Context, key, owner string) (Workspace, error) {
	last, err := p.state.lastID(ctx)
	if err != nil {
		return Workspace{}, unavailable(err)
	}
	return Workspace{ID: fmt.Sprintf("ws_%06d", last+1), IdempotencyKey: key, Owner: owner, CreatedAt: p.now().UTC()}, nil
}

// Create makes the workspace of owner under key, or answers as the first
// Create under key did: the workspace made then, or its refusal.
func (p *WorkspaceProvider) Create(ctx context.Context, key, owner string) (Workspace, error) {
	var (
		w       Workspace
		f       WorkspaceFault
		applied bool
		refused string // activation refused after the effect
	)
	err := p.update(ctx, key, func(e *workspaceEntry) error {
		e.Creates++
		f = e.take(WSErrorBefore, WSTimeoutAfter, WSRefuse, WSActivateRefused)
		switch {
		case f == WSErrorBefore:
			return &WorkspaceError{Status: 503, Message: "workspace provider unavailable"}
		case e.Refused != "":
			// A real provider replays the answer it gave under the key.
			return &WorkspaceError{Status: 422, Message: e.Refused}
		case f == WSRefuse && !e.Live:
			e.Refused = "workspace refused: plan limit reached"
			return &WorkspaceError{Status: 422, Message: e.Refused}
		}
		if !e.Live {
			nw, err := p.newWorkspace(ctx, key, owner)
			if err != nil {
				return err
			}
			e.Workspace, e.Live, applied = nw, true, true
			e.Effects++
			e.Workspace.Active = f != WSActivateRefused
		}
		if f == WSActivateRefused && !e.Workspace.Active {
			e.Refused = "workspace " + e.Workspace.ID + " created but activation refused"
			refused = e.Refused
			return nil // stored, answered below after AfterApply
		}
		w = e.Workspace
		return nil
	})
	if err != nil {
		return Workspace{}, err
	}
	if applied && p.AfterApply != nil {
		p.AfterApply(key)
	}
	switch {
	case f == WSTimeoutAfter:
		return Workspace{}, &WorkspaceError{Message: "workspace provider timed out"}
	case refused != "":
		// Activation refused: the workspace exists, inactive.
		return Workspace{}, &WorkspaceError{Status: 422, Message: refused}
	}
	return w, nil
}

// entry reads key's entry.
func (p *WorkspaceProvider) entry(ctx context.Context, key string) (workspaceEntry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.get(ctx, key)
}

// Lookup returns the workspace made under key, if any: what Verify and
// reconciliation ask.
func (p *WorkspaceProvider) Lookup(ctx context.Context, key string) (Workspace, bool, error) {
	var (
		w    Workspace
		live bool
	)
	err := p.update(ctx, key, func(e *workspaceEntry) error {
		if e.take(WSLookupUnknown) != "" {
			return &WorkspaceError{Status: 503, Message: "workspace status unavailable"}
		}
		w, live = e.Workspace, e.Live
		return nil
	})
	if err != nil || !live {
		return Workspace{}, false, err
	}
	return w, true, nil
}

// Delete deletes the workspace made under key. Deleting one that does
// not exist (never made, or deleted already) succeeds and changes nothing.
func (p *WorkspaceProvider) Delete(ctx context.Context, key string) error {
	return p.update(ctx, key, func(e *workspaceEntry) error {
		if e.take(WSDeleteError) != "" {
			return &WorkspaceError{Status: 503, Message: "workspace provider could not delete"}
		}
		if e.Live {
			e.Live = false
			e.Deletes++
		}
		return nil
	})
}

// Counts returns, for key, the Create calls, the workspaces actually
// created and those actually deleted.
func (p *WorkspaceProvider) Counts(key string) (creates, effects, deletes int) {
	e, err := p.entry(context.Background(), key)
	if err != nil {
		return 0, 0, 0
	}
	return e.Creates, e.Effects, e.Deletes
}

// Workspaces returns the live workspaces in creation order.
func (p *WorkspaceProvider) Workspaces() []Workspace {
	ws, _ := p.List(context.Background())
	return ws
}

// List returns the live workspaces in creation order, as WorkspaceAPI
// has it.
func (p *WorkspaceProvider) List(ctx context.Context) ([]Workspace, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	all, err := p.state.all(ctx)
	p.mu.Unlock()
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]Workspace, 0, len(all))
	for _, e := range all {
		if e.Live {
			out = append(out, e.Workspace)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Put places a workspace under key directly, as if made out of band: a
// drift for reconciliation to find.
func (p *WorkspaceProvider) Put(key, owner string) Workspace {
	var w Workspace
	_ = p.update(context.Background(), key, func(e *workspaceEntry) error {
		nw, err := p.newWorkspace(context.Background(), key, owner)
		if err != nil {
			return err
		}
		nw.Active = true
		e.Workspace, e.Live, w = nw, true, nw
		return nil
	})
	return w
}

// Remove deletes the workspace under key out of band (a drift).
func (p *WorkspaceProvider) Remove(key string) {
	_ = p.update(context.Background(), key, func(e *workspaceEntry) error {
		e.Live = false
		return nil
	})
}

// memoryWorkspaces is the state of a provider in memory.
type memoryWorkspaces struct {
	byKey map[string]workspaceEntry
	last  int
}

func (m *memoryWorkspaces) get(_ context.Context, key string) (workspaceEntry, error) {
	e, ok := m.byKey[key]
	if !ok {
		return workspaceEntry{Key: key}, nil
	}
	e.Faults = slices.Clone(e.Faults)
	return e, nil
}

func (m *memoryWorkspaces) put(_ context.Context, e workspaceEntry) error {
	m.byKey[e.Key] = e
	m.last = max(m.last, workspaceNumber(e.Workspace.ID))
	return nil
}

func (m *memoryWorkspaces) all(context.Context) ([]workspaceEntry, error) {
	out := make([]workspaceEntry, 0, len(m.byKey))
	for _, e := range m.byKey {
		out = append(out, e)
	}
	return out, nil
}

func (m *memoryWorkspaces) lastID(context.Context) (int, error) { return m.last, nil }

// sqlWorkspaces is the state of a provider in the table demo_workspace:
// one row per key, the entry as JSON, and seq, the number of its
// workspace, so that numbers are never given out twice.
type sqlWorkspaces struct{ db SignupDB }

func (s sqlWorkspaces) get(ctx context.Context, key string) (workspaceEntry, error) {
	var raw string
	ok, err := s.db.QueryRow(ctx, `SELECT state FROM demo_workspace WHERE key = $1`, []any{key}, &raw)
	if err != nil || !ok {
		return workspaceEntry{Key: key}, err
	}
	var e workspaceEntry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return workspaceEntry{}, fmt.Errorf("demo_workspace row %q: %w", key, err)
	}
	return e, nil
}

func (s sqlWorkspaces) put(ctx context.Context, e workspaceEntry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.db.Exec(ctx, `INSERT INTO demo_workspace (key, seq, state) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, state = excluded.state`,
		e.Key, workspaceNumber(e.Workspace.ID), string(raw))
}

func (s sqlWorkspaces) all(ctx context.Context) ([]workspaceEntry, error) {
	// One row: SignupDB reads no more. string_agg is PostgreSQL's and
	// SQLite's (3.44+) alike.
	var raw string
	if _, err := s.db.QueryRow(ctx, `SELECT '[' || COALESCE(string_agg(state, ','), '') || ']' FROM demo_workspace`, nil, &raw); err != nil {
		return nil, err
	}
	var out []workspaceEntry
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("demo_workspace rows: %w", err)
	}
	return out, nil
}

func (s sqlWorkspaces) lastID(ctx context.Context) (int, error) {
	var last int
	_, err := s.db.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM demo_workspace`, nil, &last)
	return last, err
}

// workspaceNumber is n of ws_n, 0 for none.
func workspaceNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "ws_"))
	return n
}
