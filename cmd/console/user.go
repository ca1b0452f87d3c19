package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/unstuckhq/unstuck/internal/auth"
	"github.com/unstuckhq/unstuck/internal/store"
)

// runUser is "console user add|disable|enable": local accounts (SPEC K5).
func runUser(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: console user add --username U --role R [--db URL]   (password from stdin, or generated)\n       console user disable --username U [--db URL]\n       console user enable --username U [--db URL]")
		return errUsage
	}
	sub := args[0]
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("db", getenv("UNSTUCK_DB"), "database `URL` (env UNSTUCK_DB)")
	username := fs.String("username", "", "the account's `name`")
	role := fs.String("role", "", "auditor, support, oncall or admin (add only)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
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
	case "disable", "enable", "unlock":
	default:
		fmt.Fprintf(stderr, "console user: unknown subcommand %q\n", sub)
		return errUsage
	}
	db, err := openDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if sub == "unlock" { // clears the account's sign-in throttle in every console process
		if err := db.Console.UnlockUser(ctx, *username); err != nil {
			return fmt.Errorf("unlock %s: %w", *username, err)
		}
		fmt.Fprintf(stdout, "unlocked sign-in of user %s\n", *username)
		return nil
	}
	if sub != "add" {
		if err := db.Console.SetUserDisabled(ctx, *username, sub == "disable"); err != nil {
			return fmt.Errorf("%s %s: %w", sub, *username, err)
		}
		fmt.Fprintf(stdout, "%sd user %s\n", sub, *username)
		return nil
	}
	password, generated, err := readPassword(stdin)
	if err != nil {
		return err
	}
	hash, err := auth.Hash(password)
	if err != nil {
		return err
	}
	u, err := db.Console.CreateUser(ctx, *username, *role, hash)
	if err != nil {
		return fmt.Errorf("add %s: %w", *username, err)
	}
	fmt.Fprintf(stdout, "added user %s with role %s\n", u.Username, u.Role)
	if generated {
		fmt.Fprintf(stdout, "generated password (shown once): %s\n", password)
	}
	return nil
}

// readPassword takes the first line of stdin as the password; an empty
// stdin means: generate one.
func readPassword(stdin io.Reader) (pw string, generated bool, err error) {
	if stdin != nil {
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
