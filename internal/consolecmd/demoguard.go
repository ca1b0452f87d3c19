package consolecmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/store"
)

// The demo must never weaken a real console: it marks the
// databases it creates, refuses any other unless told, and never changes an
// existing account; serve refuses the demo's public secret and its public
// passwords.

// demoMarkerTable holds one row when "console demo" created the database.
const demoMarkerTable = "unstuck_demo"

// demoPassword is the public password the demo gives the account name.
func demoPassword(name string) string { return "demo-" + name }

// demoDatabase is what the demo finds in a database before it changes it.
type demoDatabase struct {
	marked bool     // created by the demo: the marker table exists
	empty  bool     // no table at all: new, the demo may claim it
	others []string // accounts that are not demo accounts
}

// inspectDemoDatabase reads the marker, whether db has any table, and its
// accounts, changing nothing.
func inspectDemoDatabase(ctx context.Context, db *database) (demoDatabase, error) {
	var (
		st    demoDatabase
		users bool
		err   error
	)
	if db.Pool != nil {
		err = db.Pool.QueryRow(ctx, `SELECT to_regclass('`+demoMarkerTable+`') IS NOT NULL,
			NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
				WHERE c.relkind IN ('r', 'p', 'v', 'm') AND n.nspname = ANY (current_schemas(false))),
			to_regclass('unstuck_console_user') IS NOT NULL`).Scan(&st.marked, &st.empty, &users)
	} else {
		err = db.SQL.QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '`+demoMarkerTable+`'),
			NOT EXISTS (SELECT 1 FROM sqlite_schema WHERE type IN ('table', 'view')),
			EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'unstuck_console_user')`).Scan(&st.marked, &st.empty, &users)
	}
	if err != nil {
		return st, fmt.Errorf("inspect %s: %w", db.Redacted, err)
	}
	if !users {
		return st, nil
	}
	us, err := db.Console.ListUsers(ctx)
	if err != nil {
		return st, fmt.Errorf("inspect %s: %w", db.Redacted, err)
	}
	for _, u := range us {
		if !slices.Contains(demoUsers, u.Username) {
			st.others = append(st.others, u.Username)
		}
	}
	return st, nil
}

// claimDemoDatabase refuses a database the demo did not create (unless it
// has no table yet) or that has accounts other than the demo's, unless
// force (--reset-demo-users); then it marks the database as the demo's.
func claimDemoDatabase(ctx context.Context, db *database, force bool) error {
	st, err := inspectDemoDatabase(ctx, db)
	if err != nil {
		return err
	}
	if !force {
		switch {
		case !st.marked && !st.empty:
			return fmt.Errorf("%s was not created by console demo: the demo adds accounts with public passwords, so it runs only on a new database or its own. "+
				"Use a new database (by default the demo uses its own SQLite file), or pass --reset-demo-users to run it there anyway", db.Redacted)
		case len(st.others) > 0:
			return fmt.Errorf("%s has accounts that are not the demo's (%s): the demo adds accounts with public passwords next to them. "+
				"Use a new database or --fresh, or pass --reset-demo-users to run it there anyway", db.Redacted, listNames(st.others))
		}
	}
	if st.marked {
		return nil
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS ` + demoMarkerTable + ` (created_at TEXT NOT NULL)`,
		`INSERT INTO ` + demoMarkerTable + ` (created_at) SELECT CURRENT_TIMESTAMP WHERE NOT EXISTS (SELECT 1 FROM ` + demoMarkerTable + `)`,
	} {
		if db.Pool != nil {
			_, err = db.Pool.Exec(ctx, q)
		} else {
			_, err = db.SQL.ExecContext(ctx, q)
		}
		if err != nil {
			return fmt.Errorf("mark %s as the demo's: %w", db.Redacted, err)
		}
	}
	return nil
}

// listNames joins up to five names, saying how many more there are.
func listNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}

// removeDemoFile deletes the SQLite file at dbURL and its WAL for --fresh,
// if it is the demo's own (marked) or has no table; any other file is
// refused and left alone. PostgreSQL is refused: drop the database instead.
func removeDemoFile(ctx context.Context, dbURL string) error {
	path, ok := strings.CutPrefix(dbURL, "sqlite:")
	if !ok {
		return errors.New("--fresh starts a new SQLite file; for PostgreSQL, create a new database and pass it with --db")
	}
	path = strings.TrimPrefix(path, "//")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := openUnmigrated(ctx, dbURL)
	if err != nil {
		return err
	}
	st, err := inspectDemoDatabase(ctx, db)
	db.Close()
	if err != nil {
		return err
	}
	if !st.marked && !st.empty {
		return fmt.Errorf("--fresh deletes only the demo's own database, and %s was not created by console demo: nothing was deleted", dbURL)
	}
	river := consoleRiverFile(path)
	for _, p := range []string{path, path + "-wal", path + "-shm", river, river + "-wal", river + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--fresh: %w", err)
		}
	}
	return nil
}

// refuseDemoSecret refuses the demo's public secret as the application
// secret or a previous one: anyone could forge what it seals.
func refuseDemoSecret(secret string, previous [][]byte) error {
	if secret == demoSecret {
		return errors.New("UNSTUCK_SECRET is the public demo secret: set a secret of your own (at least 32 random bytes)")
	}
	for _, p := range previous {
		if string(p) == demoSecret {
			return errors.New("UNSTUCK_PREVIOUS_SECRETS lists the public demo secret: remove it")
		}
	}
	return nil
}

// refuseDemoUsers returns an error naming the enabled demo accounts (admin,
// oncall, support, auditor) whose password is still the public demo one,
// checked against their stored hashes.
func refuseDemoUsers(ctx context.Context, db *store.DB) error {
	var public []string
	for _, name := range demoUsers {
		u, ok, err := db.UserByUsername(ctx, name)
		if err != nil {
			return fmt.Errorf("look for demo accounts (has \"console migrate\" run?): %w", err)
		}
		if ok && !u.Disabled && auth.Verify(u.PasswordHash, demoPassword(name)) == nil {
			public = append(public, name)
		}
	}
	if len(public) == 0 {
		return nil
	}
	return fmt.Errorf("enabled accounts still have the public demo password demo-<name>: %s. "+
		"Disable them (console user disable --username NAME), or pass --allow-demo-users to serve a demo database anyway", strings.Join(public, ", "))
}
