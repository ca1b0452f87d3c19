package consolecmd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/unstuckhq/unstuck/idem"
	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/internal/audit"
	"github.com/unstuckhq/unstuck/internal/demo"
	"github.com/unstuckhq/unstuck/internal/ops"
	"github.com/unstuckhq/unstuck/internal/store"
)

// These names let the program's tests in other packages (the browser
// journeys) open the database a demo runs on and check its audit trail.
// Nothing outside tests uses them.

// Database is an opened console database: the engines' stores, the
// console's store and the audit trail over one connection setup.
type Database = database

// OpenDatabase opens rawURL as the console does (see openDatabase).
func OpenDatabase(ctx context.Context, rawURL string) (*Database, error) {
	return openDatabase(ctx, rawURL)
}

// DemoSecret is the demo's fixed application secret.
const DemoSecret = demoSecret

// DemoUsers are the demo's accounts, one per role; each password is its name.
var DemoUsers = demoUsers

// DemoAuditKeys returns the demo's audit keyring for secret.
func DemoAuditKeys(getenv func(string) string, secret string, log *slog.Logger) (*audit.Keyring, error) {
	return demoAuditKeys(getenv, secret, log)
}

// UseAuditKeys makes the trail sign and verify with keys.
func (d *database) UseAuditKeys(keys *audit.Keyring) { d.useAuditKeys(keys) }

// RequestBulk records spec's request of count items on d, decided by
// engine's keys, with no approval and no River: as a console that crashed
// before its run started leaves it. The console that starts next on d
// resumes the run.
func (d *database) RequestBulk(ctx context.Context, engine *idem.Engine, actor ops.Actor, spec ops.BulkSpec, reason string, count int64) (store.Bulk, error) {
	if d.Pool != nil {
		dec, err := d.postgresDecisions(nil)
		if err != nil {
			return store.Bulk{}, err
		}
		return requestBulk(ctx, d, dec, engine, d.pgStore, actor, spec, reason, count)
	}
	if d.SQL == nil {
		return store.Bulk{}, errors.New("consolecmd: bulks run on PostgreSQL and SQLite")
	}
	dec, err := d.sqliteDecisions(nil)
	if err != nil {
		return store.Bulk{}, err
	}
	return requestBulk(ctx, d, dec, engine, d.sqliteStore, actor, spec, reason, count)
}

func requestBulk[TTx any](ctx context.Context, d *database, dec *ops.DB[TTx], engine *idem.Engine, stores interface {
	Tx(tx TTx) idemdriver.Store
}, actor ops.Actor, spec ops.BulkSpec, reason string, count int64) (store.Bulk, error) {
	keys, err := keysOn(d, dec, engine, stores)
	if err != nil {
		return store.Bulk{}, err
	}
	bulks, err := ops.NewBulks(ops.BulkParts[TTx]{Store: d.Console, Keys: keys, KeyList: d.Records}, ops.BulkConfig{Approval: ops.Approval{}})
	if err != nil {
		return store.Bulk{}, err
	}
	req, _, err := bulks.Request(ctx, actor, spec, reason, count)
	return req, err
}

// UseDemoWorkspaces makes the demos this process runs afterwards call the
// workspace provider at baseURL, with every saga step's Timeout (and so
// its lease) set to stepTimeout. For a crash test's child process, before
// it calls Run.
func UseDemoWorkspaces(baseURL string, stepTimeout time.Duration) {
	sagaOverrides = sagaSettings{workspaces: &demo.WorkspaceClient{BaseURL: baseURL}, stepTimeout: stepTimeout}
}
