package sagapgx_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/unstuckhq/unstuck/saga"
	"github.com/unstuckhq/unstuck/saga/sagadriver"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
)

// The driver on the pool that the River client uses (riverpgxv5 on the
// same pool), migrated, under a runner; a console reads the same records
// through the driver's admin contract. It needs a PostgreSQL database
// (DATABASE_URL), so it has no output to check.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	driver := sagapgx.New(pool)
	if err := driver.Migrate(ctx); err != nil { // the "saga" line, with every index
		log.Fatal(err)
	}
	signup := saga.Definition{Type: "signup", Steps: []saga.Step{{Name: "account",
		Do: func(ctx context.Context, in saga.StepInput) (saga.Result, error) {
			return saga.Result{ExternalID: "acc-1"}, nil
		}}}}
	runner, err := saga.NewRunner(driver, saga.Config{Definitions: []saga.Definition{signup}})
	if err != nil {
		log.Fatal(err)
	}
	workers := river.NewWorkers()
	if err := runner.AddWorkers(workers); err != nil {
		log.Fatal(err)
	}

	// What a console shows: the operations waiting for a human.
	page, err := driver.PageOperations(ctx, sagadriver.OperationFilter{Status: sagadriver.StatusReviewRequired})
	if err != nil {
		log.Fatal(err)
	}
	for _, op := range page.Operations {
		fmt.Println(op.ID, op.ReviewReason)
	}
}
