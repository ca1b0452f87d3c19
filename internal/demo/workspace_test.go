package demo

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// sqliteDB is a SignupDB on an SQLite file, $n becoming ?n.
type sqliteDB struct{ db *sql.DB }

var dollar = regexp.MustCompile(`\$(\d+)`)

func (d sqliteDB) Exec(ctx context.Context, q string, args ...any) error {
	_, err := d.db.ExecContext(ctx, dollar.ReplaceAllString(q, "?$1"), args...)
	return err
}

func (d sqliteDB) QueryRow(ctx context.Context, q string, args []any, dest ...any) (bool, error) {
	err := d.db.QueryRowContext(ctx, dollar.ReplaceAllString(q, "?$1"), args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func openSQLiteSignupDB(t *testing.T) SignupDB {
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "demo.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return sqliteDB{db}
}

// providers are the provider's two states: memory, and the demo's database.
var providers = map[string]func(t *testing.T) *WorkspaceProvider{
	"Memory": func(*testing.T) *WorkspaceProvider { return NewWorkspaceProvider() },
	"SQLite": func(t *testing.T) *WorkspaceProvider {
		p, err := NewWorkspaceProviderDB(t.Context(), openSQLiteSignupDB(t))
		require.NoError(t, err)
		return p
	},
}

// A Create under a key whose workspace was made and then
// refused activation answers the same refusal on every repeat, as a real
// idempotent provider does; it never activates the workspace nor makes a
// second one. (It used to activate it on the repeat, so workspace_permanent
// signups completed.)
func TestWorkspaceRepeatedCreateOfRefusedNeverActivates(t *testing.T) {
	t.Parallel()
	for name, newProvider := range providers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			p := newProvider(t)
			require.NoError(t, p.InjectFaults(ctx, "k", WSActivateRefused))
			_, err := p.Create(ctx, "k", "ann@example.com")
			var werr *WorkspaceError
			require.ErrorAs(t, err, &werr)
			require.Equal(t, 422, werr.Status)
			first := werr.Message
			for range 3 {
				_, err := p.Create(ctx, "k", "ann@example.com")
				require.ErrorAs(t, err, &werr, "a repeat is refused as the first call was")
				require.Equal(t, 422, werr.Status)
				require.Equal(t, first, werr.Message)
			}
			w, ok, err := p.Lookup(ctx, "k")
			require.NoError(t, err)
			require.True(t, ok)
			require.False(t, w.Active, "never activated")
			creates, effects, deletes := p.Counts("k")
			require.Equal(t, []int{4, 1, 0}, []int{creates, effects, deletes})

			// Compensated (deleted), a repeat still does not succeed.
			require.NoError(t, p.Delete(ctx, "k"))
			_, err = p.Create(ctx, "k", "ann@example.com")
			require.ErrorAs(t, err, &werr)
			require.Equal(t, 422, werr.Status)
			_, ok, err = p.Lookup(ctx, "k")
			require.NoError(t, err)
			require.False(t, ok)

			// A refusal before any effect is final too; a lost answer is not
			// a refusal: the repeat returns the workspace made.
			require.NoError(t, p.InjectFaults(ctx, "r", WSRefuse))
			for range 2 {
				_, err = p.Create(ctx, "r", "bob@example.com")
				require.ErrorAs(t, err, &werr)
				require.Equal(t, 422, werr.Status)
			}
			require.NoError(t, p.InjectFaults(ctx, "t", WSTimeoutAfter))
			_, err = p.Create(ctx, "t", "cy@example.com")
			require.ErrorAs(t, err, &werr)
			require.True(t, werr.Timeout())
			w, err = p.Create(ctx, "t", "cy@example.com")
			require.NoError(t, err)
			require.True(t, w.Active)
			_, effects, _ = p.Counts("t")
			require.Equal(t, 1, effects)
		})
	}
}

// The provider's state is in the demo's database, so a new
// provider on it (a restarted demo) finds the workspaces, the refusals, the
// queued faults and the counters, and never gives a workspace number twice.
func TestWorkspaceStateSurvivesNewProvider(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openSQLiteSignupDB(t)
	p1, err := NewWorkspaceProviderDB(ctx, db)
	require.NoError(t, err)
	made, err := p1.Create(ctx, "done", "ann@example.com")
	require.NoError(t, err)
	require.NoError(t, p1.InjectFaults(ctx, "refused", WSActivateRefused))
	_, err = p1.Create(ctx, "refused", "bob@example.com")
	require.Error(t, err)
	require.NoError(t, p1.InjectFaults(ctx, "queued", WSErrorBefore))

	p2, err := NewWorkspaceProviderDB(ctx, db)
	require.NoError(t, err)
	w, ok, err := p2.Lookup(ctx, "done")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, made, w)
	again, err := p2.Create(ctx, "done", "ann@example.com")
	require.NoError(t, err)
	require.Equal(t, made.ID, again.ID, "the same workspace, not a second one")
	_, err = p2.Create(ctx, "refused", "bob@example.com")
	var werr *WorkspaceError
	require.ErrorAs(t, err, &werr)
	require.Equal(t, 422, werr.Status, "the refusal survived")
	_, err = p2.Create(ctx, "queued", "cy@example.com")
	require.ErrorAs(t, err, &werr)
	require.Equal(t, 503, werr.Status, "the queued fault survived")
	fresh, err := p2.Create(ctx, "queued", "cy@example.com")
	require.NoError(t, err)

	list, err := p2.List(ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, w := range list {
		require.False(t, ids[w.ID], "workspace number %s given twice", w.ID)
		ids[w.ID] = true
	}
	require.Len(t, list, 3)
	require.True(t, ids[fresh.ID])
	creates, effects, _ := p2.Counts("done")
	require.Equal(t, []int{2, 1}, []int{creates, effects})
}
