package main

import (
	"context"
	"flag"
	"log/slog"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/internal/incident"
)

// incidentFlags are the flags of the snapshots of trends and incidents
// (serve and demo).
type incidentFlags struct {
	every *time.Duration
}

func addIncidentFlags(fs *flag.FlagSet, getenv func(string) string) incidentFlags {
	def := incident.DefaultEvery
	if v, err := time.ParseDuration(getenv("UNSTUCK_SNAPSHOT_EVERY")); err == nil && v > 0 {
		def = v
	}
	return incidentFlags{
		every: fs.Duration("snapshot-every", def, "take the snapshot of counts and incident groups this often, when this console is the leader (env UNSTUCK_SNAPSHOT_EVERY)"),
	}
}

// startSnapshots runs the snapshotter of trends and incident groups over
// db until ctx ends or the returned stop is called; stop waits for it.
// Only the leader among the consoles sharing the database writes a
// snapshot (see store.DB.WriteSnapshot).
func startSnapshots(ctx context.Context, db *database, f incidentFlags, log *slog.Logger) (stop func()) {
	s := &incident.Snapshotter{Keys: db.Records, Store: db.Console, Log: log}
	if db.Sagas != nil {
		s.Ops = db.Sagas
	}
	every := *f.every
	if every <= 0 {
		every = incident.DefaultEvery
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx, every) })
	return func() {
		cancel()
		wg.Wait()
	}
}
