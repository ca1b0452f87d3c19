package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// hashDomain starts the canonical encoding of every entry. Its version
// changes with the encoding, so that an entry hashed under another one can
// never verify by accident.
const hashDomain = "unstuck/audit/entry/v1"

// ComputeHash returns the SHA-256 of e's canonical encoding: what Hash must
// be for e to verify. It reads Seq, At, every recorded field and PrevHash,
// never Hash itself, so it can check an entry read from an export as well
// as from the database. The encoding is described in the package
// documentation.
func (e Entry) ComputeHash() []byte {
	var h hasher
	sum := h.sum(&e)
	return sum[:]
}

// hasher computes entry hashes with one reusable buffer. It is not safe for
// concurrent use.
type hasher struct{ buf []byte }

// sum returns the hash of e's canonical encoding (version 1): the domain
// tag, seq and at (Unix microseconds, UTC) as big-endian int64, then
// actor, role, action, target_kind, target_id, reason, before, after,
// outcome, request_id, client_addr, user_agent and prev_hash, each as a
// big-endian uint32 byte length followed by its bytes. A nil and an empty
// state encode alike (length 0); fields are bounded far below 4 GiB.
func (h *hasher) sum(e *Entry) [sha256.Size]byte {
	b := h.buf[:0]
	b = appendBytes(b, hashDomain)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Seq))
	b = binary.BigEndian.AppendUint64(b, uint64(e.At.UnixMicro()))
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
	return sha256.Sum256(b)
}

func appendBytes[T ~string | ~[]byte](b []byte, v T) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// chain fills e's Seq, At, PrevHash and Hash as the entry that follows
// (headSeq, headHash), headSeq 0 meaning an empty trail. at is truncated
// to the microsecond and made UTC, as both databases keep it.
func chain(e Entry, headSeq int64, headHash []byte, at time.Time) Entry {
	e.Seq = headSeq + 1
	e.At = time.UnixMicro(at.UnixMicro()).UTC()
	e.PrevHash = make([]byte, sha256.Size)
	if headSeq > 0 {
		copy(e.PrevHash, headHash)
	}
	e.Hash = e.ComputeHash()
	return e
}
