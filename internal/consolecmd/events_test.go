package consolecmd

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// TestServeWiresDecisionEvents: the decisions serve wires insert an event
// on the configured queue of the applications' River tables, and none
// when events are off.
func TestServeWiresDecisionEvents(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]func(t *testing.T) string{
		"SQLite":     func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "events.db") },
		"PostgreSQL": func(t *testing.T) string { return pgtest.Database(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, err := openDatabase(ctx, url(t))
			require.NoError(t, err)
			t.Cleanup(db.Close)
			ring, err := audit.NewKeyring([]byte("events-test-audit-key-0123456789abcdef"))
			require.NoError(t, err)
			db.useAuditKeys(ring)
			if !db.Embedded {
				require.NoError(t, db.Migrate(ctx))
			}
			engine, err := idem.New(db.Store, idem.Config{Secret: []byte("events-test-secret-0123456789abcdef")})
			require.NoError(t, err)
			countEvents := func(queue string) int {
				var n int
				if db.Pool != nil {
					require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND queue = $2`, decision.Kind, queue).Scan(&n))
				} else {
					require.NoError(t, db.SQL.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE kind = ? AND queue = ?`, decision.Kind, queue).Scan(&n))
				}
				return n
			}
			decide := func(eventsQueue, key string) {
				var skew clockSkew
				wired, stop, err := operationDecisions(ctx, db, engine, saga.QueueDefault, eventsQueue, prometheus.NewRegistry(), &skew, nil, slog.New(slog.DiscardHandler))
				require.NoError(t, err)
				defer stop()
				_, err = idem.Run(ctx, engine, key, "tenant:events", func(context.Context) (int, error) {
					return 0, idem.Uncertain(errors.New("timeout"))
				}, nil)
				require.ErrorIs(t, err, idem.ErrUncertain)
				page, err := db.Records.ListKeys(ctx, idemdriver.KeyFilter{Scope: "tenant:events", Operation: idem.DefaultOperation,
					KeyDigest: idem.Digest("tenant:events", idem.DefaultOperation, key)})
				require.NoError(t, err)
				require.Len(t, page.Records, 1)
				rec := page.Records[0]
				_, err = wired.keys.Decide(ctx, ops.Actor{Username: "ada", Role: "oncall"}, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version,
					Action: idem.OperatorConfirmNotHappened, Reason: "the provider has no such charge"})
				require.NoError(t, err)
			}
			decide("app_decisions", "events-on")
			require.Equal(t, 1, countEvents("app_decisions"))
			decide("", "events-off")
			require.Equal(t, 1, countEvents("app_decisions"), "off: none")

			// An event available for long: nothing works the queue.
			var logs bytes.Buffer
			var skew clockSkew
			_, stop, err := operationDecisions(ctx, db, engine, saga.QueueDefault, "app_decisions", prometheus.NewRegistry(), &skew, nil,
				slog.New(slog.NewTextHandler(&logs, nil)))
			require.NoError(t, err)
			stop()
			require.NotContains(t, logs.String(), "decision events wait to be worked", "a fresh event is not a problem")
			if db.Pool != nil {
				_, err = db.Pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() - interval '10 minutes' WHERE kind = $1`, decision.Kind)
			} else {
				_, err = db.SQL.ExecContext(ctx, `UPDATE river_job SET scheduled_at = ? WHERE kind = ?`, time.Now().Add(-10*time.Minute).UTC(), decision.Kind)
			}
			require.NoError(t, err)
			_, stop, err = operationDecisions(ctx, db, engine, saga.QueueDefault, "app_decisions", prometheus.NewRegistry(), &skew, nil,
				slog.New(slog.NewTextHandler(&logs, nil)))
			require.NoError(t, err)
			stop()
			require.Contains(t, logs.String(), "decision events wait to be worked")
		})
	}
}

// TestDecisionEventFlags: on by default on decision.DefaultQueue, off
// with UNSTUCK_DECISION_EVENTS=false, and never on MySQL.
func TestDecisionEventFlags(t *testing.T) {
	t.Parallel()
	queue := func(env map[string]string, args []string, db *database) (string, string) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f := addEventFlags(fs, func(k string) string { return env[k] })
		require.NoError(t, fs.Parse(args))
		var logs bytes.Buffer
		q := f.queueOn(db, slog.New(slog.NewTextHandler(&logs, nil)))
		return q, logs.String()
	}
	sqlite := &database{}
	q, _ := queue(nil, nil, sqlite)
	require.Equal(t, decision.DefaultQueue, q)
	q, _ = queue(map[string]string{"UNSTUCK_DECISION_EVENTS_QUEUE": "app_q"}, nil, sqlite)
	require.Equal(t, "app_q", q)
	q, _ = queue(nil, []string{"--decision-events-queue", "flag_q"}, sqlite)
	require.Equal(t, "flag_q", q)
	q, _ = queue(map[string]string{"UNSTUCK_DECISION_EVENTS": "false"}, nil, sqlite)
	require.Empty(t, q)
	q, _ = queue(nil, []string{"--decision-events=false"}, sqlite)
	require.Empty(t, q)
	q, logs := queue(nil, nil, &database{MySQL: &sql.DB{}})
	require.Empty(t, q)
	require.Contains(t, logs, "no decision events on MySQL")
}
