// Package benchfloor is the client work that the contract of idem.Run asks
// for besides its statements: what any implementation of the
// contract must compute on the client, whatever its store. The store
// benchmarks add it to the database's limit to make the FLOOR variant, the
// least a conforming engine can cost; limit ÷ floor is then the best
// ratio any engine can reach against the limit, and floor ÷ engine what
// is left of the engine's own bookkeeping.
//
// The work, with the requirement that asks for it:
//   - a first run: the digest that names the record (SPEC H5), the hash of
//     the raw key kept for search (K11), an owner token of 128 random bits
//     (the fencing of M2), and after the callback the value's JSON, decoded
//     again into the caller's type (R1: the first run returns the JSON round
//     trip, as every repeat does) and sealed with AES-256-GCM under a random
//     nonce, bound to the digest (H14);
//   - a replay: the digest, then opening the stored result and decoding
//     its JSON into the caller's type (what Run returns).
//
// It uses the standard library directly, with the cipher built once: no
// envelope, key ring or key derivation per call.
package benchfloor

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/unstuckhq/unstuck/idem"
)

// Floor seals and opens under one random key. It is safe for concurrent
// use.
type Floor struct {
	aead cipher.AEAD
}

// New returns a Floor with a new random 256-bit key.
func New() (*Floor, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Floor{aead: aead}, nil
}

// NewTB returns a new Floor or fails tb (for benchmarks).
func NewTB(tb testing.TB) *Floor {
	tb.Helper()
	f, err := New()
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// Reserve is the client work of a first run before its insert: the digest
// of key in scope and operation, the key hash and an owner token.
func Reserve(scope, operation, key string) (digest, keyHash, token string) {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return idem.Digest(scope, operation, key), idem.KeyHash(key), hex.EncodeToString(raw[:])
}

// Seal is the client work of a first run before its update: v's JSON,
// decoded into roundTrip (the value Run returns, R1), sealed and bound to
// digest (nonce first).
func (f *Floor) Seal(digest string, v, roundTrip any) ([]byte, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(plain, roundTrip); err != nil {
		return nil, err
	}
	out := make([]byte, f.aead.NonceSize(), f.aead.NonceSize()+len(plain)+f.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return f.aead.Seal(out, out, plain, []byte(digest)), nil
}

// Open is the client work of a replay after its select: open what Seal
// sealed for digest and decode its JSON into v.
func (f *Floor) Open(digest string, sealed []byte, v any) error {
	n := f.aead.NonceSize()
	if len(sealed) < n {
		return errors.New("benchfloor: sealed value too short")
	}
	plain, err := f.aead.Open(nil, sealed[:n], sealed[n:], []byte(digest))
	if err != nil {
		return err
	}
	return json.Unmarshal(plain, v)
}

// First is a floor first run of key: Reserve's work, then the limit's
// statements, run with the digest and token; they call result between
// their insert and their update, which calls value and seals it (Seal,
// with the round trip into roundTrip).
func (f *Floor) First(scope, operation, key string, value func() (any, error), roundTrip any, statements func(digest, token string, result func() ([]byte, error)) error) error {
	digest, _, token := Reserve(scope, operation, key)
	return statements(digest, token, func() ([]byte, error) {
		v, err := value()
		if err != nil {
			return nil, err
		}
		return f.Seal(digest, v, roundTrip)
	})
}

// Replay is a floor replay of key: the digest, the limit's read of the
// sealed result by it, then Open into v.
func (f *Floor) Replay(scope, operation, key string, read func(digest string) ([]byte, error), v any) error {
	digest := idem.Digest(scope, operation, key)
	sealed, err := read(digest)
	if err != nil {
		return err
	}
	return f.Open(digest, sealed, v)
}
