package consolecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/unstuckhq/unstuck"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/saga"
)

// consoleOptions are the settings shared by serve and demo.
type consoleOptions struct {
	// trustedProxies give the client address in X-Forwarded-For.
	trustedProxies []netip.Prefix
	// metricsToken guards /metrics; noMetricsRoute serves it elsewhere.
	metricsToken   string
	noMetricsRoute bool

	secureCookies bool
	idle          time.Duration
	absolute      time.Duration
	mount         func(chi.Router)
	registry      *prometheus.Registry // nil: a new one
	// decisions are the operator decisions wired with River
	// (operationDecisions); nil: the handler decides on keys alone and
	// serves operations read-only.
	decisions *wiredDecisions
	// clockSkew, if not nil, fails /readyz above maxReadySkew.
	clockSkew clockSkew
	// sso, if not nil, signs users in through the OpenID provider;
	// noLocalSignIn then turns the local form off.
	sso           *web.SSO
	noLocalSignIn bool
	// traceURL links a key's trace ID to the tracing UI (--trace-url).
	traceURL string
	// checkpoints writes the audit trail's checkpoints outside the
	// database (--audit-checkpoint-dir); nil when it writes none.
	checkpoints *externalCheckpoints
	// webhooks serves the decision webhooks' delivery log (/webhooks).
	webhooks bool
}

// consoleHandler builds the console's HTTP handler over db and engine.
func consoleHandler(db *database, engine *idem.Engine, o consoleOptions, log *slog.Logger) (http.Handler, error) {
	enf, err := web.NewEnforcer(unstuck.RBACModel, unstuck.RBACPolicy)
	if err != nil {
		return nil, fmt.Errorf("rbac policy: %w", err)
	}
	static, err := fs.Sub(unstuck.Static, "static")
	if err != nil {
		return nil, err
	}
	wired := o.decisions
	if wired == nil {
		keys, err := db.keyDecisions(engine, log)
		if err != nil {
			return nil, err
		}
		wired = &wiredDecisions{keys: keys}
	}
	cfg := web.Config{
		TrustedProxies: o.trustedProxies,
		MetricsToken:   o.metricsToken,
		NoMetricsRoute: o.noMetricsRoute,

		Store: db.Console,
		// The operator API's bearer tokens (SPEC K25).
		Tokens: db.Console,
		Sagas:  db.Sagas,
		// Set when Sagas is nil (MySQL): the operation pages say why.
		SagasUnavailable: db.SagasUnavailable,
		Records:          db.Records,
		Engine:           engine,
		Sessions:         web.NewSessionManager(db.Console.SessionStore(), o.idle, o.absolute, o.secureCookies),
		Enforcer:         enf,
		Static:           static,
		Log:              log,
		HSTS:             o.secureCookies,
		Mount:            o.mount,
		Registry:         o.registry,
		Trail:            db.Trail,
		Keys:             wired.keys,
		Ready:            db.CheckSchema,
		// Trends and incident groups, from the snapshots startSnapshots
		// takes.
		Incidents: db.Console,

		SSO:           o.sso,
		NoLocalSignIn: o.noLocalSignIn,
		TraceURL:      o.traceURL,
	}
	if o.checkpoints != nil {
		cfg.ExternalCheckpoints = o.checkpoints
	}
	if o.webhooks {
		cfg.Webhooks = db.Console
	}
	if wired.operations != nil {
		cfg.Operations = wired.operations
	}
	if wired.bulks != nil {
		cfg.Bulks, cfg.Verify = wired.bulks, wired.verify
	}
	if o.clockSkew != nil {
		return readyClock(web.NewHandler(cfg), o.clockSkew, log), nil
	}
	return web.NewHandler(cfg), nil
}

// serveHTTP serves h on ln until ctx ends, then shuts down within 10 s.
// every, if not nil, runs once a minute while serving.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, every func(context.Context)) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-tick.C:
			if every != nil {
				every(ctx)
			}
		case <-ctx.Done():
			log.Info("shutting down")
			shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(shutdownCtx); err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			return nil
		}
	}
}

// shutdownEngine waits up to 10 s for the outcomes engine is still
// recording in the background (idem.ErrOutcomeUnrecorded), so that a
// stopped process leaves as few keys as it can to their recovery.
func shutdownEngine(engine *idem.Engine, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := engine.Shutdown(ctx); err != nil {
		log.Error("idempotency outcomes left unrecorded at shutdown", "error", err.Error())
	}
}

// sweeper returns a periodic job that removes expired idempotency records
// and expired console sessions.
func sweeper(engine *idem.Engine, db *database, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		if r, err := engine.Sweep(ctx); err != nil {
			log.Error("sweep failed", "error", err.Error())
		} else if r.Deleted > 0 || r.Escalated > 0 {
			log.Info("swept expired idempotency records", "count", r.Deleted, "escalated", r.Escalated)
		}
		if n, err := db.Console.DeleteExpiredSessions(ctx); err != nil {
			log.Error("session sweep failed", "error", err.Error())
		} else if n > 0 {
			log.Info("deleted expired sessions", "count", n)
		}
	}
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := dbFlag(fs, getenv, "database `URL`: postgres://…, mysql://… or sqlite:PATH (env UNSTUCK_DB)")
	keys := keysFlag(fs, getenv)
	addr := fs.String("addr", envOr(getenv, "UNSTUCK_ADDR", "127.0.0.1:8080"), "listen `address` (env UNSTUCK_ADDR)")
	insecure := fs.Bool("insecure-cookies", getenv("UNSTUCK_INSECURE_COOKIES") == "true", "session cookie without Secure, for plain http on loopback only (env UNSTUCK_INSECURE_COOKIES=true)")
	idle := fs.Duration("session-idle", 30*time.Minute, "sign out after this long without a request")
	absolute := fs.Duration("session-absolute", 12*time.Hour, "sign out this long after sign-in, whatever happens")
	trustedProxies := fs.String("trusted-proxies", getenv("UNSTUCK_TRUSTED_PROXIES"), "comma-separated `CIDRs` of reverse proxies whose X-Forwarded-For gives the client address (env UNSTUCK_TRUSTED_PROXIES)")
	metricsAddr := fs.String("metrics-addr", getenv("UNSTUCK_METRICS_ADDR"), "serve /metrics on this listen `address` instead of the console's (env UNSTUCK_METRICS_ADDR); a bearer token from UNSTUCK_METRICS_TOKEN guards it either way")
	traceURL := fs.String("trace-url", getenv("UNSTUCK_TRACE_URL"), "link a key's trace ID to your tracing UI: an http(s) `URL` template where "+web.TracePlaceholder+" stands for the ID, e.g. 'https://tempo.example.com/explore/trace/{trace_id}' (env UNSTUCK_TRACE_URL)")
	allowDemoUsers := fs.Bool("allow-demo-users", false, "start even while admin, oncall, support or auditor is enabled with its public demo password (a demo database)")
	ssoF := defineSSOFlags(fs, getenv)
	bulkOpts := addBulkFlags(fs, getenv)
	incidentOpts := addIncidentFlags(fs, getenv)
	checkpointOpts := addCheckpointFlags(fs, getenv)
	sagaQueue := fs.String("saga-queue", envOr(getenv, "UNSTUCK_SAGA_QUEUE", saga.QueueDefault), "River `queue` of the applications' saga jobs, where operator decisions insert theirs (env UNSTUCK_SAGA_QUEUE)")
	events := addEventFlags(fs, getenv)
	webhookOpts := addWebhookFlags(fs, getenv)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: console serve --db URL [flags]

Serves the operations console. The application secret that opens stored
responses comes from the environment only: UNSTUCK_SECRET (at least 32 bytes),
with UNSTUCK_PREVIOUS_SECRETS (comma-separated) during a rotation. The audit
trail is MACed with a key of the console's own, never held by the
applications: UNSTUCK_AUDIT_KEY (at least 32 bytes), with
UNSTUCK_AUDIT_PREVIOUS_KEYS (comma-separated) during a rotation. Run
"console migrate" first: serve refuses a database whose schema is behind.

`)
		fs.PrintDefaults()
	}
	if err := refuseSecretFlag(args); err != nil {
		fmt.Fprintln(stderr, "console serve:", err)
		return errUsage
	}
	if help, err := parseFlags(fs, args, stdout, stderr); help || err != nil {
		return err
	}
	single, err := ssoF.build(getenv, os.ReadFile)
	if err != nil {
		fmt.Fprintln(stderr, "console serve: single sign-on:", err)
		return errUsage
	}
	switch {
	case *ssoF.noLocal && single == nil:
		fmt.Fprintln(stderr, "console serve: --no-local-sign-in needs single sign-on (--oidc-issuer): nobody could sign in")
		return errUsage
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "console serve: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	case *dbURL == "":
		fmt.Fprintln(stderr, "console serve: --db is required (or set UNSTUCK_DB)")
		return errUsage
	case *idle <= 0 || *absolute <= 0 || *idle > *absolute:
		fmt.Fprintln(stderr, "console serve: --session-idle and --session-absolute must be positive, idle at most absolute")
		return errUsage
	}
	if err := incidentOpts.check(); err != nil {
		fmt.Fprintf(stderr, "console serve: %v\n", err)
		return errUsage
	}
	if err := checkpointOpts.check(); err != nil {
		fmt.Fprintf(stderr, "console serve: %v\n", err)
		return errUsage
	}
	bulkCfg, err := bulkOpts.config()
	if err != nil {
		fmt.Fprintf(stderr, "console serve: %v\n", err)
		return errUsage
	}
	webhookCfg, webhooksOn, err := webhookOpts.config(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "console serve: %v\n", err)
		return errUsage
	}
	proxies, err := web.ParseTrustedProxies(*trustedProxies)
	if err != nil {
		fmt.Fprintf(stderr, "console serve: --trusted-proxies: %v\n", err)
		return errUsage
	}
	traceTemplate, err := web.ParseTraceURL(*traceURL)
	if err != nil {
		fmt.Fprintf(stderr, "console serve: --trace-url %q: %v\n", *traceURL, err)
		return errUsage
	}
	secret, err := applicationSecret(getenv)
	if err != nil {
		return err
	}
	var previous [][]byte
	for _, p := range strings.Split(getenv("UNSTUCK_PREVIOUS_SECRETS"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			previous = append(previous, []byte(p))
		}
	}
	if err := refuseDemoSecret(secret, previous); err != nil {
		return err
	}
	auditKeys, err := auditKeysFromEnv(getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	db.useAuditKeys(auditKeys)
	// SQLite migrated itself when opened; PostgreSQL is migrated by
	// "console migrate" as a deliberate step, and serve refuses a schema
	// behind the binary rather than answer 500s.
	if err := db.CheckSchema(ctx); err != nil {
		return err
	}
	sealKeying(ctx, db, log)
	if err := db.useRedisKeys(ctx, *keys, log); err != nil {
		return err
	}
	if !*allowDemoUsers {
		if err := refuseDemoUsers(ctx, db.Console); err != nil {
			return err
		}
	}
	engine, err := idem.New(db.Store, idem.Config{Secret: []byte(secret), PreviousSecrets: previous, Logger: log})
	if err != nil {
		return err
	}
	defer shutdownEngine(engine, log)
	// Decisions on saga operations insert the River jobs that carry them
	// on; the applications' River workers run them.
	reg := prometheus.NewRegistry()
	var skew clockSkew
	bulk := &bulkSetup{config: bulkCfg, keyList: db.Records}
	if bulk.reconcile, err = bulkOpts.reconcile(); err != nil {
		fmt.Fprintf(stderr, "console %s: %v\n", fs.Name(), err)
		return errUsage
	}
	if db.MySQL != nil {
		// Sagas and bulk runs need River, which has no MySQL driver.
		if *sagaQueue != saga.QueueDefault {
			return fmt.Errorf("--saga-queue %q: %w", *sagaQueue, errNoSagasOnMySQL)
		}
		bulk = nil
		log.Info("serving keys, decisions and the audit trail on MySQL; " + errNoSagasOnMySQL.Error())
	}
	eventsQueue := events.queueOn(db, log)
	if webhooksOn && eventsQueue == "" {
		// The relay sends the events decisions emit: none, none to send.
		return errors.New("--decision-webhook-url needs decision events, which are off (--decision-events=false) or not emitted on MySQL (docs/events.md)")
	}
	wired, stopRiver, err := operationDecisions(ctx, db, engine, *sagaQueue, eventsQueue, reg, &skew, bulk, log)
	if err != nil {
		return fmt.Errorf("operation decisions: %w", err)
	}
	defer stopRiver() // after the server, before the database closes
	opts := consoleOptions{secureCookies: !*insecure, idle: *idle, absolute: *absolute, decisions: wired,
		registry: reg, clockSkew: skew, checkpoints: startExternalCheckpoints(ctx, db.Trail, checkpointOpts, reg, log),
		trustedProxies: proxies, metricsToken: getenv("UNSTUCK_METRICS_TOKEN"), noMetricsRoute: *metricsAddr != "",
		sso: single, noLocalSignIn: *ssoF.noLocal, traceURL: traceTemplate, webhooks: webhooksOn}
	h, err := consoleHandler(db, engine, opts, log)
	if err != nil {
		return err
	}
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("listen for metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", web.MetricsHandler(opts.registry, opts.metricsToken))
		go func() {
			if err := serveHTTP(ctx, mln, mux, log, nil); err != nil {
				log.Error("metrics listener stopped", "error", err.Error())
			}
		}()
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", mln.Addr())
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintf(stdout, "console listening on http://%s\n", ln.Addr())
	warnPlainHTTP(ln.Addr(), *insecure, log)
	if single != nil {
		fmt.Fprintf(stdout, "single sign-on through %s (%d groups mapped to roles; local sign-in %s)\n",
			single.Client.Issuer(), single.Roles.Len(), map[bool]string{true: "off", false: "on"}[*ssoF.noLocal])
		if single.BackChannelLogout {
			fmt.Fprintf(stdout, "back-channel logout: register %s at the provider\n", backChannelURL(*ssoF.redirectURL))
		}
	}
	log.Info("serving", "addr", ln.Addr().String(), "db", db.Redacted)
	stopSnapshots := startSnapshots(ctx, db, incidentOpts, log)
	defer stopSnapshots() // before the database closes
	if webhooksOn {
		stopWebhooks, err := startWebhooks(ctx, db, webhookCfg, *incidentOpts.consoleURL, reg, log)
		if err != nil {
			return err
		}
		defer stopWebhooks() // before the database closes
	}
	return serveHTTP(ctx, ln, h, log, sweeper(engine, db, log))
}

// warnPlainHTTP warns when serve listens off loopback, where it still
// speaks plain http: browsers send a Secure session cookie only over https,
// so sign-in works only through a TLS-terminating proxy in front; and
// --insecure-cookies, meant for loopback, would send sessions in clear.
func warnPlainHTTP(addr net.Addr, insecureCookies bool, log *slog.Logger) {
	if isLoopback(addr) {
		return
	}
	if insecureCookies {
		log.Warn("serving plain http off loopback with --insecure-cookies: session cookies travel in clear to "+addr.String()+
			"; --insecure-cookies is for loopback only — drop it and put https in front", "addr", addr.String())
		return
	}
	log.Warn("serving plain http off loopback: session cookies are Secure, so browsers sign in only over https — put a TLS-terminating proxy in front (and set --trusted-proxies); --insecure-cookies is for loopback only",
		"addr", addr.String())
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
