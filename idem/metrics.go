package idem

import "github.com/prometheus/client_golang/prometheus"

// Collector is a Prometheus collector of an engine's [Counters]:
//
//   - unstuck_idempotency_outcomes_unrecorded_total: outcomes whose first
//     write failed and went to a background recording;
//   - unstuck_idempotency_outcomes_recorded_late_total: background
//     recordings that succeeded;
//   - unstuck_idempotency_outcomes_given_up_total: background recordings
//     that ended without success (each logged at Error level);
//   - unstuck_idempotency_abandoned_escalated_total: abandoned records made
//     pending for an operator, by recovery or by Sweep;
//   - unstuck_idempotency_recordings_in_flight: background recordings
//     running now.
//
// Register it once: prometheus.MustRegister(idem.NewCollector(engine)).
type Collector struct {
	engine                                          *Engine
	unrecorded, recordedLate, givenUp, escalated, n *prometheus.Desc
}

// NewCollector returns a collector of e's counters. Collecting reads
// in-memory counters only; it touches no store.
func NewCollector(e *Engine) *Collector {
	return &Collector{
		engine:       e,
		unrecorded:   prometheus.NewDesc("unstuck_idempotency_outcomes_unrecorded_total", "Outcomes whose first write failed and went to a background recording.", nil, nil),
		recordedLate: prometheus.NewDesc("unstuck_idempotency_outcomes_recorded_late_total", "Outcomes recorded in the background after a failed first write.", nil, nil),
		givenUp:      prometheus.NewDesc("unstuck_idempotency_outcomes_given_up_total", "Background recordings that ended without recording the outcome.", nil, nil),
		escalated:    prometheus.NewDesc("unstuck_idempotency_abandoned_escalated_total", "Abandoned records escalated to pending for an operator.", nil, nil),
		n:            prometheus.NewDesc("unstuck_idempotency_recordings_in_flight", "Background recordings running now.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.unrecorded, c.recordedLate, c.givenUp, c.escalated, c.n} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	k := c.engine.Counters()
	ch <- prometheus.MustNewConstMetric(c.unrecorded, prometheus.CounterValue, float64(k.OutcomesUnrecorded))
	ch <- prometheus.MustNewConstMetric(c.recordedLate, prometheus.CounterValue, float64(k.OutcomesRecordedLate))
	ch <- prometheus.MustNewConstMetric(c.givenUp, prometheus.CounterValue, float64(k.OutcomesGivenUp))
	ch <- prometheus.MustNewConstMetric(c.escalated, prometheus.CounterValue, float64(k.AbandonedEscalated))
	ch <- prometheus.MustNewConstMetric(c.n, prometheus.GaugeValue, float64(k.RecordingsInFlight))
}
