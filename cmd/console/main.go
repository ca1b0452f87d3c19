// Command console runs the unstuck operations console and administers its
// database. Run "console --help" for the subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

// errUsage reports a command line that could not be parsed; the message was
// already printed with the usage.
var errUsage = errors.New("usage")

const usage = `console — the unstuck operations console

Usage:
  console <command> [flags]

Commands:
  demo      run the console and the demo shop on the embedded SQLite default,
            with demo users and traffic
  serve     serve the operations console
  migrate   apply the database migrations, River's included (idempotent)
  user      add, disable, enable or unlock a console account
  audit     verify the audit trail, checkpoint its head (audit verify|checkpoint)
  help      show this help

Configuration (flags override the environment):
  UNSTUCK_DB        database: postgres://user@host:5432/db, mysql://user@host:3306/db or sqlite:PATH
  UNSTUCK_ADDR      listen address of serve (default 127.0.0.1:8080)
  UNSTUCK_SECRET    application secret, at least 32 bytes (serve; never a flag)
  UNSTUCK_PREVIOUS_SECRETS  earlier secrets during a rotation, comma-separated
  UNSTUCK_AUDIT_KEY the audit trail's MAC key, at least 32 bytes, not held by the
                    applications (serve, audit; never a flag)
  UNSTUCK_AUDIT_PREVIOUS_KEYS  earlier audit keys during a rotation, comma-separated
  UNSTUCK_TRUSTED_PROXIES  CIDRs of reverse proxies whose X-Forwarded-For is believed (serve)
  UNSTUCK_METRICS_ADDR     serve /metrics on its own listen address (serve)
  UNSTUCK_METRICS_TOKEN    bearer token /metrics requires (serve; never a flag)
  UNSTUCK_OIDC_ISSUER, UNSTUCK_OIDC_CLIENT_ID, UNSTUCK_OIDC_REDIRECT_URL
                    single sign-on through an OpenID provider (serve --help)
  UNSTUCK_OIDC_CLIENT_SECRET or UNSTUCK_OIDC_CLIENT_SECRET_FILE
                    its client secret (serve; never a flag)

Run "console <command> --help" for a command's flags.
`

// run is the whole program: it parses args (without the program name),
// reads configuration through getenv, and writes to stdout and stderr. It
// returns when the command is done or ctx ends. A password for "user add"
// comes from the process's standard input (asked for on stderr, without
// echo, when that is a terminal).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runWithStdin(ctx, args, getenv, stdinOf(os.Stdin), stdout, stderr)
}

// runWithStdin is run with the standard input given, for tests.
func runWithStdin(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "user":
		return runUser(ctx, rest, getenv, stdin, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "audit":
		return runAudit(ctx, rest, getenv, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "console: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
}
