package store

import "embed"

// migrations holds the "console" migration line of each dialect. go:embed
// only works on a package-level variable; it is read-only and so is not
// shared state.
//
//go:embed migration/postgres/*.sql migration/sqlite/*.sql migration/mysql/*.sql
var migrations embed.FS

// migrationLine is the console's line in unstuck_migration.
const migrationLine = "console"
