package idemmysql_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemmysql"
)

// Open a MySQL or MariaDB database (the DSN names it), create the store's
// tables, and run a key twice: the second call replays the first one's
// value. It needs a server (MYSQL_URL, such as
// mysql://app:secret@127.0.0.1:3306/app), so it has no checked output.
func ExampleOpen() {
	ctx := context.Background()
	db, err := idemmysql.Open(os.Getenv("MYSQL_URL"))
	if err != nil {
		log.Fatal(err) // e.g. "the DSN names no database", or a Check refusal naming the setting
	}
	defer db.Close()
	store := idemmysql.New(db)
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	engine, err := idem.New(store, idem.Config{Secret: []byte(os.Getenv("UNSTUCK_SECRET"))})
	if err != nil {
		log.Fatal(err)
	}
	defer engine.Shutdown(ctx)
	for range 2 {
		res, err := idem.Run(ctx, engine, "receipt-for-order-42", "tenant:acme", func(context.Context) (string, error) {
			return "receipt-1", nil
		}, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Value, res.Replayed)
	}
}
