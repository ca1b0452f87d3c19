package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
)

// MinKeyBytes is the shortest audit key [NewKeyring] accepts.
const MinKeyBytes = 32

// keyIDDomain starts what a key ID hashes, so that an ID is never the hash
// of the key in any other use.
const keyIDDomain = "unstuck/audit/key-id/v1\x00"

// Errors about the audit key, matched with errors.Is.
var (
	// ErrNoKey: the trail was built without [WithKeys], and the call
	// (an append, a verification, a checkpoint) needs the audit key.
	ErrNoKey = errors.New("audit: no audit key: set UNSTUCK_AUDIT_KEY")
	// ErrUnknownKey: an entry or a checkpoint names a key ID that the
	// keyring does not hold.
	ErrUnknownKey = errors.New("audit: unknown audit key ID")
)

// Keyring holds the audit key that new entries and checkpoints are MACed
// with, and the previous keys that older ones may have been MACed with,
// each known by its key ID. The keys are never in the database, and the
// applications that share UNSTUCK_SECRET with the console do not hold
// them: whoever can only write the table cannot append or rewrite an entry
// that verifies. Make one with [NewKeyring]; the zero Keyring holds no key.
// A Keyring is immutable and safe for concurrent use.
type Keyring struct {
	current string            // the current key's ID
	keys    map[string][]byte // by key ID, current and previous
}

// NewKeyring returns a keyring whose current key is current, and which
// also verifies with each of previous (the keys of a rotation, newest
// first). Every key must be at least [MinKeyBytes] long; a previous key
// equal to the current one is ignored. The keys are copied.
func NewKeyring(current []byte, previous ...[]byte) (*Keyring, error) {
	if len(current) < MinKeyBytes {
		return nil, fmt.Errorf("audit: the audit key is %d bytes, want at least %d", len(current), MinKeyBytes)
	}
	k := &Keyring{current: KeyID(current), keys: map[string][]byte{KeyID(current): append([]byte(nil), current...)}}
	for i, p := range previous {
		if len(p) < MinKeyBytes {
			return nil, fmt.Errorf("audit: previous audit key %d is %d bytes, want at least %d", i+1, len(p), MinKeyBytes)
		}
		k.keys[KeyID(p)] = append([]byte(nil), p...)
	}
	return k, nil
}

// KeyID returns the ID that entries MACed with key record: the first 8
// bytes of a domain-separated SHA-256 of the key, as 16 hex digits. It
// names the key without revealing it.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte(keyIDDomain))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// CurrentID returns the ID of the key new entries are MACed with.
func (k *Keyring) CurrentID() string { return k.current }

// Has reports whether the keyring holds the key with this ID.
func (k *Keyring) Has(id string) bool {
	_, ok := k.keys[id]
	return ok
}

// ComputeHash returns what e's Hash must be for e to verify: for an entry
// with a KeyID, the HMAC-SHA-256 of its canonical encoding (version 2)
// under that key, or an error matching [ErrUnknownKey] when the keyring
// does not hold it; for a legacy entry (no KeyID), [Entry.ComputeHash].
func (k *Keyring) ComputeHash(e Entry) ([]byte, error) {
	var h hasher
	sum, err := h.sum(k, &e)
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// macs keeps one HMAC state per key for a hasher. It is not safe for
// concurrent use.
type macs map[string]hash.Hash

// mac returns the reset HMAC of the key with this ID, or nil.
func (m *macs) mac(k *Keyring, id string) hash.Hash {
	if k == nil {
		return nil
	}
	if h, ok := (*m)[id]; ok {
		h.Reset()
		return h
	}
	key, ok := k.keys[id]
	if !ok {
		return nil
	}
	if *m == nil {
		*m = macs{}
	}
	h := hmac.New(sha256.New, key)
	(*m)[id] = h
	return h
}
