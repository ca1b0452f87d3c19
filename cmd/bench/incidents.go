package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/store"
)

// prepareSnapshots gives the pages of trends and incidents what a console
// that has run for a while has: it times one snapshot's
// computation over the seeded records, imports 7 days of minute counts
// 2 days of quarter-hour ones and 90 days of hourly ones shaped on it (once per database), writes the
// incident groups hourly over the last 24 hours, and takes one real
// snapshot (timed too). It reports both times on log.
func prepareSnapshots(ctx context.Context, d readers, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	s := &incident.Snapshotter{Keys: d.keys, Ops: d.sagas, Store: d.DB}
	t0 := time.Now()
	snap, err := s.Compute(ctx)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	compute := time.Since(t0)
	now := time.Now().UTC()
	if _, ok, err := d.LastSnapshot(ctx); err != nil {
		return err
	} else if !ok {
		var rows []store.TrendRow
		wave := func(at time.Time, n int64) int64 {
			// A daily wave of ±20 % around the seeded count.
			return int64(float64(n) * (1 + 0.2*math.Sin(2*math.Pi*float64(at.Unix()%86400)/86400)))
		}
		for at := now.Add(-store.TrendMinuteRetention).Truncate(time.Minute); at.Before(now); at = at.Add(time.Minute) {
			for _, p := range snap.Trends {
				rows = append(rows, store.TrendRow{At: at, Kind: p.Kind, State: p.State, Count: wave(at, p.Count), Exact: p.Exact})
			}
		}
		for _, r := range []struct {
			res    store.Resolution
			period time.Duration
			keep   time.Duration
		}{{store.TrendQuarter, 15 * time.Minute, store.TrendQuarterRetention}, {store.TrendHour, time.Hour, store.TrendHourRetention}} {
			for at := now.Add(-r.keep).Truncate(r.period); at.Before(now); at = at.Add(r.period) {
				for _, p := range snap.Trends {
					rows = append(rows, store.TrendRow{Res: r.res, At: at, Kind: p.Kind, State: p.State, Count: wave(at, p.Count), Exact: p.Exact})
				}
			}
		}
		if err := d.ImportTrends(ctx, rows); err != nil {
			return err
		}
		for h := 23; h >= 1; h-- {
			at := now.Add(-time.Duration(h) * time.Hour)
			groups := make([]store.IncidentGroup, len(snap.Groups))
			for i, g := range snap.Groups {
				g.Count = max(1, g.Count*int64(24-h)/24)
				groups[i] = g
			}
			if _, err := d.WriteSnapshot(ctx, func(context.Context) (store.Snapshot, error) {
				return store.Snapshot{At: at, Groups: groups}, nil
			}); err != nil {
				return err
			}
		}
		fmt.Fprintf(log, "imported %d trend counts and 23 hours of %d incident groups\n", len(rows), len(snap.Groups))
	}
	t0 = time.Now()
	if _, err := s.Once(ctx); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	fmt.Fprintf(log, "snapshot: compute %v (%d groups), compute and write %v\n", compute.Round(time.Millisecond), len(snap.Groups),
		time.Since(t0).Round(time.Millisecond))
	return nil
}

// incidentCalls are the store calls of /incidents: its groups, their
// hours and the latest snapshot's time, at once as the page reads them.
func incidentCalls(ctx context.Context, d readers) error {
	return allAtOnce(
		func() error { _, err := d.IncidentGroups(ctx, 0); return err },
		func() error {
			_, err := d.IncidentHours(ctx, time.Now().Truncate(time.Hour).Add(-23*time.Hour))
			return err
		},
		func() error { _, _, err := d.LastSnapshot(ctx); return err })
}

// trendCalls are the overview's two trend reads.
func trendCalls(ctx context.Context, d readers) error {
	now := time.Now()
	if _, err := d.Trends(ctx, store.TrendQuarter, now.Add(-24*time.Hour)); err != nil {
		return err
	}
	_, err := d.Trends(ctx, store.TrendHour, now.Add(-7*24*time.Hour))
	return err
}
