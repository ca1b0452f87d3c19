package sagatest_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
	"github.com/unstuckhq/unstuck/saga/sagatest"
)

// A driver is proven by one test file that runs the suite on fresh tables
// for every subtest; this is sagasqlite's. A driver that estimates counts
// (sagapgx) also sets Fixture.Analyze.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		sagatest.Run(t, func(t *testing.T) sagatest.Fixture[*sql.Tx] {
			db, err := idemsqlite.Open(filepath.Join(t.TempDir(), "saga.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			d := sagasqlite.New(db)
			if err := d.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			return sagatest.Fixture[*sql.Tx]{Driver: d}
		})
	}
}
