package idemmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
	"github.com/unstuckhq/unstuck/migrate"
	"github.com/unstuckhq/unstuck/migrate/migratemysql"
)

var (
	_ idemdriver.TxStore = (*Store)(nil)
	_ idemdriver.Admin   = (*Store)(nil)
	_ idemdriver.Seeder  = (*Store)(nil)
)

// Store is an [idemdriver.TxStore], [idemdriver.Admin] and
// [idemdriver.Seeder] on a MySQL 8 or MariaDB 10.11 database (InnoDB). It
// is safe for concurrent use by many goroutines and processes. It judges
// time by the database's clock (UTC_TIMESTAMP(6)) unless a params struct
// carries a non-zero Now.
type Store struct {
	db *sql.DB
	// The statements of the common path, prepared on db on first use; see
	// prepared.
	getStmt, getLeanStmt, insertStmt, completeStmt, fenceStmt atomic.Pointer[sql.Stmt]
}

// New returns a store on db, which must have been migrated with
// [Store.Migrate] before the store is used. db should come from [Open]; a
// caller that opens it otherwise must keep autocommit on and a strict
// sql_mode, which [Check] verifies. The store never closes db.
func New(db *sql.DB) *Store {
	return &Store{db: db}
}

// Migrate checks the server ([Check]) and creates or upgrades the store's
// tables: it applies, in order, every migration of the "idem" line that
// the unstuck_migration table does not list yet, holding the server-wide
// lock GET_LOCK('unstuck_migration') (migratemysql.Migrate). MySQL
// commits each DDL statement on its own, so a migration is not atomic;
// every statement of ours is safe to run again, and a Migrate interrupted
// by a crash is finished by the next one. It is idempotent, and safe to
// call concurrently from several processes.
func (s *Store) Migrate(ctx context.Context) error {
	if !migrate.Checking(ctx) {
		if err := Check(ctx, s.db); err != nil {
			return err
		}
	}
	fsys, err := fs.Sub(idemMigrations, "migration/idem")
	if err != nil {
		return fmt.Errorf("idemmysql: migrate: %w", err)
	}
	if err := migratemysql.Migrate(ctx, s.db, "idem", fsys); err != nil {
		return fmt.Errorf("idemmysql: migrate: %w", err)
	}
	return nil
}

// SQLMode is the sql_mode [Open] sets on every connection: strict for
// every table (a value too long or out of range is an error, never
// truncated), no zero dates, no silent change of storage engine.
const SQLMode = "STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ZERO_DATE,NO_ZERO_IN_DATE,NO_ENGINE_SUBSTITUTION,ONLY_FULL_GROUP_BY"

// Open opens a MySQL or MariaDB database for the store and checks the
// server with [Check]. dsn is a go-sql-driver DSN
// ("user:pass@tcp(host:3306)/db?param=value") or a URL
// ("mysql://user:pass@host:3306/db?param=value", the port defaulting to
// 3306), whose parameters are those of a go-sql-driver DSN. The DSN must
// name the database (the "/db" part), which must exist: the store's tables
// are created there by [Store.Migrate], and a DSN without one is refused.
// Whatever dsn says, every connection gets parseTime=true in UTC,
// time_zone '+00:00', and sql_mode [SQLMode]. The pool keeps up to max(16, 4 × GOMAXPROCS)
// connections, each for at most 3 minutes. The caller closes the returned
// handle.
func Open(dsn string) (*sql.DB, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("idemmysql: open: %w", err)
	}
	db := sql.OpenDB(conn)
	// A bounded pool: callers beyond it queue in database/sql rather than
	// open connections until the server refuses (max_connections, 151 by
	// default). Connections are renewed before a server's or a proxy's
	// idle timeout closes them under the pool.
	conns := max(16, 4*runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(3 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Check(ctx, db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// ParseDSN parses dsn as [Open] does and returns the driver's
// configuration with the settings the store needs, for a caller that opens
// the database itself (mysql.NewConnector). Passwords never appear in its
// errors.
func ParseDSN(dsn string) (*mysql.Config, error) {
	var (
		cfg *mysql.Config
		err error
	)
	if rest, ok := strings.CutPrefix(dsn, "mysql://"); ok {
		cfg, err = parseURL("mysql://" + rest)
	} else if strings.Contains(dsn, "://") {
		return nil, errors.New("idemmysql: open: a URL must begin with mysql://")
	} else if cfg, err = mysql.ParseDSN(dsn); err != nil {
		err = fmt.Errorf("idemmysql: open: not a go-sql-driver DSN (user:pass@tcp(host:port)/db) nor a mysql:// URL: %w", err)
	}
	if err != nil {
		return nil, err
	}
	if cfg.DBName == "" {
		return nil, errors.New("idemmysql: open: the DSN names no database")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = "'" + SQLMode + "'"
	return cfg, nil
}

// parseURL turns mysql://user:pass@host:port/db?params into a
// configuration; the parameters are those of a go-sql-driver DSN.
func parseURL(s string) (*mysql.Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse quotes the URL, password included: say only what is wrong.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("idemmysql: open: not a mysql:// URL: %w", err)
	}
	host := u.Host
	if host == "" {
		return nil, errors.New("idemmysql: open: the URL names no host")
	}
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg, err := mysql.ParseDSN("tcp(" + host + ")/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("idemmysql: open: URL parameters: %w", err)
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg, nil
}

// Check refuses a server, or a handle's session settings, that break what
// the store relies on, with an error naming the setting: a server older
// than MySQL 8.0.16 or MariaDB 10.6 (CHECK constraints, JSON functions),
// a session without a strict sql_mode (too long values would be truncated,
// not refused), autocommit off (single statements would be left in open
// transactions), and innodb_flush_log_at_trx_commit other than 1 (a
// committed record could be lost in a crash). [Open] and [Store.Migrate]
// call it.
func Check(ctx context.Context, db *sql.DB) error {
	var (
		version, mode string
		flush         sql.NullInt64
		autocommit    int64
	)
	err := db.QueryRowContext(ctx, `SELECT @@version, @@session.sql_mode, @@global.innodb_flush_log_at_trx_commit, @@session.autocommit`).
		Scan(&version, &mode, &flush, &autocommit)
	if err != nil {
		return fmt.Errorf("idemmysql: check the server: %w", err)
	}
	if err := checkVersion(version); err != nil {
		return err
	}
	modes := strings.Split(mode, ",")
	if !contains(modes, "STRICT_ALL_TABLES") && !contains(modes, "STRICT_TRANS_TABLES") {
		return fmt.Errorf("idemmysql: the session's sql_mode %q is not strict: set STRICT_ALL_TABLES (idemmysql.Open does)", mode)
	}
	if autocommit != 1 {
		return errors.New("idemmysql: autocommit is off on the session: the store needs it on (autocommit=1, the default)")
	}
	if !flush.Valid || flush.Int64 != 1 {
		return fmt.Errorf("idemmysql: innodb_flush_log_at_trx_commit is %v, not 1: a committed record could be lost in a crash; set it to 1", flush.Int64)
	}
	return nil
}

// checkVersion refuses servers older than MySQL 8.0.16 or MariaDB 10.6.
func checkVersion(v string) error {
	maria := strings.Contains(strings.ToLower(v), "mariadb")
	nums := strings.SplitN(strings.SplitN(v, "-", 2)[0], ".", 3)
	part := func(i int) int {
		if i >= len(nums) {
			return 0
		}
		n, _ := strconv.Atoi(nums[i])
		return n
	}
	major, minor, patch := part(0), part(1), part(2)
	if maria {
		if major > 10 || (major == 10 && minor >= 6) {
			return nil
		}
		return fmt.Errorf("idemmysql: MariaDB %s is too old: 10.6 or later is needed", v)
	}
	if major > 8 || (major == 8 && (minor > 0 || patch >= 16)) {
		return nil
	}
	return fmt.Errorf("idemmysql: MySQL %s is too old: 8.0.16 or later is needed (CHECK constraints)", v)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

// IsError reports whether err is a MySQL server error with one of the
// given numbers (1062 duplicate key, 1213 deadlock, …).
func IsError(err error, numbers ...uint16) bool {
	return migratemysql.IsMySQLError(err, numbers...)
}

// MySQL error numbers the store reacts to.
const (
	errDuplicate    = 1062 // ER_DUP_ENTRY: the ident's unique key refused an insert
	errDeadlock     = 1213 // ER_LOCK_DEADLOCK: the transaction was rolled back
	errLockWaitTime = 1205 // ER_LOCK_WAIT_TIMEOUT
)

// maxRetries bounds how often a write of the Store's own (not a caller's
// transaction) runs again after InnoDB chose it as a deadlock victim.
const maxRetries = 5

// retry runs fn again, up to maxRetries times, while it fails with a
// deadlock: InnoDB rolled the statement or transaction back, so running it
// again is safe.
func retry(fn func() error) error {
	var err error
	for range maxRetries {
		if err = fn(); !IsError(err, errDeadlock) {
			return err
		}
	}
	return err
}

// readCommitted are the options of every transaction the store begins.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// inTx runs fn in a READ COMMITTED transaction on the pool
// ([sqlstore.InTx]) and commits if fn returns nil, running it again after
// a deadlock.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return retry(func() error { return sqlstore.InTx(ctx, s.db, readCommitted, "", fn) })
}

// prepared returns query prepared on the pool, kept in slot
// ([sqlstore.Prepared]).
func (s *Store) prepared(ctx context.Context, slot *atomic.Pointer[sql.Stmt], query string) (*sql.Stmt, error) {
	return sqlstore.Prepared(ctx, s.db, slot, query)
}
