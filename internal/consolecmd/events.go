package consolecmd

import (
	"flag"
	"log/slog"

	"github.com/unstuckhq/unstuck/decision"
)

// eventFlags are the flags of the decision events (SPEC K26,
// docs/events.md).
type eventFlags struct {
	on    *bool
	queue *string
}

func addEventFlags(fs *flag.FlagSet, getenv func(string) string) eventFlags {
	return eventFlags{
		on: fs.Bool("decision-events", getenv("UNSTUCK_DECISION_EVENTS") != "false",
			"insert an event job (kind "+decision.Kind+") for every applied decision on the applications' River tables; false turns them off (env UNSTUCK_DECISION_EVENTS=false)"),
		queue: fs.String("decision-events-queue", envOr(getenv, "UNSTUCK_DECISION_EVENTS_QUEUE", decision.DefaultQueue),
			"River `queue` of the decision events, which the applications' River must work with a decision.Worker (env UNSTUCK_DECISION_EVENTS_QUEUE)"),
	}
}

// queueOn returns the queue decisions emit their events on, "" for none,
// and logs once what db allows: none on MySQL, whose River has no driver.
func (f eventFlags) queueOn(db *database, log *slog.Logger) string {
	switch {
	case !*f.on:
		log.Info("decision events are off (--decision-events=false)")
		return ""
	case db.MySQL != nil:
		log.Info("no decision events on MySQL: River has no MySQL driver (docs/events.md)")
		return ""
	}
	log.Info("decision events on", "queue", *f.queue, "kind", decision.Kind)
	return *f.queue
}
