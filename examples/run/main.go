// Command run calls idem.Run with a key: the function runs once, a repeat
// with the same key gets the stored value without running it, and the same
// key with another request (another fingerprint) is refused as a reuse.
//
//	go run ./examples/run
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
)

// Receipt is what the operation returns; Run stores it as JSON and
// returns it to every repeat.
type Receipt struct {
	ChargeID string `json:"charge_id"`
	Amount   int64  `json:"amount"`
}

func main() {
	dbPath := flag.String("db", "", "SQLite file (default: a new file in a temporary directory)")
	flag.Parse()
	if err := run(context.Background(), *dbPath); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dbPath string) error {
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "unstuck-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "app.db")
	}
	db, err := idemsqlite.Open(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	store := idemsqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	engine, err := idem.New(store, idem.Config{Secret: secret()})
	if err != nil {
		return err
	}
	defer func() {
		if err := engine.Shutdown(context.Background()); err != nil {
			log.Print(err)
		}
	}()

	charges := 0
	charge := func(amount int64) func(context.Context) (Receipt, error) {
		return func(ctx context.Context) (Receipt, error) {
			charges++
			ref := fmt.Sprintf("ch_%03d", charges)
			// Attach the provider's reference at once: an operator sees it
			// even if this process dies before Run records the outcome.
			if err := idem.Annotate(ctx, idem.Annotation{ExternalRef: ref}); err != nil {
				return Receipt{}, err
			}
			return Receipt{ChargeID: ref, Amount: amount}, nil
		}
	}

	const key, scope = "charge-for-order-42", "tenant:acme"
	for range 2 {
		res, err := idem.Run(ctx, engine, key, scope, charge(1999), &idem.RunOpts{Fingerprint: "amount=1999"})
		if err != nil {
			return err
		}
		fmt.Printf("Run %s: charge %s amount %d replayed=%t\n", key, res.Value.ChargeID, res.Value.Amount, res.Replayed)
	}

	// The same key for another request: refused, nothing runs.
	_, err = idem.Run(ctx, engine, key, scope, charge(5000), &idem.RunOpts{Fingerprint: "amount=5000"})
	switch {
	case errors.Is(err, idem.ErrKeyReused):
		fmt.Printf("Run %s with another amount: refused (%v)\n", key, err)
	case err != nil:
		return err
	default:
		return errors.New("a reused key ran")
	}
	fmt.Println("charges made:", charges)
	return nil
}

// secret is the application secret: at least 32 bytes, from your secret
// store. The example falls back to a fixed one.
func secret() []byte {
	if s := os.Getenv("UNSTUCK_SECRET"); s != "" {
		return []byte(s)
	}
	return []byte("example-secret-not-for-production!!")
}
