// Package idempgx is the PostgreSQL driver of unstuck on pgx v5: an
// [idemdriver.Store] over a [pgxpool.Pool].
//
// # Use
//
// Build the store once, on the application's pool, and create its tables
// before first use:
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil {
//		return err
//	}
//	store := idempgx.New(pool)
//	if err := store.Migrate(ctx); err != nil {
//		return err
//	}
//	engine, err := idem.New(store, idem.Config{Secret: secret})
//	if err != nil {
//		return err
//	}
//	res, err := idem.Run(ctx, engine, key, scope, sendReceipt, nil) // or idem.NewMiddleware(engine, …)
//
// The New example is a complete program, down to the admin reads the
// console makes.
//
// Migrate is idempotent and safe to run from every process at start-up:
// concurrent runs wait for each other on an advisory lock, and the versions
// applied are recorded in the unstuck_migration table.
//
// Upgrading a large table: Migrate runs in one transaction, so an index it
// adds locks writes to the table while it is built. Build such indexes
// beforehand, without the lock, under the names the migrations use; their
// CREATE INDEX IF NOT EXISTS then skips them:
//
//	CREATE INDEX CONCURRENTLY IF NOT EXISTS unstuck_idem_record_key_hash_idx
//	    ON unstuck_idem_record (key_hash) WHERE key_hash IS NOT NULL;       -- migration 003
//	CREATE INDEX CONCURRENTLY IF NOT EXISTS unstuck_idem_record_short_digest_idx
//	    ON unstuck_idem_record (left(key_digest, 12));                       -- migration 004
//	CREATE INDEX CONCURRENTLY IF NOT EXISTS unstuck_idem_record_sweep_idx
//	    ON unstuck_idem_record (expires_at) WHERE status <> 'pending';      -- migration 006
//
// Migration 005 adds trace_id with a constant default: no table rewrite.
// Migration 006 then drops the expiry index the sweep's index replaces,
// which holds the table's lock only for a moment.
//
// Statistics: the store's look-ups by key read the unique index of (scope,
// operation, key_digest) once PostgreSQL has statistics of the table.
// Without them — a new table before autovacuum first analyzes it (within
// a minute of 50 changed rows), or one restored without statistics, as
// pg_upgrade leaves it — the planner may choose the console's index by
// operation instead, and each connection keeps that plan for its prepared
// statements while the table grows: a scan that lengthens with every
// record. Run ANALYZE unstuck_idem_record after a restore or an upgrade,
// and after loading a new table, before heavy traffic.
//
// # Schema
//
// Every statement uses unqualified names, so the tables
// (unstuck_idem_record, unstuck_migration) and the sequence
// (unstuck_idem_fence_seq) live in the first schema of the pool's
// search_path, where Migrate creates them. To keep them in a schema of their
// own, set search_path on the pool's connections:
//
//	cfg, err := pgxpool.ParseConfig(url)
//	cfg.ConnConfig.RuntimeParams["search_path"] = "unstuck"
//
// # Admin reads and seeding
//
// The Store is also an [idemdriver.Admin], the contract the operations
// console reads records through: lists with filters and keyset pages,
// look-ups by ID or key digest, counts per status, the needs-attention
// list and iteration in batches. Each list is answered by an index that
// the "idem" migration line creates, in the list's order, so a page costs
// the same at any depth. [Store.KeyOverview] counts each status exactly up
// to [DefaultCountCap] and estimates above it from the planner's
// statistics ([Store.Analyze] refreshes them); [Store.SetOverviewCaps]
// lowers the caps for tests. [Store.SeedRecords] (an [idemdriver.Seeder])
// loads records as they are, with COPY, for benchmarks and imports.
//
// # Time and fences
//
// Leases and retention are judged by the database's clock,
// statement_timestamp() (the start of the statement, inside a transaction
// as outside one), never by the application's, so that processes with
// skewed clocks agree. A record's ReadAt is that clock as the statement saw
// it. The Now field of the params structs replaces it for tests.
// PostgreSQL keeps microseconds: times and durations are truncated to them.
//
// Fences come from one sequence, unstuck_idem_fence_seq, for every record:
// each reservation and each takeover takes a value higher than any handed
// out before, even for a key deleted and reserved again. A reservation
// that finds the record already there consumes a value too, so fences
// have gaps.
//
// # Deadlines
//
// Every call honours its context's deadline: pgx cancels the statement (and
// closes the connection) when it ends. The idem engine bounds each call it
// makes by its store timeout (idem.Config.StoreTimeout, 5 s by default), so a
// dead link or a stalled server fails a call within the bound instead of
// holding it until TCP gives up (minutes). A call whose context nothing but
// the engine's deadline ends (idemdriver.DeadlineOnly: an outcome write, a
// context.Background caller) takes a connection from the pool, sets that
// deadline on its socket and clears it before giving the connection back:
// the same cut at the same moment as pgx's own (its default handler sets
// the socket's deadline when a watched context ends), without a watch
// registered per statement; the error matches context.DeadlineExceeded
// either way. A pool whose ConnConfig.BuildContextWatcherHandler is not
// pgx's default (pgconn.CancelRequestContextWatcherHandler, say, which
// also asks the server to cancel) gets no such request from these calls:
// the statement in flight ends on the server when it next writes to the
// closed connection, or at the server's statement_timeout.
//
// Connections the pool opens on its own (MinConns, health checks) carry no
// caller's deadline: bound them with the pool's connect timeout, which
// this package never changes for you, e.g.
//
//	cfg, err := pgxpool.ParseConfig(url) // or connect_timeout=5 in the URL
//	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
//
// and, for connections that die silently under a long statement, TCP
// keepalives (the default dialer sends them every 15 s, pgx's default) or
// the server's statement_timeout.
//
// # Transactions
//
// Each call of the [Store] is a single autocommit statement (Reserve
// reads and, on a miss, inserts in one statement, and takes a second one
// when it loses a race for a new key); no transaction is held across calls
// or across the caller's work.
//
// The Store is also an [idemdriver.TxStore]. [Store.WithinTx] begins a READ
// COMMITTED transaction and hands fn an idemdriver.Store that writes the record
// inside it; the application reaches the same transaction with [TxFrom]
// and writes its own rows through it, so that the record and the business
// write commit together (SPEC IDEM-H17). WithinTx commits when fn returns
// nil and rolls back otherwise:
//
//	err := store.WithinTx(ctx, func(ctx context.Context, tx idemdriver.Store) error {
//		pgtx, _ := idempgx.TxFrom(ctx)
//		if _, err := pgtx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id); err != nil {
//			return err
//		}
//		return tx.Complete(ctx, ident, owner, completion)
//	})
//
// While it is open, other callers that reserve a key it reserved wait for
// it on the unique index, so keep fn short and make no network call inside
// it.
//
// When the caller owns the transaction instead (River style), [Store.Tx]
// binds the store's primitives to it: store.Tx(tx).Settle(…) runs inside tx,
// never commits, and commits or rolls back with the caller's own writes.
// The console uses it to commit a decision and its audit entry together.
package idempgx
