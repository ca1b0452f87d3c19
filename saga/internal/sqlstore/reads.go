package sqlstore

import (
	"context"

	"github.com/unstuckhq/unstuck/saga/sagadriver"
)

// Admin implements [sagadriver.Admin] over Store, each read of several
// statements in one read-only transaction that Read begins (EachOperation:
// one a batch, so that no snapshot is held while its fn runs), each read of
// one statement by ReadOne. The drivers embed it and give their own Read
// and ReadOne; what differs by database (the transaction's isolation, how
// counts are made) is in them and in Store.D.
type Admin struct {
	Store Store
	// Read runs fn in a read-only transaction: one snapshot for each of
	// its statements.
	Read func(ctx context.Context, fn func(q Querier) error) error
	// ReadOne runs fn, which sends one statement, where that costs least:
	// a single statement sees one snapshot without a transaction, whose
	// BEGIN and COMMIT are two more round trips on a server.
	// Nil means Read.
	ReadOne func(ctx context.Context, fn func(q Querier) error) error
}

// readOne is ReadOne, or Read when the driver gives none.
func (a Admin) readOne(ctx context.Context, fn func(q Querier) error) error {
	if a.ReadOne != nil {
		return a.ReadOne(ctx, fn)
	}
	return a.Read(ctx, fn)
}

// PageOperations implements [sagadriver.Admin].
func (a Admin) PageOperations(ctx context.Context, f sagadriver.OperationFilter) (page sagadriver.OperationPage, err error) {
	if _, err := f.Check(); err != nil {
		return page, err
	}
	err = a.readOne(ctx, func(q Querier) error {
		page, err = a.Store.PageOperations(ctx, q, f)
		return err
	})
	return page, err
}

// ReadOperation implements [sagadriver.Admin], in one snapshot.
func (a Admin) ReadOperation(ctx context.Context, id string, maxEvents int) (det sagadriver.OperationDetail, err error) {
	err = a.Read(ctx, func(q Querier) error {
		det, err = a.Store.ReadOperation(ctx, q, id, maxEvents)
		return err
	})
	return det, err
}

// CountOperations implements [sagadriver.Admin]: see Store.CountOperations
// for when a count is exact.
func (a Admin) CountOperations(ctx context.Context, exactUpTo int) (c sagadriver.OperationCounts, err error) {
	err = a.Read(ctx, func(q Querier) error {
		c, err = a.Store.CountOperations(ctx, q, exactUpTo)
		return err
	})
	return c, err
}

// CountFiltered implements [sagadriver.Admin].
func (a Admin) CountFiltered(ctx context.Context, f sagadriver.OperationFilter, upTo int) (c sagadriver.FilteredCount, err error) {
	err = a.readOne(ctx, func(q Querier) error {
		c, err = a.Store.CountFiltered(ctx, q, f, upTo)
		return err
	})
	return c, err
}

// ReviewRequired implements [sagadriver.Admin].
func (a Admin) ReviewRequired(ctx context.Context, limit int) (ops []sagadriver.Operation, err error) {
	err = a.readOne(ctx, func(q Querier) error {
		ops, err = a.Store.ReviewRequired(ctx, q, limit)
		return err
	})
	return ops, err
}

// EachOperation implements [sagadriver.Admin]: one read transaction per
// batch.
func (a Admin) EachOperation(ctx context.Context, f sagadriver.OperationFilter, batchSize int, fn func([]sagadriver.Operation) error) error {
	return a.Store.EachOperation(ctx, a.Read, f, batchSize, fn)
}
