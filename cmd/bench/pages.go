package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/unstuckhq/unstuck/internal/store"
)

// pagesConfig is how "bench pages" measures.
type pagesConfig struct {
	Rounds, N, Warmup int
	// CPUProfile, if set, receives a CPU profile of the rounds: the console
	// serves in this process, so its handler's CPU is in it, with the
	// clients' (HTTP, and pgx for the limits).
	CPUProfile string
	// Only, when not empty, keeps the rows whose page contains it.
	Only     string
	Out, Log io.Writer
}

// pageRow is one page against its limit: the least SQL the database can
// answer the page's content with, prepared, on a connection of its own,
// the rows read raw (no decoding).
type pageRow struct {
	name, path, limitNote string
	limit                 func(ctx context.Context, c *pgx.Conn, sessionToken string) error
	// limitStore, instead of limit, runs store calls on the pool.
	limitStore func(ctx context.Context, d readers) error
}

// pageResult is a row's timings: per round the median of each variant and
// their ratio.
type pageResult struct {
	row               pageRow
	page, limit, rate []float64 // per round: medians in ms, ratio
}

func runPages(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pages", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", "", "PostgreSQL `URL` of a database loaded by \"bench seed\" (required)")
	rounds := fs.Int("rounds", 10, "rounds; each runs both variants of a row, in an order that alternates")
	n := fs.Int("n", 50, "timed runs of each variant per round (the round keeps their median)")
	warmup := fs.Int("warmup", 20, "untimed runs of each variant before the first round")
	only := fs.String("only", "", "measure only the pages whose path contains this `text`")
	cpu := fs.String("cpuprofile", "", "write a CPU profile of the rounds (server and clients) to this `file`")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bench pages --db URL [flags]

Serves the real console (web.NewHandler over store.NewPostgres) on a
loopback port, signs in as "bench" (role oncall), and times each page —
the overview (with its trends), /incidents, /keys?state=failed,
/operations?status=review_required —
against its limit: the least SQL that reads the page's content, prepared,
on one pgx connection, rows read raw. Both are client wall times over
loopback, interleaved in rounds whose order alternates; each round keeps
the median of each and their ratio. Prints min/median/max of the ratio.
First it takes a snapshot of trends and incident groups (timed), and on a
database without snapshots imports 7 days of trend history shaped on it.

`)
		fs.PrintDefaults()
	}
	if help, err := parseArgs(fs, args, dbURL, stderr); help || err != nil {
		return err
	}
	switch {
	case *rounds < 1 || *n < 1 || *warmup < 0:
		fmt.Fprintln(stderr, "bench pages: --rounds and --n must be positive, --warmup not negative")
		return errUsage
	}
	_, err := measurePages(ctx, *dbURL, pagesConfig{Rounds: *rounds, N: *n, Warmup: *warmup, CPUProfile: *cpu, Only: *only, Out: stdout, Log: stderr})
	return err
}

// The limits of the lists. Each is the least SQL the database can answer
// the page's content with: the session and its user's role (the page is
// only for a signed-in user whose role may see it), the 51 rows' shown
// columns by the index the page's query uses, and the count the page
// shows (up to the cap, 1000, plus one), sent as one batch: one round trip.
// They are the only SQL of the engines' tables outside their drivers: what
// is measured here is the database's limit, which no driver call could
// show.
const (
	// limitSessionSQL authenticates: the session by its token, alive, and
	// its user's role.
	limitSessionSQL = `SELECT s.data, u.role, u.disabled FROM sessions s JOIN unstuck_console_user u ON u.id = s.user_id
WHERE s.token = $1 AND current_timestamp < s.expiry`
	// The keys list shows id, state (stuck needs the lease), operation,
	// scope, external reference, attempts, updated; it leaves out the
	// console's own decision records, as the page does.
	limitKeysByStatusSQL = `SELECT id, status, operation, scope, external_ref, attempts, updated_at, lease_expires_at
FROM unstuck_idem_record WHERE status = $1 AND NOT starts_with(operation, 'console ')
ORDER BY updated_at DESC, id DESC LIMIT 51`
	limitKeysCountSQL = `SELECT count(*) FROM (SELECT 1 FROM unstuck_idem_record
WHERE status = $1 AND NOT starts_with(operation, 'console ') LIMIT 1001) c`
	// The operations list shows id, type, status, current step,
	// correlation ID, resolution, updated. The one SQL of a saga table
	// outside the saga drivers, on purpose: a limit is the least work the
	// database can do for the page, below every store, so it cannot go
	// through the driver whose cost it measures.
	limitOpsByStatusSQL = `SELECT id, type, status, current_step, correlation_id, resolution, updated_at
FROM unstuck_saga_operation WHERE status = $1 ORDER BY updated_at DESC, id DESC LIMIT 51`
	limitOpsCountSQL = `SELECT count(*) FROM (SELECT 1 FROM unstuck_saga_operation WHERE status = $1 LIMIT 1001) c`
)

// listLimit returns the limit of a list page: one batch of the session
// look-up (token), the rows and the count, every row read raw.
func listLimit(rowsSQL, countSQL, status string) func(ctx context.Context, c *pgx.Conn, token string) error {
	return func(ctx context.Context, c *pgx.Conn, token string) error {
		var b pgx.Batch
		b.Queue(limitSessionSQL, token)
		b.Queue(rowsSQL, status)
		b.Queue(countSQL, status)
		br := c.SendBatch(ctx, &b)
		for i := range b.Len() {
			rows, err := br.Query()
			if err != nil {
				_ = br.Close()
				return err
			}
			n := 0
			for rows.Next() {
				_ = rows.RawValues()
				n++
			}
			if err := rows.Err(); err != nil {
				_ = br.Close()
				return err
			}
			if i == 0 && n != 1 {
				_ = br.Close()
				return errors.New("limit: the session was not found")
			}
		}
		return br.Close()
	}
}

func pageRows() []pageRow {
	return []pageRow{
		{name: "/", path: "/", limitNote: "the page's own six store calls (KeyOverview, NeedsAttention, CountOperations, ReviewRequired, " +
			"and the two trend reads), all at once on the pool as the page makes them: capped exact counts with estimates above the cap " +
			"have no simpler SQL, so this row shows what the console costs on top of its reads",
			limitStore: func(ctx context.Context, d readers) error {
				now := time.Now()
				return allAtOnce(
					func() error { _, err := d.keys.KeyOverview(ctx); return err },
					func() error { _, err := d.keys.NeedsAttention(ctx, 20); return err },
					func() error { _, err := d.sagas.CountOperations(ctx, 1000); return err },
					func() error { _, err := d.sagas.ReviewRequired(ctx, 20); return err },
					func() error { _, err := d.Trends(ctx, store.TrendQuarter, now.Add(-24*time.Hour)); return err },
					func() error { _, err := d.Trends(ctx, store.TrendHour, now.Add(-7*24*time.Hour)); return err })
			}},
		{name: "/incidents", path: "/incidents", limitNote: "the page's own three store calls (groups, their hours, the latest snapshot), at once as the page makes them: " +
			"each one indexed read of the snapshot tables",
			limitStore: incidentCalls},
		{name: "/keys?state=failed", path: "/keys?state=failed",
			limitNote: "one batch (one round trip): the session and its user's role; the 51 rows' shown columns by (status, updated_at, id); their count up to 1001",
			limit:     listLimit(limitKeysByStatusSQL, limitKeysCountSQL, "failed")},
		{name: "/operations?status=review_required", path: "/operations?status=review_required",
			limitNote: "one batch (one round trip): the session and its user's role; the 51 rows' shown columns by (status, updated_at, id); their count up to 1001",
			limit:     listLimit(limitOpsByStatusSQL, limitOpsCountSQL, "review_required")},
	}
}

func measurePages(ctx context.Context, dbURL string, cfg pagesConfig) ([]*pageResult, error) {
	pool, err := openPool(ctx, dbURL, 8)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// The limits' connection plans each statement with its values, as the
	// console's lists do (idempgx plans them per call, for skewed scopes),
	// and reads binary values.
	ccfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	ccfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	conn, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	db := newReaders(pool)
	if err := prepareSnapshots(ctx, db, cfg.Log); err != nil {
		return nil, err
	}
	base, client, stop, err := serveConsole(ctx, pool, db, cfg.Log)
	if err != nil {
		return nil, err
	}
	defer stop()
	token, err := sessionToken(client, base)
	if err != nil {
		return nil, err
	}

	var prof *os.File
	if cfg.CPUProfile != "" {
		if prof, err = os.Create(cfg.CPUProfile); err != nil {
			return nil, err
		}
		defer prof.Close()
	}
	if prof != nil {
		if err := pprof.StartCPUProfile(prof); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}

	pageRun := func(r pageRow) error { _, err := get(ctx, client, base+r.path, false); return err }
	limitRun := func(r pageRow) error {
		if r.limitStore != nil {
			return r.limitStore(ctx, db)
		}
		return r.limit(ctx, conn, token)
	}
	timeIt := func(n int, f func() error) (float64, error) {
		ds := make([]float64, 0, n)
		for range n {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			ds = append(ds, float64(time.Since(t0))/float64(time.Millisecond))
		}
		slices.Sort(ds)
		return ds[len(ds)/2], nil
	}

	var results []*pageResult
	for _, row := range pageRows() {
		if cfg.Only != "" && !strings.Contains(row.path, cfg.Only) {
			continue
		}
		res := &pageResult{row: row}
		if _, err := timeIt(max(cfg.Warmup, 1), func() error { return pageRun(row) }); err != nil {
			return nil, fmt.Errorf("%s: page: %w", row.name, err)
		}
		if _, err := timeIt(max(cfg.Warmup, 1), func() error { return limitRun(row) }); err != nil {
			return nil, fmt.Errorf("%s: limit: %w", row.name, err)
		}
		for round := range cfg.Rounds {
			var pm, lm float64
			runPage := func() (err error) {
				pm, err = timeIt(cfg.N, func() error { return pageRun(row) })
				return err
			}
			runLimit := func() (err error) {
				lm, err = timeIt(cfg.N, func() error { return limitRun(row) })
				return err
			}
			first, second := runPage, runLimit
			if round%2 == 1 {
				first, second = runLimit, runPage
			}
			if err := errors.Join(first(), second()); err != nil {
				return nil, fmt.Errorf("%s: %w", row.name, err)
			}
			res.page = append(res.page, pm)
			res.limit = append(res.limit, lm)
			res.rate = append(res.rate, pm/lm)
		}
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "%-36s ratio %s\n", row.name, spread(res.rate, 2))
		}
		results = append(results, res)
	}
	writePagesReport(cfg, results)
	return results, nil
}

// allAtOnce runs fns at once and returns their errors joined.
func allAtOnce(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sessionToken is the signed-in client's session token: the value of the
// console's session cookie.
func sessionToken(c *http.Client, base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	for _, ck := range c.Jar.Cookies(u) {
		if strings.HasSuffix(ck.Name, "unstuck_session") { // web.NewSessionManager's name
			return ck.Value, nil
		}
	}
	return "", errors.New("bench pages: the client holds no session cookie")
}

// spread is "min / median / max" of xs.
func spread(xs []float64, prec int) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	f := func(x float64) string { return fmt.Sprintf("%.*f", prec, x) }
	return f(s[0]) + " / " + f(s[len(s)/2]) + " / " + f(s[len(s)-1])
}

func writePagesReport(cfg pagesConfig, results []*pageResult) {
	w := cfg.Out
	fmt.Fprintf(w, "%d rounds × %d runs per variant after %d warm-up; order alternates per round; times are client wall times over loopback, per-round medians.\n\n",
		cfg.Rounds, cfg.N, cfg.Warmup)
	fmt.Fprintln(w, "| page | ratio page ÷ limit, min / median / max | page ms, min / median / max | limit ms, min / median / max | limit |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	for _, r := range results {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", r.row.name, spread(r.rate, 2), spread(r.page, 3), spread(r.limit, 3), r.row.limitNote)
	}
}
