package store

// Tombstones of forgotten keys (SPEC K21): the table of migration 007,
// unstuck_console_tombstone. This file reads it; a tombstone is written in
// the forget's own transaction ([PgxTx.AddTombstoneTx],
// [SQLTx.AddTombstoneTx] in tx.go).

import (
	"context"
	"fmt"
	"time"
)

// Tombstone is what remains of a key record an operator's decision
// removed (forgot, or released as "did not happen"): enough to find it
// again (record ID, raw key's hash, digest) and to say who removed it,
// when and why.
type Tombstone struct {
	RecordID    int64
	Scope       string
	Operation   string
	KeyDigest   string
	KeyHash     string
	Status      string // the record's status when it was forgotten
	ExternalRef string
	// Action is the operator action that removed the record: forget, or
	// confirm_not_happened (released).
	Action string
	Actor  string
	Reason string
	At     time.Time
}

// TombstoneFilter finds tombstones by one of its fields; the zero fields
// are not compared, and at least one must be set.
type TombstoneFilter struct {
	RecordID  int64
	KeyHash   string
	KeyDigest string // the whole digest, or the short ID's leading digits
}

// Tombstones returns at most limit tombstones matching f, newest first.
func (d *DB) Tombstones(ctx context.Context, f TombstoneFilter, limit int) ([]Tombstone, error) {
	if f.RecordID == 0 && f.KeyHash == "" && f.KeyDigest == "" {
		return nil, invalid("tombstone", "give a record ID, a key hash or a key digest")
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	q := `SELECT record_id, scope, operation, key_digest, key_hash, status, external_ref, action, actor, reason, at FROM unstuck_console_tombstone WHERE `
	var args []any
	switch {
	case f.RecordID != 0:
		q, args = q+`record_id = $1`, []any{f.RecordID}
	case f.KeyHash != "":
		q, args = q+`key_hash = $1`, []any{f.KeyHash}
	case len(f.KeyDigest) == 64:
		q, args = q+`key_digest = $1`, []any{f.KeyDigest}
	default:
		// The short key ID: a prefix of the digest (hex digits only, so
		// no LIKE wildcard can be in it; the caller checks).
		q, args = q+`key_digest >= $1 AND key_digest < $2`, []any{f.KeyDigest, f.KeyDigest + "g"}
	}
	q += fmt.Sprintf(` ORDER BY at DESC LIMIT %d`, limit)
	var out []Tombstone
	err := bulkConn{d}.each(ctx, q, args, func(scan func(...any) error) error {
		var t Tombstone
		var at anyTime
		if err := scan(&t.RecordID, &t.Scope, &t.Operation, &t.KeyDigest, &t.KeyHash, &t.Status, &t.ExternalRef, &t.Action, &t.Actor, &t.Reason, &at); err != nil {
			return err
		}
		t.At = at.t
		out = append(out, t)
		return nil
	})
	return out, wrapBulk("read tombstones", err)
}
