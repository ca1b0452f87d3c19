package audit_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// A decision and its audit entry commit in one transaction that the caller
// begins, passes to the transition and to AppendSQLiteTx, and commits.
func ExampleTrail_AppendSQLiteTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "audit-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// _txlock=immediate: every write transaction takes the write lock at
	// BEGIN, which serialises the appends.
	q := url.Values{"_pragma": {"busy_timeout(10000)", "journal_mode(WAL)"}, "_txlock": {"immediate"}}
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: filepath.Join(dir, "console.db"), RawQuery: q.Encode()}).String())
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
	trail := audit.NewSQLite(db, audit.WithKeys(keys))
	if err := trail.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	err = func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op once committed
		// … check the version and apply the transition on tx …
		e, err := trail.AppendSQLiteTx(ctx, tx, audit.Entry{
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
		return tx.Commit() // the decision and its entry together
	}()
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
