// Package alerting checks the Prometheus alert rules shipped in
// deploy/prometheus against the metrics a running console exports: every
// selector matches a series, and on a console holding records in each
// state the alerts that should fire fire, over hours of simulated rule
// evaluations (SPEC K18).
package alerting

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/consolecmd"
	"github.com/unstuckhq/unstuck/internal/consolecmd/consoletest"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/unstucktest/slowtest"
)

// rulesFile is the alert rules shipped with the project (SPEC K18).
const rulesFile = "../../../deploy/prometheus/unstuck-rules.yml"

// alertJob and alertInstance are the target labels Prometheus adds to the
// scraped series, as the README's scrape config names them.
const (
	alertJob      = "unstuck-console"
	alertInstance = "console:8080"
)

// TestK18AlertRulesAgainstScrapedMetrics: the rules file
// parses (rulefmt, as Prometheus loads it), every metric and label matcher
// of every rule selects series a running console exports, and, on metrics
// scraped from a console holding records in each state, each alert that
// should fire fires (and none fires on an empty console); the alerts on
// failures (stats down, clock skew, the target lost, an operation not
// moving) fire on the same scrape with those gauges set as a failing
// console sets them, and UnstuckIncidentsGrowing when the key incident
// groups rise by one a minute.
//
// A scrape is one instant; the test plays it forward: the state does not
// change, so counts stay and every *_age_seconds gauge grows with the
// clock, for 8 hours of one-minute rule evaluations (the rules' "for"
// and age thresholds included).
func TestK18AlertRulesAgainstScrapedMetrics(t *testing.T) {
	slowtest.Skip(t, slowtest.AlertRule)
	t.Parallel()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "the rules file parses as Prometheus loads it")
	require.NotEmpty(t, groups.Groups)
	requireSpanCoversThresholds(t, groups)

	path := filepath.Join(t.TempDir(), "alerts.db")
	// With checkpoints written outside the database: their alert's series.
	base, _ := consoletest.StartDemoWith(t, consolecmd.Run, "sqlite:"+path, "--audit-checkpoint-dir", t.TempDir())

	// An empty console: no alert fires.
	empty := scrapeSeries(t, base)
	require.Empty(t, firingAlerts(t, groups, empty, base), "nothing fires on an empty console")

	seedEveryState(t, base, path)
	series := scrapeSeries(t, base)
	requireSelectorsMatch(t, groups, series)

	firing := firingAlerts(t, groups, series, base)
	names := make([]string, 0, len(firing))
	for name := range firing {
		names = append(names, name)
	}
	slices.Sort(names)
	require.Equal(t, []string{
		"UnstuckCompensationFailed",        // a signup whose workspace cannot be deleted
		"UnstuckKeysStuck",                 // a job whose owner stopped past its lease
		"UnstuckKeysUnavailable",           // a job whose result could not be stored
		"UnstuckPendingKeysWaiting",        // a payment whose answer was lost
		"UnstuckReconciliationFindingsOld", // a finding nobody resolved
		"UnstuckReviewRequiredWaiting",     // the signups halted for review
	}, names, "healthy console, clock in sync, operations not running: the others stay quiet")

	for name, alerts := range firing {
		for _, a := range alerts {
			require.NotEmpty(t, a.Labels.Get("severity"), "%s has a severity", name)
			runbook := a.Annotations.Get("runbook_url")
			require.True(t, strings.HasPrefix(runbook, base+"/"), "%s: runbook %q points at the console (external label console_url)", name, runbook)
			require.NotContains(t, runbook, "{{", "%s: runbook template expanded", name)
			// The filtered page exists: signed out, the console sends
			// the reader to sign in (303), it does not answer 404.
			resp, err := noRedirect.Get(runbook)
			require.NoError(t, err)
			resp.Body.Close()
			require.Contains(t, []int{http.StatusOK, http.StatusSeeOther, http.StatusFound}, resp.StatusCode, "%s: runbook %s", name, runbook)
			require.NotEmpty(t, a.Annotations.Get("summary"), name)
		}
	}
	// The states a healthy test console cannot be put in, set on the
	// scraped series as a console in them reports them (the gauges'
	// failure values are tested in internal/web and saga): the records
	// cannot be read, the clock is 5 s off, an operation has been running
	// since 10 s and stays so, and then Prometheus loses the target.
	broken := make([]sample, 0, len(series))
	for _, s := range series {
		switch name := s.labels.Get("__name__"); {
		case name == "unstuck_idempotency_stats_up":
			s.value = 0
		case name == "unstuck_clock_skew_seconds":
			s.value = 5
		case name == "unstuck_saga_oldest_age_seconds" && s.labels.Get("status") == "running":
			s.value = 10
		case name == "up":
			s.value = 0
		case name == "unstuck_audit_checkpoint_external_last_success_timestamp_seconds":
			// Last written three hours before the evaluation's clock,
			// which starts at Unix 0 here; the bound is two hours.
			s.value = -3 * 3600
		case name == "unstuck_incident_groups" && s.labels.Get("kind") == "key":
			s.growth = 1 // a new cause of stuck keys every minute
		}
		broken = append(broken, s)
	}
	firing = firingAlerts(t, groups, broken, base)
	for _, name := range []string{"UnstuckRecordStatsDown", "UnstuckClockSkew", "UnstuckOperationsNotMoving", "UnstuckConsoleDown", "UnstuckIncidentsGrowing",
		"UnstuckAuditCheckpointStale"} {
		require.Contains(t, firing, name)
	}
	require.Equal(t, "running", firing["UnstuckOperationsNotMoving"][0].Labels.Get("status"))
	require.Equal(t, "key", firing["UnstuckIncidentsGrowing"][0].Labels.Get("kind"), "only the kind whose groups grow")
	require.Len(t, firing["UnstuckIncidentsGrowing"], 1)
	require.True(t, strings.HasSuffix(firing["UnstuckOperationsNotMoving"][0].Annotations.Get("runbook_url"), "/operations?status=running&order=oldest"))

	resp, err := noRedirect.Get(base + "/no-such-page")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "an unknown page is 404 signed out: the runbook check can fail")
}

// noRedirect is a client that reports redirects instead of following them.
var noRedirect = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// seedEveryState puts records in the states the rules watch: a stuck key,
// an unavailable key, a pending key, operations in review_required (one
// with a failed compensation) and an open reconciliation finding.
func seedEveryState(t *testing.T, base, path string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	// Pending: the payment's answer was lost after the charge.
	order := consoletest.Call(t, "POST", base+"/shop/orders", `"alert-order-000000001"`, `{"sku":"lamp","qty":1}`)
	require.Equal(t, http.StatusCreated, order.Status, order.Body)
	lost := consoletest.Call(t, "POST", base+"/shop/payments?fail=timeout_after_effect", `"alert-payment-00000001"`,
		fmt.Sprintf(`{"order_id":%q,"amount_cents":1999}`, order.JSON["id"]))
	require.Equal(t, http.StatusAccepted, lost.Status, lost.Body)

	// Review required, one with a failed compensation.
	compFail := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "compfail"), `{"email":"alerts-comp@example.com","fail":"workspace_compensation_fails"}`)
	welcome := consoletest.PostSignup(t, base, consoletest.SignupKey(t, "welcome"), `{"email":"alerts-welcome@example.com","fail":"welcome_permanent"}`)
	consoletest.WaitSignup(t, base, compFail, sagadriver.StatusReviewRequired, 60*time.Second)
	consoletest.WaitSignup(t, base, welcome, sagadriver.StatusReviewRequired, 60*time.Second)

	db, err := idemsqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	// An open finding on the welcome operation, written as the console's
	// decisions are (a handle whose transactions begin IMMEDIATE), so that
	// it waits for the running console's writes instead of failing with
	// SQLITE_BUSY.
	imm, err := ops.OpenImmediate(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() { _ = imm.Close() })
	d := sagasqlite.New(imm)
	require.NoError(t, d.WithinTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now, err := d.Now(ctx, tx)
		if err != nil {
			return err
		}
		_, err = d.InsertFinding(ctx, tx, &sagadriver.Finding{OperationID: welcome, Step: "welcome", Kind: sagadriver.FindingUnresolved,
			Detail: "the mailer does not know the message", DetectedAt: now, Fingerprint: "alerts-test"})
		return err
	}))

	// Keys of jobs, on an engine of the test's over the same database.
	engine, err := idem.New(idemsqlite.New(db), idem.Config{Secret: []byte(consolecmd.DemoSecret), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	// Unavailable: the result cannot be stored.
	_, err = idem.Run(ctx, engine, "alerts-receipt", "job:alerts", func(context.Context) (float64, error) { return math.NaN(), nil }, nil)
	require.Error(t, err)
	// Stuck: the owner holds the key past its one-second lease.
	started := make(chan struct{})
	go func() {
		_, _ = idem.Run(ctx, engine, "alerts-stalled", "job:alerts", func(ctx context.Context) (struct{}, error) {
			close(started)
			<-ctx.Done()
			return struct{}{}, ctx.Err()
		}, &idem.RunOpts{Lease: time.Second})
	}()
	<-started
	require.Eventually(t, func() bool {
		return scrapeValue(t, base, `unstuck_idempotency_stuck_records{exact="true"}`) == 1
	}, 30*time.Second, 100*time.Millisecond, "the key is stuck once its lease ends")
}

// sample is one scraped series: its labels (with __name__, job and
// instance) and value.
type sample struct {
	labels labels.Labels
	value  float64
	// growth, when not 0, is added at every evaluation step (a count that
	// keeps rising); else only *_age_seconds gauges grow, with the clock.
	growth float64
}

// scrapeSeries reads base's /metrics as Prometheus would, with the target
// labels added and the scrape's own up series.
func scrapeSeries(t *testing.T, base string) []sample {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := []sample{{labels: labels.FromStrings("__name__", "up", "job", alertJob, "instance", alertInstance), value: 1}}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			b := labels.NewBuilder(labels.FromStrings("__name__", name, "job", alertJob, "instance", alertInstance))
			for _, lp := range m.GetLabel() {
				b.Set(lp.GetName(), lp.GetValue())
			}
			var v float64
			switch {
			case m.Gauge != nil:
				v = m.GetGauge().GetValue()
			case m.Counter != nil:
				v = m.GetCounter().GetValue()
			case m.Untyped != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue // histograms and summaries: no rule reads them
			}
			out = append(out, sample{labels: b.Labels(), value: v})
		}
	}
	return out
}

// scrapeValue returns the value of the series written as in the
// exposition format (name{labels}), or NaN when absent.
func scrapeValue(t *testing.T, base, series string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return math.NaN()
}

// evalSpan and evalStep are the simulated time the rules are evaluated
// over, as a Prometheus with the default evaluation interval would. The
// span outlasts the longest age threshold of the rules (6 h, an open
// reconciliation finding) with its "for"; requireSpanCoversThresholds
// fails when a rule with a longer one is added.
const (
	evalSpan = 8 * time.Hour
	evalStep = time.Minute
)

// loadSeries stores the samples from time 0 to evalSpan, one a step: a
// constant, or for a non-zero *_age_seconds a value growing with the
// clock (zero is the gauges' "no record in this state").
func loadSeries(t *testing.T, series []sample) storage.Storage {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "load %s\n", model.Duration(evalStep))
	steps := int(evalSpan / evalStep)
	for _, s := range series {
		growth := s.growth
		if growth == 0 && strings.HasSuffix(s.labels.Get("__name__"), "_age_seconds") && s.value > 0 { // 0: nothing in the state to age
			growth = evalStep.Seconds()
		}
		b.WriteString("  {")
		i := 0
		s.labels.Range(func(l labels.Label) {
			if i > 0 {
				b.WriteString(", ")
			}
			i++
			fmt.Fprintf(&b, "%s=%s", l.Name, strconv.Quote(l.Value))
		})
		fmt.Fprintf(&b, "} %s+%sx%d\n", strconv.FormatFloat(s.value, 'f', -1, 64), strconv.FormatFloat(growth, 'f', -1, 64), steps)
	}
	return promqltest.LoadedStorage(t, b.String())
}

// newEngine is a PromQL engine with Prometheus's default settings.
func newEngine(t *testing.T) *promql.Engine {
	return promqltest.NewTestEngineWithOpts(t, promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute,
		LookbackDelta: 5 * time.Minute, Parser: parser.NewParser(parser.Options{})})
}

// firingAlerts evaluates every alerting rule of groups over series, once
// a step for evalSpan, with the external label console_url = base, and
// returns the alerts firing at the end, by rule name.
func firingAlerts(t *testing.T, groups *rulefmt.RuleGroups, series []sample, base string) map[string][]*rules.Alert {
	t.Helper()
	st := loadSeries(t, series)
	query := rules.EngineQueryFunc(newEngine(t), st)
	p := parser.NewParser(parser.Options{})
	external := labels.FromStrings("console_url", base)
	firing := map[string][]*rules.Alert{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: only alerting rules (record %q)", g.Name, r.Record)
			expr, err := p.ParseExpr(r.Expr)
			require.NoError(t, err, r.Alert)
			rule := rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), external, base, false, slog.New(slog.DiscardHandler))
			for ts := time.Unix(0, 0); !ts.After(time.Unix(0, 0).Add(evalSpan)); ts = ts.Add(evalStep) {
				_, err := rule.Eval(t.Context(), 0, ts, query, &url.URL{}, 0)
				require.NoError(t, err, "%s at %s", r.Alert, ts)
			}
			for _, a := range rule.ActiveAlerts() {
				if a.State == rules.StateFiring {
					firing[r.Alert] = append(firing[r.Alert], a)
				}
			}
		}
	}
	return firing
}

// requireSelectorsMatch checks that every series selector of every rule
// selects at least one scraped series: a renamed metric, label or label
// value fails here even for a rule that should stay quiet.
func requireSelectorsMatch(t *testing.T, groups *rulefmt.RuleGroups, series []sample) {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := p.ParseExpr(r.Expr)
			require.NoError(t, err, r.Alert)
			n := 0
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				n++
				matched := slices.ContainsFunc(series, func(s sample) bool {
					for _, m := range vs.LabelMatchers {
						if !m.Matches(s.labels.Get(m.Name)) {
							return false
						}
					}
					return true
				})
				require.True(t, matched, "%s: the selector %s matches no series the console exports", r.Alert, vs)
				return nil
			})
			require.Positive(t, n, "%s selects series", r.Alert)
		}
	}
}

// TestK18AlertmanagerExampleRoutesEverySeverity: the Alertmanager example
// names only receivers it defines, and routes every severity the rules
// use somewhere other than the default by intent: page and critical to
// the pager, warning to the chat receiver.
func TestK18AlertmanagerExampleRoutesEverySeverity(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../deploy/prometheus/alertmanager.example.yml")
	require.NoError(t, err)
	var cfg struct {
		Route struct {
			Receiver string `yaml:"receiver"`
			Routes   []struct {
				Matchers []string `yaml:"matchers"`
				Receiver string   `yaml:"receiver"`
			} `yaml:"routes"`
		} `yaml:"route"`
		Receivers []struct {
			Name string `yaml:"name"`
		} `yaml:"receivers"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	defined := map[string]bool{}
	for _, r := range cfg.Receivers {
		defined[r.Name] = true
	}
	require.True(t, defined[cfg.Route.Receiver], "the default receiver %q is defined", cfg.Route.Receiver)

	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	receiverOf := func(severity string) string {
		for _, r := range cfg.Route.Routes {
			require.True(t, defined[r.Receiver], "receiver %q is defined", r.Receiver)
			for _, m := range r.Matchers {
				name, re, ok := strings.Cut(m, "=~")
				if ok && name == "severity" {
					if regexp.MustCompile("^(?:" + strings.Trim(re, `"`) + ")$").MatchString(severity) {
						return r.Receiver
					}
				}
			}
		}
		return cfg.Route.Receiver
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			want := map[string]string{"page": "unstuck-pager", "critical": "unstuck-pager", "warning": "unstuck-chat"}[r.Labels["severity"]]
			require.NotEmpty(t, want, "%s: severity %q is page, critical or warning", r.Alert, r.Labels["severity"])
			require.Equal(t, want, receiverOf(r.Labels["severity"]), r.Alert)
		}
	}
}

// requireSpanCoversThresholds fails when a rule compares an age in
// seconds with a threshold that evalSpan does not reach with its "for":
// such an alert could never fire in the simulation.
func requireSpanCoversThresholds(t *testing.T, groups *rulefmt.RuleGroups) {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := p.ParseExpr(r.Expr)
			require.NoError(t, err, r.Alert)
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				if n, ok := node.(*parser.NumberLiteral); ok {
					need := time.Duration(n.Val)*time.Second + time.Duration(r.For) + evalStep
					require.LessOrEqual(t, need, evalSpan, "%s: a threshold of %v s needs a longer evalSpan", r.Alert, n.Val)
				}
				return nil
			})
		}
	}
}
