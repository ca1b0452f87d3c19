package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// The commit-limit benchmark: first requests (a new key each) and replays
// (a completed key) per second, three ways, at each concurrency:
//
//   - engine: over loopback HTTP through the idem middleware on the store,
//     to a handler that answers 201;
//   - bare HTTP: the same client and server, a handler without middleware
//     that runs the limit's statements on the engine's pool (or handle);
//   - the limit: those statements without HTTP or Go between, PostgreSQL's
//     pgbench at the same concurrency, SQLite's single writer (and its
//     parallel readers for replays).
//
// The limit's table has the record's columns and one unique index, on the
// ident, and its writes are the engine's sizes: a first request inserts a
// processing record (RETURNING id), then completes it by id with the
// stored result of one the engine completed, two commits as the engine's
// reserve and complete are; a replay reads the columns the engine's replay
// reads, by the ident. engine ÷ limit is what the engine keeps of the
// store; engine ÷ bare HTTP and bare HTTP ÷ limit split it into the
// engine's share and Go's HTTP and driver share, which run on the same
// cores as the database.

// The kinds of request, in the order measured.
const (
	kindFirst  = "first"
	kindReplay = "replay"
)

// limitInsertColumns are the columns the engine's reserve writes.
const limitInsertColumns = `scope, operation, key_digest, fingerprint, status, owner_token, fence,
	lease_expires_at, attempts, version, created_at, updated_at, expires_at, key_hash, trace_id`

// limitReplayColumns are the columns the engine's replay reads (a lean
// reserve that finds the record).
const limitReplayColumns = `id, fingerprint, status, result, owner_token, fence, lease_expires_at, created_at, expires_at`

// commitValues are what the limit writes for one request but its key's
// digest: the values of a record that the engine completed for the
// benchmark's request, so that the limit's rows are the engine's sizes.
type commitValues struct {
	scope, operation, fingerprint, ownerToken, keyHash, traceID string
	result                                                      []byte
	responseCode                                                int
}

// commitValuesSQL reads commitValues from a completed record, on either
// store.
const commitValuesSQL = `SELECT scope, operation, fingerprint, owner_token, coalesce(key_hash, ''), trace_id, result, response_code
FROM unstuck_idem_record WHERE status = 'completed' ORDER BY id LIMIT 1`

// commitStore is one store under the benchmark: the engine's store,
// migrated and empty, and the limit's table beside it.
type commitStore struct {
	store interface {
		idemdriver.Store
		Migrate(context.Context) error
	}
	// queryRow runs a query of one row into dest.
	queryRow func(ctx context.Context, q string, dest ...any) error
	// limits readies the bare handlers and the limit to write v.
	limits func(ctx context.Context, v commitValues) (*commitLimits, error)
	// settle, if not nil, runs once the replayed keys are in both tables.
	settle func(ctx context.Context) error
	close  func()
}

// commitLimits are a store's bare handlers and its limit.
type commitLimits struct {
	// bareFirst and bareReplay run the limit's statements for the
	// request's Idempotency-Key and answer as the benchmark's handler does.
	bareFirst, bareReplay http.HandlerFunc
	// run measures the limit of kind with clients for d, in requests per
	// second; key gives a worker's next key, as it does the HTTP clients.
	run func(ctx context.Context, kind string, clients int, d time.Duration, key func(int) string) (float64, error)
	// names say what the limit is, by kind, for the report.
	names map[string]string
	// what says how the three variants run, for the report.
	what  string
	close func()
}

func runCommits(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("commits", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", "", "`STORE`: a PostgreSQL URL of a database of its own, or sqlite:PATH of a new file (required)")
	clientList := fs.String("clients", "1,8,32,64", "concurrent clients, comma-separated")
	duration := fs.Duration("duration", 10*time.Second, "length of each measurement")
	rounds := fs.Int("rounds", 3, "rounds; each measures the three variants at every concurrency, the order rotating")
	replayKeys := fs.Int("replay-keys", 10_000, "keys the replays repeat")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bench commits --db STORE [flags]

First requests (a new key each) and replays (a completed key) per second,
three ways, at each concurrency, in rounds that rotate their order:

  engine     HTTP over loopback through the idem middleware on the store
             (idempgx or idemsqlite) to a handler that answers 201
  bare HTTP  the same client and server; a handler without middleware
             runs the limit's statements on the engine's pgx pool or
             SQLite handle (SQLite: writes serialized, as the store's are)
  limit      the statements alone. PostgreSQL: pgbench -M prepared, a
             connection per client. SQLite: first requests, one goroutine
             on one connection (the single writer); replays, a goroutine
             per client on the handle.

The limit's table has the record's columns and one unique index, on the
ident; its values are the sizes of the engine's record. A first request
is two commits: INSERT … RETURNING id of a processing record, then
UPDATE … WHERE id to completed with the stored result; a replay is one
prepared SELECT by the ident. Prints min / median / max over the rounds
of engine ÷ limit, engine ÷ bare HTTP and bare HTTP ÷ limit, then of each
variant's rate. PostgreSQL needs pgbench on PATH. STORE must hold no
idempotency records.

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
	for _, bad := range []struct {
		flag string
		ok   bool
	}{{"--duration", *duration > 0}, {"--rounds", *rounds > 0}, {"--replay-keys", *replayKeys > 0}} {
		if !bad.ok {
			fmt.Fprintf(stderr, "bench commits: %s must be positive\n", bad.flag)
			return errUsage
		}
	}
	maxClients := 0
	for _, c := range clients {
		maxClients = max(maxClients, c)
	}
	var (
		st  *commitStore
		err error
	)
	switch u := *dbURL; {
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		if _, err := exec.LookPath("pgbench"); err != nil {
			return errors.New("pgbench is not on PATH (Debian: postgresql-client)")
		}
		st, err = commitsPostgres(ctx, u, maxClients, *replayKeys)
	case strings.HasPrefix(u, "sqlite:") && len(u) > len("sqlite:"):
		st, err = commitsSQLite(ctx, strings.TrimPrefix(u, "sqlite:"))
	default:
		fmt.Fprintf(stderr, "bench commits: --db: %q is neither a PostgreSQL URL (postgres://…) nor sqlite:PATH\n", u)
		return errUsage
	}
	if err != nil {
		return err
	}
	defer st.close()
	return measureCommits(ctx, st, commitsConfig{clients: clients, maxClients: maxClients, duration: *duration,
		rounds: *rounds, replayKeys: *replayKeys}, stdout, stderr)
}

// commitsConfig is one run of the benchmark.
type commitsConfig struct {
	clients            []int
	maxClients         int
	duration           time.Duration
	rounds, replayKeys int
}

// measureCommits serves the engine and the bare handlers, completes the
// replayed keys through both, then runs the rounds and prints the report.
func measureCommits(ctx context.Context, st *commitStore, cfg commitsConfig, stdout, stderr io.Writer) error {
	engine, err := idem.New(st.store, idem.Config{Secret: []byte("bench-commits-secret-0123456789abcdef")})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{})
	if err != nil {
		return fmt.Errorf("middleware: %w", err)
	}
	const enginePath = "/charges"
	barePaths := map[string]string{kindFirst: "/bare/first", kindReplay: "/bare/replay"}
	mux := http.NewServeMux()
	mux.Handle(enginePath, mw.Required(&idem.RouteOpts{Name: "POST /charges"})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		answerCreated(w)
	})))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.maxClients + 4, MaxConnsPerHost: 0}}

	for i := range cfg.replayKeys {
		if _, err := post(ctx, hc, base+enginePath, replayKey(i)); err != nil {
			return fmt.Errorf("complete the replayed keys through the middleware: %w", err)
		}
	}
	var v commitValues
	if err := st.queryRow(ctx, commitValuesSQL, &v.scope, &v.operation, &v.fingerprint, &v.ownerToken, &v.keyHash,
		&v.traceID, &v.result, &v.responseCode); err != nil {
		return fmt.Errorf("read a completed record: %w", err)
	}
	lim, err := st.limits(ctx, v)
	if err != nil {
		return err
	}
	defer lim.close()
	mux.Handle(barePaths[kindFirst], lim.bareFirst)
	mux.Handle(barePaths[kindReplay], lim.bareReplay)
	for i := range cfg.replayKeys {
		if _, err := post(ctx, hc, base+barePaths[kindFirst], replayKey(i)); err != nil {
			return fmt.Errorf("complete the replayed keys through the bare handler: %w", err)
		}
	}
	if st.settle != nil {
		if err := st.settle(ctx); err != nil {
			return err
		}
	}

	// The variants, in the order of the first round.
	const engineV, bareV, limitV = 0, 1, 2
	kinds := [2]string{kindFirst, kindReplay}
	// rates[clients][kind][variant] are the rounds' requests per second.
	rates := make([][2][3][]float64, len(cfg.clients))
	var seq atomic.Int64
	for round := range cfg.rounds {
		for ci, c := range cfg.clients {
			for ki, kind := range kinds {
				key := func(int) string {
					if kind == kindReplay {
						return replayKey(int(seq.Add(1)) % cfg.replayKeys)
					}
					return fmt.Sprintf("bench-first-%012d", seq.Add(1))
				}
				overHTTP := func(url string) (float64, error) {
					// A second untimed, as pgbench's figure leaves out
					// its connections' set-up.
					if _, err := httpLoad(ctx, hc, url, c, time.Second, key); err != nil {
						return 0, err
					}
					return httpLoad(ctx, hc, url, c, cfg.duration, key)
				}
				variants := [3]struct {
					name string
					run  func() (float64, error)
				}{
					engineV: {"engine", func() (float64, error) { return overHTTP(base + enginePath) }},
					bareV:   {"bare HTTP", func() (float64, error) { return overHTTP(base + barePaths[kind]) }},
					limitV:  {lim.names[kind], func() (float64, error) { return lim.run(ctx, kind, c, cfg.duration, key) }},
				}
				var got [3]float64
				for i := range variants {
					vi := (round + i) % len(variants)
					r, err := variants[vi].run()
					if err != nil {
						return fmt.Errorf("round %d, %d clients, %s, %s: %w", round+1, c, kind, variants[vi].name, err)
					}
					got[vi] = r
				}
				fmt.Fprintf(stderr, "round %d, %d clients, %s: engine %.0f/s, bare HTTP %.0f/s, %s %.0f/s\n",
					round+1, c, kind, got[engineV], got[bareV], lim.names[kind], got[limitV])
				for vi, r := range got {
					rates[ci][ki][vi] = append(rates[ci][ki][vi], r)
				}
			}
		}
	}

	fmt.Fprintf(stdout, "%d rounds × %s per variant, the order rotating.\n%s\n\n", cfg.rounds, cfg.duration, lim.what)
	table := func(title, head string, cells func(r [3][]float64) string) {
		fmt.Fprintf(stdout, "%s, min / median / max over the rounds:\n\n| clients |", title)
		for _, kind := range kinds {
			fmt.Fprintf(stdout, head, kind, lim.names[kind])
		}
		fmt.Fprintln(stdout, "\n|---|---|---|---|---|---|---|")
		for ci, c := range cfg.clients {
			fmt.Fprintf(stdout, "| %d |", c)
			for _, r := range rates[ci] {
				fmt.Fprint(stdout, cells(r))
			}
			fmt.Fprintln(stdout)
		}
	}
	table("Ratios", " %s: engine ÷ %s | %[1]s: engine ÷ bare HTTP | %[1]s: bare HTTP ÷ %[2]s |", func(r [3][]float64) string {
		return fmt.Sprintf(" %s | %s | %s |", spread(ratios(r[engineV], r[limitV]), 2),
			spread(ratios(r[engineV], r[bareV]), 2), spread(ratios(r[bareV], r[limitV]), 2))
	})
	fmt.Fprintln(stdout)
	table("Requests per second", " %s: engine | %[1]s: bare HTTP | %[1]s: %s |", func(r [3][]float64) string {
		return fmt.Sprintf(" %s | %s | %s |", spread(r[engineV], 0), spread(r[bareV], 0), spread(r[limitV], 0))
	})
	return nil
}

// ratios are a[i] ÷ b[i].
func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] / b[i]
	}
	return out
}

// answerCreated is the benchmark's handler: 201 and a small JSON body.
func answerCreated(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"ok":true}`))
}

// keyDigest is the limit's digest of the request's Idempotency-Key: 64 hex
// digits, as the engine's is. The pgbench scripts compute the same in SQL.
func keyDigest(r *http.Request) string {
	return hexSHA256(strings.Trim(r.Header.Get("Idempotency-Key"), `"`))
}

// hexSHA256 is the SHA-256 of s in hex.
func hexSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// sqlString is s as an SQL string literal, NULL if null and s is empty.
func sqlString(s string, null bool) string {
	if null && s == "" {
		return "NULL"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// --- PostgreSQL

// postgresStatements are the limit's statements on PostgreSQL with the
// digest and the id spelled as given (pgx's parameters or pgbench's
// expressions), every other value a literal. The clock is the statement's,
// the fence the engine's sequence, as the engine's reserve takes them.
func (v commitValues) postgresStatements(digest, id string) (insert, complete, read string) {
	insert = fmt.Sprintf(`INSERT INTO bench_commit_limit (%s)
VALUES (%s, %s, %s, %s, 'processing', %s, nextval('unstuck_idem_fence_seq'),
	statement_timestamp() + interval '%d microseconds', 1, 1, statement_timestamp(), statement_timestamp(),
	statement_timestamp() + interval '%d microseconds', %s, %s)
RETURNING id`, limitInsertColumns, sqlString(v.scope, false), sqlString(v.operation, false), digest,
		sqlString(v.fingerprint, false), sqlString(v.ownerToken, false), idem.DefaultLease.Microseconds(),
		max(idem.DefaultLease, idem.DefaultTTL).Microseconds(), sqlString(v.keyHash, true), sqlString(v.traceID, false))
	complete = fmt.Sprintf(`UPDATE bench_commit_limit SET status = 'completed', result = decode('%x', 'hex'), response_code = %d,
	last_error = '', lease_expires_at = NULL, version = version + 1, updated_at = statement_timestamp()
WHERE id = %s`, v.result, v.responseCode, id)
	read = fmt.Sprintf(`SELECT %s FROM bench_commit_limit WHERE scope = %s AND operation = %s AND key_digest = %s`,
		limitReplayColumns, sqlString(v.scope, false), sqlString(v.operation, false), digest)
	return insert, complete, read
}

// The pgbench scripts' keys, digested as keyDigest does (in the server,
// under a microsecond a statement): a first request's, a random number,
// and a replay's, replayKey(:i) spelled in SQL.
const (
	pgbenchFirstDigest  = `encode(sha256(convert_to(:r::text, 'UTF8')), 'hex')`
	pgbenchReplayDigest = `encode(sha256(convert_to('bench-replay-' || lpad(:i::text, 10, '0'), 'UTF8')), 'hex')`
)

// commitsPostgres migrates the engine's store on an empty database and
// creates the limit's table: the record's columns, defaults, checks and
// identity (LIKE copies no index), the id its primary key and one unique
// index on the ident.
func commitsPostgres(ctx context.Context, dbURL string, maxClients, replayKeys int) (*commitStore, error) {
	pool, err := openPool(ctx, dbURL, maxClients+4)
	if err != nil {
		return nil, err
	}
	st := &commitStore{
		store:    idempgx.New(pool),
		queryRow: func(ctx context.Context, q string, dest ...any) error { return pool.QueryRow(ctx, q).Scan(dest...) },
		close:    pool.Close,
	}
	st.limits = func(ctx context.Context, v commitValues) (*commitLimits, error) {
		return postgresLimits(ctx, pool, dbURL, replayKeys, v)
	}
	// Both tables vacuumed and analyzed, so that no variant meets
	// autovacuum's first pass over the replayed keys.
	st.settle = func(ctx context.Context) error {
		if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) unstuck_idem_record, bench_commit_limit`); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
		return nil
	}
	if err := prepareCommitStore(ctx, st, func() error {
		for _, q := range []string{
			`DROP TABLE IF EXISTS bench_commit_limit`,
			`CREATE TABLE bench_commit_limit (LIKE unstuck_idem_record INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY)`,
			`ALTER TABLE bench_commit_limit ADD PRIMARY KEY (id)`,
			`CREATE UNIQUE INDEX bench_commit_limit_ident ON bench_commit_limit (scope, operation, key_digest)`,
		} {
			if _, err := pool.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		pool.Close()
		return nil, err
	}
	return st, nil
}

// prepareCommitStore migrates st's store, refuses one that holds records,
// and creates the limit's table with createLimit.
func prepareCommitStore(ctx context.Context, st *commitStore, createLimit func() error) error {
	if err := st.store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := requireEmptySQL(ctx, func(q string) (bool, error) {
		var any bool
		return any, st.queryRow(ctx, q, &any)
	}); err != nil {
		return err
	}
	if err := createLimit(); err != nil {
		return fmt.Errorf("limit table: %w", err)
	}
	return nil
}

// postgresLimits are the bare handlers on pool (pgx's prepared statements)
// and pgbench -M prepared running the same statements.
func postgresLimits(ctx context.Context, pool *pgxpool.Pool, dbURL string, replayKeys int, v commitValues) (*commitLimits, error) {
	insert, complete, read := v.postgresStatements("$1", "$1")
	dir, err := os.MkdirTemp("", "bench-commits-")
	if err != nil {
		return nil, fmt.Errorf("pgbench scripts: %w", err)
	}
	scripts := map[string]string{kindFirst: filepath.Join(dir, "first.sql"), kindReplay: filepath.Join(dir, "replay.sql")}
	benchInsert, benchComplete, _ := v.postgresStatements(pgbenchFirstDigest, ":id")
	_, _, benchRead := v.postgresStatements(pgbenchReplayDigest, "")
	for kind, script := range map[string]string{
		kindFirst:  "\\set r random(1, 9000000000000000000)\n" + benchInsert + " \\gset\n" + benchComplete + ";\n",
		kindReplay: "\\set i random(0, :keys - 1)\n" + benchRead + ";\n",
	} {
		if err := os.WriteFile(scripts[kind], []byte(script), 0o600); err != nil {
			return nil, errors.Join(fmt.Errorf("pgbench scripts: %w", err), os.RemoveAll(dir))
		}
	}
	return &commitLimits{
		bareFirst: func(w http.ResponseWriter, r *http.Request) {
			var id int64
			if err := pool.QueryRow(r.Context(), insert, keyDigest(r)).Scan(&id); err != nil {
				http.Error(w, "insert: "+err.Error(), http.StatusInternalServerError)
				return
			}
			if _, err := pool.Exec(r.Context(), complete, id); err != nil {
				http.Error(w, "complete: "+err.Error(), http.StatusInternalServerError)
				return
			}
			answerCreated(w)
		},
		bareReplay: func(w http.ResponseWriter, r *http.Request) {
			if err := pool.QueryRow(r.Context(), read, keyDigest(r)).Scan(replayRow()...); err != nil {
				http.Error(w, "read: "+err.Error(), http.StatusInternalServerError)
				return
			}
			answerCreated(w)
		},
		run: func(ctx context.Context, kind string, clients int, d time.Duration, _ func(int) string) (float64, error) {
			// The engine's connections closed, so that pgbench's fit
			// under the server's max_connections.
			pool.Reset()
			return pgbench(ctx, dbURL, scripts[kind], clients, d, replayKeys)
		},
		names: map[string]string{kindFirst: "pgbench", kindReplay: "pgbench"},
		what: "PostgreSQL. engine: HTTP through the middleware on idempgx; bare HTTP: no middleware, the limit's statements " +
			"through the same pgx pool; pgbench: -M prepared, a first request INSERT … RETURNING id + UPDATE … WHERE id, a replay one SELECT.",
		close: func() { _ = os.RemoveAll(dir) },
	}, nil
}

// replayRow is somewhere to scan a row of limitReplayColumns.
func replayRow() []any {
	dest := make([]any, strings.Count(limitReplayColumns, ",")+1)
	for i := range dest {
		dest[i] = new(any)
	}
	return dest
}

// --- SQLite

// commitsSQLite opens (creating) the SQLite file at path as the store does,
// migrates it, refuses one that holds records, and creates the limit's
// table from the record's own definition, renamed and without
// AUTOINCREMENT: its columns, types, defaults and checks, the id the rowid,
// the ident's UNIQUE its one index.
func commitsSQLite(ctx context.Context, path string) (*commitStore, error) {
	db, err := idemsqlite.Open(path)
	if err != nil {
		return nil, err
	}
	st := &commitStore{
		store: idemsqlite.New(db),
		queryRow: func(ctx context.Context, q string, dest ...any) error {
			return db.QueryRowContext(ctx, q).Scan(dest...)
		},
		limits: func(ctx context.Context, v commitValues) (*commitLimits, error) {
			return sqliteLimits(ctx, db, v)
		},
		close: func() { _ = db.Close() },
	}
	if err := prepareCommitStore(ctx, st, func() error {
		var ddl string
		if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'unstuck_idem_record'`).Scan(&ddl); err != nil {
			return err
		}
		columns, ok := strings.CutPrefix(ddl, "CREATE TABLE unstuck_idem_record ")
		if !ok {
			return fmt.Errorf("unexpected definition of unstuck_idem_record: %.60q", ddl)
		}
		for _, q := range []string{`DROP TABLE IF EXISTS bench_commit_limit`,
			"CREATE TABLE bench_commit_limit " + strings.Replace(columns, " AUTOINCREMENT", "", 1)} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		var indexes int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'bench_commit_limit'`).Scan(&indexes); err != nil {
			return err
		}
		if indexes != 1 {
			return fmt.Errorf("bench_commit_limit has %d indexes, not the ident's one", indexes)
		}
		return nil
	}); err != nil {
		_ = db.Close()
		return nil, err
	}
	return st, nil
}

// sqliteStatements are the limit's statements on SQLite, every value a
// literal but these parameters: insert's digest ?1, fence ?2, lease end
// ?3, clock ?4 and retention end ?5 (Unix microseconds, as the engine's
// store binds them); complete's id ?1 and clock ?2; read's digest ?1.
func (v commitValues) sqliteStatements() (insert, complete, read string) {
	insert = fmt.Sprintf(`INSERT INTO bench_commit_limit (%s)
VALUES (%s, %s, ?1, %s, 'processing', %s, ?2, ?3, 1, 1, ?4, ?4, ?5, %s, %s)
RETURNING id`, limitInsertColumns, sqlString(v.scope, false), sqlString(v.operation, false),
		sqlString(v.fingerprint, false), sqlString(v.ownerToken, false), sqlString(v.keyHash, true), sqlString(v.traceID, false))
	complete = fmt.Sprintf(`UPDATE bench_commit_limit SET status = 'completed', result = X'%x', response_code = %d,
	last_error = '', lease_expires_at = NULL, version = version + 1, updated_at = ?2
WHERE id = ?1`, v.result, v.responseCode)
	read = fmt.Sprintf(`SELECT %s FROM bench_commit_limit WHERE scope = %s AND operation = %s AND key_digest = ?1`,
		limitReplayColumns, sqlString(v.scope, false), sqlString(v.operation, false))
	return insert, complete, read
}

// sqliteLimits are the bare handlers on db (its writes serialized, as the
// engine's store serializes its own), the single writer and the readers.
func sqliteLimits(ctx context.Context, db *sql.DB, v commitValues) (*commitLimits, error) {
	insertSQL, completeSQL, readSQL := v.sqliteStatements()
	var stmts [3]*sql.Stmt
	closeAll := func() {
		for _, s := range stmts {
			if s != nil {
				_ = s.Close()
			}
		}
	}
	for i, q := range []string{insertSQL, completeSQL, readSQL} {
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("prepare the limit's statements: %w", err)
		}
		stmts[i] = s
	}
	insert, complete, read := stmts[0], stmts[1], stmts[2]
	// The fence is the writers' own counter.
	var fence atomic.Int64
	// firstRequest inserts a processing record for digest, then completes
	// it, each in autocommit, with insert and complete prepared from
	// sqliteStatements.
	firstRequest := func(ctx context.Context, insert, complete *sql.Stmt, digest string) error {
		now := time.Now()
		var id int64
		if err := insert.QueryRowContext(ctx, digest, fence.Add(1), now.Add(idem.DefaultLease).UnixMicro(), now.UnixMicro(),
			now.Add(max(idem.DefaultLease, idem.DefaultTTL)).UnixMicro()).Scan(&id); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if _, err := complete.ExecContext(ctx, id, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("complete: %w", err)
		}
		return nil
	}
	var writer sync.Mutex
	return &commitLimits{
		bareFirst: func(w http.ResponseWriter, r *http.Request) {
			writer.Lock()
			err := firstRequest(r.Context(), insert, complete, keyDigest(r))
			writer.Unlock()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			answerCreated(w)
		},
		bareReplay: func(w http.ResponseWriter, r *http.Request) {
			if err := read.QueryRowContext(r.Context(), keyDigest(r)).Scan(replayRow()...); err != nil {
				http.Error(w, "read: "+err.Error(), http.StatusInternalServerError)
				return
			}
			answerCreated(w)
		},
		run: func(ctx context.Context, kind string, clients int, d time.Duration, key func(int) string) (float64, error) {
			if kind == kindReplay {
				return closedLoops(ctx, clients, d, func(ctx context.Context, c int) error {
					if err := read.QueryRowContext(ctx, hexSHA256(key(c))).Scan(replayRow()...); err != nil {
						return fmt.Errorf("read: %w", err)
					}
					return nil
				})
			}
			// One connection, whatever the clients: SQLite's one writer.
			conn, err := db.Conn(ctx)
			if err != nil {
				return 0, fmt.Errorf("single writer's connection: %w", err)
			}
			defer conn.Close()
			connInsert, err := conn.PrepareContext(ctx, insertSQL)
			if err != nil {
				return 0, fmt.Errorf("prepare the single writer's insert: %w", err)
			}
			defer connInsert.Close()
			connComplete, err := conn.PrepareContext(ctx, completeSQL)
			if err != nil {
				return 0, fmt.Errorf("prepare the single writer's complete: %w", err)
			}
			defer connComplete.Close()
			return closedLoops(ctx, 1, d, func(ctx context.Context, c int) error {
				return firstRequest(ctx, connInsert, connComplete, hexSHA256(key(c)))
			})
		},
		names: map[string]string{kindFirst: "single writer", kindReplay: "readers"},
		what: "SQLite. engine: HTTP through the middleware on idemsqlite; bare HTTP: no middleware, the limit's statements on " +
			"the same handle, writes serialized; single writer: one goroutine on one connection, INSERT … RETURNING id + " +
			"UPDATE … WHERE id; readers: a goroutine per client, one prepared SELECT.",
		close: closeAll,
	}, nil
}

// --- Load

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
	return closedLoops(ctx, clients, d, func(ctx context.Context, c int) error {
		_, err := post(ctx, hc, url, key(c))
		return err
	})
}

// closedLoops runs workers loops of call, each calling again as soon as
// the last call returned, for d, and returns the calls per second. The
// first error stops them all and is returned.
func closedLoops(ctx context.Context, workers int, d time.Duration, call func(ctx context.Context, worker int) error) (float64, error) {
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
	for w := range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := call(ctx, w); err != nil {
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
