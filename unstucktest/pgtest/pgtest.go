// Package pgtest gives tests a real PostgreSQL server: an isolated schema
// ([Schema]) or a whole database ([Database]) per test, dropped when the test
// ends.
//
// # Which server
//
// [URL] picks the server once per test process, in this order:
//
//  1. TEST_DATABASE_URL, when set. It must answer: an unreachable server
//     named there fails the test rather than falling back.
//  2. The development and CI server at [DefaultURL], when it answers.
//  3. A throwaway cluster started for this test process only (initdb and
//     postgres from /usr/lib/postgresql/*/bin or `pg_config --bindir`, run
//     as the postgres OS user when the tests run as root, fsync off, on a
//     free port), stopped and its files removed by [RunMain].
//
// Every package that uses pgtest therefore calls [RunMain] from its TestMain:
//
//	func TestMain(m *testing.M) { pgtest.RunMain(m) }
//
// When none of these is possible the test is skipped with the reason, except
// when the environment variable CI is "true": a missing PostgreSQL in CI is a
// failure.
//
// It is test support for this repository's suites, public so that the
// library's tests, the console's and the tools share it; adopters may use
// it, with no compatibility promise before v1.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the server that development and CI machines run.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// cleanupTimeout bounds each drop run by a test's cleanup. t.Context is
// already cancelled when cleanups run, so they use a context of their own.
const cleanupTimeout = 30 * time.Second

// process is the one server choice of this test process. It is package
// state on purpose: a throwaway cluster costs seconds to start and must be
// shared by every test of the binary, and [RunMain] must find it to stop it.
var process struct {
	mu       sync.Mutex
	inMain   bool // RunMain is running the tests
	resolved bool
	url      string
	err      error
	cluster  *cluster // the throwaway cluster, if one was started
}

// RunMain runs the tests of m and then stops the throwaway cluster, if one
// was started, and removes its files. Call it from TestMain in every package
// that uses pgtest; the test binary then exits with m.Run's code. Should the
// test binary die without returning here (a panic, a -timeout), the cluster's
// postmaster still stops, because it is started to receive SIGQUIT when its
// parent dies; only its temporary directory is left behind.
func RunMain(m *testing.M) {
	process.mu.Lock()
	process.inMain = true
	process.mu.Unlock()

	m.Run()

	process.mu.Lock()
	defer process.mu.Unlock()
	process.inMain = false
	if process.cluster != nil {
		if err := process.cluster.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop throwaway cluster: %v\n", err)
		}
		process.cluster = nil
	}
}

// URL returns the admin URL of the PostgreSQL server for this test process,
// chosen as the package documentation describes. It skips t (fails it when
// CI is "true") when no server can be had, and fails t when the chosen
// server cannot be used. Tests must not change anything outside the
// schemas and databases they create.
func URL(t testing.TB) string {
	t.Helper()
	u, err := resolve(DefaultURL)
	if err != nil {
		var unavailable *unavailableError
		if errors.As(err, &unavailable) && os.Getenv("CI") != "true" {
			t.Skipf("pgtest: no PostgreSQL for this test: %v", err)
		}
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// resolve chooses the server once per process; later calls get the same
// answer, an error included, so that a failed initdb is not retried by
// every test.
func resolve(defaultURL string) (string, error) {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.resolved {
		return process.url, process.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	process.url, process.err = pick(ctx, os.Getenv("TEST_DATABASE_URL"), defaultURL, func(ctx context.Context) (string, error) {
		if !process.inMain {
			return "", errors.New("no server answers and a throwaway cluster needs pgtest.RunMain(m) in the package's TestMain to be stopped")
		}
		c, err := startCluster(ctx)
		if err != nil {
			return "", err
		}
		process.cluster = c
		return c.url, nil
	})
	process.resolved = true
	return process.url, process.err
}

// pick applies the order of the package documentation: envURL when not
// empty (it must answer), else defaultURL if it answers, else start().
func pick(ctx context.Context, envURL, defaultURL string, start func(context.Context) (string, error)) (string, error) {
	if envURL != "" {
		if err := ping(ctx, envURL); err != nil {
			return "", fmt.Errorf("TEST_DATABASE_URL does not answer: %w", err)
		}
		return envURL, nil
	}
	if err := ping(ctx, defaultURL); err == nil {
		return defaultURL, nil
	}
	u, err := start(ctx)
	if err != nil {
		return "", fmt.Errorf("TEST_DATABASE_URL unset, nothing answers at %s, and no throwaway cluster: %w", redact(defaultURL), err)
	}
	return u, nil
}

// unavailableError says that this machine cannot run a throwaway cluster
// (no PostgreSQL binaries, no postgres OS user to run them as root): a
// reason to skip, unlike a cluster that fails to start.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

// ping connects to u once, with a short timeout.
func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// Schema creates a schema with a fresh name ("t_" and 16 hex digits) on the
// server of [URL] and returns a pool whose connections have that schema as
// their whole search_path, so unqualified names live in it. The schema is
// dropped with everything in it, and the pool closed, when t ends: a test
// must release every connection it acquires, or the cleanup waits for it.
func Schema(t testing.TB) *pgxpool.Pool {
	t.Helper()
	admin := URL(t)
	name := uniqueName(t, "t_")
	ident := pgx.Identifier{name}.Sanitize()
	mustExec(t, admin, "CREATE SCHEMA "+ident)

	cfg, err := pgxpool.ParseConfig(admin)
	if err != nil {
		t.Fatalf("pgtest: parse url: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = name
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("pgtest: pool for schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		pool.Close()
		mustExec(t, admin, "DROP SCHEMA IF EXISTS "+ident+" CASCADE")
	})
	return pool
}

// Database creates a database with a fresh name ("t_" and 16 hex digits) on
// the server of [URL] and returns its URL, for tests that need a whole
// database. It is dropped when t ends, WITH (FORCE), so connections still
// open to it are closed then.
func Database(t testing.TB) string {
	t.Helper()
	admin := URL(t)
	name := uniqueName(t, "t_")
	ident := pgx.Identifier{name}.Sanitize()
	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	// CREATE DATABASE copies template1 and fails with object_in_use while
	// another session is connected to it; that passes quickly.
	for try := 1; ; try++ {
		err := execErr(admin, "CREATE DATABASE "+ident)
		var pgErr *pgconn.PgError
		if err == nil {
			break
		}
		if try >= 10 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			t.Fatalf("pgtest: create database %s: %v", name, err)
		}
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
	t.Cleanup(func() {
		mustExec(t, admin, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
	})
	return u
}

// withDatabase returns admin with its database replaced by name, for both
// the URL and the keyword/value forms of a connection string.
func withDatabase(admin, name string) (string, error) {
	if strings.HasPrefix(admin, "postgres://") || strings.HasPrefix(admin, "postgresql://") {
		u, err := url.Parse(admin)
		if err != nil {
			return "", fmt.Errorf("parse url: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// In the keyword/value form a later keyword wins.
	return admin + " dbname=" + name, nil
}

// uniqueName returns prefix followed by 16 random hex digits, which needs no
// quoting in SQL.
func uniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random name: %v", err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// mustExec runs one statement on its own connection to u and fails t on error.
func mustExec(t testing.TB, u, sql string) {
	t.Helper()
	if err := execErr(u, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

func execErr(u, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// redact hides a password in a URL for messages.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	return p.Redacted()
}
