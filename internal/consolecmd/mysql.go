package consolecmd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/unstuckhq/unstuck/idem/idemmysql"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
)

// errNoSagasOnMySQL is what the console says when sagas are asked for on
// MySQL: the saga engine runs its steps as River jobs, and River has no
// MySQL driver.
var errNoSagasOnMySQL = errors.New("sagas are not available on MySQL (River, which runs their steps, has no MySQL driver): use PostgreSQL or SQLite for sagas")

// sagasUnavailableOnMySQL is the console's page text for the same.
const sagasUnavailableOnMySQL = "Sagas are not available on MySQL: River, which runs their steps, has no MySQL driver. Keys, searches, decisions and the audit trail work as on PostgreSQL; operations need PostgreSQL or SQLite."

// mysqlDSN matches a go-sql-driver DSN: [user[:password]@]net(addr)/db.
var mysqlDSN = regexp.MustCompile(`^([^@/]*@)?(tcp|tcp4|tcp6|unix)\([^)]*\)/`)

// isMySQL reports whether raw names a MySQL or MariaDB database: a
// mysql:// URL or a go-sql-driver DSN.
func isMySQL(raw string) bool {
	return strings.HasPrefix(raw, "mysql://") || mysqlDSN.MatchString(raw)
}

// redactMySQL is raw without its password, as a mysql:// URL, fit for
// logs and messages.
func redactMySQL(raw string) string {
	cfg, err := idemmysql.ParseDSN(raw)
	if err != nil {
		return "mysql://…"
	}
	user := cfg.User
	if cfg.Passwd != "" {
		user += ":xxxxx"
	}
	if user != "" {
		user += "@"
	}
	return "mysql://" + user + cfg.Addr + "/" + cfg.DBName
}

// openMySQL opens a MySQL or MariaDB database for the console: the
// engine's store and admin reads (idemmysql), the console's tables
// (store.NewMySQL) and the audit trail (audit.NewMySQL) on one handle.
// Sagas are nil: the console serves keys, searches, decisions and the
// audit trail, and says so on the operation pages. Like PostgreSQL, it is
// migrated by "console migrate" as a deliberate step.
func openMySQL(ctx context.Context, rawURL string) (*database, error) {
	redacted := redactMySQL(rawURL)
	db, err := idemmysql.Open(rawURL)
	if err != nil {
		// idemmysql's errors never carry the password.
		return nil, fmt.Errorf("open %s: %w", redacted, err)
	}
	if err := db.PingContext(ctx); err != nil {
		closeQuietly(db)
		return nil, fmt.Errorf("connect to %s: %w", redacted, err)
	}
	s, c, trail := idemmysql.New(db), store.NewMySQL(db), audit.NewMySQL(db)
	return &database{Redacted: redacted, Store: s, Records: s, Console: c, Trail: trail, MySQL: db, mysqlStore: s,
		SagasUnavailable: sagasUnavailableOnMySQL,
		migrate:          []func(context.Context) error{s.Migrate, c.Migrate, trail.Migrate},
		Close:            func() { closeQuietly(db) }}, nil
}

// mysqlDecisions returns the console's decisions on the MySQL handle,
// audited in the trail as it is now (after useAuditKeys), logging to log.
func (d *database) mysqlDecisions(log *slog.Logger) (*ops.DB[*sql.Tx], error) {
	return ops.MySQL(d.MySQL, d.Trail, d.Console, log)
}
