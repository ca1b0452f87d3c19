package sagasqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// The driver on a SQLite file (one connection, as riversqlite advises),
// migrated, under a runner; the console's overview counts through the
// driver's admin contract.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sagasqlite-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := idemsqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	driver := sagasqlite.New(db)
	if err := driver.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	signup := saga.Definition{Type: "signup", Steps: []saga.Step{{Name: "account",
		Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
			return saga.Result{ExternalID: "acc-1"}, nil
		}}}}
	if _, err := saga.NewRunner(driver, saga.Config{Definitions: []saga.Definition{signup}}); err != nil {
		log.Fatal(err)
	}

	counts, err := driver.CountOperations(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	c := counts.Count(sagadriver.StatusReviewRequired)
	fmt.Println(c.Status, c.Count, c.Exact)
	// Output: review_required 0 true
}
