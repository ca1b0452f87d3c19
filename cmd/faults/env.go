package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/unstuckhq/unstuck/idem/idempgx"
	"github.com/unstuckhq/unstuck/unstucktest/faultproxy"
	"github.com/unstuckhq/unstuck/unstucktest/pgtest"
)

// pgEnv is the PostgreSQL side of the experiments: a throwaway cluster of
// the harness's own, never the shared server.
type pgEnv struct {
	cluster *pgtest.Cluster
	dbs     atomic.Int64
}

// startPG starts the cluster.
func startPG(ctx context.Context, bin string) (*pgEnv, error) {
	k, err := pgtest.StartCluster(ctx, bin)
	if err != nil {
		return nil, err
	}
	return &pgEnv{cluster: k}, nil
}

// close stops the cluster.
func (e *pgEnv) close() error { return e.cluster.Stop() }

// database is one experiment's fresh database with a fault proxy of its
// own: a pool that goes through the proxy (the application's) and one that
// goes straight to the server (the harness's, for setup and counting).
type database struct {
	name    string
	proxy   *faultproxy.Proxy
	app     *pgxpool.Pool
	direct  *pgxpool.Pool
	store   *idempgx.Store // over app
	closeMu sync.Once
}

// newDatabase creates a database, migrates the idem store in it and opens
// both pools; maxConns bounds the application's pool.
func (e *pgEnv) newDatabase(ctx context.Context, maxConns int32, extraSQL string) (*database, error) {
	name := "faults_" + strconv.FormatInt(e.dbs.Add(1), 10)
	admin, err := pgx.Connect(ctx, e.cluster.URL())
	if err != nil {
		return nil, fmt.Errorf("connect admin: %w", err)
	}
	_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
	_ = admin.Close(context.Background())
	if err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	directURL := strings.Replace(e.cluster.URL(), "/postgres?", "/"+name+"?", 1)
	direct, err := pgxpool.New(ctx, directURL)
	if err != nil {
		return nil, err
	}
	if err := idempgx.New(direct).Migrate(ctx); err != nil {
		direct.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if extraSQL != "" {
		if _, err := direct.Exec(ctx, extraSQL); err != nil {
			direct.Close()
			return nil, fmt.Errorf("schema: %w", err)
		}
	}
	proxy, err := faultproxy.Listen(e.cluster.Addr())
	if err != nil {
		direct.Close()
		return nil, err
	}
	host, port, _ := net.SplitHostPort(proxy.Addr())
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://postgres@%s:%s/%s?sslmode=disable", host, port, name))
	if err == nil {
		cfg.MaxConns = maxConns
		var app *pgxpool.Pool
		if app, err = pgxpool.NewWithConfig(ctx, cfg); err == nil {
			return &database{name: name, proxy: proxy, app: app, direct: direct, store: idempgx.New(app)}, nil
		}
	}
	direct.Close()
	_ = proxy.Close()
	return nil, err
}

// close closes both pools and the proxy.
func (d *database) close() {
	d.closeMu.Do(func() {
		d.app.Close()
		d.direct.Close()
		_ = d.proxy.Close()
	})
}

// recordCounts returns how many records the database holds per status,
// through the driver's admin contract; a count it can only estimate is an
// error (the runs hold far fewer records than its cap).
func (d *database) recordCounts(ctx context.Context) (map[string]int, error) {
	o, err := idempgx.New(d.direct).KeyOverview(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, c := range o.Counts {
		if !c.Exact {
			return nil, fmt.Errorf("the count of %s records is an estimate", c.Status)
		}
		if c.Count > 0 {
			out[string(c.Status)] = int(c.Count)
		}
	}
	return out, nil
}
