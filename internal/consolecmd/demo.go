package consolecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/unstuckhq/unstuck/decision"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga"
)

// demoSecret seals the demo's stored responses when UNSTUCK_SECRET is not
// set. It is public: never use the demo's database for real data.
const demoSecret = "unstuck-demo-secret-not-for-production!"

// demoUsers are created by "console demo" when missing, each with the
// password demo-<username> ([demoPassword]).
var demoUsers = []string{store.RoleAdmin, store.RoleOncall, store.RoleSupport, store.RoleAuditor}

func runDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen `address`")
	dbURL := fs.String("db", "sqlite:"+filepath.Join(os.TempDir(), "unstuck-demo.db"), "database `URL`: sqlite:PATH or postgres://…")
	traffic := fs.Bool("traffic", true, "generate demo traffic that keeps records in every state")
	fresh := fs.Bool("fresh", false, "start from an empty database: delete the demo's SQLite file first (only a file the demo created)")
	oidcDemo := fs.Bool("oidc-demo", false, "also start a demo OpenID provider in the process, with test users in groups, and offer single sign-on through it (a console built with -tags oidcdemo)")
	oidcAddr := fs.String("oidc-demo-addr", "127.0.0.1:0", "listen `address` of the demo OpenID provider (with --oidc-demo)")
	bulkOpts := addBulkFlags(fs, getenv)
	incidentOpts := addIncidentFlags(fs, getenv)
	checkpointOpts := addCheckpointFlags(fs, getenv)
	resetUsers := fs.Bool("reset-demo-users", false, "run on a database the demo did not create, or that has other accounts, and give admin, oncall, support and auditor their public demo passwords again")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: console demo [--addr ADDR] [--db URL] [--traffic=false] [--fresh] [--oidc-demo]

Runs the console and the demo shop on the embedded SQLite default. The
database is kept between runs (records, accounts and their passwords);
--fresh starts from an empty one. The demo runs only on a new database or
one it created, and never changes an existing account, unless
--reset-demo-users. Its accounts have public passwords: "console serve"
refuses to start while they are enabled.

`)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stdout, stderr); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "console demo: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	if err := incidentOpts.check(); err != nil {
		fmt.Fprintf(stderr, "console demo: %v\n", err)
		return errUsage
	}
	if err := checkpointOpts.check(); err != nil {
		fmt.Fprintf(stderr, "console demo: %v\n", err)
		return errUsage
	}
	bulkCfg, err := bulkOpts.config()
	if err != nil {
		fmt.Fprintf(stderr, "console demo: %v\n", err)
		return errUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer func() {
		// Cancelled while starting (migrations, River): a clean stop.
		if err != nil && ctx.Err() != nil {
			err = nil
		}
	}()

	secret := getenv("UNSTUCK_SECRET")
	if secret == "" {
		secret = demoSecret
		log.Warn("UNSTUCK_SECRET is not set: sealing demo responses with the public demo secret")
	}
	if *fresh {
		if err := removeDemoFile(ctx, *dbURL); err != nil {
			return err
		}
	}
	auditKeys, err := demoAuditKeys(getenv, secret, log)
	if err != nil {
		return err
	}
	db, err := openUnmigrated(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if db.MySQL != nil {
		// The demo's signups are sagas: refuse before touching the database.
		return fmt.Errorf("console demo on %s: %w", db.Redacted, errNoSagasOnMySQL)
	}
	db.useAuditKeys(auditKeys)
	// Before the migrations: a database with tables and no marker is not
	// the demo's, whatever the migrations would add.
	if err := claimDemoDatabase(ctx, db, *resetUsers); err != nil {
		return err
	}
	if err := db.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", db.Redacted, err)
	}
	sealKeying(ctx, db, log)
	kept, err := ensureDemoUsers(ctx, db.Console, *resetUsers)
	if err != nil {
		return err
	}
	engine, err := idem.New(db.Store, idem.Config{Secret: []byte(secret), Logger: log})
	if err != nil {
		return err
	}
	defer shutdownEngine(engine, log) // after the server, before the database closes
	shop, err := demo.NewShop(engine, demo.NewProvider(), log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(idem.NewCollector(engine)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	var skew clockSkew
	bulk := &bulkSetup{config: bulkCfg, keyList: db.Records}
	if bulk.reconcile, err = bulkOpts.reconcile(); err != nil {
		fmt.Fprintf(stderr, "console %s: %v\n", fs.Name(), err)
		return errUsage
	}
	mountSignups, stopSagas, err := startSagas(ctx, db, shop, log)
	if err != nil {
		return fmt.Errorf("signups: %w", err)
	}
	defer stopSagas() // before the database closes
	// The console part of the demo, wired as "console serve" is.
	wired, stopConsoleRiver, err := operationDecisions(ctx, db, engine, saga.QueueDefault, decision.DefaultQueue, reg, &skew, bulk, log)
	if err != nil {
		return fmt.Errorf("operation decisions: %w", err)
	}
	defer stopConsoleRiver() // before the database closes
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	loopback := isLoopback(ln.Addr())
	base := "http://" + ln.Addr().String()
	opts := consoleOptions{secureCookies: !loopback, idle: 30 * time.Minute, absolute: 12 * time.Hour, registry: reg,
		mount: func(r chi.Router) { shop.Routes(r); mountSignups(r) }, decisions: wired, clockSkew: skew,
		checkpoints: startExternalCheckpoints(ctx, db.Trail, checkpointOpts, reg, log)}
	var idp *demoIdP
	if *oidcDemo {
		if !loopback {
			_ = ln.Close()
			return fmt.Errorf("--oidc-demo speaks plain http, which single sign-on accepts on loopback only: run the demo with --addr 127.0.0.1:PORT, not %s", ln.Addr())
		}
		if idp, opts.sso, err = startDemoSSO(*oidcAddr, base, log); err != nil {
			return fmt.Errorf("demo identity provider: %w", err)
		}
		defer func() { _ = idp.close() }()
	}
	h, err := consoleHandler(db, engine, opts, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, `unstuck demo — database %s
  (kept between runs, with its records and accounts; --fresh starts from an empty one)
listening on %s

Console: open %[2]s/ and sign in as one of
  admin / demo-admin   oncall / demo-oncall   support / demo-support   auditor / demo-auditor

Shop:
  curl -i -X POST %[2]s/shop/orders -H 'Idempotency-Key: "order-0000000000001"' -H 'Content-Type: application/json' -d '{"sku":"book","qty":1}'
  (run it twice: the second answer is replayed, with Idempotent-Replayed: true)
  curl -i -X POST %[2]s/shop/signups -H 'Idempotency-Key: "signup-000000000001"' -H 'Content-Type: application/json' -d '{"email":"ann@example.com"}'
  (a saga on River; add "fail":"workspace_permanent" or another mode; GET the Location to follow it)
`, db.Redacted, base)
	if len(kept) > 0 {
		fmt.Fprintf(stdout, "  (%s existed already and keep the password they had)\n", strings.Join(kept, ", "))
	}
	if idp != nil {
		fmt.Fprintf(stdout, `
Single sign-on: the demo identity provider runs at %s
  On the console's sign-in page choose "Sign in with the demo identity provider",
  then sign in at the provider as one of (password demo-sso):
`, idp.issuer)
		for _, u := range idp.users {
			role, ok := opts.sso.Roles.Role(u.groups)
			if !ok {
				role = "no access (no mapped group)"
			}
			fmt.Fprintf(stdout, "    %-6s groups %-34s -> %s\n", u.username, strings.Join(u.groups, ","), role)
		}
		fmt.Fprintln(stdout, "  Groups map to roles through oidc_roles.csv.")
	}
	if !loopback {
		log.Warn("not on loopback: session cookies are Secure, so sign-in needs https in front of the demo")
	}
	if *traffic {
		trafficCtx, stopTraffic := context.WithCancel(ctx)
		defer stopTraffic()
		go demo.Traffic(trafficCtx, base, engine, log)
	}
	stopSnapshots := startSnapshots(ctx, db, incidentOpts, log)
	defer stopSnapshots() // before the database closes
	return serveHTTP(ctx, ln, h, log, sweeper(engine, db, log))
}

// ensureDemoUsers creates the demo accounts that do not exist, each with
// its public password. It never changes an existing account unless reset
// (--reset-demo-users), which gives the demo accounts their public
// password and role again and enables them. It returns the names of the
// existing accounts it left as they were. Every error of a lookup, a
// creation or a reset is returned.
func ensureDemoUsers(ctx context.Context, db *store.DB, reset bool) ([]string, error) {
	var kept []string
	for _, name := range demoUsers {
		_, exists, err := db.UserByUsername(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("demo user %s: %w", name, err)
		}
		if exists && !reset {
			kept = append(kept, name)
			continue
		}
		hash, err := auth.Hash(demoPassword(name))
		if err != nil {
			return nil, err
		}
		_, err = db.CreateUser(ctx, name, name, hash)
		switch {
		case errors.Is(err, store.ErrConflict) && reset:
			err = errors.Join(db.SetUserPassword(ctx, name, hash), db.SetUserDisabled(ctx, name, false), db.SetUserRole(ctx, name, name))
		case errors.Is(err, store.ErrConflict):
			kept, err = append(kept, name), nil
		}
		if err != nil {
			return nil, fmt.Errorf("demo user %s: %w", name, err)
		}
	}
	return kept, nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
