package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/idemsqlite"
	"github.com/unstuckhq/unstuck/internal/audit"
)

// A decision and its audit entry commit in one transaction: the driver's
// WithinTx, which AppendTx joins through the context.
func ExampleTrail_AppendTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "audit-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := idemsqlite.Open(filepath.Join(dir, "console.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// The audit key comes from the console's environment
	// (UNSTUCK_AUDIT_KEY), never from the database.
	keys, err := audit.NewKeyring([]byte("example-audit-key-never-use-this-one"))
	if err != nil {
		log.Fatal(err)
	}
	store, trail := idemsqlite.New(db), audit.NewSQLite(db, audit.WithKeys(keys))
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := trail.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	err = store.WithinTx(ctx, func(ctx context.Context, tx idemdriver.Store) error {
		// … check the version and apply the transition through tx …
		e, err := trail.AppendTx(ctx, audit.Entry{
			Actor: "ada", Role: "support", Action: "key.forget", TargetKind: "key", TargetID: "42",
			Reason:  "the customer confirmed the charge never happened",
			Before:  json.RawMessage(`{"status":"unavailable","version":3}`),
			After:   json.RawMessage(`{"status":"released","version":4}`),
			Outcome: audit.OutcomeApplied, RequestID: "req-7f3a", ClientAddr: "192.0.2.10",
		})
		if err != nil {
			return err
		}
		fmt.Println("appended seq", e.Seq)
		return nil // WithinTx commits the decision and its entry together
	})
	if err != nil {
		log.Fatal(err)
	}

	v, err := trail.Verify(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("verified %d entries: %t\n", v.Checked, v.OK)
	// Output:
	// appended seq 1
	// verified 1 entries: true
}
