package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// Domain tags start the canonical encodings. Their version changes with
// the encoding, so that an entry hashed under one can never verify under
// another: v1 is the legacy SHA-256 link, v2 the keyed one.
const (
	hashDomain  = "unstuck/audit/entry/v1"
	keyedDomain = "unstuck/audit/entry/v2"
)

// ComputeHash returns the SHA-256 of e's canonical encoding version 1:
// what Hash must be for a legacy entry (one without a KeyID, appended
// before the chain was keyed) to verify. It reads Seq, At, every recorded
// field and PrevHash, never Hash itself. An entry with a KeyID is checked
// with [Keyring.ComputeHash] instead, which needs the audit key.
func (e Entry) ComputeHash() []byte {
	var h hasher
	sum := sha256.Sum256(h.encode(hashDomain, &e))
	return sum[:]
}

// hasher computes entry hashes with one reusable buffer and one HMAC
// state per key. It is not safe for concurrent use.
type hasher struct {
	buf  []byte
	macs macs
}

// sum returns what e's Hash must be: the SHA-256 of encoding version 1
// for a legacy entry, the HMAC-SHA-256 under the key e.KeyID names of
// version 2 for a keyed one. It returns an error matching ErrUnknownKey
// when keys does not hold that key.
func (h *hasher) sum(keys *Keyring, e *Entry) ([]byte, error) {
	if e.KeyID == "" {
		sum := sha256.Sum256(h.encode(hashDomain, e))
		return sum[:], nil
	}
	m := h.macs.mac(keys, e.KeyID)
	if m == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownKey, e.KeyID)
	}
	m.Write(h.encode(keyedDomain, e))
	return m.Sum(nil), nil
}

// encode writes e's canonical encoding into the hasher's buffer: the
// domain tag, seq and at (Unix microseconds, UTC) as big-endian int64,
// then (version 2 only) key_id, then actor, role, action, target_kind,
// target_id, reason, before, after, outcome, request_id, client_addr,
// user_agent and prev_hash, each as a big-endian uint32 byte length
// followed by its bytes. A nil and an empty state encode alike (length
// 0); fields are bounded far below 4 GiB.
func (h *hasher) encode(domain string, e *Entry) []byte {
	b := h.buf[:0]
	b = appendBytes(b, domain)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Seq))
	b = binary.BigEndian.AppendUint64(b, uint64(e.At.UnixMicro()))
	if domain == keyedDomain {
		b = appendBytes(b, e.KeyID)
	}
	b = appendBytes(b, e.Actor)
	b = appendBytes(b, e.Role)
	b = appendBytes(b, e.Action)
	b = appendBytes(b, e.TargetKind)
	b = appendBytes(b, e.TargetID)
	b = appendBytes(b, e.Reason)
	b = appendBytes(b, e.Before)
	b = appendBytes(b, e.After)
	b = appendBytes(b, e.Outcome)
	b = appendBytes(b, e.RequestID)
	b = appendBytes(b, e.ClientAddr)
	b = appendBytes(b, e.UserAgent)
	b = appendBytes(b, e.PrevHash)
	h.buf = b
	return b
}

func appendBytes[T ~string | ~[]byte](b []byte, v T) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// chain fills e's Seq, At, KeyID, PrevHash and Hash as the entry that
// follows (headSeq, headHash), headSeq 0 meaning an empty trail, MACed
// with keys' current key. at is truncated to the microsecond and made
// UTC, as both databases keep it.
func chain(e Entry, headSeq int64, headHash []byte, at time.Time, keys *Keyring) Entry {
	e.Seq = headSeq + 1
	e.At = time.UnixMicro(at.UnixMicro()).UTC()
	e.KeyID = keys.CurrentID()
	e.PrevHash = make([]byte, sha256.Size)
	if headSeq > 0 {
		copy(e.PrevHash, headHash)
	}
	var h hasher
	sum, err := h.sum(keys, &e)
	if err != nil {
		panic("audit: the current key is not in its keyring") // NewKeyring always adds it
	}
	e.Hash = sum
	return e
}
