package idemsqlite

import "embed"

// idemMigrations holds the "idem" migration line, applied by the migrate package (one
// migrator and one bookkeeping table, unstuck_migration, for every line).
// An embedded file system must be a package-level variable; it is read-only and so
// is not shared state.
//
//go:embed migration/idem/*.sql
var idemMigrations embed.FS
