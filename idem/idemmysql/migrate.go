package idemmysql

import "embed"

// idemMigrations holds the "idem" migration line, applied by
// the migrate package (one migrator and one bookkeeping table,
// unstuck_migration, for every line).
//
//go:embed migration/idem/*.sql
var idemMigrations embed.FS
