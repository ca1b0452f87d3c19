package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

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
	cfg := seedConfig{Keys: *keys, Tenants: *tenants, Span: 24 * time.Hour, Now: time.Now().UTC(),
		Parallel: *parallel, Batch: *batch, Seed: *seed, Log: stderr}
	var (
		rep storageReport
		err error
	)
	switch u := *dbURL; {
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		rep, err = storagePostgres(ctx, u, cfg, *keep)
	case strings.HasPrefix(u, "sqlite:"):
		cfg.Parallel = 1
		rep, err = storageSQLite(ctx, strings.TrimPrefix(u, "sqlite:"), cfg, *keep)
	case strings.HasPrefix(u, "redis://"), strings.HasPrefix(u, "rediss://"):
		rep, err = storageRedis(ctx, u, cfg, *keep)
	default:
		rep, err = storageMySQL(ctx, u, cfg, *keep)
	}
	if err != nil {
		return err
	}
	printStorage(stdout, rep)
	return nil
}

// loadRecords seeds cfg.Keys records of the generator into s.
func loadRecords(ctx context.Context, s idemdriver.Seeder, cfg seedConfig) (time.Duration, error) {
	g := newGenerator(cfg)
	t0 := time.Now()
	err := g.loadKeys(ctx, s, logTo(cfg.Log))
	return time.Since(t0), err
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

func storagePostgres(ctx context.Context, dbURL string, cfg seedConfig, keep bool) (storageReport, error) {
	rep := storageReport{Store: "PostgreSQL"}
	pool, err := openPool(ctx, dbURL, cfg.Parallel+2)
	if err != nil {
		return rep, err
	}
	defer pool.Close()
	s := idempgx.New(pool)
	if err := s.Migrate(ctx); err != nil {
		return rep, err
	}
	if err := requireEmptySQL(ctx, func(q string) (bool, error) {
		var any bool
		return any, pool.QueryRow(ctx, q).Scan(&any)
	}); err != nil {
		return rep, err
	}
	if rep.Load, err = loadRecords(ctx, s, cfg); err != nil {
		return rep, err
	}
	if err := s.Analyze(ctx); err != nil {
		return rep, err
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
			return rep, fmt.Errorf("raw minimum: %w", err)
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM unstuck_idem_record`).Scan(&rep.Records); err != nil {
		return rep, err
	}
	if rep.Engine, err = pgSizes(ctx, pool, "unstuck_idem_record"); err != nil {
		return rep, err
	}
	if rep.Raw, err = pgSizes(ctx, pool, "bench_raw_record"); err != nil {
		return rep, err
	}
	if !keep {
		_, err = pool.Exec(ctx, `DROP TABLE bench_raw_record`)
	}
	return rep, err
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
	}
	// raw builds the raw minimum, bench_raw_record, and brings the
	// statistics sizes reads up to date.
	raw   []string
	sizes func(ctx context.Context, db *sql.DB, table string) ([]relationSize, error)
	note  string
}

func (st sqlStorage) measure(ctx context.Context, cfg seedConfig, keep bool) (storageReport, error) {
	rep := storageReport{Store: st.name, Note: st.note}
	if err := st.store.Migrate(ctx); err != nil {
		return rep, err
	}
	if err := requireEmptySQL(ctx, func(q string) (bool, error) {
		var any bool
		return any, st.db.QueryRowContext(ctx, q).Scan(&any)
	}); err != nil {
		return rep, err
	}
	var err error
	if rep.Load, err = loadRecords(ctx, st.store, cfg); err != nil {
		return rep, err
	}
	for _, q := range append([]string{`DROP TABLE IF EXISTS bench_raw_record`}, st.raw...) {
		if _, err := st.db.ExecContext(ctx, q); err != nil {
			return rep, fmt.Errorf("raw minimum: %w", err)
		}
	}
	if err := st.db.QueryRowContext(ctx, `SELECT count(*) FROM unstuck_idem_record`).Scan(&rep.Records); err != nil {
		return rep, err
	}
	if rep.Engine, err = st.sizes(ctx, st.db, "unstuck_idem_record"); err != nil {
		return rep, err
	}
	if rep.Raw, err = st.sizes(ctx, st.db, "bench_raw_record"); err != nil {
		return rep, err
	}
	if !keep {
		_, err = st.db.ExecContext(ctx, `DROP TABLE bench_raw_record`)
	}
	return rep, err
}

func storageSQLite(ctx context.Context, path string, cfg seedConfig, keep bool) (storageReport, error) {
	db, err := idemsqlite.Open(path)
	if err != nil {
		return storageReport{}, err
	}
	defer db.Close()
	return sqlStorage{name: "SQLite", db: db, store: idemsqlite.New(db), sizes: sqliteSizes, raw: []string{
		`CREATE TABLE bench_raw_record AS SELECT ` + rawColumns + ` FROM unstuck_idem_record WHERE 0`,
		`CREATE UNIQUE INDEX bench_raw_record_ident ON bench_raw_record (scope, operation, key_digest)`,
		`INSERT INTO bench_raw_record SELECT ` + rawColumns + ` FROM unstuck_idem_record ORDER BY id`,
	}}.measure(ctx, cfg, keep)
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

func storageMySQL(ctx context.Context, dsn string, cfg seedConfig, keep bool) (storageReport, error) {
	db, err := idemmysql.Open(dsn)
	if err != nil {
		return storageReport{}, err
	}
	defer db.Close()
	// InnoDB clusters a table without a primary key on its first unique
	// index of NOT NULL columns: the raw minimum is one B-tree.
	return sqlStorage{name: "MySQL/MariaDB (InnoDB)", db: db, store: idemmysql.New(db), sizes: mysqlSizes, raw: []string{
		`CREATE TABLE bench_raw_record ENGINE = InnoDB AS SELECT ` + rawColumns + ` FROM unstuck_idem_record WHERE 0`,
		`ALTER TABLE bench_raw_record ADD UNIQUE KEY bench_raw_record_ident (scope, operation, key_digest)`,
		`INSERT INTO bench_raw_record SELECT ` + rawColumns + ` FROM unstuck_idem_record ORDER BY id`,
		`ANALYZE TABLE unstuck_idem_record, bench_raw_record`,
	}, note: " (sizes: InnoDB's index statistics, allocated pages, after ANALYZE TABLE; BLOBs stored off-page count with their index)"}.measure(ctx, cfg, keep)
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

func storageRedis(ctx context.Context, url string, cfg seedConfig, keep bool) (storageReport, error) {
	rep := storageReport{Store: "Redis"}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return rep, err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if n, err := c.DBSize(ctx).Result(); err != nil {
		return rep, err
	} else if n > 0 {
		return rep, fmt.Errorf("the Redis database holds %d keys: measure on a server of its own", n)
	}
	s, err := idemredis.New(ctx, c, idemredis.Config{AcceptDurabilityRisk: true, ExpiryGrace: -1})
	if err != nil {
		return rep, err
	}
	before, err := redisUsedMemory(ctx, c)
	if err != nil {
		return rep, err
	}
	if rep.Load, err = loadRecords(ctx, s, cfg); err != nil {
		return rep, err
	}
	after, err := redisUsedMemory(ctx, c)
	if err != nil {
		return rep, err
	}
	rep.Records = int64(cfg.Keys)
	rep.Engine = []relationSize{{Name: "records and the store's indexes (used_memory)", Kind: "memory", Bytes: after - before}}
	// The raw minimum: one string per record, its ident the key, the
	// record's JSON the value.
	g := newGenerator(cfg)
	rawBefore := after
	const rawPrefix = "bench:raw:"
	for lo := 0; lo < cfg.Keys; lo += cfg.Batch {
		p := c.Pipeline()
		for i := lo; i < min(lo+cfg.Batch, cfg.Keys); i++ {
			r := g.keyRecord(i)
			v, err := json.Marshal(r)
			if err != nil {
				return rep, err
			}
			p.Set(ctx, rawPrefix+r.Scope+"\x00"+r.Operation+"\x00"+r.KeyDigest, v, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			return rep, err
		}
	}
	rawAfter, err := redisUsedMemory(ctx, c)
	if err != nil {
		return rep, err
	}
	rep.Raw = []relationSize{{Name: "one string per record (used_memory)", Kind: "memory", Bytes: rawAfter - rawBefore}}
	rep.Note = " (used_memory before and after loading)"
	if !keep {
		iter := c.Scan(ctx, 0, rawPrefix+"*", 10_000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 10_000 {
				if err := c.Unlink(ctx, batch...).Err(); err != nil {
					return rep, err
				}
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			err = c.Unlink(ctx, batch...).Err()
		}
		if err == nil {
			err = iter.Err()
		}
	}
	return rep, err
}

var usedMemory = regexp.MustCompile(`(?m)^used_memory:(\d+)\r?$`)

func redisUsedMemory(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	m := usedMemory.FindStringSubmatch(info)
	if m == nil {
		return 0, errors.New("INFO memory has no used_memory")
	}
	return strconv.ParseInt(m[1], 10, 64)
}
