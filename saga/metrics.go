package saga

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Collector is a Prometheus collector of the engine's state (SPEC G10),
// read from the records at every scrape:
//
//   - unstuck_saga_operations{status}: operations per status;
//   - unstuck_saga_oldest_age_seconds{status}: for running,
//     compensating and review_required, the time since the least recently
//     changed operation changed (stuck work and old review items);
//   - unstuck_saga_failed_compensations: steps in compensation_failed;
//   - unstuck_saga_open_findings: reconciliation findings not resolved;
//   - unstuck_saga_oldest_open_finding_age_seconds: the time since the
//     oldest open finding was detected (0 when none is open);
//   - unstuck_saga_stats_up: 1 if the scrape's read of the records
//     succeeded, 0 if not (then only this and no other gauge is sent);
//   - unstuck_clock_skew_seconds: the application's clock minus the
//     database's, as [Runner.ClockSkew] measures it (alert on its
//     absolute value: River's retries and rescues are off by as much).
//
// Ages are measured on the database's clock, as the records are.
//
// Register it once: prometheus.MustRegister(saga.NewCollector(runner, 5*time.Second)).
type Collector struct {
	stats   func(ctx context.Context) (reading, error)
	timeout time.Duration

	ops, age, comp, findings, findingAge, up, skew *prometheus.Desc
}

// reading is one scrape: the stats, the database's clock and the skew.
type reading struct {
	sagadriver.Stats
	now  time.Time
	skew time.Duration
}

// NewCollector returns a collector over runner; each scrape reads the
// records in one read transaction bounded by timeout.
func NewCollector[TTx any](runner *Runner[TTx], timeout time.Duration) *Collector {
	return &Collector{
		stats: func(ctx context.Context) (reading, error) {
			var rd reading
			err := runner.driver.WithinTx(ctx, func(ctx context.Context, tx TTx) error {
				var err error
				if rd.skew, err = runner.skewIn(ctx, tx); err != nil {
					return err
				}
				if rd.now, err = runner.clock(ctx, tx); err != nil {
					return err
				}
				rd.Stats, err = runner.driver.Stats(ctx, tx)
				return err
			})
			return rd, err
		},
		timeout:    timeout,
		ops:        prometheus.NewDesc("unstuck_saga_operations", "Operations per status.", []string{"status"}, nil),
		age:        prometheus.NewDesc("unstuck_saga_oldest_age_seconds", "Seconds since the least recently changed operation of the status changed.", []string{"status"}, nil),
		comp:       prometheus.NewDesc("unstuck_saga_failed_compensations", "Steps whose compensation failed.", nil, nil),
		findings:   prometheus.NewDesc("unstuck_saga_open_findings", "Open reconciliation findings.", nil, nil),
		findingAge: prometheus.NewDesc("unstuck_saga_oldest_open_finding_age_seconds", "Seconds since the oldest open reconciliation finding was detected; 0 when none is open.", nil, nil),
		up:         prometheus.NewDesc("unstuck_saga_stats_up", "1 if the last read of the records succeeded.", nil, nil),
		skew:       prometheus.NewDesc("unstuck_clock_skew_seconds", "The application's clock minus the database's, in seconds.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ops, c.age, c.comp, c.findings, c.findingAge, c.up, c.skew} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.skew, prometheus.GaugeValue, st.skew.Seconds())
	now := st.now
	for _, s := range sagadriver.Statuses {
		ch <- prometheus.MustNewConstMetric(c.ops, prometheus.GaugeValue, float64(st.Operations[s]), string(s))
	}
	for _, s := range []sagadriver.Status{sagadriver.StatusRunning, sagadriver.StatusCompensating, sagadriver.StatusReviewRequired} {
		age := 0.0
		if t, ok := st.OldestUpdate[s]; ok {
			age = max(now.Sub(t).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.comp, prometheus.GaugeValue, float64(st.FailedCompensations))
	ch <- prometheus.MustNewConstMetric(c.findings, prometheus.GaugeValue, float64(st.OpenFindings))
	findingAge := 0.0
	if !st.OldestOpenFinding.IsZero() {
		findingAge = max(now.Sub(st.OldestOpenFinding).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.findingAge, prometheus.GaugeValue, findingAge)
}
