package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Digest returns the stored form of a key: the hex SHA-256 of scope,
// operation and key, each length-prefixed so that no two different triples
// encode alike (SPEC H5). The console finds a record from a raw key by
// computing the same digest.
func Digest(scope, operation, key string) string {
	// One buffer hashed in one go: the same digest as writing the parts
	// one by one, without an allocation per part (scope, operation and key
	// are at most 255 bytes each, so the stack buffer nearly always fits).
	var stack [512]byte
	b := stack[:0]
	for _, part := range [...]string{"unstuck/idem/v1", scope, operation, key} {
		b = appendPart(b, part)
	}
	return hexSum(sha256.Sum256(b))
}

// KeyHash returns the look-up form of a raw key alone: the hex SHA-256 of
// the key under a domain prefix of its own. Stores keep it beside the
// digest (which binds scope and operation too) so that an operator who has
// only the raw key — support, quoting a customer — finds its records in
// every scope and operation (SPEC K11). Like the digest it does not reveal
// the key. Records written before a store kept it have none.
func KeyHash(key string) string {
	var stack [320]byte
	b := appendPart(stack[:0], "unstuck/idem/key/v1")
	return hexSum(sha256.Sum256(appendPart(b, key)))
}

// appendPart appends s to b with its length before it (8 bytes, big
// endian), so that no two sequences of parts encode alike.
func appendPart(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// hexSum returns the lowercase hex form of a SHA-256 sum with one
// allocation (the string).
func hexSum(d [sha256.Size]byte) string {
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], d[:])
	return string(out[:])
}

// SafeKeyID returns a short identifier of a key that can be logged: the
// first 12 hex digits of its digest (SPEC M5).
func SafeKeyID(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
