package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
)

// seedConfig is what to load.
type seedConfig struct {
	Keys       int
	Operations int
	// Tenants is how many scopes the keys spread over, by a Zipf-like law
	// (scope of rank k has weight 1/k): the largest holds about a tenth of
	// the records, the smallest a handful.
	Tenants int
	// Span is how far back the records go; Now is the newest.
	Span time.Duration
	Now  time.Time
	// Parallel COPY streams, and rows (keys) or operations per COPY.
	Parallel int
	Batch    int
	// Seed makes the data reproducible: row i is a function of (Seed, i).
	Seed uint64
	// Retention is how long after its creation a record expires; 0
	// means 35 days (none of the span has expired).
	Retention time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// seedReport is how long each phase took.
type seedReport struct {
	Keys, Operations, Steps, Events, Findings int64
	Load, Index, Vacuum, Total                time.Duration
}

func runSeed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", "", "PostgreSQL `URL` of an empty database of its own (required)")
	keys := fs.Int("keys", 10_000_000, "idempotency records to load")
	ops := fs.Int("operations", 1_000_000, "saga operations to load (3 steps and a few events each)")
	tenants := fs.Int("tenants", 20_000, "scopes (tenants) the records spread over")
	days := fs.Int("days", 30, "days the records' times spread over, ending now")
	parallel := fs.Int("parallel", 2, "concurrent COPY streams")
	batch := fs.Int("batch", 100_000, "records (or operations / 10) per COPY")
	seed := fs.Uint64("seed", 1, "random seed: the same seed loads the same data")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: bench seed --db URL [flags]

Migrates the database (every migration line, as "console migrate"), refuses
if it already holds records, then loads idempotency records through their
driver's seeding path (idempgx SeedRecords: COPY, around the engine's lease
protocol) and saga operations through the saga driver's importer (sagapgx
ImportOperations: COPY as given, bypassing the step machine): a benchmark
fixture only. The saga tables' indexes are dropped during the load and
rebuilt after it, then every table is vacuumed and analyzed. Prints the time
of each phase.

`)
		fs.PrintDefaults()
	}
	if help, err := parseArgs(fs, args, dbURL, stderr); help || err != nil {
		return err
	}
	switch {
	case *keys < 1 || *ops < 0 || *tenants < 1 || *days < 1 || *parallel < 1 || *batch < 1:
		fmt.Fprintln(stderr, "bench seed: --keys, --tenants, --days, --parallel and --batch must be positive, --operations not negative")
		return errUsage
	}
	pool, err := openPool(ctx, *dbURL, *parallel+2)
	if err != nil {
		return err
	}
	defer pool.Close()
	rep, err := seedDatabase(ctx, pool, seedConfig{Keys: *keys, Operations: *ops, Tenants: *tenants,
		Span: time.Duration(*days) * 24 * time.Hour, Now: time.Now().UTC(), Parallel: *parallel, Batch: *batch,
		Seed: *seed, Log: stderr})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "seeded %d keys, %d operations (%d steps, %d events, %d findings)\n",
		rep.Keys, rep.Operations, rep.Steps, rep.Events, rep.Findings)
	fmt.Fprintf(stdout, "load (COPY) %s, indexes %s, vacuum+analyze %s, total %s\n",
		rep.Load.Round(time.Second), rep.Index.Round(time.Second), rep.Vacuum.Round(time.Second), rep.Total.Round(time.Second))
	return nil
}

func openPool(ctx context.Context, rawURL string, maxConns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	cfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// migrate runs every migration line in the order the console does.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := store.NewPostgres(pool)
	for _, m := range []func(context.Context) error{idempgx.New(pool).Migrate, sagapgx.New(pool).Migrate, db.Migrate} {
		if err := m(ctx); err != nil {
			return err
		}
	}
	return nil
}

// seededTables are the saga tables seedDatabase loads, referenced table
// first. The key records are not among them: they are seeded through their
// driver (idempgx.Store.SeedRecords), whose table keeps its indexes during
// the load.
var seededTables = sagapgx.Tables()

func seedDatabase(ctx context.Context, pool *pgxpool.Pool, cfg seedConfig) (seedReport, error) {
	var rep seedReport
	logf := logTo(cfg.Log)
	start := time.Now()
	if err := migrate(ctx, pool); err != nil {
		return rep, fmt.Errorf("migrate: %w", err)
	}
	keys := idempgx.New(pool)
	if page, err := keys.ListKeys(ctx, idemdriver.KeyFilter{Limit: 1}); err != nil {
		return rep, err
	} else if len(page.Records) > 0 {
		return rep, errors.New("the key records are not empty: seed a new database")
	}
	for _, t := range seededTables {
		var any bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+t+`)`).Scan(&any); err != nil {
			return rep, err
		}
		if any {
			return rep, fmt.Errorf("table %s is not empty: seed a new database", t)
		}
	}
	deferred, err := dropSecondary(ctx, pool, seededTables)
	if err != nil {
		return rep, err
	}
	logf("dropped %d indexes and constraints for the load; an interrupted seed leaves them dropped: drop the database", len(deferred))

	g := newGenerator(cfg)
	loadStart := time.Now()
	if err := g.loadKeys(ctx, keys, logf); err != nil {
		return rep, err
	}
	if err := g.loadOperations(ctx, pool, logf); err != nil {
		return rep, err
	}
	rep.Load = time.Since(loadStart)
	rep.Keys, rep.Operations = int64(cfg.Keys), int64(cfg.Operations)
	rep.Steps, rep.Events, rep.Findings = g.steps.Load(), g.events.Load(), g.findings.Load()
	logf("loaded in %s", rep.Load.Round(time.Millisecond))

	idxStart := time.Now()
	if err := restoreSecondary(ctx, pool, deferred, logf); err != nil {
		return rep, err
	}
	rep.Index = time.Since(idxStart)

	vacStart := time.Now()
	t0 := time.Now()
	if err := keys.Analyze(ctx); err != nil {
		return rep, fmt.Errorf("vacuum the key records: %w", err)
	}
	logf("vacuum (analyze) the key records: %s", time.Since(t0).Round(time.Millisecond))
	for _, t := range seededTables {
		t0 := time.Now()
		if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) `+t); err != nil {
			return rep, fmt.Errorf("vacuum %s: %w", t, err)
		}
		logf("vacuum (analyze) %s: %s", t, time.Since(t0).Round(time.Millisecond))
	}
	rep.Vacuum = time.Since(vacStart)
	rep.Total = time.Since(start)
	return rep, nil
}

// deferredDDL is one index or constraint dropped for the load: drop undoes
// it and create restores it from its own definition.
type deferredDDL struct {
	name, drop, create string
}

// dropSecondary drops every index but the primary keys, and the unique and
// foreign-key constraints, of tables; it returns how to recreate them.
func dropSecondary(ctx context.Context, pool *pgxpool.Pool, tables []string) ([]deferredDDL, error) {
	var out []deferredDDL
	for _, t := range tables {
		rows, err := pool.Query(ctx, `SELECT conname, pg_get_constraintdef(oid)
FROM pg_constraint WHERE conrelid = $1::regclass AND contype IN ('u', 'f') ORDER BY contype DESC, conname`, t)
		if err != nil {
			return nil, err
		}
		cons, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (deferredDDL, error) {
			var name, def string
			err := r.Scan(&name, &def)
			return deferredDDL{name: name, drop: `ALTER TABLE ` + t + ` DROP CONSTRAINT ` + name,
				create: `ALTER TABLE ` + t + ` ADD CONSTRAINT ` + name + ` ` + def}, err
		})
		if err != nil {
			return nil, err
		}
		rows, err = pool.Query(ctx, `SELECT c.relname, pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = $1::regclass AND NOT i.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid)
ORDER BY c.relname`, t)
		if err != nil {
			return nil, err
		}
		idx, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (deferredDDL, error) {
			var name, def string
			err := r.Scan(&name, &def)
			return deferredDDL{name: name, drop: `DROP INDEX ` + name, create: def}, err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, cons...)
		out = append(out, idx...)
	}
	// Foreign keys last when restoring, after every unique index exists;
	// dropped first, before the indexes they may lean on.
	sort.SliceStable(out, func(i, j int) bool { return isFK(out[i]) && !isFK(out[j]) })
	for _, d := range out {
		if _, err := pool.Exec(ctx, d.drop); err != nil {
			return nil, fmt.Errorf("%s: %w", d.drop, err)
		}
	}
	return out, nil
}

func isFK(d deferredDDL) bool { return strings.Contains(d.create, " FOREIGN KEY ") }

// restoreSecondary recreates what dropSecondary dropped, foreign keys last,
// on one connection with room to sort in memory.
func restoreSecondary(ctx context.Context, pool *pgxpool.Pool, ds []deferredDDL, logf func(string, ...any)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET maintenance_work_mem = '512MB'`); err != nil {
		return err
	}
	for i := len(ds) - 1; i >= 0; i-- { // reverse of the drop order: foreign keys last
		t0 := time.Now()
		if _, err := conn.Exec(ctx, ds[i].create); err != nil {
			return fmt.Errorf("%s: %w", ds[i].create, err)
		}
		logf("built %s: %s", ds[i].name, time.Since(t0).Round(time.Millisecond))
	}
	_, err = conn.Exec(ctx, `RESET maintenance_work_mem`)
	return err
}

// ---- the data

// Statuses of the keys, cumulative shares: mostly completed, a few percent
// of everything else.
var keyStatusCDF = []struct {
	upTo   float64
	status idemdriver.Status
}{
	{0.940, idemdriver.StatusCompleted},
	{0.970, idemdriver.StatusFailed},
	{0.985, idemdriver.StatusPending},
	{0.995, idemdriver.StatusUnavailable},
	{1.000, idemdriver.StatusProcessing},
}

// keyOperations are the routes the records belong to, with their weights.
var keyOperations = []weighted{
	{"POST /v1/orders", 30}, {"POST /v1/payments", 25}, {"POST /v1/customers", 12},
	{"POST /v1/subscriptions", 10}, {"POST /v1/refunds", 8}, {"POST /v1/invoices", 7},
	{"POST /v1/transfers", 5}, {"POST /v1/payouts", 3},
}

// sagaTypes are the operation types, with their weights and three steps.
var sagaTypes = []struct {
	weighted
	steps  [3]string
	system [3]string
}{
	{weighted{"checkout", 40}, [3]string{"reserve_stock", "charge_card", "ship_order"}, [3]string{"inventory", "payments", "shipping"}},
	{weighted{"signup", 25}, [3]string{"create_account", "create_workspace", "send_welcome"}, [3]string{"local", "workspace-provider", "mailer"}},
	{weighted{"refund", 15}, [3]string{"lock_order", "refund_payment", "notify_customer"}, [3]string{"local", "payments", "mailer"}},
	{weighted{"subscription_renewal", 12}, [3]string{"charge", "extend_period", "email_receipt"}, [3]string{"payments", "local", "mailer"}},
	{weighted{"payout", 8}, [3]string{"debit_ledger", "send_transfer", "notify_merchant"}, [3]string{"ledger", "bank", "mailer"}},
}

type weighted struct {
	name   string
	weight float64
}

// cdf returns cumulative shares of weights, ending at 1.
func cdf(weights []float64) []float64 {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	out := make([]float64, len(weights))
	acc := 0.0
	for i, w := range weights {
		acc += w
		out[i] = acc / total
	}
	out[len(out)-1] = 1
	return out
}

func pick(r *rand.Rand, c []float64) int {
	return min(sort.SearchFloat64s(c, r.Float64()), len(c)-1)
}

// generator makes row i of each table from (Seed, i) alone, so that
// concurrent COPY streams can load disjoint ranges and a rerun loads the
// same data.
type generator struct {
	cfg                     seedConfig
	tenantCDF, opCDF, sagaC []float64
	start                   time.Time
	steps, events, findings atomic.Int64
}

func newGenerator(cfg seedConfig) *generator {
	tw := make([]float64, cfg.Tenants)
	for k := range tw {
		tw[k] = 1 / float64(k+1)
	}
	ow := make([]float64, len(keyOperations))
	for k, o := range keyOperations {
		ow[k] = o.weight
	}
	sw := make([]float64, len(sagaTypes))
	for k, s := range sagaTypes {
		sw[k] = s.weight
	}
	return &generator{cfg: cfg, tenantCDF: cdf(tw), opCDF: cdf(ow), sagaC: cdf(sw), start: cfg.Now.Add(-cfg.Span)}
}

// tenant returns the scope of rank k (0 is the largest).
func tenant(k int) string { return fmt.Sprintf("tenant:%05d", k) }

// rawKey is the client's idempotency key of record i.
func rawKey(i int) string { return "k-" + strconv.Itoa(i) }

// retention is cfg.Retention or its default.
func (g *generator) retention() time.Duration {
	if g.cfg.Retention > 0 {
		return g.cfg.Retention
	}
	return 35 * 24 * time.Hour
}

func (g *generator) rng(table uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(g.cfg.Seed^table<<56, uint64(i)))
}

// at spreads n items evenly over the span, oldest first.
func (g *generator) at(i, n int) time.Time {
	return g.start.Add(time.Duration(float64(g.cfg.Span) * float64(i) / float64(n))).Truncate(time.Microsecond)
}

// keyScopeOperation draws a record's scope and operation, the first draws
// of its random stream. The raw key of record i is rawKey(i), and its fence
// is i+1, which is how "bench console" finds the raw key of a record.
func (g *generator) keyScopeOperation(r *rand.Rand) (string, string) {
	return tenant(pick(r, g.tenantCDF)), keyOperations[pick(r, g.opCDF)].name
}

func (g *generator) keyRecord(i int) idemdriver.Record {
	r := g.rng(1, i)
	scope, operation := g.keyScopeOperation(r)
	digest := idem.Digest(scope, operation, rawKey(i))
	created := g.at(i, g.cfg.Keys)
	u := r.Float64()
	status := idemdriver.StatusProcessing
	for _, s := range keyStatusCDF {
		if u < s.upTo {
			status = s.status
			break
		}
	}
	fingerprint := ""
	if r.Float64() < 0.8 {
		sum := sha256.Sum256([]byte(digest))
		fingerprint = hex.EncodeToString(sum[:])
	}
	var (
		result       []byte
		responseCode int32
		lastError    string
		lease        *time.Time
		updated      = created.Add(time.Duration(5+r.IntN(3000)) * time.Millisecond)
		correlation  string
		externalRef  string
		resourceIDs  = []string{}
	)
	if r.Float64() < 0.3 {
		correlation = fmt.Sprintf("req_%016x", r.Uint64())
	}
	if r.Float64() < 0.2 {
		externalRef = "ch_" + strconv.FormatUint(r.Uint64(), 36)
	}
	if r.Float64() < 0.25 {
		resourceIDs = []string{"ord_" + strconv.FormatUint(r.Uint64()>>20, 36)}
	}
	switch status {
	case idemdriver.StatusCompleted:
		responseCode = 201
		result = storedResponse(201, fmt.Sprintf(`{"id":"ord_%x","status":"created","amount":%d,"currency":"eur"}`, r.Uint64()>>16, 100+r.IntN(100000)))
	case idemdriver.StatusFailed:
		responseCode = 422
		lastError = "card_declined: insufficient funds"
		if r.IntN(3) == 0 {
			responseCode, lastError = 409, "conflict: order already shipped"
		}
		result = storedResponse(int(responseCode), `{"error":"`+lastError+`"}`)
	case idemdriver.StatusPending:
		lastError = "provider timeout after 10s: outcome unknown"
		externalRef = "ch_" + strconv.FormatUint(r.Uint64(), 36)
		updated = created.Add(time.Duration(10+r.IntN(20)) * time.Second)
	case idemdriver.StatusUnavailable:
		lastError = "the effect ran but its result could not be stored: connection reset"
	case idemdriver.StatusProcessing:
		if g.cfg.Now.Sub(created) < time.Hour {
			// A live owner. Leases are long here so that they are still
			// live while the benchmark runs after the seed.
			updated = created
			l := created.Add(6 * time.Hour)
			lease = &l
		} else {
			// An owner that died: past its lease.
			updated = created
			l := created.Add(30 * time.Second)
			lease = &l
		}
	}
	attempts := int32(1)
	if v := r.Float64(); v < 0.01 {
		attempts = 3
	} else if v < 0.05 {
		attempts = 2
	}
	version := int64(attempts)
	if status != idemdriver.StatusProcessing {
		version++
	}
	if correlation != "" || externalRef != "" || len(resourceIDs) > 0 {
		version++
	}
	rec := idemdriver.Record{Ident: idemdriver.Ident{Scope: scope, Operation: operation, KeyDigest: digest},
		Fingerprint: fingerprint, Status: status, Result: result, ResponseCode: int(responseCode),
		CorrelationID: correlation, ExternalRef: externalRef, ResourceIDs: resourceIDs, LastError: lastError,
		Owner: idemdriver.Owner{Token: randomUUID(r).String(), Fence: int64(i) + 1}, Attempts: int(attempts),
		Version: version, CreatedAt: created, UpdatedAt: updated, ExpiresAt: created.Add(g.retention())}
	if lease != nil {
		rec.LeaseExpiresAt = *lease
	}
	return rec
}

// storedResponse is the plain envelope of an HTTP response as the engine's
// middleware stores it with sealing off: "UP", version 1, then the JSON of
// an idem.StoredResponse.
func storedResponse(status int, body string) []byte {
	js := `{"status":` + strconv.Itoa(status) + `,"header":{"Content-Type":["application/json"]},"body":"` +
		base64.StdEncoding.EncodeToString([]byte(body)) + `"}`
	return append([]byte("UP\x01"), js...)
}

func randomUUID(r *rand.Rand) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[:8], r.Uint64())
	binary.BigEndian.PutUint64(u[8:], r.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// uuidV7 is a version 7 UUID of t, as saga.Runner makes operation IDs.
func uuidV7(r *rand.Rand, t time.Time) uuid.UUID {
	u := randomUUID(r)
	ms := uint64(t.UnixMilli())
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = u[6]&0x0f | 0x70
	return u
}

// forBatches runs fn on [lo, hi) ranges of n items, size at a time, on
// parallel goroutines, and returns the first error.
func forBatches(ctx context.Context, n, size, parallel int, fn func(ctx context.Context, lo, hi int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		once     sync.Once
	)
	for range parallel {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(size))) - size
				if lo >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, lo, min(lo+size, n)); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// logTo returns a progress logger writing lines to w (nothing when w is
// nil), safe for concurrent use: the loaders call it from their goroutines.
func logTo(w io.Writer) func(format string, a ...any) {
	var mu sync.Mutex
	return func(format string, a ...any) {
		if w == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", a...)
	}
}

// loadKeys seeds the key records through the driver's seeding path
// (idempgx.Store.SeedRecords: COPY), batch records per call, on parallel
// goroutines: logf must be safe for concurrent use (logTo).
func (g *generator) loadKeys(ctx context.Context, keys idemdriver.Seeder, logf func(string, ...any)) error {
	var done atomic.Int64
	t0 := time.Now()
	step := max(int64(g.cfg.Keys)/10, 1)
	return forBatches(ctx, g.cfg.Keys, g.cfg.Batch, g.cfg.Parallel, func(ctx context.Context, lo, hi int) error {
		recs := make([]idemdriver.Record, 0, hi-lo)
		for i := lo; i < hi; i++ {
			recs = append(recs, g.keyRecord(i))
		}
		if err := keys.SeedRecords(ctx, recs); err != nil {
			return fmt.Errorf("seed keys %d–%d: %w", lo, hi, err)
		}
		n := done.Add(int64(hi - lo))
		if n/step != (n-int64(hi-lo))/step {
			el := time.Since(t0)
			logf("keys: %d of %d (%s, %.0f rows/s)", n, g.cfg.Keys, el.Round(time.Second), float64(n)/el.Seconds())
		}
		return nil
	})
}

// opBatch is one batch of operations with their events and findings, as
// the saga driver's importer takes them.
type opBatch struct {
	ops      []sagadriver.Operation
	events   []sagadriver.Event
	findings []sagadriver.Finding
	steps    int
}

// stepState is how one step of an operation ended up.
type stepState struct {
	status, comp, class, err string
	attempts                 int32
	done                     bool
}

func (g *generator) addOperation(j int, out *opBatch) {
	r := g.rng(2, j)
	def := sagaTypes[pick(r, g.sagaC)]
	created := g.at(j, g.cfg.Operations)
	id := uuidV7(r, created).String()
	// Active statuses only in the newest 1 % (the last few hours); older
	// operations have ended or wait for a human.
	status := "completed"
	u := r.Float64()
	if float64(j) >= 0.99*float64(g.cfg.Operations) {
		switch {
		case u < 0.30:
			status = "running"
		case u < 0.40:
			status = "pending"
		case u < 0.45:
			status = "compensating"
		}
	} else {
		switch {
		case u < 0.035:
			status = "compensated"
		case u < 0.055:
			status = "failed"
		case u < 0.070:
			status = "review_required"
		}
	}
	correlation := ""
	if r.Float64() < 0.5 {
		correlation = fmt.Sprintf("req_%016x", r.Uint64())
	}
	input := fmt.Sprintf(`{"customer":"cus_%d","amount":%d,"currency":"eur"}`, r.IntN(1_000_000), 100+r.IntN(100000))
	var st [3]stepState
	current, lastError, review := def.steps[2], "", ""
	switch status {
	case "completed":
		for k := range st {
			st[k] = stepState{status: "completed", attempts: 1, done: true}
		}
		if r.IntN(20) == 0 {
			st[1].attempts = 2
		}
	case "compensated":
		st[0] = stepState{status: "compensated", comp: "completed", attempts: 1, done: true}
		st[1] = stepState{status: "failed", class: "permanent", err: "card_declined: do_not_honor", attempts: 1}
		st[2] = stepState{status: "skipped"}
		current, lastError = def.steps[1], def.steps[1]+": card_declined: do_not_honor"
	case "failed":
		st[0] = stepState{status: "failed", class: "permanent", err: "validation: amount must be positive", attempts: 1}
		st[1], st[2] = stepState{status: "skipped"}, stepState{status: "skipped"}
		current, lastError = def.steps[0], def.steps[0]+": validation: amount must be positive"
	case "review_required":
		st[0] = stepState{status: "completed", attempts: 1, done: true}
		st[1] = stepState{status: "uncertain", class: "uncertain", err: "timeout after 5s", attempts: 2}
		st[2] = stepState{status: "pending"}
		current, lastError, review = def.steps[1], def.steps[1]+": timeout after 5s", "uncertain_unresolved"
	case "running":
		st[0] = stepState{status: "completed", attempts: 1, done: true}
		st[1] = stepState{status: "running", attempts: 1}
		st[2] = stepState{status: "pending"}
		current = def.steps[1]
	case "pending":
		st[0], st[1], st[2] = stepState{status: "pending"}, stepState{status: "pending"}, stepState{status: "pending"}
		current = def.steps[0]
	case "compensating":
		st[0] = stepState{status: "compensating", comp: "running", attempts: 1, done: true}
		st[1] = stepState{status: "failed", class: "permanent", err: "insufficient_funds", attempts: 1}
		st[2] = stepState{status: "skipped"}
		current, lastError = def.steps[1], def.steps[1]+": insufficient_funds"
	}

	at := created
	tick := func() time.Time {
		at = at.Add(time.Duration(20+r.IntN(800)) * time.Millisecond)
		return at
	}
	nEvents := int64(0)
	event := func(step, action, from, to, actor, msg string, attempt int32) {
		nEvents++
		out.events = append(out.events, sagadriver.Event{OperationID: id, Step: step, Action: action, From: from, To: to,
			Actor: actor, Message: msg, Attempt: int(attempt), At: tick()})
	}
	event("", "started", "", "pending", "app", "", 0)
	if status != "pending" {
		event("", "status", "pending", "running", "worker", "", 0)
	}
	steps := make([]sagadriver.StepRecord, 0, len(st))
	for k, s := range st {
		var started, finished *time.Time
		extID := ""
		var result json.RawMessage
		if s.attempts > 0 {
			t := tick()
			started = &t
			switch s.status {
			case "completed", "compensated", "compensating":
				f := tick()
				finished = &f
				extID = fmt.Sprintf("%s_%x", def.system[k][:2], r.Uint64()>>24)
				result = json.RawMessage(`{"external_id":"` + extID + `"}`)
				event(def.steps[k], "step_completed", "running", "completed", "worker", "", s.attempts)
			case "failed":
				f := tick()
				finished = &f
				event(def.steps[k], "step_failed", "running", "failed", "worker", s.err, s.attempts)
			case "uncertain":
				event(def.steps[k], "step_uncertain", "running", "uncertain", "worker", s.err, s.attempts)
			case "running":
				event(def.steps[k], "step_begun", "pending", "running", "worker", "", s.attempts)
			}
		}
		compensable := k == 0
		steps = append(steps, sagadriver.StepRecord{Name: def.steps[k], Seq: k,
			Kind: [3]sagadriver.Kind{sagadriver.Compensatable, sagadriver.Pivot, sagadriver.Retriable}[k], System: def.system[k],
			Status: sagadriver.StepStatus(s.status), Key: id + "/" + def.steps[k], ExternalID: extID, Result: result,
			Attempts: int(s.attempts), MaxAttempts: 5, Verifications: int(verifications(s)), LastError: s.err,
			LastErrorClass: sagadriver.Class(s.class), Compensable: compensable, CompSeq: 3 - k,
			CompKey: id + "/" + def.steps[k] + "/compensate", CompStatus: sagadriver.CompStatus(s.comp),
			CompAttempts: int(compAttempts(s)), CompMaxAttempts: 5, Generation: 1, StartedAt: started, FinishedAt: finished,
			UpdatedAt: at})
	}
	var finishedAt *time.Time
	switch status {
	case "completed", "compensated", "failed":
		if status == "compensated" {
			event(def.steps[0], "compensated", "compensating", "compensated", "worker", "", 1)
		}
		event("", "status", "running", status, "worker", lastError, 0)
		f := at
		finishedAt = &f
	case "review_required":
		event("", "status", "running", "review_required", "worker", "verification could not resolve step "+def.steps[1], 0)
		out.findings = append(out.findings, sagadriver.Finding{OperationID: id, Step: def.steps[1], Kind: sagadriver.FindingUnresolved,
			Detail: "step " + def.steps[1] + " is uncertain after 3 verifications", DetectedAt: at})
	case "compensating":
		event("", "status", "running", "compensating", "worker", lastError, 0)
	}
	out.ops = append(out.ops, sagadriver.Operation{ID: id, Type: def.name, Status: sagadriver.Status(status),
		CorrelationID: correlation, Input: json.RawMessage(input), CurrentStep: current, LastError: lastError, ReviewReason: review,
		Version: nEvents, CreatedAt: created, UpdatedAt: at, FinishedAt: finishedAt, Steps: steps})
	out.steps += len(steps)
}

func verifications(s stepState) int32 {
	if s.status == "uncertain" {
		return 3
	}
	return 0
}

func compAttempts(s stepState) int32 {
	if s.comp != "" {
		return 1
	}
	return 0
}

func (g *generator) loadOperations(ctx context.Context, pool *pgxpool.Pool, logf func(string, ...any)) error {
	if g.cfg.Operations == 0 {
		return nil
	}
	var done atomic.Int64
	t0 := time.Now()
	step := max(int64(g.cfg.Operations)/5, 1)
	size := max(g.cfg.Batch/10, 1)
	// The saga driver's importer, for benchmarks and imports: it loads the
	// records as given (COPY), bypassing the step machine.
	sagas := sagapgx.New(pool)
	return forBatches(ctx, g.cfg.Operations, size, g.cfg.Parallel, func(ctx context.Context, lo, hi int) error {
		var rows opBatch
		for j := lo; j < hi; j++ {
			g.addOperation(j, &rows)
		}
		if err := sagas.ImportOperations(ctx, rows.ops, rows.events, rows.findings); err != nil {
			return fmt.Errorf("import operations %d–%d: %w", lo, hi, err)
		}
		g.steps.Add(int64(rows.steps))
		g.events.Add(int64(len(rows.events)))
		g.findings.Add(int64(len(rows.findings)))
		n := done.Add(int64(hi - lo))
		if n/step != (n-int64(hi-lo))/step {
			el := time.Since(t0)
			logf("operations: %d of %d (%s, %.0f operations/s)", n, g.cfg.Operations, el.Round(time.Second), float64(n)/el.Seconds())
		}
		return nil
	})
}
