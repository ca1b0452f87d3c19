package sagapgx

import "embed"

// migrations holds the "saga" migration line, applied by the migrate package (one
// migrator and one bookkeeping table, unstuck_migration, for every line).
// The embed directive works only on a package-level variable; it is
// read-only and so is not shared state.
//
//go:embed migration/saga/*.sql
var migrations embed.FS
