package ops_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/fielderr"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/unstucktest/mysqltest"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
	"github.com/unstuckhq/unstuck/unstucktest/redistest"
)

func TestMain(m *testing.M) { pgtest.RunMain(m); redistest.Stop() }

type bundle struct {
	engine *idem.Engine
	db     *store.DB
	// records reads the engine's records, as the console does.
	records idemdriver.Admin
	trail   *audit.Trail
	keys    keyDecisions
	// newBulks returns the bulk decisions of keys, listed with keyList.
	newBulks func(keyList keyIterator, cfg ops.BulkConfig) (bulkDecisions, error)
	// exec runs a statement on the test's own database, as its owner;
	// names runs a query of one text column there.
	exec  func(t testing.TB, query string)
	names func(t testing.TB, query string) []string
	// dialect is the trail's.
	dialect string
}

// backend is a migrated-to-be database: the engine's store, the console's
// store, the trail, and the key decisions of an engine on it.
type backend struct {
	store idemdriver.Store
	db    *store.DB
	trail *audit.Trail
	// newKeys returns the key decisions of engine, logging to log, and
	// how bulk decisions of them are made.
	newKeys func(engine *idem.Engine, log *slog.Logger) (keyDecisions, func(keyIterator, ops.BulkConfig) (bulkDecisions, error), error)
	exec    func(t testing.TB, query string)
	names   func(t testing.TB, query string) []string
}

var backends = map[string]func(t testing.TB) backend{
	"SQLite": func(t testing.TB) backend {
		db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "ops.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		imm, err := ops.OpenImmediate(context.Background(), db)
		require.NoError(t, err)
		t.Cleanup(func() { _ = imm.Close() })
		s, cdb, trail := idemsqlite.New(db), store.NewSQLite(db), audit.NewSQLite(db, audit.WithKeys(testAuditKeys))
		return backend{store: s, db: cdb, trail: trail,
			newKeys: func(engine *idem.Engine, log *slog.Logger) (keyDecisions, func(keyIterator, ops.BulkConfig) (bulkDecisions, error), error) {
				d, err := ops.SQLite(imm, trail, cdb, log)
				if err != nil {
					return nil, nil, err
				}
				return keysOf(ops.NewKeys(d, engine, s, s))(cdb)
			},
			exec: func(t testing.TB, query string) {
				t.Helper()
				_, err := db.ExecContext(context.Background(), query)
				require.NoError(t, err, query)
			},
			names: func(t testing.TB, query string) []string { return sqlNames(t, db, query) }}
	},
	"MySQL": func(t testing.TB) backend {
		db, err := idemmysql.Open(mysqltest.NewDatabase(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		s, cdb, trail := idemmysql.New(db), store.NewMySQL(db), audit.NewMySQL(db, audit.WithKeys(testAuditKeys))
		return backend{store: s, db: cdb, trail: trail,
			newKeys: func(engine *idem.Engine, log *slog.Logger) (keyDecisions, func(keyIterator, ops.BulkConfig) (bulkDecisions, error), error) {
				d, err := ops.MySQL(db, trail, cdb, log)
				if err != nil {
					return nil, nil, err
				}
				return keysOf(ops.NewKeys(d, engine, s, s))(cdb)
			},
			exec: func(t testing.TB, query string) {
				t.Helper()
				_, err := db.ExecContext(context.Background(), query)
				require.NoError(t, err, query)
			},
			names: func(t testing.TB, query string) []string { return sqlNames(t, db, query) }}
	},
	"PostgreSQL": func(t testing.TB) backend {
		pool := pgtest.Schema(t)
		s, cdb, trail := idempgx.New(pool), store.NewPostgres(pool), audit.NewPostgres(pool, audit.WithKeys(testAuditKeys))
		return backend{store: s, db: cdb, trail: trail,
			newKeys: func(engine *idem.Engine, log *slog.Logger) (keyDecisions, func(keyIterator, ops.BulkConfig) (bulkDecisions, error), error) {
				d, err := ops.Postgres(pool, trail, cdb, log)
				if err != nil {
					return nil, nil, err
				}
				return keysOf(ops.NewKeys(d, engine, s, s))(cdb)
			},
			exec: func(t testing.TB, query string) {
				t.Helper()
				_, err := pool.Exec(context.Background(), query)
				require.NoError(t, err, query)
			},
			names: func(t testing.TB, query string) []string { return pgNames(t, pool, query) }}
	},
}

// testAuditKeys is the audit key of every test trail: appends need one.
var testAuditKeys = func() *audit.Keyring {
	k, err := audit.NewKeyring([]byte("ops-test-audit-key-0123456789abcdef"))
	if err != nil {
		panic(err)
	}
	return k
}()

// keyDecisions is an *ops.Keys of any backend's transaction type.
type keyDecisions interface {
	Decide(ctx context.Context, actor ops.Actor, d ops.KeyDecision) (ops.KeyResult, error)
	History(ctx context.Context, recordID int64, limit int) ([]audit.Entry, error)
}

// bulkDecisions is an *ops.Bulks of any backend's transaction type.
type bulkDecisions interface {
	Approve(ctx context.Context, actor ops.Actor, id int64, reason string) (store.Bulk, error)
	Reject(ctx context.Context, actor ops.Actor, id int64, reason string) (store.Bulk, error)
	Cancel(ctx context.Context, actor ops.Actor, id int64, isAdmin bool) (store.Bulk, error)
	Pause(ctx context.Context, actor ops.Actor, id int64, isAdmin bool) (store.Bulk, error)
	Resume(ctx context.Context, actor ops.Actor, id int64, isAdmin bool) (store.Bulk, error)
	Config() ops.BulkConfig
	Drift(ctx context.Context, actor ops.Actor, req store.Bulk, spec ops.BulkSpec) (int64, bool, error)
	Preview(ctx context.Context, spec ops.BulkSpec) (ops.BulkPreview, error)
	Freeze(ctx context.Context, actor ops.Actor, spec ops.BulkSpec) (store.Bulk, ops.BulkPreview, error)
	Submit(ctx context.Context, actor ops.Actor, id int64, reason string, confirmCount int64) (store.Bulk, error)
	Request(ctx context.Context, actor ops.Actor, spec ops.BulkSpec, reason string, confirmCount int64) (store.Bulk, ops.BulkPreview, error)
	Get(ctx context.Context, id int64) (store.Bulk, bool, error)
	List(ctx context.Context, status string, limit int) ([]store.Bulk, error)
	Items(ctx context.Context, id int64, outcome string, after, limit int) ([]store.BulkItem, error)
	Waiting(ctx context.Context) (int64, error)
	Run(ctx context.Context, id int64, slice time.Duration) (bool, error)
	SetNow(now func() time.Time)
}

// keyIterator reads the key records a filter selects.
type keyIterator interface {
	EachKey(ctx context.Context, f idemdriver.KeyFilter, batch int, fn func([]idemdriver.Record) error) error
}

// keysOf returns, for the console store cdb, keys and how bulk decisions
// of them are made, listing with a key iterator.
func keysOf[TTx any](keys *ops.Keys[TTx], err error) func(cdb *store.DB) (keyDecisions, func(keyIterator, ops.BulkConfig) (bulkDecisions, error), error) {
	return func(cdb *store.DB) (keyDecisions, func(keyIterator, ops.BulkConfig) (bulkDecisions, error), error) {
		if err != nil {
			return nil, nil, err
		}
		return keys, func(keyList keyIterator, cfg ops.BulkConfig) (bulkDecisions, error) {
			return ops.NewBulks(ops.BulkParts[TTx]{Store: cdb, Keys: keys, KeyList: keyList}, cfg)
		}, nil
	}
}

func setup(t testing.TB, newBackend func(t testing.TB) backend) bundle {
	t.Helper()
	return setupLogged(t, newBackend, nil)
}

// setupLogged is setup with the decisions logging to log.
func setupLogged(t testing.TB, newBackend func(t testing.TB) backend, log *slog.Logger) bundle {
	t.Helper()
	ctx := context.Background()
	be := newBackend(t)
	require.NoError(t, be.store.(interface{ Migrate(context.Context) error }).Migrate(ctx))
	require.NoError(t, be.db.Migrate(ctx))
	require.NoError(t, be.trail.Migrate(ctx))
	e, err := idem.New(be.store, idem.Config{Secret: []byte("ops-test-secret-0123456789abcdefgh")})
	require.NoError(t, err)
	keys, newBulks, err := be.newKeys(e, log)
	require.NoError(t, err)
	return bundle{engine: e, db: be.db, records: be.store.(idemdriver.Admin), trail: be.trail, keys: keys, newBulks: newBulks, exec: be.exec, names: be.names, dialect: be.trail.Dialect()}
}

// sqlNames runs query on db and returns its one text column.
func sqlNames(t testing.TB, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), query)
	require.NoError(t, err, query)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// pgNames runs query on pool and returns its one text column.
func pgNames(t testing.TB, pool *pgxpool.Pool, query string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), query)
	require.NoError(t, err, query)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, query)
	return out
}

// pending makes a pending record (a provider timed out) and returns it.
func pending(t *testing.T, b bundle, key string) idemdriver.Record {
	t.Helper()
	_, err := idem.Run(context.Background(), b.engine, key, "tenant:ops", func(ctx context.Context) (int, error) {
		require.NoError(t, idem.Annotate(ctx, idem.Annotation{ExternalRef: "prov-" + key}))
		return 0, idem.Uncertain(errors.New("timeout"))
	}, nil)
	require.ErrorIs(t, err, idem.ErrUncertain)
	page, err := b.records.ListKeys(context.Background(), idemdriver.KeyFilter{Scope: "tenant:ops", KeyDigest: idem.Digest("tenant:ops", idem.DefaultOperation, key), Operation: idem.DefaultOperation})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	return page.Records[0]
}

func TestKeyDecisions(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("ConcurrentDecisionsApplyOnce", func(t *testing.T) {
				t.Parallel()
				b := setup(t, backend)
				rec := pending(t, b, "k-concurrent")
				decisions := []ops.KeyDecision{
					{Action: idem.OperatorConfirmHappened, ExternalRef: "ch_1"},
					{Action: idem.OperatorConfirmNotHappened},
					{Action: idem.OperatorForget, AcknowledgeRerun: true},
				}
				var wg sync.WaitGroup
				results := make(chan error, 8)
				for i := range 8 {
					d := decisions[i%len(decisions)]
					d.RecordID, d.Version, d.Reason = rec.ID, rec.Version, fmt.Sprintf("operator %d checked the provider", i)
					wg.Go(func() {
						_, err := b.keys.Decide(context.Background(), ops.Actor{Username: fmt.Sprintf("op%d", i), Role: "oncall"}, d)
						results <- err
					})
				}
				wg.Wait()
				close(results)
				applied, conflicts := 0, 0
				for err := range results {
					switch {
					case err == nil:
						applied++
					case errors.Is(err, ops.ErrStale), errors.Is(err, ops.ErrNotFound), errors.Is(err, ops.ErrIllegal):
						conflicts++
					default:
						t.Fatalf("unexpected error: %v", err)
					}
				}
				require.Equal(t, 1, applied, "exactly one decision applies")
				require.Equal(t, 7, conflicts)

				entries, _, err := b.trail.List(context.Background(), audit.Filter{TargetKind: "key"})
				require.NoError(t, err)
				require.Len(t, entries, 8, "every attempt has exactly one audit entry")
				outcomes := map[string]int{}
				for _, e := range entries {
					outcomes[e.Outcome]++
				}
				require.Equal(t, map[string]int{audit.OutcomeApplied: 1, audit.OutcomeConflict: 7}, outcomes)
				v, err := b.trail.Verify(context.Background())
				require.NoError(t, err)
				require.True(t, v.OK, v.Problem)
			})

			t.Run("ConfirmHappenedIsAuditedWithBeforeAndAfter", func(t *testing.T) {
				t.Parallel()
				b := setup(t, backend)
				rec := pending(t, b, "k-confirm")
				res, err := b.keys.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall", RequestID: "req-1", ClientAddr: "10.0.0.1"},
					ops.KeyDecision{RecordID: rec.ID, Version: rec.Version, Action: idem.OperatorConfirmHappened, ExternalRef: "ch_9", Reason: "provider dashboard shows ch_9"})
				require.NoError(t, err)
				require.NotNil(t, res.After)
				require.Equal(t, idemdriver.StatusCompleted, res.After.Status)
				hist, err := b.trail.History(context.Background(), "key", fmt.Sprint(rec.ID), 10)
				require.NoError(t, err)
				require.Len(t, hist, 1)
				require.Equal(t, "key.confirm_happened", hist[0].Action)
				require.Equal(t, "ada", hist[0].Actor)
				require.Equal(t, "req-1", hist[0].RequestID)
				require.Contains(t, string(hist[0].Before), `"status":"pending"`)
				require.Contains(t, string(hist[0].After), `"status":"completed"`)
				require.Contains(t, string(hist[0].After), `"external_ref":"ch_9"`)

				// The key never runs again.
				_, err = idem.Run(context.Background(), b.engine, "k-confirm", "tenant:ops", func(context.Context) (int, error) { return 1, nil }, nil)
				require.ErrorIs(t, err, idem.ErrResultUnavailable)
			})

			t.Run("InvalidDecisionsChangeNothing", func(t *testing.T) {
				t.Parallel()
				b := setup(t, backend)
				rec := pending(t, b, "k-invalid")
				for field, d := range map[string]ops.KeyDecision{
					"reason":       {Action: idem.OperatorForget, Reason: "too short"},
					"external_ref": {Action: idem.OperatorConfirmHappened, Reason: "a long enough reason"},
					"outcome":      {Action: "explode", Reason: "a long enough reason"},
				} {
					d.RecordID, d.Version = rec.ID, rec.Version
					_, err := b.keys.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall"}, d)
					var fe *fielderr.Error
					require.ErrorAs(t, err, &fe)
					require.Equal(t, field, fe.Field)
				}
				_, err := b.keys.Decide(context.Background(), ops.Actor{Username: "ada", Role: "oncall"},
					ops.KeyDecision{RecordID: rec.ID, Version: rec.Version + 5, Action: idem.OperatorForget, Reason: "an outdated page was open"})
				require.ErrorIs(t, err, ops.ErrStale)
				got, ok, err := b.records.KeyByID(context.Background(), rec.ID)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, rec.Version, got.Version, "nothing changed")
			})
		})
	}
}

// TestKeyDecisionAndItsEntryCommitTogether breaks the one transaction of a
// key decision and its audit entry (SPEC CON K5): an entry the
// trail refuses, or that the database refuses at its INSERT, leaves the
// key as it was (an append after the commit would not), and a commit that
// fails leaves no entry (an append in a transaction of its own would).
func TestKeyDecisionAndItsEntryCommitTogether(t *testing.T) {
	t.Parallel()
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, backend)
			breakAudit(t, b.dialect, b.exec)
			unchanged := func(t *testing.T, rec idemdriver.Record) {
				t.Helper()
				got, ok, err := b.records.KeyByID(ctx, rec.ID)
				require.NoError(t, err)
				require.True(t, ok, "the key is still there")
				require.Equal(t, rec.Version, got.Version, "the key did not change")
				require.Equal(t, idemdriver.StatusPending, got.Status)
				hist, err := b.keys.History(ctx, rec.ID, 10)
				require.NoError(t, err)
				require.Zero(t, len(hist), "no audit entry")
			}
			for _, action := range []idem.OperatorAction{idem.OperatorForget, idem.OperatorConfirmHappened, idem.OperatorConfirmNotHappened} {
				t.Run(string(action), func(t *testing.T) {
					d := ops.KeyDecision{Action: action, Reason: "the provider's dashboard was checked", ExternalRef: "ch_1", AcknowledgeRerun: true}

					t.Run("TheAppendFails", func(t *testing.T) {
						rec := pending(t, b, "k-append-"+string(action))
						d.RecordID, d.Version = rec.ID, rec.Version
						// The trail refuses an entry without an actor.
						_, err := b.keys.Decide(ctx, ops.Actor{}, d)
						require.ErrorIs(t, err, audit.ErrInvalid)
						unchanged(t, rec)
					})

					t.Run("TheDatabaseRefusesTheEntry", func(t *testing.T) {
						rec := pending(t, b, "k-insert-"+string(action))
						d.RecordID, d.Version = rec.ID, rec.Version
						d := d
						d.Reason += failAppend
						_, err := b.keys.Decide(ctx, ops.Actor{Username: "ada", Role: "oncall"}, d)
						require.ErrorContains(t, err, "the test refuses this audit entry")
						unchanged(t, rec)
					})

					t.Run("TheCommitFails", func(t *testing.T) {
						rec := pending(t, b, "k-commit-"+string(action))
						d.RecordID, d.Version = rec.ID, rec.Version
						restore := failCommits(t, b.dialect, b.exec, b.names)
						_, err := b.keys.Decide(ctx, ops.Actor{Username: "ada", Role: "oncall"}, d)
						restore()
						require.ErrorContains(t, err, "commit: ", "the COMMIT failed")
						unchanged(t, rec)
					})
				})
			}
		})
	}
}

// TestRefusalAuditFailureIsLogged: a refused decision whose audit entry
// cannot be appended is still refused, and the failure is logged without
// the reason (never dropped with _ =).
func TestRefusalAuditFailureIsLogged(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	b := setupLogged(t, backends["SQLite"], slog.New(slog.NewJSONHandler(&buf, nil)))
	rec := pending(t, b, "k-refusal-log")
	reason := "an outdated page was open, secret-ish words"
	// A stale version is refused; the trail refuses an entry without an
	// actor, so the refusal's entry fails.
	_, err := b.keys.Decide(context.Background(), ops.Actor{}, ops.KeyDecision{RecordID: rec.ID, Version: rec.Version + 1,
		Action: idem.OperatorForget, Reason: reason})
	require.ErrorIs(t, err, ops.ErrStale)
	require.Contains(t, buf.String(), "the audit entry of a refused decision was not appended")
	require.Contains(t, buf.String(), `"target_id":"`+fmt.Sprint(rec.ID)+`"`)
	require.NotContains(t, buf.String(), reason, "no reason in the logs")
}

// TestDecisionsRefuseAnotherDialect: the console store of a DB is of the
// DB's dialect, so that its typed statements run in the DB's transactions.
func TestDecisionsRefuseAnotherDialect(t *testing.T) {
	t.Parallel()
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "dialect.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = ops.SQLite(db, audit.NewSQLite(db), store.NewMySQL(db), nil)
	require.Error(t, err, "a MySQL console store under SQLite decisions")
	_, err = ops.MySQL(db, audit.NewMySQL(db), store.NewSQLite(db), nil)
	require.Error(t, err, "a SQLite console store under MySQL decisions")
	_, err = ops.SQLite(db, audit.NewSQLite(db), store.NewSQLite(db), nil)
	require.NoError(t, err)
}
