package audit

import "embed"

// migrations holds the "audit" migration line of each dialect. go:embed
// only works on a package-level variable; it is read-only and so is not
// shared state.
//
//go:embed migration/postgres/*.sql migration/sqlite/*.sql migration/mysql/*.sql
var migrations embed.FS

// migrationLine is the audit trail's line in unstuck_migration.
const migrationLine = "audit"
