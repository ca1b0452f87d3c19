package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/driver/pgxv5"
	"github.com/unstuckhq/unstuck/driver/sqlite"
	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/store"
	"github.com/unstuckhq/unstuck/saga/sagapgx"
	"github.com/unstuckhq/unstuck/saga/sagasqlite"
)

// database is an opened database with the engine's store and the
// console's store over it.
type database struct {
	// Redacted is the URL without a password, fit for logs and messages.
	Redacted string
	Store    idem.Store
	Console  *store.DB
	// Trail is the audit trail of operator decisions.
	Trail *audit.Trail
	// Embedded is true for SQLite, the zero-setup default.
	Embedded bool
	// Pool is the PostgreSQL pool (nil for SQLite); SQL the SQLite handle
	// (nil for PostgreSQL). For wiring River and the saga stores.
	Pool    *pgxpool.Pool
	SQL     *sql.DB
	migrate []func(context.Context) error
	Close   func()
}

// Migrate applies the engines' migrations (idempotency records, then
// sagas), then the console's (its own tables and the read models' indexes
// on the engines' tables).
func (d *database) Migrate(ctx context.Context) error {
	for _, m := range d.migrate {
		if err := m(ctx); err != nil {
			return err
		}
	}
	return nil
}

// openDatabase opens a PostgreSQL URL (postgres:// or postgresql://) or
// sqlite:PATH (the embedded default; the file is created if missing).
func openDatabase(ctx context.Context, rawURL string) (*database, error) {
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		if _, err := url.Parse(rawURL); err != nil {
			return nil, errors.New("database URL cannot be parsed")
		}
		redacted := redactURL(rawURL)
		cfg, err := pgxpool.ParseConfig(rawURL)
		if err != nil {
			return nil, fmt.Errorf("database URL %s: %w", redacted, err)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", redacted, err)
		}
		if err := pool.Ping(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to %s: %w", redacted, err)
		}
		s, c := pgxv5.New(pool), store.NewPostgres(pool)
		return &database{Redacted: redacted, Store: s, Console: c, Pool: pool,
			Trail:   audit.NewPostgres(pool),
			migrate: []func(context.Context) error{s.Migrate, sagapgx.New(pool).Migrate, c.Migrate, c.MigrateOperations, audit.NewPostgres(pool).Migrate}, Close: pool.Close}, nil
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		if path == "" {
			return nil, errors.New("database URL sqlite: needs a path, e.g. sqlite:/var/lib/unstuck/console.db")
		}
		db, err := sqlite.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		if err := db.PingContext(ctx); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("open %s: %w", rawURL, err)
		}
		s, c := sqlite.New(db), store.NewSQLite(db)
		return &database{Redacted: rawURL, Store: s, Console: c, Embedded: true, SQL: db,
			Trail:   audit.NewSQLite(db),
			migrate: []func(context.Context) error{s.Migrate, sagasqlite.New(db).Migrate, c.Migrate, c.MigrateOperations, audit.NewSQLite(db).Migrate}, Close: func() { closeQuietly(db) }}, nil
	default:
		return nil, fmt.Errorf("database URL must start with postgres://, postgresql:// or sqlite: (got %q)", schemeOf(rawURL))
	}
}

func closeQuietly(db *sql.DB) { _ = db.Close() }

// schemeOf returns what precedes the first colon, so an error never echoes
// a whole URL that may hold a password.
func schemeOf(raw string) string {
	if i := strings.IndexByte(raw, ':'); i >= 0 {
		return raw[:i+1] + "…"
	}
	if len(raw) > 12 {
		return raw[:12] + "…"
	}
	return raw
}
