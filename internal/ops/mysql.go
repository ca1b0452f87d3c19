package ops

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"

	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
)

// MySQL returns the decisions on db, a MySQL 8 or MariaDB 10.6+ database
// (idem/idemmysql's Open): READ COMMITTED transactions, audited with
// trail.AppendMySQLTx, the console's rows written with console.SQLTx, so
// that a key decision, its record's change (the idemmysql store bound to
// the transaction with Store.Tx) and its audit entry commit together or
// not at all. trail and console must be MySQL ones on the same database.
// The audit append locks the trail's lock row until the commit, so appends
// (not the decisions' other statements) are serialised. log is as for
// [Postgres].
func MySQL(db *sql.DB, trail *audit.Trail, console *store.DB, log *slog.Logger) (*DB[*sql.Tx], error) {
	if db == nil || trail == nil || console == nil {
		return nil, errors.New("ops: decisions need a database handle, an audit trail and the console store")
	}
	if trail.Dialect() != audit.DialectMySQL || console.Dialect() != store.DialectMySQL {
		return nil, errors.New("ops: decisions on MySQL need a MySQL audit trail and console store")
	}
	return &DB[*sql.Tx]{trail: trail, log: orDefaultLog(log), tx: mysqlTx{sqlTx{db: db, opts: &sql.TxOptions{Isolation: sql.LevelReadCommitted}}, trail}, console: console.SQLTx()}, nil
}

// mysqlTx is the dialect of [MySQL].
type mysqlTx struct {
	sqlTx
	trail *audit.Trail
}

func (d mysqlTx) appendTx(ctx context.Context, tx *sql.Tx, e audit.Entry) (audit.Entry, error) {
	return d.trail.AppendMySQLTx(ctx, tx, e)
}

func (d mysqlTx) lastMarkedTx(ctx context.Context, tx *sql.Tx, kind, id, marker string, before int64) (audit.Marked, bool, error) {
	return d.trail.LastMarkedSQLTx(ctx, tx, kind, id, marker, before)
}
