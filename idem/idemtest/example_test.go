package idemtest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/idem/idemtest"
)

// newSQLiteStore returns a migrated store on a fresh database file in dir.
func newSQLiteStore(ctx context.Context, dir string) (*idemsqlite.Store, func() error, error) {
	db, err := idemsqlite.Open(filepath.Join(dir, "unstuck.db"))
	if err != nil {
		return nil, nil, err
	}
	s := idemsqlite.New(db)
	if err := s.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	return s, db.Close, nil
}

// Example shows the one test file a driver needs: the store contract's
// suite and the admin contract's, each given fresh migrated tables per
// subtest. Outside a test, the same harness reads what the engine wrote.
func Example() {
	// In the driver's _test.go file:
	newStore := func(t *testing.T) *idemsqlite.Store {
		s, closeDB, err := newSQLiteStore(t.Context(), t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, closeDB()) })
		return s
	}
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		idemtest.Run(t, func(t *testing.T) idemdriver.Store { return newStore(t) })
	}
	_ = func(t *testing.T) { // func TestAdminConformance(t *testing.T)
		idemtest.RunAdmin(t, func(t *testing.T) idemtest.AdminHarness {
			s := newStore(t)
			return idemtest.AdminHarness{Store: s, Admin: s, Seeder: s}
		})
	}

	// The harness's store, used as the suites use it.
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idemtest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, closeDB, err := newSQLiteStore(ctx, dir)
	if err != nil {
		log.Fatal(err)
	}
	defer closeDB()
	engine, err := idem.New(s, idem.Config{Secret: idemtest.Secret})
	if err != nil {
		log.Fatal(err)
	}
	_, err = idem.Run(ctx, engine, "key-1", "tenant:1", func(ctx context.Context) (string, error) {
		return "charged", nil
	}, &idem.RunOpts{Operation: "charge", TTL: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	o, err := s.KeyOverview(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c := o.Count(idemdriver.StatusCompleted)
	fmt.Println(c.Count, "completed, exact:", c.Exact)
	// Output: 1 completed, exact: true
}
