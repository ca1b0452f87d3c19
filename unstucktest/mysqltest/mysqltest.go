// Package mysqltest gives each test a database of its own on the MySQL or
// MariaDB server named by TEST_MYSQL_DSN (default
// root@tcp(127.0.0.1:3306)/): CREATE DATABASE unstuck_t_<random>, dropped
// at the test's cleanup. Without a server the test is skipped, or fails
// when CI=true.
//
// It is test support for this repository's suites, public so that the
// library's tests, the console's and the tools share it; adopters may use
// it, with no compatibility promise before v1.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvDSN names the variable holding the server's go-sql-driver DSN; its
// database part is ignored.
const EnvDSN = "TEST_MYSQL_DSN"

// defaultDSN is the shared test server: root without a password.
const defaultDSN = "root@tcp(127.0.0.1:3306)/"

// ServerConfig returns the configuration of the test server, without a
// database.
func ServerConfig(t testing.TB) *mysql.Config {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn == "" {
		dsn = defaultDSN
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("mysqltest: %s: %v", EnvDSN, err)
	}
	cfg.DBName = ""
	return cfg
}

// NewDatabase creates an empty database of its own for t, dropped when t
// ends, and returns a go-sql-driver DSN naming it. An unreachable server
// skips t, or fails it when CI=true.
func NewDatabase(t testing.TB) string {
	t.Helper()
	cfg := ServerConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	admin := sql.OpenDB(conn)
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		if os.Getenv("CI") == "true" {
			t.Fatalf("mysqltest: no MySQL server at %s (CI=true): %v", cfg.Addr, err)
		}
		t.Skipf("mysqltest: no MySQL server at %s (set %s): %v", cfg.Addr, EnvDSN, err)
	}
	name := "unstuck_t_" + strings.ToLower(rand.Text()[:16])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		_ = admin.Close()
		t.Fatalf("mysqltest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("mysqltest: drop database %s: %v", name, err)
		}
		if err := admin.Close(); err != nil {
			t.Errorf("mysqltest: %v", err)
		}
	})
	db := cfg.Clone()
	db.DBName = name
	return db.FormatDSN()
}
