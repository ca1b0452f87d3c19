// Package sagapgx is the PostgreSQL driver of package saga on pgx v5: a
// [sagadriver.Driver] over a [pgxpool.Pool], for a River client built with
// riverpgxv5 on the same pool, so that the operation records and River's
// jobs commit in one transaction.
//
//	driver := sagapgx.New(pool)
//	if err := driver.Migrate(ctx); err != nil { // the engine's tables
//		return err
//	}
//	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
//	if err != nil {
//		return err
//	}
//	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil { // River's
//		return err
//	}
//	runner, err := saga.NewRunner(driver, saga.Config{Definitions: defs})
//
// Package saga's documentation shows the rest of the wiring (workers,
// River's config, SetClient); its Definition examples run it end to end on
// SQLite.
//
// The driver owns its tables (unstuck_saga_operation, unstuck_saga_step,
// unstuck_saga_event, unstuck_saga_finding): their schema, every index
// (those the console's lists need too), the "saga" migration line and
// every query. They live in the first schema of the pool's search_path, as
// River's do with riverpgxv5. Times are the database's clock
// (statement_timestamp(), read once per transaction), stored as
// timestamptz.
//
// # Reading for a console
//
// The [sagadriver.Admin] methods (PageOperations, ReadOperation,
// CountOperations, ReviewRequired, EachOperation) run on the pool, each in
// a read-only REPEATABLE READ transaction of its own, and plan every
// statement for its arguments. CountOperations counts each status exactly
// up to its cap by an index-only scan, and beyond it estimates from the
// statistics of the last ANALYZE. [Driver.ImportOperations] loads records
// with COPY, for benchmarks and imports only.
package sagapgx
