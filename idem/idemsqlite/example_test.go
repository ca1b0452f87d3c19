package idemsqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// Open the database file, migrate it (safe on every start), make the store
// and an engine over it. A second Run of the same key replays the first
// one's value without calling the function again.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idemsqlite-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := idemsqlite.Open(filepath.Join(dir, "unstuck.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	engine, err := idem.New(store, idem.Config{Secret: []byte("example-secret-of-at-least-32-bytes!")})
	if err != nil {
		log.Fatal(err)
	}

	calls := 0
	sendReceipt := func(context.Context) (string, error) {
		calls++
		return "receipt-1", nil
	}
	for range 2 {
		res, err := idem.Run(ctx, engine, "receipt-for-order-42", "tenant:acme", sendReceipt, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s replayed=%t\n", res.Value, res.Replayed)
	}
	fmt.Println("calls:", calls)
	if err := engine.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// receipt-1 replayed=false
	// receipt-1 replayed=true
	// calls: 1
}
