package idem

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/unstuckhq/unstuck/idem/idemdriver"
)

// Envelope layout. A sealed result is
//
//	"US" | 0x01 | key id (4 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// and, with sealing explicitly turned off, a plain result is
//
//	"UP" | 0x01 | JSON
//
// The additional data binds the ciphertext to its record: scope, operation,
// key digest and fingerprint, length-prefixed. A blob copied to another
// record, a flipped bit, or a plain envelope planted while sealing is on is
// never opened (SPEC H14).
const (
	envelopeVersion = 0x01
	keyIDSize       = 4
	nonceSize       = 12
	headerSize      = 3 // magic (2) + version (1)

	// MinSecretBytes is the shortest application secret [Config].Secret accepts.
	MinSecretBytes = 32
)

var (
	magicSealed = []byte("US")
	magicPlain  = []byte("UP")

	errEnvelope = errors.New("idem: result envelope cannot be opened")
)

type sealKey struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

// sealer seals and opens stored results. The zero value is unusable; a nil
// current key with plain set means sealing is off.
type sealer struct {
	current *sealKey
	keys    map[[keyIDSize]byte]*sealKey
	plain   bool
}

func newSealer(current []byte, previous [][]byte) (*sealer, error) {
	s := &sealer{keys: make(map[[keyIDSize]byte]*sealKey)}
	for i, secret := range append([][]byte{current}, previous...) {
		k, err := deriveSealKey(secret)
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("idem: current secret: %w", err)
			}
			return nil, fmt.Errorf("idem: previous secret %d: %w", i, err)
		}
		if _, dup := s.keys[k.id]; dup {
			return nil, fmt.Errorf("idem: secret %d repeats an earlier secret or collides with its key id", i)
		}
		s.keys[k.id] = k
		if i == 0 {
			s.current = k
		}
	}
	return s, nil
}

// deriveSealKey derives the result-sealing key for this purpose only, and
// its public key id, from an application secret with HKDF-SHA-256.
func deriveSealKey(secret []byte) (*sealKey, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("secret has %d bytes, want at least %d", len(secret), MinSecretBytes)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "unstuck/idem/result-seal/v1", 32)
	if err != nil {
		return nil, err
	}
	id, err := hkdf.Key(sha256.New, secret, nil, "unstuck/idem/result-seal-key-id/v1", keyIDSize)
	if err != nil {
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
	k := &sealKey{aead: aead}
	copy(k.id[:], id)
	return k, nil
}

// adPool holds buffers for the additional data, which escapes into the
// AEAD interface: pooled, it costs no allocation per seal or open.
var adPool = sync.Pool{New: func() any { return new([512]byte) }}

// additionalData appends the data that binds an envelope to its record to
// dst.
func additionalData(dst []byte, id idemdriver.Ident, fingerprint string) []byte {
	for _, part := range [...]string{"unstuck/idem/result/v1", id.Scope, id.Operation, id.KeyDigest, fingerprint} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(part)))
		dst = append(dst, part...)
	}
	return dst
}

// sealRoom is the room sealInPlace needs before the plaintext: the longest
// envelope header.
const sealRoom = headerSize + keyIDSize + nonceSize

// seal returns the envelope of plaintext for the record id with fingerprint.
func (s *sealer) seal(id idemdriver.Ident, fingerprint string, plaintext []byte) ([]byte, error) {
	buf := make([]byte, sealRoom, sealRoom+len(plaintext)+sealOverhead)
	return s.sealInPlace(id, fingerprint, append(buf, plaintext...))
}

// sealOverhead is the AEAD's tag size (AES-GCM: 16 bytes).
const sealOverhead = 16

// sealInPlace returns the envelope of buf[sealRoom:] for the record id with
// fingerprint, written over buf: the envelope is a subslice of buf when buf
// has sealOverhead bytes of spare capacity, else a new slice. buf[:sealRoom]
// is scratch; the caller must not use buf afterwards.
func (s *sealer) sealInPlace(id idemdriver.Ident, fingerprint string, buf []byte) ([]byte, error) {
	if s.plain {
		out := buf[sealRoom-headerSize:]
		copy(out, magicPlain)
		out[2] = envelopeVersion
		return out, nil
	}
	k := s.current
	copy(buf, magicSealed)
	buf[2] = envelopeVersion
	copy(buf[headerSize:], k.id[:])
	nonce := buf[headerSize+keyIDSize : sealRoom]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("idem: nonce: %w", err)
	}
	ad := adPool.Get().(*[512]byte)
	defer adPool.Put(ad)
	// Output over the plaintext, in place (exact overlap is allowed).
	return k.aead.Seal(buf[:sealRoom], nonce, buf[sealRoom:], additionalData(ad[:0], id, fingerprint)), nil
}

// open returns the plaintext of an envelope written by seal for the same
// record and fingerprint. Any other input (a blob from another record, a
// flipped bit, an unknown key id, a plain envelope while sealing is on)
// fails with an error that carries no payload.
func (s *sealer) open(id idemdriver.Ident, fingerprint string, envelope []byte) ([]byte, error) {
	if len(envelope) < headerSize || envelope[2] != envelopeVersion {
		return nil, fmt.Errorf("%w: unknown format", errEnvelope)
	}
	switch {
	case bytes.Equal(envelope[:2], magicPlain):
		if !s.plain {
			return nil, fmt.Errorf("%w: plain result while sealing is on", errEnvelope)
		}
		return envelope[headerSize:], nil
	case bytes.Equal(envelope[:2], magicSealed):
		if len(envelope) < headerSize+keyIDSize+nonceSize {
			return nil, fmt.Errorf("%w: truncated", errEnvelope)
		}
		var kid [keyIDSize]byte
		copy(kid[:], envelope[headerSize:])
		k, ok := s.keys[kid]
		if !ok {
			return nil, fmt.Errorf("%w: sealed under an unknown secret (key id %x)", errEnvelope, kid)
		}
		nonce := envelope[headerSize+keyIDSize : headerSize+keyIDSize+nonceSize]
		ad := adPool.Get().(*[512]byte)
		defer adPool.Put(ad)
		pt, err := k.aead.Open(nil, nonce, envelope[headerSize+keyIDSize+nonceSize:], additionalData(ad[:0], id, fingerprint))
		if err != nil {
			return nil, fmt.Errorf("%w: authentication failed", errEnvelope)
		}
		return pt, nil
	default:
		return nil, fmt.Errorf("%w: unknown format", errEnvelope)
	}
}
