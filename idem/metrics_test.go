package idem_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
)

// The collector exposes the engine's counters of unrecorded outcomes and
// escalations under the unstuck_idempotency_ prefix.
func TestCollectorExposesTheCounters(t *testing.T) {
	t.Parallel()
	s, e := newOutageEngine(t)
	s.down.Store(true)
	_, err := idem.Run(context.Background(), e, "k", "s", func(context.Context) (int, error) { return 1, nil }, nil)
	require.ErrorIs(t, err, idem.ErrOutcomeUnrecorded)
	s.down.Store(false)
	waitRecorded(t, e)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(idem.NewCollector(e)))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[f.GetName()] = c.GetValue()
		} else {
			got[f.GetName()] = m.GetGauge().GetValue()
		}
	}
	require.Equal(t, map[string]float64{
		"unstuck_idempotency_outcomes_unrecorded_total":    1,
		"unstuck_idempotency_outcomes_recorded_late_total": 1,
		"unstuck_idempotency_outcomes_given_up_total":      0,
		"unstuck_idempotency_abandoned_escalated_total":    0,
		"unstuck_idempotency_recordings_in_flight":         0,
	}, got)
}
