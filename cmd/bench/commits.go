package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idempgx"
)

// The commit-limit benchmark: first requests per second end to end over
// HTTP (a load generator's clients, the idem middleware on idempgx, a
// handler that answers 201) against what PostgreSQL can commit of the same
// two commits a first request makes (reserve, then complete), run by
// pgbench at the same concurrency; and replays against one prepared
// SELECT. Both run in the same rounds, the order alternating.

// limitTable is pgbench's table: the record's ident as its unique key, a
// result, the least a reserve and a complete can write.
const limitTable = `CREATE TABLE IF NOT EXISTS bench_commit_limit (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	k text NOT NULL UNIQUE,
	status text NOT NULL,
	result bytea)`

// pgbench scripts: a first request's two commits, and a replay's one read.
const (
	limitFirstScript = `\set r random(1, 9000000000000000000)
INSERT INTO bench_commit_limit (k, status) VALUES (:client_id || '-' || :r || '-' || :r, 'processing') RETURNING id \gset
UPDATE bench_commit_limit SET status = 'completed', result = '\x7b226f6b223a747275657d' WHERE id = :id;
`
	limitReplayScript = `\set r random(1, :keys)
SELECT status, result FROM bench_commit_limit WHERE k = 'replay-' || :r;
`
)

func runCommits(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("commits", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", "", "PostgreSQL `URL` of a database of its own (required)")
	clientList := fs.String("clients", "1,8,32,64", "concurrent clients, comma-separated")
	duration := fs.Duration("duration", 10*time.Second, "length of each measurement")
	rounds := fs.Int("rounds", 3, "rounds; each measures both variants at every concurrency, the order alternating")
	replayKeys := fs.Int("replay-keys", 10_000, "keys the replays repeat")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bench commits --db URL [flags]

At each concurrency, in rounds with the order alternating: first requests
per second over HTTP through the idem middleware on idempgx (each with a
new key) against pgbench running a first request's two commits (INSERT …
RETURNING, then UPDATE) on a table of its own; then replays (a key already
completed) against pgbench's one prepared SELECT. Prints min / median / max
of engine ÷ pgbench. Needs pgbench on PATH.

`)
		fs.PrintDefaults()
	}
	if help, err := parseArgs(fs, args, dbURL, stderr); help || err != nil {
		return err
	}
	var clients []int
	for f := range strings.SplitSeq(*clientList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "bench commits: --clients: %q is not a positive number\n", f)
			return errUsage
		}
		clients = append(clients, n)
	}
	if *rounds < 1 || *duration <= 0 || *replayKeys < 1 {
		fmt.Fprintln(stderr, "bench commits: --rounds, --duration and --replay-keys must be positive")
		return errUsage
	}
	if _, err := exec.LookPath("pgbench"); err != nil {
		return errors.New("pgbench is not on PATH (Debian: postgresql-client)")
	}
	maxClients := 0
	for _, c := range clients {
		maxClients = max(maxClients, c)
	}
	pool, err := openPool(ctx, *dbURL, maxClients+4)
	if err != nil {
		return err
	}
	defer pool.Close()
	s := idempgx.New(pool)
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	for _, q := range []string{limitTable, `TRUNCATE bench_commit_limit`,
		`INSERT INTO bench_commit_limit (k, status, result) SELECT 'replay-' || i, 'completed', '\x7b226f6b223a747275657d' FROM generate_series(1, ` + strconv.Itoa(*replayKeys) + `) i`,
		`VACUUM (ANALYZE) bench_commit_limit`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "bench-commits-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	firstScript, replayScript := filepath.Join(dir, "first.sql"), filepath.Join(dir, "replay.sql")
	if err := os.WriteFile(firstScript, []byte(limitFirstScript), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(replayScript, []byte(limitReplayScript), 0o600); err != nil {
		return err
	}

	engine, err := idem.New(s, idem.Config{Secret: []byte("bench-commits-secret-0123456789abcdef")})
	if err != nil {
		return err
	}
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		return err
	}
	h := mw.Required(&idem.RouteOpts{Name: "POST /charges"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String() + "/charges"

	// The replayed keys, completed once through the middleware.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: maxClients + 4, MaxConnsPerHost: 0}}
	for i := range *replayKeys {
		if _, err := post(ctx, hc, base, replayKey(i)); err != nil {
			return fmt.Errorf("complete the replayed keys: %w", err)
		}
	}

	type row struct{ first, replay []float64 }
	results := map[int]*row{}
	var seq atomic.Int64
	for round := range *rounds {
		for _, c := range clients {
			r := results[c]
			if r == nil {
				r = &row{}
				results[c] = r
			}
			for _, kind := range []string{"first", "replay"} {
				engineRun := func() (float64, error) {
					key := func(int) string {
						if kind == "replay" {
							return replayKey(int(seq.Add(1)) % *replayKeys)
						}
						return fmt.Sprintf("bench-first-%012d", seq.Add(1))
					}
					// A second untimed, as pgbench's figure leaves out
					// its connections' set-up.
					if _, err := httpLoad(ctx, hc, base, c, time.Second, key); err != nil {
						return 0, err
					}
					return httpLoad(ctx, hc, base, c, *duration, key)
				}
				script := firstScript
				if kind == "replay" {
					script = replayScript
				}
				limitRun := func() (float64, error) {
					// The engine's connections closed, so that pgbench's
					// fit under the server's max_connections.
					pool.Reset()
					return pgbench(ctx, *dbURL, script, c, *duration, *replayKeys)
				}
				var e, l float64
				var err error
				if round%2 == 0 {
					if e, err = engineRun(); err == nil {
						l, err = limitRun()
					}
				} else {
					if l, err = limitRun(); err == nil {
						e, err = engineRun()
					}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(stderr, "round %d, %d clients, %s: engine %.0f/s, pgbench %.0f/s, ratio %.2f\n", round+1, c, kind, e, l, e/l)
				if kind == "first" {
					r.first = append(r.first, e/l)
				} else {
					r.replay = append(r.replay, e/l)
				}
			}
		}
	}
	fmt.Fprintf(stdout, "%d rounds × %s per variant; engine over HTTP through the middleware ÷ pgbench (min / median / max)\n\n", *rounds, *duration)
	fmt.Fprintln(stdout, "| clients | first requests ÷ two commits | replays ÷ one SELECT |")
	fmt.Fprintln(stdout, "|---|---|---|")
	for _, c := range clients {
		fmt.Fprintf(stdout, "| %d | %s | %s |\n", c, spread(results[c].first, 2), spread(results[c].replay, 2))
	}
	return nil
}

func replayKey(i int) string { return fmt.Sprintf("bench-replay-%010d", i) }

// post sends one POST with key as its Idempotency-Key and requires a 201.
func post(ctx context.Context, c *http.Client, url, key string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{"amount":1999}`)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return resp.StatusCode, fmt.Errorf("POST answered %d: %s", resp.StatusCode, body)
	}
	return resp.StatusCode, nil
}

// httpLoad runs clients closed loops of POSTs for d and returns the
// requests per second; any answer but 201 fails it.
func httpLoad(ctx context.Context, hc *http.Client, url string, clients int, d time.Duration, key func(int) string) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		done     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	deadline := time.Now().Add(d)
	t0 := time.Now()
	for c := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := post(ctx, hc, url, key(c)); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(t0).Seconds(), nil
}

var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// pgbench runs script with clients connections for d and returns its
// transactions (script runs) per second.
func pgbench(ctx context.Context, dbURL, script string, clients int, d time.Duration, keys int) (float64, error) {
	cmd := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-T", strconv.Itoa(max(1, int(d.Seconds()))), "-D", "keys="+strconv.Itoa(keys), "-f", script, dbURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := pgbenchTPS.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}
