// Package fakeworkspace is an in-process fake of an external workspace
// provider, the side effect of the signup saga that the saga engine's
// tests and the console's demo both drive: creations deduplicated by
// idempotency key, lookups and deletions, and faults injected per key.
//
// It is test support for this repository's suites, public so that the
// library's tests, the console's and the tools share it; adopters may use
// it, with no compatibility promise before v1.
package fakeworkspace

import (
	"context"
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

// Fault is a fault the provider injects into the next call of
// one kind for one key.
type Fault string

// Faults of the workspace provider.
const (
	// ErrorBefore: Create fails with a 503 before any effect.
	ErrorBefore Fault = "error_before"
	// TimeoutAfter: Create makes the workspace, then the answer is lost.
	TimeoutAfter Fault = "timeout_after"
	// Refuse: Create refuses for a business reason (422), no effect.
	Refuse Fault = "refuse"
	// ActivateRefused: Create makes the workspace, then refuses to
	// activate it (422): the effect is partial.
	ActivateRefused Fault = "activate_refused"
	// LookupUnknown: Lookup cannot tell (503).
	LookupUnknown Fault = "lookup_unknown"
	// DeleteError: Delete fails with a 503 before any effect.
	DeleteError Fault = "delete_error"
)

// Error is a provider answer that is not a success.
type Error struct {
	Status  int // 0 for a timeout: the outcome is unknown
	Message string
}

func (e *Error) Error() string { return e.Message }

// Timeout reports whether the call timed out, leaving the outcome unknown.
func (e *Error) Timeout() bool { return e.Status == 0 }

// Provider is an in-process fake of an external workspace provider.
// Like a real one it deduplicates creations by the idempotency
// key it is given: the first answer under a key that made or refused
// something is the answer to every later Create under that key (a
// workspace whose activation was refused is never activated by a retry),
// and deleting a workspace that does not exist is a success. Faults are
// injected per key with Inject; a fault with Always set applies to every
// call. It is the one fake in the project.
//
// Its state lives in memory ([New]) or in a [State] of the caller's
// ([NewWithState]; the console's demo keeps it in its database, where it
// survives a restart as a real provider's would). The methods without an
// error result (Inject, InjectAlways, Counts, Workspaces, Put, Remove) are
// test helpers: on a failure of the state they change nothing and report
// zero values.
type Provider struct {
	mu         sync.Mutex // serialises each read-modify-write of the state
	state      State
	now        func() time.Time
	AfterApply func(key string) // called after an effect is applied, for crash tests
}

// Entry is everything the provider holds under one key.
type Entry struct {
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
	Faults []Fault `json:"faults,omitempty"`
	Always Fault   `json:"always,omitempty"`
}

// State stores the entries of a provider: in memory ([New]) or wherever
// the caller keeps them ([NewWithState]). The provider holds its mutex
// around every call.
type State interface {
	// Get returns key's entry; one never stored is Entry{Key: key}.
	Get(ctx context.Context, key string) (Entry, error)
	// Put stores e under e.Key.
	Put(ctx context.Context, e Entry) error
	// All returns every stored entry, in any order.
	All(ctx context.Context) ([]Entry, error)
	// LastID is the highest workspace [Number] ever given out.
	LastID(ctx context.Context) (int, error)
}

// New returns an empty provider whose state lives in memory.
func New() *Provider {
	return NewWithState(&memoryState{byKey: map[string]Entry{}})
}

// NewWithState returns a provider whose state lives in s: a new provider
// on the same state carries on where the last one stopped. One provider
// at a time may use a state.
func NewWithState(s State) *Provider {
	return &Provider{state: s, now: time.Now}
}

// Inject queues faults for the next calls concerning key, one per call of
// the kind the fault applies to.
func (p *Provider) Inject(key string, faults ...Fault) {
	_ = p.InjectFaults(context.Background(), key, faults...)
}

// InjectFaults is Inject with a context and the state's error.
func (p *Provider) InjectFaults(ctx context.Context, key string, faults ...Fault) error {
	return p.update(ctx, key, func(e *Entry) error {
		e.Faults = append(e.Faults, faults...)
		return nil
	})
}

// InjectAlways makes every call of f's kind for key fail so; "" ends it.
func (p *Provider) InjectAlways(key string, f Fault) {
	_ = p.update(context.Background(), key, func(e *Entry) error {
		e.Always = f
		return nil
	})
}

// update runs fn on key's entry under the mutex and stores the entry if
// fn changed it (also when fn fails: a consumed fault stays consumed);
// fn's error is returned.
func (p *Provider) update(ctx context.Context, key string, fn func(e *Entry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.state.Get(ctx, key)
	if err != nil {
		return unavailable(err)
	}
	before := e
	before.Faults = slices.Clone(e.Faults)
	ferr := fn(&e)
	if reflect.DeepEqual(before, e) {
		return ferr
	}
	if err := p.state.Put(ctx, e); err != nil {
		return unavailable(err)
	}
	return ferr
}

// unavailable is the provider's answer when its own storage fails: a 503
// before any effect.
func unavailable(err error) error {
	return &Error{Status: 503, Message: "workspace provider unavailable: " + err.Error()}
}

// take pops the first queued fault of e among kinds.
func (e *Entry) take(kinds ...Fault) Fault {
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
func (p *Provider) newWorkspace(ctx context.Context, key, owner string) (Workspace, error) {
	last, err := p.state.LastID(ctx)
	if err != nil {
		return Workspace{}, unavailable(err)
	}
	return Workspace{ID: fmt.Sprintf("ws_%06d", last+1), IdempotencyKey: key, Owner: owner, CreatedAt: p.now().UTC()}, nil
}

// Create makes the workspace of owner under key, or answers as the first
// Create under key did: the workspace made then, or its refusal.
func (p *Provider) Create(ctx context.Context, key, owner string) (Workspace, error) {
	var (
		w       Workspace
		f       Fault
		applied bool
		refused string // activation refused after the effect
	)
	err := p.update(ctx, key, func(e *Entry) error {
		e.Creates++
		f = e.take(ErrorBefore, TimeoutAfter, Refuse, ActivateRefused)
		switch {
		case f == ErrorBefore:
			return &Error{Status: 503, Message: "workspace provider unavailable"}
		case e.Refused != "":
			// A real provider replays the answer it gave under the key.
			return &Error{Status: 422, Message: e.Refused}
		case f == Refuse && !e.Live:
			e.Refused = "workspace refused: plan limit reached"
			return &Error{Status: 422, Message: e.Refused}
		}
		if !e.Live {
			nw, err := p.newWorkspace(ctx, key, owner)
			if err != nil {
				return err
			}
			e.Workspace, e.Live, applied = nw, true, true
			e.Effects++
			e.Workspace.Active = f != ActivateRefused
		}
		if f == ActivateRefused && !e.Workspace.Active {
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
	case f == TimeoutAfter:
		return Workspace{}, &Error{Message: "workspace provider timed out"}
	case refused != "":
		// Activation refused: the workspace exists, inactive.
		return Workspace{}, &Error{Status: 422, Message: refused}
	}
	return w, nil
}

// entry reads key's entry.
func (p *Provider) entry(ctx context.Context, key string) (Entry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.Get(ctx, key)
}

// Lookup returns the workspace made under key, if any: what Verify and
// reconciliation ask.
func (p *Provider) Lookup(ctx context.Context, key string) (Workspace, bool, error) {
	var (
		w    Workspace
		live bool
	)
	err := p.update(ctx, key, func(e *Entry) error {
		if e.take(LookupUnknown) != "" {
			return &Error{Status: 503, Message: "workspace status unavailable"}
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
func (p *Provider) Delete(ctx context.Context, key string) error {
	return p.update(ctx, key, func(e *Entry) error {
		if e.take(DeleteError) != "" {
			return &Error{Status: 503, Message: "workspace provider could not delete"}
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
func (p *Provider) Counts(key string) (creates, effects, deletes int) {
	e, err := p.entry(context.Background(), key)
	if err != nil {
		return 0, 0, 0
	}
	return e.Creates, e.Effects, e.Deletes
}

// Workspaces returns the live workspaces in creation order.
func (p *Provider) Workspaces() []Workspace {
	ws, _ := p.List(context.Background())
	return ws
}

// List returns the live workspaces in creation order, with the state's
// error.
func (p *Provider) List(ctx context.Context) ([]Workspace, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	all, err := p.state.All(ctx)
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
func (p *Provider) Put(key, owner string) Workspace {
	var w Workspace
	_ = p.update(context.Background(), key, func(e *Entry) error {
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
func (p *Provider) Remove(key string) {
	_ = p.update(context.Background(), key, func(e *Entry) error {
		e.Live = false
		return nil
	})
}

// memoryState is the state of a provider in memory.
type memoryState struct {
	byKey map[string]Entry
	last  int
}

func (m *memoryState) Get(_ context.Context, key string) (Entry, error) {
	e, ok := m.byKey[key]
	if !ok {
		return Entry{Key: key}, nil
	}
	e.Faults = slices.Clone(e.Faults)
	return e, nil
}

func (m *memoryState) Put(_ context.Context, e Entry) error {
	m.byKey[e.Key] = e
	m.last = max(m.last, Number(e.Workspace.ID))
	return nil
}

func (m *memoryState) All(context.Context) ([]Entry, error) {
	out := make([]Entry, 0, len(m.byKey))
	for _, e := range m.byKey {
		out = append(out, e)
	}
	return out, nil
}

func (m *memoryState) LastID(context.Context) (int, error) { return m.last, nil }

// Number is n of ws_n, 0 for none.
func Number(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "ws_"))
	return n
}
