package idempgx_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idempgx"
)

// ExampleNew builds the store on the application's pool, creates its
// tables, runs the engine on it and reads the records back through the
// admin contract, as the console does. It needs a PostgreSQL database, so
// it has no checked output.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store := idempgx.New(pool)
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	engine, err := idem.New(store, idem.Config{Secret: []byte(os.Getenv("IDEM_SECRET"))})
	if err != nil {
		log.Fatal(err)
	}
	_ = engine // run requests with idem.Run or the HTTP middleware

	// The same store is an idemdriver.Admin: the console's lists and counts.
	var admin idemdriver.Admin = store
	page, err := admin.ListKeys(ctx, idemdriver.KeyFilter{Status: idemdriver.StatusPending})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Records), "pending records on the first page")
}
