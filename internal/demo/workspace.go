package demo

import (
	"context"
	"fmt"
	"sort"
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
// key it is given, and deleting a workspace that does not exist is a
// success. Faults are injected per key with Inject; a fault with Always
// set applies to every call. It is the one fake in the project.
type WorkspaceProvider struct {
	mu         sync.Mutex
	byKey      map[string]Workspace
	faults     map[string][]WorkspaceFault
	always     map[string]WorkspaceFault
	creates    map[string]int // Create calls per key
	effects    map[string]int // workspaces actually created per key
	deletes    map[string]int // workspaces actually deleted per key
	nextID     int
	now        func() time.Time
	AfterApply func(key string) // called after an effect is applied, for crash tests
}

// NewWorkspaceProvider returns an empty provider.
func NewWorkspaceProvider() *WorkspaceProvider {
	return &WorkspaceProvider{byKey: map[string]Workspace{}, faults: map[string][]WorkspaceFault{}, always: map[string]WorkspaceFault{},
		creates: map[string]int{}, effects: map[string]int{}, deletes: map[string]int{}, now: time.Now}
}

// Inject queues faults for the next calls concerning key, one per call of
// the kind the fault applies to.
func (p *WorkspaceProvider) Inject(key string, faults ...WorkspaceFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[key] = append(p.faults[key], faults...)
}

// InjectAlways makes every call of f's kind for key fail so.
func (p *WorkspaceProvider) InjectAlways(key string, f WorkspaceFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.always[key] = f
}

// take pops the first queued fault for key among kinds.
func (p *WorkspaceProvider) take(key string, kinds ...WorkspaceFault) WorkspaceFault {
	if f, ok := p.always[key]; ok {
		for _, k := range kinds {
			if k == f {
				return f
			}
		}
	}
	q := p.faults[key]
	for i, f := range q {
		for _, k := range kinds {
			if f == k {
				p.faults[key] = append(q[:i:i], q[i+1:]...)
				return f
			}
		}
	}
	return ""
}

// Create makes the workspace of owner under key, or returns the one made
// under key before.
func (p *WorkspaceProvider) Create(ctx context.Context, key, owner string) (Workspace, error) {
	if err := ctx.Err(); err != nil {
		return Workspace{}, err
	}
	p.mu.Lock()
	p.creates[key]++
	f := p.take(key, WSErrorBefore, WSTimeoutAfter, WSRefuse, WSActivateRefused)
	switch f {
	case WSErrorBefore:
		p.mu.Unlock()
		return Workspace{}, &WorkspaceError{Status: 503, Message: "workspace provider unavailable"}
	case WSRefuse:
		p.mu.Unlock()
		return Workspace{}, &WorkspaceError{Status: 422, Message: "workspace refused: plan limit reached"}
	}
	w, ok := p.byKey[key]
	if !ok {
		p.nextID++
		w = Workspace{ID: fmt.Sprintf("ws_%06d", p.nextID), IdempotencyKey: key, Owner: owner, CreatedAt: p.now().UTC()}
		p.effects[key]++
	}
	if f != WSActivateRefused {
		w.Active = true
	}
	p.byKey[key] = w
	after := p.AfterApply
	p.mu.Unlock()
	if after != nil {
		after(key)
	}
	switch f {
	case WSTimeoutAfter:
		return Workspace{}, &WorkspaceError{Message: "workspace provider timed out"}
	case WSActivateRefused:
		return Workspace{}, &WorkspaceError{Status: 422, Message: "workspace " + w.ID + " created but activation refused"}
	}
	return w, nil
}

// Lookup returns the workspace made under key, if any: what Verify and
// reconciliation ask.
func (p *WorkspaceProvider) Lookup(ctx context.Context, key string) (Workspace, bool, error) {
	if err := ctx.Err(); err != nil {
		return Workspace{}, false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.take(key, WSLookupUnknown) != "" {
		return Workspace{}, false, &WorkspaceError{Status: 503, Message: "workspace status unavailable"}
	}
	w, ok := p.byKey[key]
	return w, ok, nil
}

// Delete deletes the workspace made under key. Deleting one that does
// not exist (never made, or deleted already) succeeds and changes nothing.
func (p *WorkspaceProvider) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.take(key, WSDeleteError) != "" {
		return &WorkspaceError{Status: 503, Message: "workspace provider could not delete"}
	}
	if _, ok := p.byKey[key]; ok {
		delete(p.byKey, key)
		p.deletes[key]++
	}
	return nil
}

// Counts returns, for key, the Create calls, the workspaces actually
// created and those actually deleted.
func (p *WorkspaceProvider) Counts(key string) (creates, effects, deletes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creates[key], p.effects[key], p.deletes[key]
}

// Workspaces returns the live workspaces in creation order.
func (p *WorkspaceProvider) Workspaces() []Workspace {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Workspace, 0, len(p.byKey))
	for _, w := range p.byKey {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Put places a workspace under key directly, as if made out of band: a
// drift for reconciliation to find.
func (p *WorkspaceProvider) Put(key, owner string) Workspace {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	w := Workspace{ID: fmt.Sprintf("ws_%06d", p.nextID), IdempotencyKey: key, Owner: owner, Active: true, CreatedAt: p.now().UTC()}
	p.byKey[key] = w
	return w
}

// Remove deletes the workspace under key out of band (a drift).
func (p *WorkspaceProvider) Remove(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byKey, key)
}
