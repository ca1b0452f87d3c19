package idemsqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
	"github.com/unstuckhq/unstuck/idem/internal/sqlstore"
)

// The connections of a handle from [Open] carry the store's lean read
// (queryGetLean) prepared on them, so that a repeat reads its row through
// the driver alone: database/sql's Stmt costs a pool look-up, a Rows and a
// conversion of every column per call, which made the read a third dearer
// than the same query's driver work. The statement belongs to
// the connection and is finalized by its Close, before the driver's
// connection closes: database/sql closes connections without telling the
// store, and SQLite keeps a connection closed under an unfinalized
// statement open, file included.

// leanConnector is the driver.Connector of [Open]: the driver's, with each
// connection it makes wrapped in a leanConn.
type leanConnector struct {
	driver.Connector
}

// Connect returns the driver's connection wrapped in a leanConn, or as it
// is if it lacks a method that database/sql may call on it.
func (c leanConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if full, ok := dc.(fullConn); ok {
		return &leanConn{fullConn: full}, nil
	}
	return dc, nil
}

// fullConn is every interface of modernc.org/sqlite's connection that
// database/sql uses, so that a leanConn offers database/sql what the
// driver's connection does.
type fullConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// leanConn is a connection of [Open]'s pool: the driver's connection and
// the store's lean read, prepared on first use. database/sql serialises
// its use (Conn.Raw and Close hold the connection's lock), so its fields
// need no lock.
type leanConn struct {
	fullConn
	lean driver.StmtQueryContext // nil until the first lean read
	// args and row are the lean read's buffers, reused by every call.
	args [3]driver.NamedValue
	row  [leanColumnCount]driver.Value
}

// Close finalizes the lean read, then closes the driver's connection.
func (c *leanConn) Close() error {
	var err error
	if c.lean != nil {
		err = c.lean.(driver.Stmt).Close()
		c.lean = nil
	}
	return errors.Join(err, c.fullConn.Close())
}

// readLean runs queryGetLean for p.Ident on c and returns the record it
// finds, with idemdriver.LeanFields only, stamped with readAt; ok is false
// when there is none.
func (c *leanConn) readLean(ctx context.Context, p idemdriver.ReserveParams, readAt time.Time) (rec idemdriver.Record, ok bool, err error) {
	if c.lean == nil {
		st, err := c.PrepareContext(ctx, queryGetLean)
		if err != nil {
			return idemdriver.Record{}, false, fmt.Errorf("prepare: %w", err)
		}
		q, isQuery := st.(driver.StmtQueryContext)
		if !isQuery {
			return idemdriver.Record{}, false, errors.Join(errors.New("prepare: the driver's statement has no QueryContext"), st.Close())
		}
		c.lean = q
	}
	c.args = [3]driver.NamedValue{{Ordinal: 1, Value: p.Scope}, {Ordinal: 2, Value: p.Operation}, {Ordinal: 3, Value: p.KeyDigest}}
	defer func() { clear(c.args[:]); clear(c.row[:]) }() // keep no caller's values alive
	rows, err := c.lean.QueryContext(ctx, c.args[:])
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	err = rows.Next(c.row[:])
	if errors.Is(err, io.EOF) {
		return idemdriver.Record{}, false, rows.Close()
	}
	if err == nil {
		rec, err = decodeLean(&c.row, p, readAt)
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return idemdriver.Record{}, false, err
	}
	return rec, true, nil
}

// decodeLean reads a row of leanColumns as the driver returns it: INTEGER
// as int64, TEXT as string, BLOB as []byte (nil when empty), NULL as nil;
// the table is STRICT, so no other type can be stored. A value of another
// type is an error naming its column.
func decodeLean(row *[leanColumnCount]driver.Value, p idemdriver.ReserveParams, readAt time.Time) (idemdriver.Record, error) {
	var rec idemdriver.Record
	var status string
	var lease, createdAt, expiresAt int64
	var leaseValid bool
	for i, v := range row {
		ok := true
		switch i {
		case 0:
			rec.ID, ok = v.(int64)
		case 1:
			rec.Fingerprint, ok = v.(string)
		case 2:
			status, ok = v.(string)
		case 3:
			if v != nil {
				rec.Result, ok = v.([]byte)
				if rec.Result == nil {
					rec.Result = []byte{} // a stored empty result stays non-nil
				}
			}
		case 4:
			rec.Token, ok = v.(string)
		case 5:
			rec.Fence, ok = v.(int64)
		case 6:
			if leaseValid = v != nil; leaseValid {
				lease, ok = v.(int64)
			}
		case 7:
			createdAt, ok = v.(int64)
		case 8:
			expiresAt, ok = v.(int64)
		}
		if !ok {
			return idemdriver.Record{}, fmt.Errorf("lean read: column %d (%s) holds a %T", i, leanColumnNames[i], v)
		}
	}
	if rec.Status = statusOf([]byte(status)); rec.Status == "" {
		return idemdriver.Record{}, fmt.Errorf("record %d: unknown status %q", rec.ID, status)
	}
	rec.Ident = p.Ident
	if leaseValid {
		rec.LeaseExpiresAt = sqlstore.Micros(lease)
	}
	rec.CreatedAt = sqlstore.Micros(createdAt)
	rec.ExpiresAt = sqlstore.Micros(expiresAt)
	rec.ReadAt = readAt
	return rec, nil
}
