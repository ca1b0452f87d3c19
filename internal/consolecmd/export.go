package consolecmd

import (
	"context"
	"log/slog"

	"github.com/unstuckhq/unstuck/internal/audit"
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
