package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/unstuckhq/unstuck/unstucktest/fakeworkspace"
)

// The demo's workspace provider is the fake of unstucktest/fakeworkspace,
// under the names the demo and the console use.
type (
	// Workspace is what the fake workspace provider holds.
	Workspace = fakeworkspace.Workspace
	// WorkspaceFault is a fault the provider injects into the next call of
	// one kind for one key.
	WorkspaceFault = fakeworkspace.Fault
	// WorkspaceError is a provider answer that is not a success.
	WorkspaceError = fakeworkspace.Error
	// WorkspaceProvider is the fake workspace provider.
	WorkspaceProvider = fakeworkspace.Provider
)

// Faults of the workspace provider.
const (
	WSErrorBefore     = fakeworkspace.ErrorBefore
	WSTimeoutAfter    = fakeworkspace.TimeoutAfter
	WSRefuse          = fakeworkspace.Refuse
	WSActivateRefused = fakeworkspace.ActivateRefused
	WSLookupUnknown   = fakeworkspace.LookupUnknown
	WSDeleteError     = fakeworkspace.DeleteError
)

// NewWorkspaceProvider returns an empty provider whose state lives in
// memory.
func NewWorkspaceProvider() *WorkspaceProvider { return fakeworkspace.New() }

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
	return fakeworkspace.NewWithState(sqlWorkspaces{db}), nil
}

// sqlWorkspaces is the state of a provider in the table demo_workspace:
// one row per key, the entry as JSON, and seq, the number of its
// workspace, so that numbers are never given out twice.
type sqlWorkspaces struct{ db SignupDB }

func (s sqlWorkspaces) Get(ctx context.Context, key string) (fakeworkspace.Entry, error) {
	var raw string
	ok, err := s.db.QueryRow(ctx, `SELECT state FROM demo_workspace WHERE key = $1`, []any{key}, &raw)
	if err != nil || !ok {
		return fakeworkspace.Entry{Key: key}, err
	}
	var e fakeworkspace.Entry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return fakeworkspace.Entry{}, fmt.Errorf("demo_workspace row %q: %w", key, err)
	}
	return e, nil
}

func (s sqlWorkspaces) Put(ctx context.Context, e fakeworkspace.Entry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.db.Exec(ctx, `INSERT INTO demo_workspace (key, seq, state) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET seq = excluded.seq, state = excluded.state`,
		e.Key, fakeworkspace.Number(e.Workspace.ID), string(raw))
}

func (s sqlWorkspaces) All(ctx context.Context) ([]fakeworkspace.Entry, error) {
	// One row: SignupDB reads no more. string_agg is PostgreSQL's and
	// SQLite's (3.44+) alike.
	var raw string
	if _, err := s.db.QueryRow(ctx, `SELECT '[' || COALESCE(string_agg(state, ','), '') || ']' FROM demo_workspace`, nil, &raw); err != nil {
		return nil, err
	}
	var out []fakeworkspace.Entry
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		return nil, fmt.Errorf("demo_workspace rows: %w", err)
	}
	return out, nil
}

func (s sqlWorkspaces) LastID(ctx context.Context) (int, error) {
	var last int
	_, err := s.db.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM demo_workspace`, nil, &last)
	return last, err
}
