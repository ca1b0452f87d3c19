package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemredis"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// The storage benchmark: what one idempotency record costs on disk (or in
// Redis's memory), the table and each index apart, against the raw
// minimum: the record's own columns in a table with one unique index on
// its ident (scope, operation, key digest), filled in the same order, so
// that its index splits its pages as the store's does. Everything above
// the raw minimum is a surrogate ID and the indexes that serve the engine's
// sweep and the console's lists and searches.
//
// With --expired, the oldest share of the records is loaded past its
// retention, and after the measure the engine's sweep removes them alone:
// its rate, and what it leaves behind in each store (free space inside
// the files, dead tuples, InnoDB's purge backlog, Redis's memory).

// rawColumns are the record's own columns, as every SQL store names them:
// what the raw minimum keeps.
const rawColumns = `scope, operation, key_digest, fingerprint, status, result, response_code, correlation_id,
	external_ref, resource_ids, last_error, owner_token, fence, lease_expires_at, attempts, version, created_at,
	updated_at, expires_at, key_hash, trace_id`

// relationSize is one table or index and its bytes.
type relationSize struct {
	Name  string
	Kind  string // "table" or "index"
	Bytes int64
}

// storageReport is what one store's records take.
type storageReport struct {
	Store   string
	Records int64
	// Engine is the store's table and each of its indexes; Raw the raw
	// minimum's.
	Engine, Raw []relationSize
	Load        time.Duration
	Note        string
	// Expired is what the load made past its retention.
	Expired expiredCounts
}

func total(rs []relationSize) int64 {
	var n int64
	for _, r := range rs {
		n += r.Bytes
	}
	return n
}

func runStorage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("storage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", "", "the store to fill: a PostgreSQL URL, sqlite:PATH, a MySQL DSN (mysql://… or user@tcp(…)/db) or redis://… (required; empty: the benchmark refuses a store that holds records)")
	keys := fs.Int("keys", 10_000_000, "idempotency records to load")
	tenants := fs.Int("tenants", 20_000, "scopes (tenants) the records spread over")
	parallel := fs.Int("parallel", 2, "concurrent loading streams (SQLite: 1)")
	batch := fs.Int("batch", 20_000, "records per seeding call")
	seed := fs.Uint64("seed", 1, "random seed: the same seed loads the same records")
	keep := fs.Bool("keep", false, "keep the raw minimum's table (or keys) after measuring")
	expired := fs.Float64("expired", 0, "share `F` of the records, the oldest, loaded past their retention, in [0, 1); above 0 the engine's sweep\nthen runs alone after the measure, and its rate and what it leaves in the store are printed")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bench storage --db STORE [flags]

Migrates the engine's key table in STORE (an empty database of its own, a
new SQLite file, or a Redis server of its own), loads --keys records
through the driver's seeding path (the records "bench seed" makes), then
measures the table and each index, per record, against the raw minimum:
the same records' columns with one unique index on the ident (Redis: one
string key per record holding its JSON), loaded in the same order.
Prints a Markdown table.

`)
		fs.PrintDefaults()
	}
	if help, err := parseArgs(fs, args, dbURL, stderr); help || err != nil {
		return err
	}
	if *keys < 1 || *tenants < 1 || *parallel < 1 || *batch < 1 {
		fmt.Fprintln(stderr, "bench storage: --keys, --tenants, --parallel and --batch must be positive")
		return errUsage
	}
	if !(*expired >= 0 && *expired < 1) {
		fmt.Fprintln(stderr, "bench storage: --expired must be in [0, 1)")
		return errUsage
	}
	r := storageRun{cfg: seedConfig{Keys: *keys, Tenants: *tenants, Span: storageSpan, Now: time.Now().UTC(),
		Parallel: *parallel, Batch: *batch, Seed: *seed, Log: stderr}, keep: *keep, sweep: *expired > 0, out: stdout}
	if r.sweep {
		// The records spread over the span, oldest first: with a retention
		// of (1 - F) × span the oldest share F has ended it. At least 1 ns,
		// since 0 is the generator's default retention.
		r.cfg.Retention = max(time.Duration((1-*expired)*float64(storageSpan)), 1)
	}
	switch u := *dbURL; {
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return storagePostgres(ctx, u, r)
	case strings.HasPrefix(u, "sqlite:"):
		r.cfg.Parallel = 1
		return storageSQLite(ctx, strings.TrimPrefix(u, "sqlite:"), r)
	case strings.HasPrefix(u, "redis://"), strings.HasPrefix(u, "rediss://"):
		return storageRedis(ctx, u, r)
	default:
		return storageMySQL(ctx, u, r)
	}
}

// storageSpan is how far back the loaded records go.
const storageSpan = 24 * time.Hour

// storageRun is one run of the storage benchmark.
type storageRun struct {
	cfg  seedConfig
	keep bool // keep the raw minimum
	// sweep runs the engine's sweep after the measure (--expired).
	sweep bool
	out   io.Writer
}

// loadRecords seeds r.cfg.Keys records of the generator into s and counts
// those past their retention.
func (r storageRun) loadRecords(ctx context.Context, s idemdriver.Seeder) (time.Duration, expiredCounts, error) {
	g := newGenerator(r.cfg)
	c := &expiredSeeder{Seeder: s, now: r.cfg.Now}
	t0 := time.Now()
	err := g.loadKeys(ctx, c, logTo(r.cfg.Log))
	return time.Since(t0), c.counts(), err
}

// finish prints rep; with --expired it then sweeps s with the engine and
// prints what the sweep left, read by lo.
func (r storageRun) finish(ctx context.Context, rep storageReport, s idemdriver.Store, lo leftover) error {
	printStorage(r.out, rep)
	if !r.sweep {
		return nil
	}
	sr, err := sweepAlone(ctx, s, lo)
	if err != nil {
		return fmt.Errorf("%s: %w", rep.Store, err)
	}
	printLeftover(r.out, rep, sr)
	return nil
}

func printStorage(w io.Writer, rep storageReport) {
	n := float64(rep.Records)
	engine, raw := total(rep.Engine), total(rep.Raw)
	fmt.Fprintf(w, "%s: %d records, loaded in %s%s\n\n", rep.Store, rep.Records, rep.Load.Round(time.Second), rep.Note)
	fmt.Fprintln(w, "| relation | kind | MiB | bytes/record |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range rep.Engine {
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f |\n", r.Name, r.Kind, float64(r.Bytes)/(1<<20), float64(r.Bytes)/n)
	}
	fmt.Fprintf(w, "| **engine, total** | | **%.1f** | **%.1f** |\n", float64(engine)/(1<<20), float64(engine)/n)
	for _, r := range rep.Raw {
		fmt.Fprintf(w, "| raw minimum: %s | %s | %.1f | %.1f |\n", r.Name, r.Kind, float64(r.Bytes)/(1<<20), float64(r.Bytes)/n)
	}
	fmt.Fprintf(w, "| **raw minimum, total** | | **%.1f** | **%.1f** |\n", float64(raw)/(1<<20), float64(raw)/n)
	if raw > 0 {
		fmt.Fprintf(w, "\nengine ÷ raw minimum: %.2f\n", float64(engine)/float64(raw))
	}
}

// --- PostgreSQL

func storagePostgres(ctx context.Context, dbURL string, r storageRun) error {
	rep := storageReport{Store: "PostgreSQL"}
	pool, err := openPool(ctx, dbURL, r.cfg.Parallel+2)
	if err != nil {
		return err
	}
	defer pool.Close()
	s := idempgx.New(pool)
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	if err := requireEmptySQL(ctx, func(q string) (bool, error) {
		var any bool
		return any, pool.QueryRow(ctx, q).Scan(&any)
	}); err != nil {
		return err
	}
	if rep.Load, rep.Expired, err = r.loadRecords(ctx, s); err != nil {
		return err
	}
	if err := s.Analyze(ctx); err != nil {
		return err
	}
	// The raw minimum: created with its one index, then filled in the
	// engine's insertion order.
	for _, q := range []string{
		`DROP TABLE IF EXISTS bench_raw_record`,
		`CREATE TABLE bench_raw_record AS SELECT ` + rawColumns + ` FROM unstuck_idem_record WITH NO DATA`,
		`CREATE UNIQUE INDEX bench_raw_record_ident ON bench_raw_record (scope, operation, key_digest)`,
		`INSERT INTO bench_raw_record SELECT ` + rawColumns + ` FROM unstuck_idem_record ORDER BY id`,
		`VACUUM (ANALYZE) bench_raw_record`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("raw minimum: %w", err)
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM unstuck_idem_record`).Scan(&rep.Records); err != nil {
		return err
	}
	if rep.Engine, err = pgSizes(ctx, pool, "unstuck_idem_record"); err != nil {
		return err
	}
	if rep.Raw, err = pgSizes(ctx, pool, "bench_raw_record"); err != nil {
		return err
	}
	if !r.keep {
		if _, err := pool.Exec(ctx, `DROP TABLE bench_raw_record`); err != nil {
			return fmt.Errorf("drop the raw minimum: %w", err)
		}
	}
	if !r.sweep {
		return r.finish(ctx, rep, s, leftover{})
	}
	// The sweep runs on a connection of its own, whose pending statistics
	// pgLeftover can then flush before reading them.
	sweepPool, err := openPool(ctx, dbURL, 1)
	if err != nil {
		return fmt.Errorf("the sweep's connection: %w", err)
	}
	defer sweepPool.Close()
	return r.finish(ctx, rep, idempgx.New(sweepPool), pgLeftover(pool, sweepPool))
}

// pgLeftover reads the key table's size, its indexes' and its dead tuples,
// after flushing the statistics pending on sweepPool's one connection; it
// then runs VACUUM on the table.
func pgLeftover(pool, sweepPool *pgxpool.Pool) leftover {
	const source = "pg_stat_user_tables, after pg_stat_force_next_flush() on the sweep's connection"
	return leftover{
		read: func(ctx context.Context) ([]figure, error) {
			if err := pgFlushStats(ctx, sweepPool); err != nil {
				return nil, err
			}
			var table, indexes, dead, autovacuums int64
			if err := pool.QueryRow(ctx, `SELECT pg_table_size(relid), pg_indexes_size(relid), n_dead_tup, autovacuum_count
				FROM pg_stat_user_tables WHERE relid = 'unstuck_idem_record'::regclass`).Scan(&table, &indexes, &dead, &autovacuums); err != nil {
				return nil, fmt.Errorf("table statistics: %w", err)
			}
			return []figure{
				{Name: "table", Unit: unitBytes, Source: "pg_table_size", Value: table},
				{Name: "indexes", Unit: unitBytes, Source: "pg_indexes_size", Value: indexes},
				{Name: "dead tuples", Unit: "tuples", Source: "n_dead_tup of " + source, Value: dead},
				{Name: "autovacuums", Unit: "runs", Source: "autovacuum_count of " + source, Value: autovacuums},
			}, nil
		},
		then: func(ctx context.Context, _ sweepReport) (string, string, error) {
			t0 := time.Now()
			if _, err := pool.Exec(ctx, `VACUUM unstuck_idem_record`); err != nil {
				return "", "", fmt.Errorf("vacuum: %w", err)
			}
			return "after VACUUM", fmt.Sprintf("VACUUM unstuck_idem_record: %.3f s. It makes the dead tuples' space free for new rows, "+
				"and gives back to the file system only empty pages at the end of the table (VACUUM FULL rewrites it).", time.Since(t0).Seconds()), nil
		},
	}
}

// pgFlushStats makes the statistics pending on pool's connection visible
// to the others (pg_stat_force_next_flush, PostgreSQL 15 and later; an
// earlier server's collector has them within half a second: it waits one).
func pgFlushStats(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "42883": // undefined_function
		select {
		case <-time.After(time.Second):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	default:
		return fmt.Errorf("flush the sweep's statistics: %w", err)
	}
}

// pgSizes returns table's size (heap, TOAST, free space and visibility
// maps) and each of its indexes'.
func pgSizes(ctx context.Context, pool *pgxpool.Pool, table string) ([]relationSize, error) {
	out := []relationSize{{Name: table, Kind: "table"}}
	if err := pool.QueryRow(ctx, `SELECT pg_table_size($1::regclass)`, table).Scan(&out[0].Bytes); err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
		FROM pg_index WHERE indrelid = $1::regclass ORDER BY pg_relation_size(indexrelid) DESC`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		r := relationSize{Kind: "index"}
		if err := rows.Scan(&r.Name, &r.Bytes); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// requireEmptySQL refuses a key table that already holds records.
func requireEmptySQL(ctx context.Context, exists func(q string) (bool, error)) error {
	any, err := exists(`SELECT EXISTS (SELECT 1 FROM unstuck_idem_record)`)
	if err != nil {
		return err
	}
	if any {
		return errors.New("the key records are not empty: measure on a new database")
	}
	return nil
}

// --- SQLite and MySQL

// sqlStorage is the storage benchmark on a database/sql store.
type sqlStorage struct {
	name  string
	db    *sql.DB
	store interface {
		Migrate(context.Context) error
		idemdriver.Seeder
		idemdriver.Store
	}
	// raw builds the raw minimum, bench_raw_record, and brings the
	// statistics sizes reads up to date.
	raw   []string
	sizes func(ctx context.Context, db *sql.DB, table string) ([]relationSize, error)
	note  string
	left  leftover // what the sweep leaves, with --expired
}

func (st sqlStorage) measure(ctx context.Context, r storageRun) error {
	rep := storageReport{Store: st.name, Note: st.note}
	if err := st.store.Migrate(ctx); err != nil {
		return err
	}
	if err := requireEmptySQL(ctx, func(q string) (bool, error) {
		var any bool
		return any, st.db.QueryRowContext(ctx, q).Scan(&any)
	}); err != nil {
		return err
	}
	var err error
	if rep.Load, rep.Expired, err = r.loadRecords(ctx, st.store); err != nil {
		return err
	}
	for _, q := range append([]string{`DROP TABLE IF EXISTS bench_raw_record`}, st.raw...) {
		if _, err := st.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("raw minimum: %w", err)
		}
	}
	if err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM unstuck_idem_record`).Scan(&rep.Records); err != nil {
		return err
	}
	if rep.Engine, err = st.sizes(ctx, st.db, "unstuck_idem_record"); err != nil {
		return err
	}
	if rep.Raw, err = st.sizes(ctx, st.db, "bench_raw_record"); err != nil {
		return err
	}
	if !r.keep {
		if _, err := st.db.ExecContext(ctx, `DROP TABLE bench_raw_record`); err != nil {
			return fmt.Errorf("drop the raw minimum: %w", err)
		}
	}
	return r.finish(ctx, rep, st.store, st.left)
}

func storageSQLite(ctx context.Context, path string, r storageRun) error {
	db, err := idemsqlite.Open(path)
	if err != nil {
		return err
	}
	defer db.Close()
	return sqlStorage{name: "SQLite", db: db, store: idemsqlite.New(db), sizes: sqliteSizes, raw: []string{
		`CREATE TABLE bench_raw_record AS SELECT ` + rawColumns + ` FROM unstuck_idem_record WHERE 0`,
		`CREATE UNIQUE INDEX bench_raw_record_ident ON bench_raw_record (scope, operation, key_digest)`,
		`INSERT INTO bench_raw_record SELECT ` + rawColumns + ` FROM unstuck_idem_record ORDER BY id`,
	}, left: sqliteLeftover(db, path, r.keep)}.measure(ctx, r)
}

// sqliteLeftover reads the database file's pages, its free ones and the
// WAL file's size; then says what would return the free pages.
func sqliteLeftover(db *sql.DB, path string, keep bool) leftover {
	return leftover{
		read: func(ctx context.Context) ([]figure, error) {
			var pages, pageSize, free int64
			if err := db.QueryRowContext(ctx, `SELECT c.page_count, s.page_size, f.freelist_count
				FROM pragma_page_count() c, pragma_page_size() s, pragma_freelist_count() f`).Scan(&pages, &pageSize, &free); err != nil {
				return nil, fmt.Errorf("pages: %w", err)
			}
			var wal int64
			if fi, err := os.Stat(path + "-wal"); err == nil {
				wal = fi.Size()
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("the WAL file: %w", err)
			}
			return []figure{
				{Name: "database file", Unit: unitBytes, Source: "PRAGMA page_count × page_size", Value: pages * pageSize},
				{Name: "free pages", Unit: "pages", Source: fmt.Sprintf("PRAGMA freelist_count (%d bytes a page)", pageSize), Value: free},
				{Name: "WAL file", Unit: unitBytes, Source: "the size of " + path + "-wal", Value: wal},
			}, nil
		},
		then: func(ctx context.Context, sr sweepReport) (string, string, error) {
			var mode int
			if err := db.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
				return "", "", fmt.Errorf("auto_vacuum: %w", err)
			}
			free := sr.value(1, "free pages")
			line := fmt.Sprintf("The sweep freed %d pages.", free-sr.value(0, "free pages"))
			if !keep {
				line += " (The free pages before it are the raw minimum's, dropped.)"
			}
			switch mode {
			case 0:
				line += " The file does not shrink without VACUUM: new records reuse the free pages. auto_vacuum is none, so PRAGMA incremental_vacuum" +
					" releases nothing; it needs auto_vacuum = incremental, set before the first table or by a VACUUM."
			case 1:
				line += " auto_vacuum is full: each commit gives the free pages back to the file system."
			default:
				line += fmt.Sprintf(" The file does not shrink without VACUUM or PRAGMA incremental_vacuum (auto_vacuum is incremental), which would release its %d free pages.", free)
			}
			return "", line, nil
		},
	}
}

// sqliteSizes returns the pages (dbstat) of table and of each index on it.
func sqliteSizes(ctx context.Context, db *sql.DB, table string) ([]relationSize, error) {
	rows, err := db.QueryContext(ctx, `SELECT s.name, CASE WHEN s.name = ? THEN 'table' ELSE 'index' END, sum(s.pgsize)
		FROM dbstat s JOIN sqlite_schema m ON m.name = s.name
		WHERE m.tbl_name = ? GROUP BY s.name ORDER BY s.name <> ?, sum(s.pgsize) DESC`, table, table, table)
	if err != nil {
		return nil, fmt.Errorf("dbstat: %w", err)
	}
	defer rows.Close()
	var out []relationSize
	for rows.Next() {
		var r relationSize
		if err := rows.Scan(&r.Name, &r.Kind, &r.Bytes); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func storageMySQL(ctx context.Context, dsn string, r storageRun) error {
	db, err := idemmysql.Open(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	// InnoDB clusters a table without a primary key on its first unique
	// index of NOT NULL columns: the raw minimum is one B-tree.
	return sqlStorage{name: "MySQL/MariaDB (InnoDB)", db: db, store: idemmysql.New(db), sizes: mysqlSizes, raw: []string{
		`CREATE TABLE bench_raw_record ENGINE = InnoDB AS SELECT ` + rawColumns + ` FROM unstuck_idem_record WHERE 0`,
		`ALTER TABLE bench_raw_record ADD UNIQUE KEY bench_raw_record_ident (scope, operation, key_digest)`,
		`INSERT INTO bench_raw_record SELECT ` + rawColumns + ` FROM unstuck_idem_record ORDER BY id`,
		`ANALYZE TABLE unstuck_idem_record, bench_raw_record`,
	}, note: " (sizes: InnoDB's index statistics, allocated pages, after ANALYZE TABLE; BLOBs stored off-page count with their index)",
		left: mysqlLeftover(db)}.measure(ctx, r)
}

// InnoDB's purge after the sweep: mysqlLeftover waits for the history list
// to fall below purgedBelow, sampling it every second, at most purgeWait
// after the sweep ended.
const (
	purgedBelow = 1000
	purgeWait   = time.Minute
)

// mysqlLeftover reads InnoDB's history list length and the key table's
// sizes; then waits for the purge.
func mysqlLeftover(db *sql.DB) leftover {
	return leftover{
		read: func(ctx context.Context) ([]figure, error) {
			// The history list first: right after the sweep.
			history, err := innodbHistory(ctx, db)
			if err != nil {
				return nil, err
			}
			if _, err := db.ExecContext(ctx, `ANALYZE TABLE unstuck_idem_record`); err != nil {
				return nil, fmt.Errorf("analyze: %w", err)
			}
			var data, index, free int64
			if err := db.QueryRowContext(ctx, `SELECT data_length, index_length, data_free FROM information_schema.TABLES
				WHERE table_schema = DATABASE() AND table_name = 'unstuck_idem_record'`).Scan(&data, &index, &free); err != nil {
				return nil, fmt.Errorf("table sizes: %w", err)
			}
			const tables = "information_schema.TABLES, after ANALYZE TABLE"
			return []figure{
				{Name: "data_length", Unit: unitBytes, Source: tables + " (the clustered index: the rows)", Value: data},
				{Name: "index_length", Unit: unitBytes, Source: tables + " (the secondary indexes)", Value: index},
				{Name: "data_free", Unit: unitBytes, Source: tables + " (free extents of the tablespace)", Value: free},
				{Name: "history list length", Unit: "undo logs", Source: "SHOW ENGINE INNODB STATUS, server-wide: committed transactions' changes not purged yet", Value: history},
			}, nil
		},
		then: func(ctx context.Context, sr sweepReport) (string, string, error) {
			for {
				n, err := innodbHistory(ctx, db)
				if err != nil {
					return "", "", err
				}
				waited := time.Since(sr.Ended)
				if n < purgedBelow {
					return "after the purge", fmt.Sprintf("InnoDB's purge: the history list length was %d, below %d, %.1f s after the sweep ended (sampled every second).",
						n, purgedBelow, waited.Seconds()), nil
				}
				if waited >= purgeWait {
					return fmt.Sprintf("after %.0f s of purge", purgeWait.Seconds()), fmt.Sprintf("InnoDB's purge: the history list length was still %d, not below %d, %.0f s after the sweep ended (sampled every second).",
						n, purgedBelow, waited.Seconds()), nil
				}
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
					return "", "", ctx.Err()
				}
			}
		},
	}
}

var historyLength = regexp.MustCompile(`History list length (\d+)`)

// innodbHistory returns InnoDB's history list length: the committed
// transactions whose undo logs the purge has not processed yet.
func innodbHistory(ctx context.Context, db *sql.DB) (int64, error) {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, `SHOW ENGINE INNODB STATUS`).Scan(&typ, &name, &status); err != nil {
		return 0, fmt.Errorf("SHOW ENGINE INNODB STATUS: %w", err)
	}
	m := historyLength.FindStringSubmatch(status)
	if m == nil {
		return 0, errors.New("SHOW ENGINE INNODB STATUS has no history list length")
	}
	return strconv.ParseInt(m[1], 10, 64)
}

// mysqlSizes returns the allocated pages of each index of table (the
// clustered one, PRIMARY or the first unique key, holds the rows: it is
// named the table), from mysql.innodb_index_stats.
func mysqlSizes(ctx context.Context, db *sql.DB, table string) ([]relationSize, error) {
	var page int64
	if err := db.QueryRowContext(ctx, `SELECT @@innodb_page_size`).Scan(&page); err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT s.index_name, s.stat_value FROM mysql.innodb_index_stats s
		WHERE s.database_name = DATABASE() AND s.table_name = ? AND s.stat_name = 'size' ORDER BY s.stat_value DESC`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []relationSize
	for rows.Next() {
		var (
			r     relationSize
			pages int64
		)
		if err := rows.Scan(&r.Name, &pages); err != nil {
			return nil, err
		}
		r.Bytes, r.Kind = pages*page, "index"
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// The clustered index is the table: the first listed is the largest.
	for i := range out {
		if out[i].Name == "PRIMARY" || (table == "bench_raw_record" && out[i].Name == "bench_raw_record_ident") {
			out[i].Name, out[i].Kind = table+" (clustered: "+out[i].Name+")", "table"
			out[0], out[i] = out[i], out[0]
		}
	}
	return out, nil
}

// --- Redis

func storageRedis(ctx context.Context, url string, r storageRun) error {
	rep := storageReport{Store: "Redis"}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if n, err := c.DBSize(ctx).Result(); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("the Redis database holds %d keys: measure on a server of its own", n)
	}
	s, err := idemredis.New(ctx, c, idemredis.Config{AcceptDurabilityRisk: true, ExpiryGrace: -1})
	if err != nil {
		return err
	}
	before, err := redisMemory(ctx, c, "used_memory")
	if err != nil {
		return err
	}
	if rep.Load, rep.Expired, err = r.loadRecords(ctx, s); err != nil {
		return err
	}
	after, err := redisMemory(ctx, c, "used_memory")
	if err != nil {
		return err
	}
	rep.Records = int64(r.cfg.Keys)
	rep.Engine = []relationSize{{Name: "records and the store's indexes (used_memory)", Kind: "memory", Bytes: after - before}}
	// The raw minimum: one string per record, its ident the key, the
	// record's JSON the value.
	g := newGenerator(r.cfg)
	rawBefore := after
	const rawPrefix = "bench:raw:"
	for lo := 0; lo < r.cfg.Keys; lo += r.cfg.Batch {
		p := c.Pipeline()
		for i := lo; i < min(lo+r.cfg.Batch, r.cfg.Keys); i++ {
			rec := g.keyRecord(i)
			v, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			p.Set(ctx, rawPrefix+rec.Scope+"\x00"+rec.Operation+"\x00"+rec.KeyDigest, v, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	rawAfter, err := redisMemory(ctx, c, "used_memory")
	if err != nil {
		return err
	}
	rep.Raw = []relationSize{{Name: "one string per record (used_memory)", Kind: "memory", Bytes: rawAfter - rawBefore}}
	rep.Note = " (used_memory before and after loading)"
	if !r.keep {
		if err := unlinkMatching(ctx, c, rawPrefix+"*"); err != nil {
			return fmt.Errorf("drop the raw minimum: %w", err)
		}
	}
	return r.finish(ctx, rep, s, redisLeftover(c))
}

// redisLeftover reads the server's memory and the database's keys.
func redisLeftover(c *redis.Client) leftover {
	return leftover{read: func(ctx context.Context) ([]figure, error) {
		var fs []figure
		for _, f := range []struct{ name, source string }{
			{"used_memory", "INFO memory: what Redis allocated"},
			{"used_memory_rss", "INFO memory: the process's resident pages, which the allocator gives back late if at all"},
		} {
			n, err := redisMemory(ctx, c, f.name)
			if err != nil {
				return nil, err
			}
			fs = append(fs, figure{Name: f.name, Unit: unitBytes, Source: f.source, Value: n})
		}
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			return nil, fmt.Errorf("DBSIZE: %w", err)
		}
		return append(fs, figure{Name: "keys", Unit: "keys", Source: "DBSIZE (records, and the store's few index keys)", Value: n}), nil
	}}
}

// unlinkMatching unlinks the keys matching pattern.
func unlinkMatching(ctx context.Context, c *redis.Client, pattern string) error {
	iter := c.Scan(ctx, 0, pattern, 10_000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 10_000 {
			if err := c.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := c.Unlink(ctx, batch...).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

// redisMemory returns field of INFO memory (used_memory, used_memory_rss).
func redisMemory(ctx context.Context, c *redis.Client, field string) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO memory: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO memory has no %s", field)
}

// --- What the sweep leaves

// expiredCounts are the records a load made past their retention, by what
// the engine's sweep does with them.
type expiredCounts struct {
	// Finished records (completed, failed, unavailable): it deletes them.
	Finished int64
	// Abandoned ones (processing, lease ended): it escalates them to
	// pending.
	Abandoned int64
	// Kept: pending, or processing under a live lease.
	Kept int64
}

func (e expiredCounts) total() int64 { return e.Finished + e.Abandoned + e.Kept }

// expiredSeeder seeds through its Seeder, counting the records past their
// retention at now; safe for concurrent use.
type expiredSeeder struct {
	idemdriver.Seeder
	now                       time.Time
	finished, abandoned, kept atomic.Int64
}

func (s *expiredSeeder) SeedRecords(ctx context.Context, recs []idemdriver.Record) error {
	for _, r := range recs {
		switch {
		case r.ExpiresAt.After(s.now):
		case r.Status == idemdriver.StatusPending, r.Status == idemdriver.StatusProcessing && r.LeaseExpiresAt.After(s.now):
			s.kept.Add(1)
		case r.Status == idemdriver.StatusProcessing:
			s.abandoned.Add(1)
		default:
			s.finished.Add(1)
		}
	}
	return s.Seeder.SeedRecords(ctx, recs)
}

func (s *expiredSeeder) counts() expiredCounts {
	return expiredCounts{Finished: s.finished.Load(), Abandoned: s.abandoned.Load(), Kept: s.kept.Load()}
}

// unitBytes is the unit of a figure in bytes, printed in MiB.
const unitBytes = "bytes"

// figure is one number of what a store holds: its name, unit and value,
// and where it was read.
type figure struct {
	Name, Unit, Source string
	Value              int64
}

// leftover is how the sweep benchmark reads one store.
type leftover struct {
	// read returns the store's figures at one moment: the same names,
	// units and order at every call.
	read func(ctx context.Context) ([]figure, error)
	// then, if not nil, runs after the sweep and its read (PostgreSQL's
	// VACUUM, InnoDB's purge) and returns a line saying what it did, and
	// the name of the moment after it, when read runs again: "" for none.
	then func(ctx context.Context, sr sweepReport) (stage, line string, err error)
}

// sweepReport is the engine's sweep on one store and what it left.
type sweepReport struct {
	Result  idemdriver.SweepResult
	Took    time.Duration
	Ended   time.Time
	Stages  []string   // the moments read: before the sweep, after it, ...
	Figures [][]figure // read at each stage
	Then    string     // what ran after the sweep
}

// value is the figure named name read at stage i.
func (sr sweepReport) value(i int, name string) int64 {
	for _, f := range sr.Figures[i] {
		if f.Name == name {
			return f.Value
		}
	}
	return 0
}

// storageSweepBatch is the batch of the sweep that runs alone.
const storageSweepBatch = 1000

// sweepAlone reads lo, runs the engine's sweep over s to completion with
// no other load (batches of 1,000 back to back: the store's own rate, not
// the engine's default pace), reads lo again, then runs
// lo.then and reads lo after it if it names a stage.
func sweepAlone(ctx context.Context, s idemdriver.Store, lo leftover) (sweepReport, error) {
	sr := sweepReport{Stages: []string{"before the sweep", "after the sweep"}}
	before, err := lo.read(ctx)
	if err != nil {
		return sr, fmt.Errorf("before the sweep: %w", err)
	}
	engine, err := idem.New(s, idem.Config{DisableSealing: true, SweepBatch: storageSweepBatch, SweepPause: -1})
	if err != nil {
		return sr, fmt.Errorf("the sweep's engine: %w", err)
	}
	t0 := time.Now()
	sr.Result, err = engine.Sweep(ctx)
	sr.Ended = time.Now()
	sr.Took = sr.Ended.Sub(t0)
	if err != nil {
		return sr, fmt.Errorf("sweep, after %d deleted: %w", sr.Result.Deleted, err)
	}
	after, err := lo.read(ctx)
	if err != nil {
		return sr, fmt.Errorf("after the sweep: %w", err)
	}
	sr.Figures = [][]figure{before, after}
	if lo.then == nil {
		return sr, nil
	}
	stage, line, err := lo.then(ctx, sr)
	if err != nil {
		return sr, fmt.Errorf("after the sweep: %w", err)
	}
	sr.Then = line
	if stage == "" {
		return sr, nil
	}
	last, err := lo.read(ctx)
	if err != nil {
		return sr, fmt.Errorf("%s: %w", stage, err)
	}
	sr.Stages, sr.Figures = append(sr.Stages, stage), append(sr.Figures, last)
	return sr, nil
}

// printLeftover prints the sweep of sr after the storage report rep: what
// the load made past its retention, the sweep's rate, and a table of what
// the store held at each stage.
func printLeftover(w io.Writer, rep storageReport, sr sweepReport) {
	e := rep.Expired
	fmt.Fprintf(w, "\n### The engine's sweep, alone\n\n")
	fmt.Fprintf(w, "past their retention at load: %d of %d records (%d finished: the sweep deletes them; %d abandoned: it escalates them to pending; %d pending or leased: kept)\n\n",
		e.total(), rep.Records, e.Finished, e.Abandoned, e.Kept)
	fmt.Fprintf(w, "sweep: %d deleted, %d escalated in %.3f s: %.0f deleted/s (idem.Engine.Sweep, batch %d, no pause)\n\n",
		sr.Result.Deleted, sr.Result.Escalated, sr.Took.Seconds(), float64(sr.Result.Deleted)/sr.Took.Seconds(), storageSweepBatch)
	if more := int64(sr.Result.Deleted) - e.Finished; more > 0 {
		fmt.Fprintf(w, "(%d of them reached their retention after the load, before the sweep.)\n\n", more)
	}
	fmt.Fprintf(w, "| left | %s | unit | read from |\n", strings.Join(sr.Stages, " | "))
	fmt.Fprintf(w, "|---|%s---|---|\n", strings.Repeat("---|", len(sr.Stages)))
	for i, f := range sr.Figures[0] {
		unit := f.Unit
		if unit == unitBytes {
			unit = "MiB"
		}
		fmt.Fprintf(w, "| %s |", f.Name)
		for _, at := range sr.Figures {
			if f.Unit == unitBytes {
				fmt.Fprintf(w, " %.2f |", float64(at[i].Value)/(1<<20))
			} else {
				fmt.Fprintf(w, " %d |", at[i].Value)
			}
		}
		fmt.Fprintf(w, " %s | %s |\n", unit, f.Source)
	}
	if sr.Then != "" {
		fmt.Fprintf(w, "\n%s\n", sr.Then)
	}
}
