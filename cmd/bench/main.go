// Command bench is the console's scale benchmark: it seeds
// a PostgreSQL database with millions of idempotency records and saga
// operations, then measures the console's pages on it, both the store calls
// behind each page (database time) and the whole HTML response over
// loopback HTTP through the real handler.
//
//	createdb -h 127.0.0.1 -U postgres unstuck_bench
//	go run ./cmd/bench seed --db postgres://postgres@127.0.0.1:5432/unstuck_bench \
//	    --keys 10000000 --operations 1000000
//	go run ./cmd/bench console --db postgres://postgres@127.0.0.1:5432/unstuck_bench --explain
//	go run ./cmd/bench pages --db 'postgres://postgres@127.0.0.1:5432/unstuck_bench?sslmode=disable'
//	dropdb -h 127.0.0.1 -U postgres unstuck_bench
//
// # Seeding the engines' tables
//
// The seed is a benchmark fixture, not a way to load production data. It
// creates the tables with the same migrations as "console migrate", then
// loads the idempotency records through their driver's seeding path
// (idempgx.Store.SeedRecords, COPY into the indexed table; it bypasses the
// engine's lease protocol, which nothing else in the project may do) and
// the saga tables directly with COPY, dropping their secondary indexes and
// constraints while it loads and rebuilding them from their own
// definitions. It then runs VACUUM (ANALYZE) (idempgx.Store.Analyze for
// the key records) so that the visibility map and the planner's
// statistics are what a database in service would have. Stored results
// are plain envelopes ("UP", version 1, JSON), so the console measured
// here runs its engine without sealing; opening a sealed result costs a
// few microseconds more.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// errUsage reports a command line that could not be parsed; the message was
// already printed.
var errUsage = errors.New("usage")

const usage = `bench — scale benchmarks of the console and the engine's stores

Usage:
  bench seed    --db URL [--keys N] [--operations N] [flags]
  bench console --db URL [--n N] [--explain] [flags]
  bench pages   --db URL [--rounds R] [--n N] [--cpuprofile FILE]
  bench storage --db STORE [--keys N]
  bench sweep   --db URL [--keys N] [--rate R] [--phase D] [--rounds R]
  bench commits --db STORE [--clients 1,8,32,64] [--duration D] [--rounds R]

Commands:
  seed      migrate an empty database and load idempotency records (through
            the driver's seeding path) and saga operations (COPY) into it,
            a fixture around the engines, then VACUUM (ANALYZE)
  console   measure the overview, lists and detail pages: the store calls
            (database time) and the HTML responses over loopback HTTP,
            median and p95, as Markdown
  pages     each of the overview, /keys?state=failed and
            /operations?status=review_required against its limit (the
            least SQL for its content), interleaved rounds, min/median/max
            of the ratio
  storage   load records into an empty store (PostgreSQL, SQLite, MySQL
            or Redis) and measure the table and each index per record
            against the raw minimum (the records with one unique index)
  sweep     on PostgreSQL, records past their retention and first
            requests at a steady rate: phases with and without the sweep,
            its records per second and the requests' p99 beside it
  commits   first requests and replays over HTTP through the middleware,
            over HTTP without it, and the same statements alone (pgbench
            on PostgreSQL, one writer on SQLite), at each concurrency
  help      show this help

A PostgreSQL database must exist and should be one of its own, e.g.
  createdb -h 127.0.0.1 -U postgres unstuck_bench
and be dropped afterwards. Run "bench <command> --help" for the flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "seed":
		return runSeed(ctx, args[1:], stdout, stderr)
	case "console":
		return runConsole(ctx, args[1:], stdout, stderr)
	case "pages":
		return runPages(ctx, args[1:], stdout, stderr)
	case "storage":
		return runStorage(ctx, args[1:], stdout, stderr)
	case "sweep":
		return runSweep(ctx, args[1:], stdout, stderr)
	case "commits":
		return runCommits(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "bench: unknown command %q\n\n%s", args[0], usage)
		return errUsage
	}
}

// parseArgs parses a command's flags with fs and checks what every command
// needs: no positional arguments and a --db URL. help is true, with a nil
// error, for -h/--help; a bad command line is errUsage, said on stderr.
func parseArgs(fs *flag.FlagSet, args []string, dbURL *string, stderr io.Writer) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, errUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "bench %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return false, errUsage
	case *dbURL == "":
		fmt.Fprintf(stderr, "bench %s: --db is required\n", fs.Name())
		return false, errUsage
	}
	return false, nil
}
