package web_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

// lowerBoundStuck is a driver whose stuck count stopped at its cap, as
// idempgx's does above 10,000 stuck records.
type lowerBoundStuck struct{ idemdriver.Admin }

func (s lowerBoundStuck) KeyOverview(ctx context.Context) (idemdriver.KeyOverview, error) {
	o, err := s.Admin.KeyOverview(ctx)
	o.StuckProcessing, o.StuckExact = 10000, false
	return o, err
}

// A stuck count that is a lower bound says so,
// on the overview ("≥") and in the gauge's exact label; an exact one says
// that too.
func TestStuckCountSaysWhetherExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	oncall := signIn(t, b, store.RoleOncall)
	resp, body := do(t, oncall, http.MethodGet, b.srv.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `data-testid="count-stuck">\s*0\s*</td>`, body)
	_, body = do(t, client(t), http.MethodGet, b.srv.URL+"/metrics", nil)
	require.Contains(t, body, `unstuck_idempotency_stuck_records{exact="true"} 0`)

	capped := setup(t, func(c *web.Config) { c.Records = lowerBoundStuck{c.Records} })
	oncall = signIn(t, capped, store.RoleOncall)
	resp, body = do(t, oncall, http.MethodGet, capped.srv.URL+"/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `data-testid="count-stuck">\s*<abbr [^>]*>≥</abbr>\s*10000\s*</td>`, body)
	require.Contains(t, body, "at least this many")
	_, body = do(t, client(t), http.MethodGet, capped.srv.URL+"/metrics", nil)
	require.Contains(t, body, `unstuck_idempotency_stuck_records{exact="false"} 10000`)
	require.Contains(t, body, `unstuck_idempotency_records{exact="true",status="completed"} 1`)
}

// /readyz asks Config.Ready after the database answers and
// answers 503 with its reason.
func TestReadinessAsksReady(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *web.Config) {
		c.Ready = func(context.Context) error { return errors.New("the database schema is behind: river (1) not applied") }
	})
	resp, body := do(t, client(t), http.MethodGet, b.srv.URL+"/readyz", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "the database schema is behind: river (1) not applied\n", body)
}

// failingOverview is a driver whose key counts cannot be read.
type failingOverview struct{ idemdriver.Admin }

func (failingOverview) KeyOverview(context.Context) (idemdriver.KeyOverview, error) {
	return idemdriver.KeyOverview{}, errors.New("the database is gone")
}

// SPEC K18: a failed read of the key counts is a gauge
// at 0 that the rule UnstuckRecordStatsDown watches, not a silent gap.
func TestKeyStatsUpGauge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, body := do(t, client(t), http.MethodGet, b.srv.URL+"/metrics", nil)
	require.Contains(t, body, "\nunstuck_idempotency_stats_up 1\n")

	down := setup(t, func(c *web.Config) { c.Records = failingOverview{c.Records} })
	_, body = do(t, client(t), http.MethodGet, down.srv.URL+"/metrics", nil)
	require.Contains(t, body, "\nunstuck_idempotency_stats_up 0\n")
	require.NotContains(t, body, "unstuck_idempotency_records{", "no counts from a failed read")
}
