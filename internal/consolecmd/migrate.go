package consolecmd

import (
	"context"
	"flag"
	"fmt"
	"io"
)

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := dbFlag(fs, getenv, "database `URL`: postgres://…, mysql://… or sqlite:PATH (env UNSTUCK_DB)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: console migrate --db URL

Applies every pending migration: the idempotency records, the sagas,
River's job tables (rivermigrate), the console's tables and indexes, and
the audit trail. Running it again changes nothing. "console serve" refuses
to start until it has run; on SQLite every command runs it first. On
MySQL there are no sagas (River has no MySQL driver): it migrates the
idempotency records, the console's tables and the audit trail.

With UNSTUCK_AUDIT_KEY set it also seals the audit trail's keying marker
with it (else the console does at its first start, which then needs
UPDATE on unstuck_audit_keying).

`)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stdout, stderr); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "console migrate: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	if *dbURL == "" {
		fmt.Fprintln(stderr, "console migrate: --db is required (or set UNSTUCK_DB)")
		return errUsage
	}
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", db.Redacted, err)
	}
	fmt.Fprintf(stdout, "migrated %s\n", db.Redacted)
	if getenv("UNSTUCK_AUDIT_KEY") == "" {
		return nil
	}
	keys, err := auditKeysFromEnv(getenv)
	if err != nil {
		return err
	}
	db.useAuditKeys(keys)
	sealed, err := db.Trail.SealKeying(ctx)
	if err != nil {
		return fmt.Errorf("seal the audit trail's keying marker: %w", err)
	}
	if sealed {
		fmt.Fprintln(stdout, "sealed the audit trail's keying marker with the audit key")
	}
	return nil
}
