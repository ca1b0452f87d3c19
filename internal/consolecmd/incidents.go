package consolecmd

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/unstuckhq/unstuck/internal/incident"
	"github.com/unstuckhq/unstuck/internal/outbound"
)

// incidentFlags are the flags of the snapshots of trends and incidents
// (serve and demo).
type incidentFlags struct {
	every      *time.Duration
	webhook    *string
	consoleURL *string
}

func addIncidentFlags(fs *flag.FlagSet, getenv func(string) string) incidentFlags {
	def := incident.DefaultEvery
	if v, err := time.ParseDuration(getenv("UNSTUCK_SNAPSHOT_EVERY")); err == nil && v > 0 {
		def = v
	}
	return incidentFlags{
		every: fs.Duration("snapshot-every", def, "take the snapshot of counts and incident groups this often, when this console is the leader (env UNSTUCK_SNAPSHOT_EVERY)"),
		webhook: fs.String("incident-webhook", getenv("UNSTUCK_INCIDENT_WEBHOOK"), "post Slack-compatible JSON to this `URL` when a new incident group appears "+
			"(env UNSTUCK_INCIDENT_WEBHOOK; the URL holds a token: prefer the env, which ps does not show)"),
		consoleURL: fs.String("console-url", getenv("UNSTUCK_CONSOLE_URL"), "the console's `URL` as people reach it, for the links in notifications (env UNSTUCK_CONSOLE_URL)"),
	}
}

// check validates the flags; an error names the flag.
func (f incidentFlags) check() error {
	if *f.every < time.Second {
		return errors.New("--snapshot-every must be at least 1s")
	}
	if *f.webhook != "" {
		if err := outbound.CheckURL(*f.webhook); err != nil {
			return errors.New("--incident-webhook: " + err.Error())
		}
	}
	if *f.consoleURL != "" {
		if err := outbound.CheckURL(*f.consoleURL); err != nil {
			return errors.New("--console-url: " + err.Error())
		}
	}
	return nil
}

// startSnapshots runs the snapshotter of trends and incident groups over
// db until ctx ends or the returned stop is called; stop waits for it.
// Only the leader among the consoles sharing the database writes a
// snapshot (see store.DB.WriteSnapshot).
func startSnapshots(ctx context.Context, db *database, f incidentFlags, log *slog.Logger) (stop func()) {
	s := &incident.Snapshotter{Keys: db.Records, Store: db.Console, Log: log}
	if *f.webhook != "" {
		s.OnNewGroups = incident.Webhook(*f.webhook, *f.consoleURL, &http.Client{Timeout: 10 * time.Second}, log)
	}
	if db.Sagas != nil {
		s.Ops = db.Sagas
	}
	every := max(*f.every, time.Second)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx, every) })
	return func() {
		cancel()
		wg.Wait()
	}
}
