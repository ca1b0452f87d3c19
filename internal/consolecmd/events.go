package consolecmd

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

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

// unworkedAfter is how long a decision event may wait, available, before
// the console says that nothing works its queue.
const unworkedAfter = 5 * time.Minute

// warnUnworkedEvents is the check of the applications' River settings the
// console can make, which cannot read them: it warns when the oldest
// available decision event on queue has been available for more than
// unworkedAfter at now, as when the applications' River client lacks the
// queue in its Config.Queues.
func warnUnworkedEvents[TTx any](ctx context.Context, client *river.Client[TTx], queue string, now time.Time, log *slog.Logger) {
	res, err := client.JobList(ctx, river.NewJobListParams().Kinds(decision.Kind).Queues(queue).
		States(rivertype.JobStateAvailable).OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1))
	if err != nil {
		log.Warn("could not read the decision events waiting to be worked", "queue", queue, "error", err.Error())
		return
	}
	if len(res.Jobs) == 0 || now.Sub(res.Jobs[0].ScheduledAt) <= unworkedAfter {
		return
	}
	log.Warn("decision events wait to be worked: does the applications' River work this queue, with a decision.Worker registered? (docs/events.md)",
		"queue", queue, "oldest_available_since", res.Jobs[0].ScheduledAt.UTC().Format(time.RFC3339))
}
