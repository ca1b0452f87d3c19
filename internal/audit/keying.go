package audit

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// keyingDomain starts the message of the keying marker's MAC.
const keyingDomain = "unstuck/audit/keying/v1"

// Keying is the trail's keying marker (SPEC K24): every entry from
// KeyedFrom on is keyed. It is written once, when the trail's table is
// created or upgraded (1 for a trail keyed from the start), and sealed
// with a MAC under the audit key by the first keyed process that sees it.
// [Trail.Verify] requires it, so a chain rewritten without the key as
// legacy links, emptied, or cut below KeyedFrom does not verify.
type Keying struct {
	KeyedFrom int64
	At        time.Time
	// KeyID and MAC are empty until the marker is sealed.
	KeyID string
	MAC   []byte
}

// Sealed reports whether the marker carries a MAC.
func (k Keying) Sealed() bool { return k.KeyID != "" }

func keyingMAC(key []byte, k Keying) []byte {
	b := appendBytes(nil, keyingDomain)
	b = binary.BigEndian.AppendUint64(b, uint64(k.KeyedFrom))
	b = binary.BigEndian.AppendUint64(b, uint64(k.At.UnixMicro()))
	b = appendBytes(b, k.KeyID)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)
}

// errNoMarker: the trail has no keying marker row.
var errNoMarker = errors.New("audit: no keying marker")

// keying reads the marker; errNoMarker when its row is missing.
func (t *Trail) keying(ctx context.Context) (Keying, error) {
	const q = `SELECT keyed_from, at, key_id, mac FROM unstuck_audit_keying WHERE id = 1`
	var (
		k   Keying
		err error
	)
	switch t.dialect {
	case DialectPostgres:
		err = t.pool.QueryRow(ctx, q).Scan(&k.KeyedFrom, &k.At, &k.KeyID, &k.MAC)
		if errors.Is(err, pgx.ErrNoRows) {
			return Keying{}, errNoMarker
		}
		err = pgMapError(err)
	default:
		var (
			at    int64
			keyID []byte
		)
		err = t.sqldb.QueryRowContext(ctx, q).Scan(&k.KeyedFrom, &at, &keyID, &k.MAC)
		if errors.Is(err, sql.ErrNoRows) {
			return Keying{}, errNoMarker
		}
		k.At, k.KeyID = time.UnixMicro(at), string(keyID)
		err = sqliteMapError(err)
	}
	if err != nil {
		return Keying{}, fmt.Errorf("audit: read the keying marker: %w", err)
	}
	k.At = k.At.UTC()
	return k, nil
}

// SealKeying seals the keying marker with a MAC under the current audit
// key if it is not sealed yet, and reports whether it did. A marker whose
// KeyedFrom disagrees with the chain (a keyed entry before it, or a legacy
// one at or after it) or with the last stored checkpoint is not sealed:
// verification reports it. It needs the trail's keys ([ErrNoKey]).
//
// Whoever owns the tables can still delete a sealed marker and insert an
// unsealed one along with a chain rewritten as legacy links; the next
// keyed process then seals it. Only a checkpoint kept outside the
// database catches that (its KeyedFrom and head are MACed).
func (t *Trail) SealKeying(ctx context.Context) (bool, error) {
	if t.keys == nil {
		return false, fmt.Errorf("audit: seal the keying marker: %w", ErrNoKey)
	}
	k, err := t.keying(ctx)
	if err != nil || k.Sealed() {
		return false, err
	}
	// The first keyed entry, and the last legacy one: the marker must lie
	// between them.
	var firstKeyed, lastLegacy int64
	const q = `SELECT coalesce(min(CASE WHEN key_id <> '' THEN seq END), 0), coalesce(max(CASE WHEN key_id = '' THEN seq END), 0) FROM unstuck_audit_entry`
	if t.dialect == DialectPostgres {
		err = pgMapError(t.pool.QueryRow(ctx, q).Scan(&firstKeyed, &lastLegacy))
	} else {
		err = sqliteMapError(t.sqldb.QueryRowContext(ctx, q).Scan(&firstKeyed, &lastLegacy))
	}
	if err != nil {
		return false, fmt.Errorf("audit: seal the keying marker: %w", err)
	}
	if (firstKeyed != 0 && firstKeyed != k.KeyedFrom) || lastLegacy >= k.KeyedFrom {
		return false, nil
	}
	// Nor one that a stored checkpoint contradicts: the marker was
	// replaced after that checkpoint was made.
	if c, ok, err := t.LastCheckpoint(ctx); err != nil {
		return false, err
	} else if ok && c.KeyedFrom != 0 && c.KeyedFrom != k.KeyedFrom {
		return false, nil
	}
	k.At, k.KeyID = time.UnixMicro(time.Now().UnixMicro()).UTC(), t.keys.current
	k.MAC = keyingMAC(t.keys.keys[k.KeyID], k)
	if t.dialect == DialectPostgres {
		_, err = t.pool.Exec(ctx, `UPDATE unstuck_audit_keying SET at = $1, key_id = $2, mac = $3 WHERE id = 1 AND key_id = ''`, k.At, k.KeyID, k.MAC)
		err = pgMapError(err)
	} else {
		_, err = t.sqldb.ExecContext(ctx, `UPDATE unstuck_audit_keying SET at = ?, key_id = ?, mac = ? WHERE id = 1 AND key_id = ''`, k.At.UnixMicro(), k.KeyID, k.MAC)
		err = sqliteMapError(err)
	}
	if err != nil {
		return false, fmt.Errorf("audit: seal the keying marker: %w", err)
	}
	return true, nil
}

// checkKeying returns "" when k's MAC verifies (or k is not sealed), else
// what is wrong.
func (t *Trail) checkKeying(k Keying) string {
	if !k.Sealed() {
		return ""
	}
	key, ok := t.keys.keys[k.KeyID]
	switch {
	case !ok:
		return fmt.Sprintf("the keying marker names audit key ID %q, which is not among the keys given: add a retired key to UNSTUCK_AUDIT_PREVIOUS_KEYS; otherwise it was forged", k.KeyID)
	case !hmac.Equal(k.MAC, keyingMAC(key, k)):
		return "the keying marker's MAC does not verify: it was altered without the audit key"
	}
	return ""
}
