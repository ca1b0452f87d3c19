package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// checkpointTag starts a checkpoint's text form and its signed message.
const checkpointTag = "unstuck-audit-checkpoint/v1"

// ErrBadSignature: a checkpoint's signature does not verify with the
// public key given.
var ErrBadSignature = errors.New("audit: checkpoint signature does not verify")

// Checkpoint is an [Anchor] signed with Ed25519 by a key that the
// database's administrators do not hold: anyone with the public key alone
// can check that the trail's head at Seq had Hash, and so that the trail
// was not rewritten or cut back since (Verify with the checkpoint's
// Anchor). Make one from a successful verification's HeadSeq and Head, and
// keep it outside the database.
type Checkpoint struct {
	Anchor
	Signature []byte
}

// SignCheckpoint signs a with key.
func SignCheckpoint(key ed25519.PrivateKey, a Anchor) Checkpoint {
	return Checkpoint{Anchor: a, Signature: ed25519.Sign(key, checkpointMessage(a))}
}

// Verify checks c's signature with pub and returns an error matching
// [ErrBadSignature] when it does not verify.
func (c Checkpoint) Verify(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("audit: checkpoint: a public key of %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	if !ed25519.Verify(pub, checkpointMessage(c.Anchor), c.Signature) {
		return fmt.Errorf("%w (seq %d)", ErrBadSignature, c.Seq)
	}
	return nil
}

// checkpointMessage is what a checkpoint signs: the tag, seq and hash, one
// per line.
func checkpointMessage(a Anchor) []byte {
	return fmt.Appendf(nil, "%s\n%d\n%x\n", checkpointTag, a.Seq, a.Hash)
}

// MarshalText writes c on one line: the tag, seq, the hash and the
// signature in hex, separated by spaces.
func (c Checkpoint) MarshalText() ([]byte, error) {
	return fmt.Appendf(nil, "%s %d %x %x", checkpointTag, c.Seq, c.Hash, c.Signature), nil
}

// UnmarshalText reads what MarshalText writes. It checks the form, not the
// signature.
func (c *Checkpoint) UnmarshalText(b []byte) error {
	parts := strings.Fields(string(b))
	if len(parts) != 4 || parts[0] != checkpointTag {
		return fmt.Errorf("audit: checkpoint: want %q, seq, hash and signature", checkpointTag)
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq <= 0 {
		return fmt.Errorf("audit: checkpoint: seq %q is not a positive integer", parts[1])
	}
	hash, err := hex.DecodeString(parts[2])
	if err != nil || len(hash) != sha256.Size {
		return errors.New("audit: checkpoint: the hash is not 64 hex digits")
	}
	sig, err := hex.DecodeString(parts[3])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("audit: checkpoint: the signature is not %d hex digits", 2*ed25519.SignatureSize)
	}
	*c = Checkpoint{Anchor: Anchor{Seq: seq, Hash: hash}, Signature: sig}
	return nil
}

// ParseAnchor reads an anchor written as SEQ:HASH, the hash in hex, as
// `console audit verify` prints the head.
func ParseAnchor(s string) (Anchor, error) {
	seqText, hashText, ok := strings.Cut(strings.TrimSpace(s), ":")
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if !ok || err != nil || seq <= 0 {
		return Anchor{}, &FieldError{Field: "anchor", Reason: fmt.Sprintf("%q is not SEQ:HASH", s)}
	}
	hash, err := hex.DecodeString(hashText)
	if err != nil || len(hash) != sha256.Size {
		return Anchor{}, &FieldError{Field: "anchor", Reason: "the hash is not 64 hex digits"}
	}
	return Anchor{Seq: seq, Hash: hash}, nil
}

// String writes a as SEQ:HASH, which ParseAnchor reads.
func (a Anchor) String() string {
	return fmt.Sprintf("%d:%x", a.Seq, a.Hash)
}
