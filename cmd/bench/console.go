package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
)

// consoleConfig is how to measure.
type consoleConfig struct {
	// N timed runs of each store call and of each page; Warmup untimed
	// runs of both before.
	N, Warmup int
	// DeepPages is how many Next links the deep-page case follows first.
	DeepPages int
	// Explain adds EXPLAIN (ANALYZE, BUFFERS) of every store call's
	// statements, taken with auto_explain on a connection of its own.
	Explain bool
	// Only, when not empty, keeps the cases whose name contains it.
	Only string
	// Out receives the Markdown report, Log progress and server warnings.
	Out, Log io.Writer
}

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", "", "PostgreSQL `URL` of a database loaded by \"bench seed\" (required)")
	n := fs.Int("n", 50, "timed runs of each store call and of each page")
	warmup := fs.Int("warmup", 5, "untimed runs of each before timing")
	deep := fs.Int("deep", 20, "Next links the deep-page case follows before it measures")
	explain := fs.Bool("explain", false, "also print EXPLAIN (ANALYZE, BUFFERS) of each case's statements (needs a superuser, for auto_explain)")
	only := fs.String("only", "", "measure only the cases whose name contains this `text`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bench console --db URL [flags]

Serves the real console (web.NewHandler over store.NewPostgres) on a
loopback port, signs in as a user "bench" of role oncall (created, or its
password reset), and for each case times the store calls behind the page
(database time: the calls made directly, as the handler makes them) and the
whole HTML response over HTTP. Prints a Markdown table with the median and
the p95 of each. The engine runs without sealing: "bench seed" stores plain
result envelopes.

`)
		fs.PrintDefaults()
	}
	if help, err := parseArgs(fs, args, dbURL, stderr); help || err != nil {
		return err
	}
	switch {
	case *n < 1 || *warmup < 0 || *deep < 0:
		fmt.Fprintln(stderr, "bench console: --n must be positive, --warmup and --deep not negative")
		return errUsage
	}
	pool, err := openPool(ctx, *dbURL, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := consoleConfig{N: *n, Warmup: *warmup, DeepPages: *deep, Explain: *explain, Only: *only, Out: stdout, Log: stderr}
	_, err = measureConsole(ctx, pool, cfg)
	return err
}

// benchCase is one page: the store calls behind it and its URL.
type benchCase struct {
	name  string
	kind  string // overview, list, detail, incidents or part (of the overview): which target applies
	path  string // "" for a part: its store call only
	htmx  bool   // ask for the HTMX fragment (the table swap) instead of the page
	db    func(ctx context.Context, d readers) (rows int, err error)
	notes string
}

// readers are what the console reads through: its own store (users,
// sessions), the idem driver's admin contract for the key records and the
// saga driver's for operations.
type readers struct {
	*store.DB
	keys  *idempgx.Store
	sagas sagadriver.Admin
}

func newReaders(pool *pgxpool.Pool) readers {
	return readers{DB: store.NewPostgres(pool), keys: idempgx.New(pool), sagas: sagapgx.New(pool)}
}

// result is the timings of one case.
type result struct {
	c             benchCase
	rows          int
	db, html      []time.Duration
	dbFirst       time.Duration // the first call, before any warm-up
	bytes         int
	plan          string
	explainFailed string
}

func measureConsole(ctx context.Context, pool *pgxpool.Pool, cfg consoleConfig) ([]*result, error) {
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	db := newReaders(pool)
	if err := prepareSnapshots(ctx, db, cfg.Log); err != nil {
		return nil, err
	}
	base, client, stop, err := serveConsole(ctx, pool, db, cfg.Log)
	if err != nil {
		return nil, err
	}
	defer stop()
	cases, facts, err := buildCases(ctx, pool, db, cfg.DeepPages)
	if err != nil {
		return nil, err
	}
	if cfg.Only != "" {
		cases = slices.DeleteFunc(cases, func(c benchCase) bool { return !strings.Contains(c.name, cfg.Only) })
	}

	var results []*result
	for _, c := range cases {
		res := &result{c: c}
		for i := range cfg.Warmup + cfg.N {
			t0 := time.Now()
			rows, err := c.db(ctx, db)
			d := time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("%s: store: %w", c.name, err)
			}
			res.rows = rows
			if i == 0 {
				res.dbFirst = d
			}
			if i >= cfg.Warmup {
				res.db = append(res.db, d)
			}
		}
		for i := range cfg.Warmup + cfg.N {
			if c.path == "" {
				break // a store call only, no page of its own
			}
			t0 := time.Now()
			n, err := get(ctx, client, base+c.path, c.htmx)
			d := time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("%s: GET %s: %w", c.name, c.path, err)
			}
			res.bytes = n
			if i >= cfg.Warmup {
				res.html = append(res.html, d)
			}
		}
		logf("%-50s db p50 %7s p95 %7s   html p50 %7s p95 %7s", c.name,
			ms(quantile(res.db, 0.5)), ms(quantile(res.db, 0.95)), ms(quantile(res.html, 0.5)), ms(quantile(res.html, 0.95)))
		results = append(results, res)
	}
	if cfg.Explain {
		if err := explainCases(ctx, pool.Config().ConnConfig, results); err != nil {
			return nil, err
		}
	}
	writeReport(cfg, facts, results)
	return results, nil
}

// serveConsole serves the real console over db on a loopback port, signs
// in as "bench" (role oncall) and returns the base URL, the signed-in
// client and the function that stops the server. The engine runs without
// sealing: "bench seed" stores plain result envelopes.
func serveConsole(ctx context.Context, pool *pgxpool.Pool, db readers, log io.Writer) (string, *http.Client, func(), error) {
	engine, err := idem.New(db.keys, idem.Config{DisableSealing: true})
	if err != nil {
		return "", nil, nil, err
	}
	password, err := benchUser(ctx, db.DB)
	if err != nil {
		return "", nil, nil, err
	}
	enf, err := web.NewEnforcer(unstuck.RBACModel, unstuck.RBACPolicy)
	if err != nil {
		return "", nil, nil, err
	}
	static, err := fs.Sub(unstuck.Static, "static")
	if err != nil {
		return "", nil, nil, err
	}
	if log == nil {
		log = io.Discard
	}
	h := web.NewHandler(web.Config{Store: db.DB, Records: db.keys, Sagas: db.sagas, Engine: engine, Enforcer: enf, Static: static, Incidents: db.DB,
		Sessions: web.NewSessionManager(db.SessionStore(), 30*time.Minute, 12*time.Hour, false),
		Log:      slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := func() { _ = srv.Shutdown(context.WithoutCancel(ctx)) }
	base := "http://" + ln.Addr().String()
	client, err := signIn(ctx, base, password)
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	return base, client, stop, nil
}

// benchUser creates the console user "bench" (role oncall, which may see
// stored responses), or resets its password, and returns the password.
func benchUser(ctx context.Context, db *store.DB) (string, error) {
	pw, err := auth.GeneratePassword()
	if err != nil {
		return "", err
	}
	hash, err := auth.Hash(pw)
	if err != nil {
		return "", err
	}
	_, err = db.CreateUser(ctx, "bench", store.RoleOncall, hash)
	if errors.Is(err, store.ErrConflict) {
		if err = db.SetUserPassword(ctx, "bench", hash); err == nil {
			err = db.SetUserRole(ctx, "bench", store.RoleOncall)
		}
		if err == nil {
			err = db.SetUserDisabled(ctx, "bench", false)
		}
	}
	if err != nil {
		return "", fmt.Errorf("bench user: %w", err)
	}
	return pw, nil
}

func signIn(ctx context.Context, base, password string) (*http.Client, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"username": {"bench"}, "password": {password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("sign-in: status %d", resp.StatusCode)
	}
	return c, nil
}

// get fetches u, reads the whole body and returns its size; anything but
// 200 is an error.
func get(ctx context.Context, c *http.Client, u string, htmx bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if htmx {
		req.Header.Set("HX-Request", "true")
		req.Header.Set("HX-Target", "results")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return int(n), nil
}

// facts describe the data the cases run on.
type facts struct {
	keys, operations   float64 // reltuples
	tableSize, idxSize string  // of the key records (idempgx.Store.TableSize)
	opSize             string  // of the four saga tables, indexes included
	scopes             map[string]int64
	deepDepth          int
}

// buildCases picks the filter values from the data (unmeasured queries)
// and returns the cases.
func buildCases(ctx context.Context, pool *pgxpool.Pool, db readers, deepPages int) ([]benchCase, facts, error) {
	var f facts
	f.scopes = map[string]int64{}
	// The saga tables' size; the operations' counts and filter values come
	// through the saga driver's admin contract, the key records' facts
	// through theirs.
	if err := pool.QueryRow(ctx, `SELECT (SELECT pg_size_pretty(sum(pg_total_relation_size(t))) FROM unnest($1::regclass[]) t)`,
		sagapgx.Tables()).Scan(&f.opSize); err != nil {
		return nil, f, err
	}
	counts, err := db.sagas.CountOperations(ctx, 0)
	if err != nil {
		return nil, f, err
	}
	var opOldest time.Time
	for _, c := range counts.Counts {
		f.operations += float64(c.Count)
		if !c.Oldest.IsZero() && (opOldest.IsZero() || c.Oldest.Before(opOldest)) {
			opOldest = c.Oldest
		}
	}
	kf, err := keyFacts(ctx, db.keys)
	if err != nil {
		return nil, f, err
	}
	f.keys, f.tableSize, f.idxSize = kf.records, kf.tableSize, kf.indexSize
	// Scopes are "tenant:NNNNN" by rank, the first the largest (Zipf).
	big, mid, small := tenant(0), tenant(99), tenant(4999)
	for _, s := range []string{big, mid, small} {
		n, err := countKeys(ctx, db.keys, idemdriver.KeyFilter{Scope: s})
		if err != nil {
			return nil, f, err
		}
		f.scopes[s] = n
	}
	var (
		opCorr, stepExt, reviewOp, doneOp string
		opMidTime                         time.Time
	)
	if opCorr, reviewOp, doneOp, stepExt, opMidTime, err = opFixtures(ctx, db.sagas, opOldest); err != nil {
		return nil, f, err
	}
	newest := kf.newest
	corr, ext, detailID := kf.correlationID, kf.externalRef, kf.detailID
	lookupScope, lookupOp, lookupFence, midTime := kf.middle.Scope, kf.middle.Operation, kf.middle.Fence, kf.middle.UpdatedAt
	// A day's window, whole minutes as the form sends them.
	dayTo := newest.Add(-10 * 24 * time.Hour).Truncate(time.Minute)
	dayFrom := dayTo.Add(-24 * time.Hour)
	rawKey := rawKey(int(lookupFence - 1)) // fence i+1 was given to record i, whose key is k-i
	// The deep cursors: follow Next links, and, deeper, the first page
	// before the middle of the table in time.
	deep, err := followNext(ctx, db, idemdriver.KeyFilter{}, deepPages)
	if err != nil {
		return nil, f, err
	}
	f.deepDepth = deepPages * idemdriver.DefaultLimit
	veryDeep, err := db.keys.ListKeys(ctx, idemdriver.KeyFilter{To: midTime})
	if err != nil {
		return nil, f, err
	}
	opDeep, err := followOpNext(ctx, db, deepPages)
	if err != nil {
		return nil, f, err
	}
	opVeryDeep, err := db.sagas.PageOperations(ctx, sagadriver.OperationFilter{To: opMidTime})
	if err != nil {
		return nil, f, err
	}

	keys := func(name, notes string, kf idemdriver.KeyFilter, query url.Values) benchCase {
		return benchCase{name: name, kind: "list", path: "/keys?" + query.Encode(), notes: notes,
			db: func(ctx context.Context, d readers) (int, error) { return keyListCalls(ctx, d.keys, kf) }}
	}
	ops := func(name, notes string, of sagadriver.OperationFilter, query url.Values) benchCase {
		return benchCase{name: name, kind: "list", path: "/operations?" + query.Encode(), notes: notes,
			db: func(ctx context.Context, d readers) (int, error) {
				p, err := d.sagas.PageOperations(ctx, of)
				return len(p.Operations), err
			}}
	}
	v := func(kv ...string) url.Values {
		out := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	scopeNote := func(s string) string { return fmt.Sprintf("%s: %d records", s, f.scopes[s]) }
	cases := []benchCase{
		{name: "overview", kind: "overview", path: "/", notes: "KeyOverview, NeedsAttention(20), OperationOverview, ReviewRequired(20), trends",
			db: func(ctx context.Context, d readers) (int, error) {
				n, err := overviewCalls(ctx, d)
				if err != nil {
					return n, err
				}
				return n, trendCalls(ctx, d)
			}},
		{name: "overview part: trends", kind: "part", notes: "24 h of quarter-hour counts, 7 d of hourly counts",
			db: func(ctx context.Context, d readers) (int, error) { return 0, trendCalls(ctx, d) }},
		{name: "incidents", kind: "incidents", path: "/incidents", notes: "groups, their hours, the latest snapshot (snapshot tables only)",
			db: func(ctx context.Context, d readers) (int, error) { return 0, incidentCalls(ctx, d) }},
		{name: "overview part: KeyOverview", kind: "part", notes: "counts per status (capped at 10 000, then estimates), oldest, stuck count",
			db: func(ctx context.Context, d readers) (int, error) { _, err := d.keys.KeyOverview(ctx); return 0, err }},
		{name: "overview part: NeedsAttention(20)", kind: "part", notes: "pending, unavailable, stuck: oldest first",
			db: func(ctx context.Context, d readers) (int, error) {
				r, err := d.keys.NeedsAttention(ctx, 20)
				return len(r), err
			}},
		{name: "overview part: OperationOverview", kind: "part", notes: "counts per status (capped at 10 000, then estimates), oldest",
			db: func(ctx context.Context, d readers) (int, error) {
				_, err := d.sagas.CountOperations(ctx, sagadriver.DefaultCountCap)
				return 0, err
			}},
		{name: "overview part: ReviewRequired(20)", kind: "part",
			db: func(ctx context.Context, d readers) (int, error) {
				r, err := d.sagas.ReviewRequired(ctx, 20)
				return len(r), err
			}},
		keys("keys: first page", "", idemdriver.KeyFilter{}, v()),
		func() benchCase {
			c := keys("keys: first page (htmx swap)", "the table fragment only", idemdriver.KeyFilter{}, v())
			c.htmx = true
			return c
		}(),
		keys("keys: deep page", fmt.Sprintf("after %d Next links (%d records in)", deepPages, f.deepDepth),
			idemdriver.KeyFilter{After: deep}, v("after", deep)),
		keys("keys: very deep page", "cursor at the middle of the table in time",
			idemdriver.KeyFilter{After: veryDeep.Next}, v("after", veryDeep.Next)),
		keys("keys: state=failed", "", idemdriver.KeyFilter{Status: idemdriver.StatusFailed}, v("state", "failed")),
		keys("keys: state=pending", "", idemdriver.KeyFilter{Status: idemdriver.StatusPending}, v("state", "pending")),
		keys("keys: state=stuck", "processing past lease", idemdriver.KeyFilter{Stuck: true}, v("state", "stuck")),
		keys("keys: scope (largest)", scopeNote(big), idemdriver.KeyFilter{Scope: big}, v("scope", big)),
		keys("keys: scope (small)", scopeNote(small), idemdriver.KeyFilter{Scope: small}, v("scope", small)),
		keys("keys: operation", "POST /v1/payouts, 3 % of records", idemdriver.KeyFilter{Operation: "POST /v1/payouts"}, v("operation", "POST /v1/payouts")),
		keys("keys: correlation ID", "", idemdriver.KeyFilter{CorrelationID: corr}, v("correlation_id", corr)),
		keys("keys: external ref", "", idemdriver.KeyFilter{ExternalRef: ext}, v("external_ref", ext)),
		// The console takes a raw key by POST /search only (never in a URL,
		// SPEC K11): the page measured is the scope + operation list.
		keys("keys: raw key lookup", "store: key + scope + operation → digest; page: scope + operation", idemdriver.KeyFilter{Scope: lookupScope, Operation: lookupOp,
			KeyDigest: idem.Digest(lookupScope, lookupOp, rawKey)}, v("scope", lookupScope, "operation", lookupOp)),
		keys("keys: scope+state (largest, failed)", scopeNote(big), idemdriver.KeyFilter{Scope: big, Status: idemdriver.StatusFailed},
			v("scope", big, "state", "failed")),
		keys("keys: scope+state (mid, unavailable)", scopeNote(mid), idemdriver.KeyFilter{Scope: mid, Status: idemdriver.StatusUnavailable},
			v("scope", mid, "state", "unavailable")),
		keys("keys: scope+state (small, failed)", scopeNote(small), idemdriver.KeyFilter{Scope: small, Status: idemdriver.StatusFailed},
			v("scope", small, "state", "failed")),
		keys("keys: scope+state (largest, stuck)", scopeNote(big), idemdriver.KeyFilter{Scope: big, Stuck: true},
			v("scope", big, "state", "stuck")),
		keys("keys: scope+state+operation (mid, failed, payouts)", scopeNote(mid),
			idemdriver.KeyFilter{Scope: mid, Status: idemdriver.StatusFailed, Operation: "POST /v1/payouts"},
			v("scope", mid, "state", "failed", "operation", "POST /v1/payouts")),
		keys("keys: time range (one day)", "updated 11 to 10 days before the newest record", idemdriver.KeyFilter{From: dayFrom, To: dayTo},
			v("from", dayFrom.Format(formTime), "to", dayTo.Format(formTime))),
		keys("keys: scope+operation (mid, payouts)", scopeNote(mid), idemdriver.KeyFilter{Scope: mid, Operation: "POST /v1/payouts"},
			v("scope", mid, "operation", "POST /v1/payouts")),
		keys("keys: state+operation (unavailable, payouts)", "", idemdriver.KeyFilter{Status: idemdriver.StatusUnavailable, Operation: "POST /v1/payouts"},
			v("state", "unavailable", "operation", "POST /v1/payouts")),
		{name: "key detail", kind: "detail", path: "/keys/" + strconv.FormatInt(detailID, 10),
			notes: "completed, stored response shown (role oncall)",
			db: func(ctx context.Context, d readers) (int, error) {
				_, ok, err := d.keys.KeyByID(ctx, detailID)
				return b2i(ok), err
			}},
		ops("operations: first page", "", sagadriver.OperationFilter{}, v()),
		ops("operations: deep page", fmt.Sprintf("after %d Next links", deepPages), sagadriver.OperationFilter{After: opDeep}, v("after", opDeep)),
		ops("operations: very deep page", "cursor at the middle in time", sagadriver.OperationFilter{After: opVeryDeep.Next}, v("after", opVeryDeep.Next)),
		ops("operations: status=review_required", "", sagadriver.OperationFilter{Status: sagadriver.StatusReviewRequired}, v("status", "review_required")),
		ops("operations: type=payout", "", sagadriver.OperationFilter{Type: "payout"}, v("type", "payout")),
		ops("operations: correlation ID", "", sagadriver.OperationFilter{CorrelationID: opCorr}, v("correlation_id", opCorr)),
		ops("operations: external ID", "a step's external ID", sagadriver.OperationFilter{ExternalID: stepExt}, v("external_id", stepExt)),
		ops("operations: status+type (failed, payout)", "", sagadriver.OperationFilter{Status: sagadriver.StatusFailed, Type: "payout"},
			v("status", "failed", "type", "payout")),
		opDetail("operation detail (review_required)", reviewOp),
		opDetail("operation detail (completed)", doneOp),
	}
	return cases, f, nil
}

// keyListCalls makes the store calls of the key list page for kf, one
// after the other: the page and its count (within web.DefaultCountBudget, as the
// handler's), both without the console's own records, and, when that
// count is exact, the count with them. It returns the page's rows.
func keyListCalls(ctx context.Context, keys *idempgx.Store, kf idemdriver.KeyFilter) (int, error) {
	kf.SkipOperationPrefix = web.ConsoleOperationPrefix
	p, err := keys.ListKeys(ctx, kf)
	if err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, web.DefaultCountBudget)
	defer cancel()
	n, err := keys.CountKeys(cctx, kf, 0)
	if err == nil && n.Exact {
		kf.SkipOperationPrefix = ""
		_, err = keys.CountKeys(cctx, kf, 0)
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = nil // the page shows its rows and says the count stopped
	}
	return len(p.Records), err
}

// formTime is the layout of the lists' from and to fields.
const formTime = "2006-01-02T15:04"

// opFixtures picks the operations' filter values through the admin
// contract: a correlation ID among the newest operations, the newest
// operation under review and the newest completed one, an external ID of
// the latter's steps, and the middle in time between the oldest update
// and the newest.
func opFixtures(ctx context.Context, sagas sagadriver.Admin, oldest time.Time) (corr, review, done, ext string, mid time.Time, err error) {
	first, err := sagas.PageOperations(ctx, sagadriver.OperationFilter{Limit: sagadriver.MaxLimit})
	if err != nil || len(first.Operations) == 0 {
		return "", "", "", "", time.Time{}, err
	}
	for _, op := range first.Operations {
		if op.CorrelationID != "" {
			corr = op.CorrelationID
			break
		}
	}
	newest := first.Operations[0].UpdatedAt
	mid = oldest.Add(newest.Sub(oldest) / 2)
	for _, p := range []struct {
		status sagadriver.Status
		dst    *string
	}{{sagadriver.StatusReviewRequired, &review}, {sagadriver.StatusCompleted, &done}} {
		page, err := sagas.PageOperations(ctx, sagadriver.OperationFilter{Status: p.status, Limit: 1})
		if err != nil {
			return "", "", "", "", time.Time{}, err
		}
		if len(page.Operations) > 0 {
			*p.dst = page.Operations[0].ID
		}
	}
	if done != "" {
		det, err := sagas.ReadOperation(ctx, done, 1)
		if err != nil {
			return "", "", "", "", time.Time{}, err
		}
		for _, st := range det.Operation.Steps {
			if st.ExternalID != "" {
				ext = st.ExternalID
				break
			}
		}
	}
	return corr, review, done, ext, mid, nil
}

func opDetail(name, id string) benchCase {
	return benchCase{name: name, kind: "detail", path: "/operations/" + url.PathEscape(id), notes: "3 steps, events, findings",
		db: func(ctx context.Context, d readers) (int, error) {
			det, err := d.sagas.ReadOperation(ctx, id, sagadriver.DefaultMaxEvents)
			return len(det.Events), err
		}}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// overviewCalls are the store calls of the overview page, in the
// handler's order.
func overviewCalls(ctx context.Context, d readers) (int, error) {
	if _, err := d.keys.KeyOverview(ctx); err != nil {
		return 0, err
	}
	att, err := d.keys.NeedsAttention(ctx, 20)
	if err != nil {
		return 0, err
	}
	if _, err := d.sagas.CountOperations(ctx, sagadriver.DefaultCountCap); err != nil {
		return 0, err
	}
	rev, err := d.sagas.ReviewRequired(ctx, 20)
	return len(att) + len(rev), err
}

// keyFactsOf are the facts of the key records the cases run on, read
// through the driver's admin contract (unmeasured).
type keyFactsOf struct {
	records              float64 // the overview's counts, estimates included
	tableSize, indexSize string
	newest               time.Time
	correlationID        string // of the newest record that has one
	externalRef          string // of the newest pending record that has one
	// middle is the record seeded halfway (ID about half the newest's),
	// detailID the first completed one with a result from there on.
	middle   idemdriver.Record
	detailID int64
}

func keyFacts(ctx context.Context, keys *idempgx.Store) (keyFactsOf, error) {
	var kf keyFactsOf
	o, err := keys.KeyOverview(ctx)
	if err != nil {
		return kf, err
	}
	for _, c := range o.Counts {
		kf.records += float64(c.Count)
	}
	size, err := keys.TableSize(ctx)
	if err != nil {
		return kf, err
	}
	kf.tableSize, kf.indexSize = prettyBytes(size.Table), prettyBytes(size.Indexes)
	stop := errors.New("found")
	// first returns the first record, in list order, that f selects and ok
	// accepts.
	first := func(f idemdriver.KeyFilter, ok func(idemdriver.Record) bool) (idemdriver.Record, error) {
		var found idemdriver.Record
		err := keys.EachKey(ctx, f, idemdriver.MaxLimit, func(recs []idemdriver.Record) error {
			for _, r := range recs {
				if ok(r) {
					found = r
					return stop
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, stop) {
			return found, err
		}
		return found, nil
	}
	anyRecord := func(idemdriver.Record) bool { return true }
	newest, err := first(idemdriver.KeyFilter{}, anyRecord)
	if err != nil {
		return kf, err
	}
	kf.newest = newest.UpdatedAt
	r, err := first(idemdriver.KeyFilter{}, func(r idemdriver.Record) bool { return r.CorrelationID != "" })
	if err != nil {
		return kf, err
	}
	kf.correlationID = r.CorrelationID
	r, err = first(idemdriver.KeyFilter{Status: idemdriver.StatusPending}, func(r idemdriver.Record) bool { return r.ExternalRef != "" })
	if err != nil {
		return kf, err
	}
	kf.externalRef = r.ExternalRef
	// The seed gives IDs in the order of creation: the newest record's ID
	// is about the highest.
	for id := max(newest.ID/2, 1); id <= newest.ID; id++ {
		rec, ok, err := keys.KeyByID(ctx, id)
		if err != nil {
			return kf, err
		}
		if ok {
			kf.middle = rec
			break
		}
	}
	for id := kf.middle.ID; id > 0 && id <= newest.ID; id++ {
		rec, ok, err := keys.KeyByID(ctx, id)
		if err != nil {
			return kf, err
		}
		if ok && rec.Status == idemdriver.StatusCompleted && rec.Result != nil {
			kf.detailID = id
			break
		}
	}
	return kf, nil
}

// countKeys counts the records f selects, reading them all.
func countKeys(ctx context.Context, keys idemdriver.Admin, f idemdriver.KeyFilter) (int64, error) {
	var n int64
	err := keys.EachKey(ctx, f, idemdriver.MaxLimit, func(recs []idemdriver.Record) error {
		n += int64(len(recs))
		return nil
	})
	return n, err
}

// prettyBytes is n bytes as pg_size_pretty shows it.
func prettyBytes(n int64) string {
	const unit = 1024
	v, units := float64(n), []string{"bytes", "kB", "MB", "GB", "TB"}
	i := 0
	for v >= 10*unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + " " + units[i]
}

func followNext(ctx context.Context, db readers, f idemdriver.KeyFilter, pages int) (string, error) {
	for range pages {
		p, err := db.keys.ListKeys(ctx, f)
		if err != nil {
			return "", err
		}
		if p.Next == "" {
			break
		}
		f.After = p.Next
	}
	return f.After, nil
}

func followOpNext(ctx context.Context, db readers, pages int) (string, error) {
	var f sagadriver.OperationFilter
	for range pages {
		p, err := db.sagas.PageOperations(ctx, f)
		if err != nil {
			return "", err
		}
		if p.Next == "" {
			break
		}
		f.After = p.Next
	}
	return f.After, nil
}

// explainCases runs each case's store calls once more on a connection
// where auto_explain sends the plan of every statement, with ANALYZE and
// BUFFERS, to the client as a NOTICE, so the plans are those of the exact
// statements the store sends.
func explainCases(ctx context.Context, connCfg *pgx.ConnConfig, results []*result) error {
	cfg := connCfg.Copy()
	var (
		mu      sync.Mutex
		notices []string
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	// A pool of one connection: the stores want a pool.
	pcfg, err := pgxpool.ParseConfig(connCfg.ConnString())
	if err != nil {
		return err
	}
	pcfg.ConnConfig = cfg
	pcfg.MaxConns = 1
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, s := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_analyze = on`,
			`SET auto_explain.log_buffers = on`, `SET auto_explain.log_level = notice`} {
			if _, err := c.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	d := newReaders(pool)
	// Connect (and load auto_explain) outside the first case. Without the
	// right to LOAD there are no plans, but the timings stand.
	if _, err := d.keys.KeyOverview(ctx); err != nil {
		for _, r := range results {
			r.explainFailed = err.Error()
		}
		return nil
	}
	mu.Lock()
	notices = nil
	mu.Unlock()
	for _, r := range results {
		if _, err := r.c.db(ctx, d); err != nil {
			return fmt.Errorf("explain %s: %w", r.c.name, err)
		}
		mu.Lock()
		r.plan = strings.Join(notices, "\n\n")
		notices = nil
		mu.Unlock()
	}
	return nil
}

// quantile returns the nearest-rank q-quantile of ds (the median for 0.5,
// the p95 for 0.95: of 50 runs, the 48th fastest).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(float64(len(s))*q+0.999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// targets are the console's page budgets, in milliseconds: database time
// of the overview and of a list page, and the p95 of a rendered page.
const (
	targetOverviewDB = 20 * time.Millisecond
	targetListDB     = 10 * time.Millisecond
	targetHTMLp95    = 50 * time.Millisecond
	// /incidents in at most 50 ms of database time.
	targetIncidentsDB = 50 * time.Millisecond
)

func verdict(r *result) string {
	var miss []string
	dbp95 := quantile(r.db, 0.95)
	switch r.c.kind {
	case "overview":
		if dbp95 > targetOverviewDB {
			miss = append(miss, "DB > 20")
		}
	case "list":
		if dbp95 > targetListDB {
			miss = append(miss, "DB > 10")
		}
	case "incidents":
		if dbp95 > targetIncidentsDB {
			miss = append(miss, "DB > 50")
		}
	}
	if r.c.kind == "part" {
		return "(part of the overview)"
	}
	if quantile(r.html, 0.95) > targetHTMLp95 {
		miss = append(miss, "HTML > 50")
	}
	if len(miss) == 0 {
		return "met"
	}
	return "**missed** (" + strings.Join(miss, ", ") + ")"
}

func writeReport(cfg consoleConfig, f facts, results []*result) {
	w := cfg.Out
	fmt.Fprintf(w, "Data: %.0f key records (table %s, indexes %s), %.0f operations (saga tables %s with indexes).\n",
		f.keys, f.tableSize, f.idxSize, f.operations, f.opSize)
	fmt.Fprintf(w, "Runs: %d timed after %d warm-up, one client, sequential. Times in ms; p95 is the nearest rank.\n", cfg.N, cfg.Warmup)
	fmt.Fprintf(w, "DB first is the case's first store call, before its warm-up: pages not yet in shared_buffers (perhaps in the OS cache).\n\n")
	fmt.Fprintln(w, "| page | rows | DB first | DB median | DB p95 | HTML median | HTML p95 | HTML KiB | target | notes |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
	for _, r := range results {
		htmlMed, htmlP95, size := "—", "—", "—"
		if r.c.path != "" {
			htmlMed, htmlP95 = ms(quantile(r.html, 0.5)), ms(quantile(r.html, 0.95))
			size = strconv.FormatFloat(float64(r.bytes)/1024, 'f', 1, 64)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.c.name, r.rows, ms(r.dbFirst),
			ms(quantile(r.db, 0.5)), ms(quantile(r.db, 0.95)), htmlMed, htmlP95, size, verdict(r), r.c.notes)
	}
	if !cfg.Explain {
		return
	}
	fmt.Fprintln(w, "\n### Plans (auto_explain: ANALYZE, BUFFERS)")
	for _, r := range results {
		fmt.Fprintf(w, "\n#### %s\n\n", r.c.name)
		if r.explainFailed != "" {
			fmt.Fprintf(w, "no plan: %s\n", r.explainFailed)
			continue
		}
		fmt.Fprintf(w, "```\n%s\n```\n", strings.TrimSpace(r.plan))
	}
}
