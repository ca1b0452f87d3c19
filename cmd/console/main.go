// Command console runs the unstuck operations console and administers its
// database. Run "console --help" for the subcommands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/unstuckhq/unstuck/internal/consolecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := consolecmd.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if msg := consolecmd.ErrorMessage(err); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(consolecmd.ExitStatus(err))
}
