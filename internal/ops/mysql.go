package ops

import (
	"context"
	"database/sql"
	"errors"

	"github.com/unstuckhq/unstuck/internal/audit"
)

// MySQL returns the decisions on db, a MySQL 8 or MariaDB 10.6+ database
// (idem/idemmysql's Open): READ COMMITTED transactions, audited with
// trail.AppendMySQLTx, so that a key decision, its record's change (the
// idemmysql store bound to the transaction with Store.Tx) and its audit
// entry commit together or not at all. trail must be a MySQL trail on the
// same database. The audit append locks the trail's lock row until the
// commit, so appends (not the decisions' other statements) are serialised.
func MySQL(db *sql.DB, trail *audit.Trail) (*DB[*sql.Tx], error) {
	if db == nil || trail == nil {
		return nil, errors.New("ops: decisions need a database handle and an audit trail")
	}
	if trail.Dialect() != audit.DialectMySQL {
		return nil, errors.New("ops: decisions on MySQL need a MySQL audit trail")
	}
	return &DB[*sql.Tx]{
		trail: trail,
		begin: func(ctx context.Context) (*sql.Tx, error) {
			// database/sql rolls a transaction back when the ctx of its
			// BeginTx ends; the decision's statements still see ctx.
			return db.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		},
		commit: func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		rollback: func(_ context.Context, tx *sql.Tx) error {
			if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
				return err
			}
			return nil
		},
		appendTx: func(ctx context.Context, tx *sql.Tx, e audit.Entry) (audit.Entry, error) {
			return trail.AppendMySQLTx(ctx, tx, e)
		},
	}, nil
}
