// Package consolecmd is the console program: the subcommands of
// cmd/console ("serve", "demo", "migrate", "user", …) behind one entry
// point, [Run]. It lives outside package main so that its tests can be
// split into packages that each fit the default test timeout.
package consolecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/unstuckhq/unstuck/idem"
)

// Run is the whole program: it parses args (without the program name),
// reads configuration through getenv, and writes to stdout and stderr. It
// returns when the command is done or ctx ends. A password for "user add"
// comes from the process's standard input (asked for on stderr, without
// echo, when that is a terminal).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return run(ctx, args, getenv, stdout, stderr)
}

// ExitStatus is the process's exit status after Run returned err: 0 when
// the command is done (serve and demo after SIGINT or SIGTERM), 2 when the
// command line could not be used (an unknown command or flag, a missing
// required flag), 1 when the command failed.
func ExitStatus(err error) int { return exitStatus(err) }

// ErrorMessage is what the program prints on stderr when Run returned err,
// or "" when there is nothing to print (a usage error printed its usage).
func ErrorMessage(err error) string {
	if err == nil || errors.Is(err, errUsage) {
		return ""
	}
	return fmt.Sprint("console: ", err)
}

// errUsage reports a command line that could not be parsed; the message was
// already printed with the usage.
var errUsage = errors.New("usage")

// exitStatus is the process's exit status after run returned err: 0 when
// the command is done (serve and demo after SIGINT or SIGTERM), 2 when the
// command line could not be used (errUsage: an unknown command or flag, a
// missing required flag), 1 when the command failed.
func exitStatus(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		return 1
	}
}

// applicationSecret returns UNSTUCK_SECRET, or an error that says its
// length and how to make one: the secret is used as raw bytes, never
// decoded, so a base64 or hex text counts by its characters.
func applicationSecret(getenv func(string) string) (string, error) {
	secret := getenv("UNSTUCK_SECRET")
	const how = "it is used as raw bytes, not decoded from base64 or hex; make one with: openssl rand -base64 48"
	switch {
	case secret == "":
		return "", fmt.Errorf("UNSTUCK_SECRET is not set: the application secret must have at least %d bytes; %s", idem.MinSecretBytes, how)
	case len(secret) < idem.MinSecretBytes:
		return "", fmt.Errorf("UNSTUCK_SECRET has %d bytes, at least %d are needed; %s", len(secret), idem.MinSecretBytes, how)
	}
	return secret, nil
}

const usage = `console — the unstuck operations console

Usage:
  console <command> [flags]

Commands:
  demo      run the console and the demo shop on the embedded SQLite default,
            with demo users and traffic
  serve     serve the operations console
  migrate   apply the database migrations, River's included (idempotent)
  user      add, disable, enable or unlock a console account, or reset its
            password (user password)
  audit     verify the audit trail, checkpoint its head (audit verify|checkpoint)
  token     create, revoke or list API tokens of /api/v1 (token create|revoke|list)
  api       call the operator API: list, show and decide keys, operations and
            bulk requests (api keys list, api --help)
  help      show this help

Configuration (flags override the environment):
  UNSTUCK_DB        database: postgres://user@host:5432/db, mysql://user@host:3306/db or sqlite:PATH
  UNSTUCK_ADDR      listen address of serve (default 127.0.0.1:8080)
  UNSTUCK_SECRET    application secret, at least 32 bytes taken as they are, not
                    decoded: openssl rand -base64 48 (serve; never a flag)
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
  UNSTUCK_API_URL   the console's URL "console api" calls
  UNSTUCK_API_TOKEN the API token "console api" sends (never a flag)

Run "console <command> --help" for a command's flags.

Exit status: 0 done, 1 the command failed (the error is printed as
"console: …"), 2 the command line could not be used.
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
	case "token":
		return runToken(ctx, rest, getenv, stdout, stderr)
	case "api":
		return runAPI(ctx, rest, getenv, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "console: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
}
