package consolecmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/store"
)

const userUsage = `Usage: console user add --username U --role R [--db URL]
       console user password --username U [--db URL]   (resets the password)
       console user disable --username U [--db URL]
       console user enable --username U [--db URL]
       console user unlock --username U [--db URL]   (clears the sign-in throttle)

"user add" and "user password" take the password from standard input: at a
terminal they ask for it on stderr without echo (twice); otherwise they read
the first line. An empty answer or an empty input generates a password,
printed once. "user password" ends the account's sessions and is recorded in
the audit trail as user.password_reset, so it needs UNSTUCK_AUDIT_KEY.

`

// passwordResetActor is the audit trail's actor of "console user
// password": whoever runs it holds the database URL, not a console
// session.
const passwordResetActor = "system:console-user-password"

// runUser is "console user add|password|disable|enable|unlock": local
// accounts (SPEC K5).
func runUser(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, userUsage)
		return errUsage
	}
	sub := args[0]
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, userUsage)
		return nil
	}
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := dbFlag(fs, getenv, "database `URL` (env UNSTUCK_DB)")
	username := fs.String("username", "", "the account's `name`")
	role := fs.String("role", "", "auditor, support, oncall or admin (add only)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), userUsage)
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args[1:], stdout, stderr); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "console user %s: unexpected argument %q\n", sub, fs.Arg(0))
		return errUsage
	}
	if *dbURL == "" || *username == "" {
		fmt.Fprintln(stderr, "console user: --db (or UNSTUCK_DB) and --username are required")
		return errUsage
	}
	switch sub {
	case "add":
		if !store.ValidRole(*role) {
			fmt.Fprintf(stderr, "console user add: --role must be one of auditor, support, oncall, admin (got %q)\n", *role)
			return errUsage
		}
	case "password", "disable", "enable", "unlock":
	default:
		fmt.Fprintf(stderr, "console user: unknown subcommand %q\n\n%s", sub, userUsage)
		return errUsage
	}
	var auditKeys *audit.Keyring
	if sub == "password" { // refused before anything is asked or opened
		keys, err := auditKeysFromEnv(getenv)
		if err != nil {
			return fmt.Errorf("user password: %w", err)
		}
		auditKeys = keys
	}
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	switch sub {
	case "unlock": // clears the account's sign-in throttle in every console process
		if err := db.Console.UnlockUser(ctx, *username); err != nil {
			return db.explain(fmt.Errorf("unlock %s: %w", *username, err))
		}
		fmt.Fprintf(stdout, "unlocked sign-in of user %s\n", *username)
		return nil
	case "disable", "enable":
		if err := db.Console.SetUserDisabled(ctx, *username, sub == "disable"); err != nil {
			return db.explain(fmt.Errorf("%s %s: %w", sub, *username, err))
		}
		fmt.Fprintf(stdout, "%sd user %s\n", sub, *username)
		return nil
	case "password":
		db.useAuditKeys(auditKeys)
		return resetPassword(ctx, db, *username, stdin, stdout, stderr)
	}
	password, generated, err := readPassword(ctx, stdin, stderr, *username)
	if err != nil {
		return err
	}
	hash, err := auth.Hash(password)
	if err != nil {
		return err
	}
	u, err := db.Console.CreateUser(ctx, *username, *role, hash)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("add %s: user %s exists; use console user password --username %s to reset its password", *username, *username, *username)
	}
	if err != nil {
		return db.explain(fmt.Errorf("add %s: %w", *username, err))
	}
	fmt.Fprintf(stdout, "added user %s with role %s\n", u.Username, u.Role)
	if generated {
		fmt.Fprintf(stdout, "generated password (shown once): %s\n", password)
	}
	return nil
}

// resetPassword is "console user password": it reads a new password for
// the local account username as "user add" does, stores its hash, ends
// every session of the account and appends user.password_reset to the
// audit trail (which db's trail must be able to key). An account that signs
// in through single sign-on has no console password and is refused. The
// password changes before the entry is appended, as the console's other
// account changes do: if the append fails, the error says the password was
// changed and not recorded.
func resetPassword(ctx context.Context, db *database, username string, stdin io.Reader, stdout, stderr io.Writer) error {
	u, ok, err := db.Console.UserByUsername(ctx, username)
	switch {
	case err != nil:
		return db.explain(fmt.Errorf("user password %s: %w", username, err))
	case !ok:
		return fmt.Errorf("no user %s; add it with console user add --username %s --role ROLE", username, username)
	case u.Source != "" && u.Source != store.SourceLocal:
		return fmt.Errorf("user %s signs in through single sign-on (%s): its password is the identity provider's, not the console's", username, u.Source)
	}
	password, generated, err := readPassword(ctx, stdin, stderr, username)
	if err != nil {
		return err
	}
	hash, err := auth.Hash(password)
	if err != nil {
		return err
	}
	if err := db.Console.SetUserPassword(ctx, username, hash); err != nil {
		return fmt.Errorf("user password %s: %w", username, err)
	}
	ended, err := db.Console.EndUserSessions(ctx, u.ID)
	if err != nil {
		return fmt.Errorf("user password %s: the password changed, but its sessions could not be ended: %w", username, err)
	}
	after, err := json.Marshal(struct {
		SessionsEnded int64 `json:"sessions_ended"`
	}{ended})
	if err != nil {
		return err
	}
	if _, err := db.Trail.Append(ctx, audit.Entry{Actor: passwordResetActor, Role: "system", Action: "user.password_reset",
		TargetKind: "user", TargetID: username, Reason: "password reset with console user password",
		Outcome: audit.OutcomeApplied, After: after}); err != nil {
		return fmt.Errorf("user password %s: the password changed and %d sessions ended, but the audit entry could not be appended: %w", username, ended, err)
	}
	fmt.Fprintf(stdout, "reset the password of user %s; ended %d sessions\n", username, ended)
	if generated {
		fmt.Fprintf(stdout, "generated password (shown once): %s\n", password)
	}
	return nil
}

// readPassword takes the password for username: at a terminal (stdin is
// a [terminal]) it prompts on stderr and reads without echo, else it takes
// the first line of stdin. An empty answer means: generate one.
func readPassword(ctx context.Context, stdin io.Reader, stderr io.Writer, username string) (pw string, generated bool, err error) {
	if t, ok := stdin.(terminal); ok {
		pw, err = promptPassword(ctx, t, stderr, username)
		if err != nil {
			return "", false, err
		}
	} else if stdin != nil {
		line, rerr := bufio.NewReader(stdin).ReadString('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return "", false, fmt.Errorf("read password: %w", rerr)
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	if pw == "" {
		pw, err = auth.GeneratePassword()
		return pw, true, err
	}
	if err := auth.ValidatePassword(pw); err != nil {
		return "", false, err
	}
	return pw, false, nil
}

// promptPassword asks for a password on stderr and reads it twice without
// echo. An empty first answer returns "" (generate one); a password that
// fails [auth.ValidatePassword] is refused before it is asked again.
func promptPassword(ctx context.Context, t terminal, stderr io.Writer, username string) (string, error) {
	ask := func(prompt string) (string, error) {
		fmt.Fprint(stderr, prompt)
		b, err := t.ReadPassword(ctx)
		fmt.Fprintln(stderr) // the newline typed was not echoed either
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		return string(b), nil
	}
	pw, err := ask(fmt.Sprintf("Password for %s (at least %d characters; empty: generate one): ", username, auth.MinPasswordLength))
	if err != nil || pw == "" {
		return "", err
	}
	if err := auth.ValidatePassword(pw); err != nil {
		return "", err
	}
	again, err := ask("Repeat the password: ")
	if err != nil {
		return "", err
	}
	if again != pw {
		return "", errors.New("the two passwords differ; nothing was changed")
	}
	return pw, nil
}

// terminal is a standard input that is an interactive terminal.
type terminal interface {
	io.Reader
	// ReadPassword reads one line without echoing it, without its line
	// ending. It returns ctx's error, with the terminal restored, when
	// ctx ends first (Ctrl-C).
	ReadPassword(ctx context.Context) ([]byte, error)
}

// stdinOf returns f, as a [terminal] when it is one.
func stdinOf(f *os.File) io.Reader {
	if fd := int(f.Fd()); term.IsTerminal(fd) {
		return ttyStdin{File: f, fd: fd}
	}
	return f
}

// ttyStdin is a standard input on a terminal.
type ttyStdin struct {
	*os.File
	fd int
}

func (t ttyStdin) ReadPassword(ctx context.Context) ([]byte, error) {
	state, err := term.GetState(t.fd)
	if err != nil {
		return nil, err
	}
	type line struct {
		b   []byte
		err error
	}
	read := make(chan line, 1)
	go func() {
		b, err := term.ReadPassword(t.fd)
		read <- line{b, err}
	}()
	select {
	case l := <-read:
		return l.b, l.err
	case <-ctx.Done():
		// The reading goroutine stays blocked; the process is ending.
		_ = term.Restore(t.fd, state)
		return nil, ctx.Err()
	}
}
