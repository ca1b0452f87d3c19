package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
)

// verifyPage is how many entries Verify reads per query.
const verifyPage = 10000

// Verification is what [Trail.Verify] found.
type Verification struct {
	// Checked is how many entries verified, from seq 1 on, before the
	// first problem or to the end.
	Checked int64
	// OK is true when the whole trail verified and every anchor matched.
	OK bool
	// FirstBad is the first seq that is missing or does not verify; 0 when
	// OK.
	FirstBad int64
	// Problem says what is wrong at FirstBad; "" when OK.
	Problem string
	// HeadSeq and Head are the last entry that verified and its hash (0
	// and nil for an empty trail): record them outside the database as an
	// [Anchor] for later verifications.
	HeadSeq int64
	Head    []byte
	// Keying is the trail's keying marker as read: every entry from its
	// KeyedFrom on must be keyed, and the trail may not end before it.
	Keying Keying
	// KeyedFrom is the first seq that verified as a keyed entry (an HMAC
	// under an audit key); 0 when none did. Entries before it are legacy
	// SHA-256 links, appended before the chain was keyed: on their own,
	// whoever can write the table could rewrite them, but the MAC of
	// KeyedFrom covers their head, so they cannot change without breaking
	// it. After KeyedFrom, every entry must be keyed.
	KeyedFrom int64
}

// Anchor is an entry's hash recorded outside the database (printed by a
// verification, signed in a [Checkpoint], kept by an auditor). The chain
// only proves that the entries agree with each other: someone who can
// write the table can delete its newest entries, or rewrite a whole suffix
// and recompute its hashes. An anchor detects both.
type Anchor struct {
	Seq  int64
	Hash []byte
	// KeyedFrom, when not 0, is the keying marker's KeyedFrom as the
	// anchor's checkpoint recorded it: the marker must still say so.
	KeyedFrom int64
}

// errStop ends a walk at its first problem.
var errStop = errors.New("stop")

// Verify walks the chain in seq order, from seq 1, in pages of a query
// each, and reports the first seq that breaks it:
//
//   - missing: an entry was deleted (seq has no gaps otherwise);
//   - its prev_hash differs from the previous entry's hash: an entry was
//     inserted, or the previous one rewritten with a recomputed hash;
//   - its hash is not the hash of its content: the entry was edited;
//   - its hash differs from an anchor's for that seq: the chain was
//     rewritten from this seq or before;
//   - an anchor names a seq beyond the end: entries were removed from the
//     end;
//   - the keying marker ([Keying]) is missing, its MAC does not verify,
//     or it differs from an anchor's: the trail was rewritten by the
//     table's owner; an entry at or after its KeyedFrom is legacy: the
//     chain was rewritten without the audit key; the trail ends before
//     KeyedFrom-1: entries were removed.
//
// A keyed entry's hash must be the HMAC of its content under the key its
// KeyID names, which the trail's keyring must hold (so an entry forged or
// rewritten without the audit key is reported), and after the first keyed
// entry no legacy one may follow (so a forged append without the key is
// reported too).
//
// A broken chain is a Verification with OK false, not an error; err is
// for a failed query, an anchor without a positive seq and a 32-byte
// hash, or a trail without keys ([ErrNoKey]). Entries appended while
// Verify runs are verified if its pages reach them. Verify only reads; the
// caller records it as a read if it must be audited.
func (t *Trail) Verify(ctx context.Context, anchors ...Anchor) (Verification, error) {
	if t.keys == nil {
		return Verification{}, fmt.Errorf("audit: verify: %w", ErrNoKey)
	}
	anchored := make(map[int64][]byte, len(anchors))
	for _, a := range anchors {
		if a.Seq <= 0 || len(a.Hash) != sha256.Size {
			return Verification{}, invalid("anchor", fmt.Sprintf("seq %d with a %d-byte hash: want a positive seq and a SHA-256", a.Seq, len(a.Hash)))
		}
		if h, ok := anchored[a.Seq]; ok && !bytes.Equal(h, a.Hash) {
			return Verification{}, invalid("anchor", fmt.Sprintf("two different hashes for seq %d", a.Seq))
		}
		anchored[a.Seq] = a.Hash
	}
	query := t.verifySQL()
	var (
		v    Verification
		h    hasher
		prev = make([]byte, sha256.Size)
	)
	k, err := t.keying(ctx)
	switch {
	case errors.Is(err, errNoMarker):
		v.FirstBad, v.Problem = 1, "the keying marker is missing (it is written once, when the trail's table is made or upgraded): it was deleted with the table owner's rights; verify against a checkpoint kept outside the database"
		return v, nil
	case err != nil:
		return Verification{}, err
	}
	v.Keying = k
	if problem := t.checkKeying(k); problem != "" {
		v.FirstBad, v.Problem = 1, problem
		return v, nil
	}
	for seq, a := range anchorKeyedFrom(anchors) {
		if a != k.KeyedFrom || !k.Sealed() {
			v.FirstBad, v.Problem = 1, fmt.Sprintf("the keying marker says keyed from seq %d, the checkpoint of seq %d says %d: the marker was rewritten", k.KeyedFrom, seq, a)
			return v, nil
		}
	}
	for {
		n := 0
		err := t.each(ctx, query, []any{v.HeadSeq, verifyPage}, func(e *Entry) error {
			n++
			want := v.HeadSeq + 1
			sum, sumErr := h.sum(t.keys, e)
			anchor, isAnchored := anchored[e.Seq]
			switch {
			case e.Seq != want:
				v.FirstBad, v.Problem = want, fmt.Sprintf("seq %d is missing (the next entry is seq %d): entries were deleted", want, e.Seq)
			case !bytes.Equal(e.PrevHash, prev):
				v.FirstBad, v.Problem = e.Seq, fmt.Sprintf("prev_hash is not the hash of seq %d: an entry was inserted or seq %d was rewritten", e.Seq-1, e.Seq-1)
			case e.KeyID == "" && v.KeyedFrom > 0:
				v.FirstBad, v.Problem = e.Seq, fmt.Sprintf("the entry has no key ID, but the chain is keyed from seq %d: it was appended or rewritten without the audit key", v.KeyedFrom)
			case e.KeyID == "" && e.Seq >= k.KeyedFrom:
				v.FirstBad, v.Problem = e.Seq, fmt.Sprintf("the entry has no key ID, but the keying marker says every entry from seq %d is keyed: the chain was rewritten without the audit key", k.KeyedFrom)
			case sumErr != nil:
				v.FirstBad, v.Problem = e.Seq, fmt.Sprintf("the entry names audit key ID %q, which is not among the keys given: add a retired key to UNSTUCK_AUDIT_PREVIOUS_KEYS; otherwise the entry was forged", e.KeyID)
			case !bytes.Equal(e.Hash, sum) && e.KeyID == "":
				v.FirstBad, v.Problem = e.Seq, "hash does not match the entry's content: the entry was altered"
			case !bytes.Equal(e.Hash, sum):
				v.FirstBad, v.Problem = e.Seq, fmt.Sprintf("hash is not the MAC of the entry's content under audit key %s: the entry was altered or forged without the key", e.KeyID)
			case isAnchored && !bytes.Equal(e.Hash, anchor):
				v.FirstBad, v.Problem = e.Seq, "hash differs from the anchor: the chain was rewritten at or before this seq"
			}
			if v.Problem != "" {
				return errStop
			}
			v.Checked++
			v.HeadSeq, v.Head, prev = e.Seq, e.Hash, e.Hash
			if e.KeyID != "" && v.KeyedFrom == 0 {
				v.KeyedFrom = e.Seq
			}
			return nil
		})
		if errors.Is(err, errStop) {
			return v, nil
		}
		if err != nil {
			return Verification{}, fmt.Errorf("audit: verify after seq %d: %w", v.HeadSeq, err)
		}
		if n < verifyPage {
			break
		}
	}
	if v.HeadSeq < k.KeyedFrom-1 {
		v.FirstBad = v.HeadSeq + 1
		v.Problem = fmt.Sprintf("seq %d is missing: the trail ends at seq %d but the keying marker records that seq %d existed when keying began: entries were removed",
			v.FirstBad, v.HeadSeq, k.KeyedFrom-1)
		return v, nil
	}
	var beyond int64
	for seq := range anchored {
		beyond = max(beyond, seq)
	}
	if beyond > v.HeadSeq {
		v.FirstBad = v.HeadSeq + 1
		v.Problem = fmt.Sprintf("seq %d is missing: the trail ends at seq %d but an anchor records seq %d: entries were removed from the end",
			v.FirstBad, v.HeadSeq, beyond)
		return v, nil
	}
	v.OK = true
	return v, nil
}

// anchorKeyedFrom is the KeyedFrom each anchor records, by seq (anchors
// without one left out).
func anchorKeyedFrom(anchors []Anchor) map[int64]int64 {
	out := map[int64]int64{}
	for _, a := range anchors {
		if a.KeyedFrom > 0 {
			out[a.Seq] = a.KeyedFrom
		}
	}
	return out
}

// verifySQL reads the page of entries after a seq, in seq order.
func (t *Trail) verifySQL() string {
	if t.dialect == DialectPostgres {
		return `SELECT ` + columns + ` FROM unstuck_audit_entry WHERE seq > $1 ORDER BY seq LIMIT $2`
	}
	return `SELECT ` + columns + ` FROM unstuck_audit_entry WHERE seq > ? ORDER BY seq LIMIT ?`
}
