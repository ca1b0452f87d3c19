package sagasqlite_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// TestStartInTransactionalMiddleware (SPEC IDEM-H17, G4): on SQLite, a
// handler under the transactional middleware starts a saga in the
// middleware's transaction (idemsqlite.TxFrom hands out the *sql.Tx that
// sagasqlite's StartTx takes), so the idempotency record, the operation
// and its first River job commit together; a handler that fails (5xx)
// rolls all three back. The handle has one connection, as riversqlite
// advises: a saga started on a second connection would wait for the
// middleware's write lock instead.
func TestStartInTransactionalMiddleware(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "app.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	db.SetMaxOpenConns(1)

	store := idemsqlite.New(db)
	require.NoError(t, store.Migrate(ctx))
	driver := sagasqlite.New(db)
	require.NoError(t, driver.Migrate(ctx))
	migrator, err := rivermigrate.New(riversqlite.New(db), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)

	signup := saga.Definition{Type: "signup", Steps: []saga.Step{{Name: "account",
		Do: func(context.Context, saga.StepInput) (saga.Result, error) { return saga.Result{}, nil }}}}
	runner, err := saga.NewRunner(driver, saga.Config{Definitions: []saga.Definition{signup}})
	require.NoError(t, err)
	workers := river.NewWorkers()
	require.NoError(t, runner.AddWorkers(workers))
	// Not started: the test checks what commits, not what the steps do.
	client, err := river.NewClient(riversqlite.New(db), &river.Config{Workers: workers, TestOnly: true})
	require.NoError(t, err)
	runner.SetClient(client)

	engine, err := idem.New(store, idem.Config{Secret: []byte("a-test-secret-of-at-least-32-bytes!!")})
	require.NoError(t, err)
	mw, err := idem.NewMiddleware(engine, idem.MiddlewareConfig{Transactional: true})
	require.NoError(t, err)
	h := mw.Required(&idem.RouteOpts{Name: "signup"})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := idemsqlite.TxFrom(r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		id := r.URL.Query().Get("id")
		if _, err := runner.StartTx(r.Context(), tx, "signup", map[string]string{"email": id + "@example.com"}, &saga.StartOpts{ID: id}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if r.URL.Query().Has("fail") {
			http.Error(w, "failed after the start", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	serve := func(key, query string) int {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/signup?"+query, nil)
		r.Header.Set("Idempotency-Key", `"`+key+`"`)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	count := func(query string) int {
		var n int
		require.NoError(t, db.QueryRowContext(ctx, query).Scan(&n))
		return n
	}

	t.Run("Commit", func(t *testing.T) {
		require.Equal(t, http.StatusCreated, serve("signup-key-0000000001", "id=op-1"))
		op, err := runner.Get(ctx, "op-1")
		require.NoError(t, err)
		require.Equal(t, sagadriver.StatusPending, op.Status)
		require.Equal(t, 1, count(`SELECT count(*) FROM river_job`))
		require.Equal(t, 1, count(`SELECT count(*) FROM unstuck_idem_record`))
		require.Equal(t, http.StatusCreated, serve("signup-key-0000000001", "id=op-1"), "the repeat replays")
		require.Equal(t, 1, count(`SELECT count(*) FROM river_job`), "the repeat starts nothing")
	})
	t.Run("HandlerErrorRollsBack", func(t *testing.T) {
		require.Equal(t, http.StatusInternalServerError, serve("signup-key-0000000002", "id=op-2&fail"))
		_, err := runner.Get(ctx, "op-2")
		require.True(t, errors.Is(err, saga.ErrNotFound), "%v", err)
		require.Equal(t, 1, count(`SELECT count(*) FROM river_job`))
		require.Equal(t, 1, count(`SELECT count(*) FROM unstuck_idem_record`))
	})
}
