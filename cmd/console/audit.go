package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/unstuckhq/unstuck/internal/audit"
)

const auditUsage = `Usage: console audit verify --db URL [--anchor SEQ:HASH]...

Walks the audit trail's hash chain from seq 1 and reports the first entry
that is missing or altered; the exit status is non-zero if the chain is
broken. On success it prints the head as SEQ:HASH: keep it outside the
database and pass it back with --anchor later, to detect entries removed
from the end or a chain rewritten with recomputed hashes.

`

// runAudit runs "console audit <subcommand>"; verify is the only one.
func runAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, auditUsage)
		return errUsage
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "verify":
		return runAuditVerify(ctx, rest, getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, auditUsage)
		return nil
	default:
		fmt.Fprintf(stderr, "console audit: unknown subcommand %q\n\n%s", sub, auditUsage)
		return errUsage
	}
}

func runAuditVerify(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := dbFlag(fs, getenv, "database `URL`: postgres://… or sqlite:PATH (env UNSTUCK_DB)")
	var anchors []audit.Anchor
	fs.Func("anchor", "a head printed by an earlier verification, as `SEQ:HASH` (repeatable)", func(s string) error {
		a, err := audit.ParseAnchor(s)
		if err != nil {
			return err
		}
		anchors = append(anchors, a)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), auditUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args, stdout, stderr); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "console audit verify: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	if *dbURL == "" {
		fmt.Fprintln(stderr, "console audit verify: --db is required (or set UNSTUCK_DB)")
		return errUsage
	}
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	trail := audit.NewSQLite(db.SQL)
	if db.Pool != nil {
		trail = audit.NewPostgres(db.Pool)
	}
	v, err := trail.Verify(ctx, anchors...)
	if err != nil {
		return fmt.Errorf("verify the audit trail of %s: %w", db.Redacted, err)
	}
	if !v.OK {
		fmt.Fprintf(stdout, "%d entries verified before the break\n", v.Checked)
		return fmt.Errorf("audit trail broken at seq %d: %s", v.FirstBad, v.Problem)
	}
	fmt.Fprintf(stdout, "audit trail verified: %d entries\n", v.Checked)
	if v.HeadSeq > 0 {
		fmt.Fprintf(stdout, "head: %s\n", audit.Anchor{Seq: v.HeadSeq, Hash: v.Head})
	}
	return nil
}
