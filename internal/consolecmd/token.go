package consolecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/internal/web"
)

const tokenUsage = `Usage: console token create --name N (--user U | --role R) [--expires 720h] [--db URL]
       console token revoke --name N [--db URL]
       console token list [--db URL]

API tokens of the operator API under /api/v1 (docs/api.md). A user's token
(--user) acts as its user, with the user's role; a service token (--role)
acts as "token:NAME" with its own role. "token create" prints the token
once: only its hash is kept. "create" and "revoke" are recorded in the
audit trail by the token's name and ID, so they need UNSTUCK_AUDIT_KEY;
"list" never shows a secret.

`

// tokenActor is the audit trail's actor of "console token": whoever runs
// it holds the database URL, not a console session.
const tokenActor = "system:console-token"

// runToken is "console token create|revoke|list" (SPEC K25).
func runToken(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return errUsage
	}
	sub := args[0]
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, tokenUsage)
		return nil
	case "create", "revoke", "list":
	default:
		fmt.Fprintf(stderr, "console token: unknown subcommand %q\n\n%s", sub, tokenUsage)
		return errUsage
	}
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := dbFlag(fs, getenv, "database `URL` (env UNSTUCK_DB)")
	name := fs.String("name", "", "the token's `name` (create, revoke)")
	user := fs.String("user", "", "the `username` a user's token acts as (create)")
	role := fs.String("role", "", "a service token's role: auditor, support, oncall or admin (create)")
	expires := fs.Duration("expires", 0, "the token's lifetime, e.g. 720h; 0: it does not expire (create)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), tokenUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args[1:], stdout, stderr); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "console token %s: unexpected argument %q\n", sub, fs.Arg(0))
		return errUsage
	}
	switch {
	case *dbURL == "":
		fmt.Fprintln(stderr, "console token: --db (or UNSTUCK_DB) is required")
		return errUsage
	case sub != "list" && *name == "":
		fmt.Fprintf(stderr, "console token %s: --name is required\n", sub)
		return errUsage
	case sub == "create" && (*user == "") == (*role == ""):
		fmt.Fprintln(stderr, "console token create: give --user (a user's token) or --role (a service token), not both")
		return errUsage
	case sub == "create" && *expires < 0:
		fmt.Fprintln(stderr, "console token create: --expires must not be negative")
		return errUsage
	}
	var keys *audit.Keyring
	if sub != "list" { // refused before the database is opened
		k, err := auditKeysFromEnv(getenv)
		if err != nil {
			return fmt.Errorf("token %s: %w", sub, err)
		}
		keys = k
	}
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "list":
		return listTokens(ctx, db, stdout)
	case "revoke":
		db.useAuditKeys(keys)
		t, revoked, err := db.Console.RevokeAPIToken(ctx, *name, time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("token revoke: there is no token %s", *name)
		}
		if err != nil {
			return db.explain(fmt.Errorf("token revoke %s: %w", *name, err))
		}
		if !revoked {
			fmt.Fprintf(stdout, "token %s was revoked already, at %s\n", t.Name, t.RevokedAt.Format(time.RFC3339))
			return nil
		}
		if _, err := db.Trail.Append(ctx, web.TokenAuditEntry(web.ActionTokenRevoke, t, tokenActor, "system", "revoked with console token revoke")); err != nil {
			return fmt.Errorf("token revoke %s: the token is revoked, but the audit entry could not be appended: %w", *name, err)
		}
		fmt.Fprintf(stdout, "revoked token %s (id %d)\n", t.Name, t.ID)
		return nil
	}
	db.useAuditKeys(keys)
	secret, hash := store.NewTokenSecret()
	t := store.APIToken{Name: *name, Owner: *user, Role: *role, CreatedBy: tokenActor}
	if *expires > 0 {
		t.ExpiresAt = time.Now().Add(*expires)
	}
	t, err = db.Console.CreateAPIToken(ctx, t, hash)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("token create: a token named %s exists; revoke it or choose another name", *name)
	}
	if err != nil {
		return db.explain(fmt.Errorf("token create %s: %w", *name, err))
	}
	if _, err := db.Trail.Append(ctx, web.TokenAuditEntry(web.ActionTokenCreate, t, tokenActor, "system", "created with console token create")); err != nil {
		if _, _, rerr := db.Console.RevokeAPIToken(ctx, t.Name, time.Now()); rerr != nil {
			return fmt.Errorf("token create %s: the audit entry could not be appended (%w), and the token could not be revoked: %w", *name, err, rerr)
		}
		return fmt.Errorf("token create %s: the audit entry could not be appended, so the token was revoked: %w", *name, err)
	}
	fmt.Fprintf(stdout, "created token %s (id %d)\ntoken (shown once): %s\n", t.Name, t.ID, secret)
	return nil
}

// listTokens prints every token, without secrets (none is kept).
func listTokens(ctx context.Context, db *database, stdout io.Writer) error {
	list, err := db.Console.ListAPITokens(ctx)
	if err != nil {
		return db.explain(fmt.Errorf("token list: %w", err))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tACTS AS\tROLE\tCREATED\tEXPIRES\tLAST USED\tSTATE")
	at := func(t time.Time, zero string) string {
		if t.IsZero() {
			return zero
		}
		return t.UTC().Format(time.RFC3339)
	}
	now := time.Now()
	for _, t := range list {
		actsAs, role := t.Owner, "(the user's)"
		if actsAs == "" {
			actsAs, role = "token:"+t.Name, t.Role
		}
		state := "active"
		switch {
		case !t.RevokedAt.IsZero():
			state = "revoked " + at(t.RevokedAt, "")
		case !t.Usable(now):
			state = "expired"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, actsAs, role, at(t.CreatedAt, ""), at(t.ExpiresAt, "never"), at(t.LastUsedAt, "never"), state)
	}
	return tw.Flush()
}
