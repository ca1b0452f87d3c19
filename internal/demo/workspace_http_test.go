package demo

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkspaceClientOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := NewWorkspaceProvider()
	srv := httptest.NewServer(WorkspaceHandler(p))
	t.Cleanup(srv.Close)
	c := &WorkspaceClient{BaseURL: srv.URL}

	ws, err := c.Create(ctx, "op/workspace", "ann@example.com")
	require.NoError(t, err)
	require.True(t, ws.Active)
	again, err := c.Create(ctx, "op/workspace", "ann@example.com")
	require.NoError(t, err)
	require.Equal(t, ws.ID, again.ID, "deduplicated by key")
	got, ok, err := c.Lookup(ctx, "op/workspace")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, ws, got)
	_, ok, err = c.Lookup(ctx, "nope")
	require.NoError(t, err)
	require.False(t, ok)

	// Faults travel to the provider and come back as the same errors.
	require.NoError(t, c.InjectFaults(ctx, "k2", WSTimeoutAfter, WSRefuse, WSLookupUnknown, WSDeleteError))
	_, err = c.Create(ctx, "k2", "bob")
	var werr *WorkspaceError
	require.ErrorAs(t, err, &werr)
	require.True(t, werr.Timeout(), "the lost answer is an unknown outcome: %v", err)
	_, err = c.Create(ctx, "k3", "cy")
	require.NoError(t, err)
	_, _, err = c.Lookup(ctx, "k2")
	require.ErrorAs(t, err, &werr)
	require.Equal(t, http.StatusServiceUnavailable, werr.Status)
	require.ErrorAs(t, c.Delete(ctx, "k2"), &werr)
	require.Equal(t, http.StatusServiceUnavailable, werr.Status)
	require.NoError(t, c.InjectFaults(ctx, "k4", WSRefuse))
	_, err = c.Create(ctx, "k4", "dee")
	require.ErrorAs(t, err, &werr)
	require.Equal(t, http.StatusUnprocessableEntity, werr.Status)

	require.NoError(t, c.Delete(ctx, "k2"))
	require.NoError(t, c.Delete(ctx, "k2"), "deleting nothing succeeds")
	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	counts, err := c.Counts(ctx, "k2")
	require.NoError(t, err)
	require.Equal(t, WorkspaceCounts{Creates: 1, Effects: 1, Deletes: 1}, counts)

	// No answer at all: an unknown outcome too.
	srv.Close()
	_, err = c.Create(ctx, "k5", "eve")
	require.ErrorAs(t, err, &werr)
	require.True(t, werr.Timeout())
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Create(cancelled, "k5", "eve")
	require.True(t, errors.As(err, &werr) && werr.Timeout())
}
