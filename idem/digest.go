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
	h := sha256.New()
	var n [8]byte
	for _, part := range [...]string{"unstuck/idem/v1", scope, operation, key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SafeKeyID returns a short identifier of a key that can be logged: the
// first 12 hex digits of its digest (SPEC M5).
func SafeKeyID(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
