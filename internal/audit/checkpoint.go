package audit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// checkpointTag starts a checkpoint's text form; checkpointDomain its MAC's
// message. Version 3 records the keying marker's KeyedFrom; version 2
// checkpoints, made before it, still verify.
const (
	checkpointTag      = "unstuck-audit-checkpoint/v3"
	checkpointDomain   = "unstuck/audit/checkpoint/v3"
	checkpointTagV2    = "unstuck-audit-checkpoint/v2"
	checkpointDomainV2 = "unstuck/audit/checkpoint/v2"
)

// Errors of checkpoints, matched with errors.Is.
var (
	// ErrBadCheckpoint: a checkpoint's MAC does not verify under the key
	// it names: it was not made with the audit key, or was altered.
	ErrBadCheckpoint = errors.New("audit: checkpoint MAC does not verify")
	// ErrBroken: the chain does not verify, so no checkpoint is made.
	ErrBroken = errors.New("audit: the chain does not verify")
	// ErrEmpty: the trail has no entry to checkpoint.
	ErrEmpty = errors.New("audit: the trail is empty")
)

// Checkpoint is a verified head of the trail, seq and hash, with its
// HMAC-SHA-256 under the audit key: whoever holds the key can check that
// the trail had this entry at Seq when the checkpoint was made, and so
// that it was not cut back or rewritten since (verify with [Checkpoint.Anchor]).
// Its text form is one line, to keep outside the database.
type Checkpoint struct {
	Seq  int64
	Hash []byte
	// At is when the checkpoint was made, UTC, to the microsecond.
	At time.Time
	// KeyedFrom is the keying marker's KeyedFrom when the checkpoint was
	// made (0: a version 2 checkpoint, which did not record it).
	KeyedFrom int64
	KeyID     string
	MAC       []byte
}

// Anchor is the checkpoint's head and keying, for [Trail.Verify].
func (c Checkpoint) Anchor() Anchor { return Anchor{Seq: c.Seq, Hash: c.Hash, KeyedFrom: c.KeyedFrom} }

// checkpointMAC is the MAC of c's seq, time, keying, key ID and hash
// under key (version 2, without keying, when c.KeyedFrom is 0).
func checkpointMAC(key []byte, c Checkpoint) []byte {
	domain := checkpointDomain
	if c.KeyedFrom == 0 {
		domain = checkpointDomainV2
	}
	b := appendBytes(nil, domain)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Seq))
	b = binary.BigEndian.AppendUint64(b, uint64(c.At.UnixMicro()))
	if c.KeyedFrom != 0 {
		b = binary.BigEndian.AppendUint64(b, uint64(c.KeyedFrom))
	}
	b = appendBytes(b, c.KeyID)
	b = appendBytes(b, c.Hash)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)
}

// SignCheckpoint returns the checkpoint of a (its head and keying), made
// at at, MACed with the current key.
func (k *Keyring) SignCheckpoint(a Anchor, at time.Time) Checkpoint {
	c := Checkpoint{Seq: a.Seq, Hash: bytes.Clone(a.Hash), At: time.UnixMicro(at.UnixMicro()).UTC(), KeyedFrom: a.KeyedFrom, KeyID: k.current}
	c.MAC = checkpointMAC(k.keys[k.current], c)
	return c
}

// CheckCheckpoint returns nil when c's MAC verifies under the key it
// names; an error matching [ErrUnknownKey] when the keyring does not hold
// that key, [ErrBadCheckpoint] when the MAC does not verify. It does not
// read the trail: verify it with c.Anchor() for that.
func (k *Keyring) CheckCheckpoint(c Checkpoint) error {
	key, ok := k.keys[c.KeyID]
	if !ok {
		return fmt.Errorf("%w %q (checkpoint of seq %d)", ErrUnknownKey, c.KeyID, c.Seq)
	}
	if !hmac.Equal(c.MAC, checkpointMAC(key, c)) {
		return fmt.Errorf("%w (seq %d)", ErrBadCheckpoint, c.Seq)
	}
	return nil
}

// MarshalText writes c on one line: the tag, seq, the hash in hex, the
// time (RFC 3339, UTC, microseconds), the keying marker's KeyedFrom, the
// key ID and the MAC in hex, separated by spaces (a version 2 checkpoint
// has no KeyedFrom).
func (c Checkpoint) MarshalText() ([]byte, error) {
	if c.KeyedFrom == 0 {
		return fmt.Appendf(nil, "%s %d %x %s %s %x", checkpointTagV2, c.Seq, c.Hash, c.At.UTC().Format(timeLayout), c.KeyID, c.MAC), nil
	}
	return fmt.Appendf(nil, "%s %d %x %s %d %s %x", checkpointTag, c.Seq, c.Hash, c.At.UTC().Format(timeLayout), c.KeyedFrom, c.KeyID, c.MAC), nil
}

// String is the text form of c.
func (c Checkpoint) String() string {
	b, _ := c.MarshalText()
	return string(b)
}

// UnmarshalText reads what MarshalText writes. It checks the form, not the
// MAC. A refused text is a *fielderr.Error for the field "checkpoint".
func (c *Checkpoint) UnmarshalText(b []byte) error {
	bad := func(why string) error { return invalid("checkpoint", why) }
	parts := strings.Fields(string(b))
	var keyedFrom int64
	switch {
	case len(parts) == 6 && parts[0] == checkpointTagV2:
	case len(parts) == 7 && parts[0] == checkpointTag:
		n, err := strconv.ParseInt(parts[4], 10, 64)
		if err != nil || n <= 0 {
			return bad(fmt.Sprintf("keyed from %q is not a positive integer", parts[4]))
		}
		keyedFrom, parts = n, append(parts[:4], parts[5:]...)
	default:
		return bad(fmt.Sprintf("want %q, seq, hash, time, keyed-from seq, key ID and MAC, as console audit checkpoint prints it", checkpointTag))
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq <= 0 {
		return bad(fmt.Sprintf("seq %q is not a positive integer", parts[1]))
	}
	hash, err := hex.DecodeString(parts[2])
	if err != nil || len(hash) != sha256.Size {
		return bad("the hash is not 64 hex digits")
	}
	at, err := time.Parse(time.RFC3339Nano, parts[3])
	if err != nil {
		return bad("the time is not RFC 3339")
	}
	if len(parts[4]) != 16 {
		return bad("the key ID is not 16 hex digits")
	}
	mac, err := hex.DecodeString(parts[5])
	if err != nil || len(mac) != sha256.Size {
		return bad("the MAC is not 64 hex digits")
	}
	*c = Checkpoint{Seq: seq, Hash: hash, At: at.UTC(), KeyedFrom: keyedFrom, KeyID: parts[4], MAC: mac}
	return nil
}

// ParseCheckpoint reads a checkpoint's text form (see
// [Checkpoint.UnmarshalText]).
func ParseCheckpoint(s string) (Checkpoint, error) {
	var c Checkpoint
	err := c.UnmarshalText([]byte(s))
	return c, err
}

// Checkpoint verifies the whole chain (against the last stored checkpoint
// too, when its MAC verifies), then stores and returns a checkpoint of the
// head it verified, MACed with the current key. It refuses with an error
// matching [ErrBroken] (and the Verification that says where) when the
// chain does not verify, [ErrBadCheckpoint] when the last stored checkpoint
// does not, [ErrEmpty] for an empty trail and [ErrNoKey] without keys.
// Keep the returned checkpoint outside the database: the stored copy is
// only as safe as the database.
func (t *Trail) Checkpoint(ctx context.Context) (Checkpoint, Verification, error) {
	if t.keys == nil {
		return Checkpoint{}, Verification{}, fmt.Errorf("audit: checkpoint: %w", ErrNoKey)
	}
	if _, err := t.SealKeying(ctx); err != nil && !errors.Is(err, errNoMarker) {
		return Checkpoint{}, Verification{}, err
	}
	var anchors []Anchor
	last, ok, err := t.LastCheckpoint(ctx)
	if err != nil {
		return Checkpoint{}, Verification{}, err
	}
	if ok {
		if err := t.CheckCheckpoint(last); err != nil {
			return Checkpoint{}, Verification{}, fmt.Errorf("audit: checkpoint: the last stored checkpoint: %w", err)
		}
		anchors = append(anchors, last.Anchor())
	}
	v, err := t.Verify(ctx, anchors...)
	if err != nil {
		return Checkpoint{}, Verification{}, err
	}
	if !v.OK {
		return Checkpoint{}, v, fmt.Errorf("%w: seq %d: %s", ErrBroken, v.FirstBad, v.Problem)
	}
	if v.HeadSeq == 0 {
		return Checkpoint{}, v, ErrEmpty
	}
	if !v.Keying.Sealed() {
		return Checkpoint{}, v, fmt.Errorf("%w: the keying marker (keyed from seq %d) disagrees with the chain and was not sealed", ErrBroken, v.Keying.KeyedFrom)
	}
	c := t.keys.SignCheckpoint(Anchor{Seq: v.HeadSeq, Hash: v.Head, KeyedFrom: v.Keying.KeyedFrom}, time.Now())
	if t.dialect == DialectPostgres {
		_, err = t.pool.Exec(ctx, `INSERT INTO unstuck_audit_checkpoint (seq, hash, at, key_id, mac, keyed_from) VALUES ($1, $2, $3, $4, $5, $6)`,
			c.Seq, c.Hash, c.At, c.KeyID, c.MAC, c.KeyedFrom)
		err = pgMapError(err)
	} else {
		_, err = t.sqldb.ExecContext(ctx, `INSERT INTO unstuck_audit_checkpoint (seq, hash, at, key_id, mac, keyed_from) VALUES (?, ?, ?, ?, ?, ?)`,
			c.Seq, c.Hash, c.At.UnixMicro(), c.KeyID, c.MAC, c.KeyedFrom)
		err = sqliteMapError(err)
	}
	if err != nil {
		return Checkpoint{}, v, fmt.Errorf("audit: store the checkpoint: %w", err)
	}
	return c, v, nil
}

// LastCheckpoint returns the newest stored checkpoint, as stored: check
// its MAC with [Keyring.CheckCheckpoint]. ok is false when there is none.
func (t *Trail) LastCheckpoint(ctx context.Context) (c Checkpoint, ok bool, err error) {
	const q = `SELECT seq, hash, at, key_id, mac, keyed_from FROM unstuck_audit_checkpoint ORDER BY id DESC LIMIT 1`
	if t.dialect == DialectPostgres {
		err = t.pool.QueryRow(ctx, q).Scan(&c.Seq, &c.Hash, &c.At, &c.KeyID, &c.MAC, &c.KeyedFrom)
		if errors.Is(err, pgx.ErrNoRows) {
			return Checkpoint{}, false, nil
		}
		err = pgMapError(err)
	} else {
		var at int64
		err = t.sqldb.QueryRowContext(ctx, q).Scan(&c.Seq, &c.Hash, &at, &c.KeyID, &c.MAC, &c.KeyedFrom)
		if errors.Is(err, sql.ErrNoRows) {
			return Checkpoint{}, false, nil
		}
		c.At = time.UnixMicro(at)
		err = sqliteMapError(err)
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("audit: read the last checkpoint: %w", err)
	}
	c.At = c.At.UTC()
	return c, true, nil
}

// CheckCheckpoint is [Keyring.CheckCheckpoint] with the trail's keys; it
// fails with [ErrNoKey] on a trail without them.
func (t *Trail) CheckCheckpoint(c Checkpoint) error {
	if t.keys == nil {
		return fmt.Errorf("audit: checkpoint: %w", ErrNoKey)
	}
	return t.keys.CheckCheckpoint(c)
}

// HeadSeq returns the seq of the newest entry, 0 for an empty trail. It
// reads one index entry: cheap enough to call on every page view.
func (t *Trail) HeadSeq(ctx context.Context) (int64, error) {
	const q = `SELECT coalesce(max(seq), 0) FROM unstuck_audit_entry`
	var (
		n   int64
		err error
	)
	if t.dialect == DialectPostgres {
		err = pgMapError(t.pool.QueryRow(ctx, q).Scan(&n))
	} else {
		err = sqliteMapError(t.sqldb.QueryRowContext(ctx, q).Scan(&n))
	}
	if err != nil {
		return 0, fmt.Errorf("audit: read the head: %w", err)
	}
	return n, nil
}

// ParseAnchor reads an anchor written as SEQ:HASH, the hash in hex, as
// `console audit verify` prints the head.
func ParseAnchor(s string) (Anchor, error) {
	seqText, hashText, ok := strings.Cut(strings.TrimSpace(s), ":")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if !ok || err != nil || seq <= 0 {
		return Anchor{}, invalid("anchor", fmt.Sprintf("%q is not SEQ:HASH", s))
	}
	hash, err := hex.DecodeString(hashText)
	if err != nil || len(hash) != sha256.Size {
		return Anchor{}, invalid("anchor", "the hash is not 64 hex digits")
	}
	return Anchor{Seq: seq, Hash: hash}, nil
}

// String writes a as SEQ:HASH, which ParseAnchor reads.
func (a Anchor) String() string {
	return fmt.Sprintf("%d:%x", a.Seq, a.Hash)
}
